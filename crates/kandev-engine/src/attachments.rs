//! Attachments (issue 18): files stored once by content hash under
//! `$KANDEV_HOME/attachments/<sha256>`, the checks a message's references go through, and
//! the ACP content blocks each becomes for an agent (`image`, embedded `resource`, or a
//! `resource_link` to a copy in the working directory's `.kandev/attachments/`, written on the
//! agent's host: through the SSH executor's link when the agent runs on a build host).

use std::io::Write;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use kandev_acp::ContentBlock;
use kandev_domain::attachment::{
    AttachmentRef, Delivery, MAX_ATTACHMENT_BYTES, MAX_ATTACHMENTS, PromptAccepts, delivery,
    is_attachment_id, safe_file_name,
};
use kandev_runtime::remote::Site;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::error::{EngineError, Result};

/// The folder of stored attachments.
pub(crate) fn folder(home: &Path) -> PathBuf {
    home.join("attachments")
}

fn too_large(size: u64) -> EngineError {
    EngineError::Validation(format!(
        "attachment is {} bytes, larger than 20 MiB (the attachment size limit); attach a smaller file",
        size
    ))
}

/// The size-limit refusal for a body of more than [`MAX_ATTACHMENT_BYTES`] (the server says
/// it before the whole body is read).
pub fn too_large_error() -> EngineError {
    EngineError::Validation(
        "attachment is larger than 20 MiB (the attachment size limit); attach a smaller file"
            .into(),
    )
}

fn io_error(what: &str, err: &std::io::Error) -> EngineError {
    tracing::error!(error = %err, "{what}");
    EngineError::Unavailable(format!("{what}; check the disk holding KANDEV_HOME"))
}

/// Checks an upload's name and type and stores its content once under its SHA-256 (an
/// existing file of that hash is kept: same hash, same bytes).
pub(crate) async fn store(
    home: &Path,
    name: &str,
    mime: &str,
    bytes: Vec<u8>,
) -> Result<AttachmentRef> {
    let name = kandev_domain::validate::name("name", name)
        .map_err(|e| EngineError::Validation(e.to_string()))?;
    let mime = checked_mime(mime)?;
    let size = bytes.len() as u64;
    if size > MAX_ATTACHMENT_BYTES {
        return Err(too_large(size));
    }
    let id = hex(&Sha256::digest(&bytes));
    let dir = folder(home);
    let path = dir.join(&id);
    tokio::task::spawn_blocking(move || -> std::io::Result<()> {
        if path.is_file() {
            return Ok(());
        }
        std::fs::create_dir_all(&dir)?;
        // Written aside and renamed: a reader never sees half a file under its hash.
        let aside = dir.join(format!(".{}.part", uuid::Uuid::new_v4()));
        let written = std::fs::File::create(&aside).and_then(|mut file| {
            file.write_all(&bytes)?;
            file.sync_all()
        });
        let renamed = written.and_then(|()| std::fs::rename(&aside, &path));
        if renamed.is_err() {
            let _ = std::fs::remove_file(&aside);
        }
        renamed
    })
    .await
    .map_err(|e| io_error("storing the attachment failed", &std::io::Error::other(e)))?
    .map_err(|e| io_error("storing the attachment failed", &e))?;
    Ok(AttachmentRef { id, name, mime, size })
}

/// A MIME type as `type/subtype` (parameters dropped, lowercase); `application/octet-stream`
/// when none is given.
fn checked_mime(mime: &str) -> Result<String> {
    let essence = mime.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
    if essence.is_empty() {
        return Ok("application/octet-stream".into());
    }
    let token = |t: &str| {
        !t.is_empty()
            && t.len() <= 100
            && t.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$&-^_.+".contains(&b))
    };
    match essence.split_once('/') {
        Some((kind, sub)) if token(kind) && token(sub) => Ok(essence),
        _ => Err(EngineError::Validation(format!(
            "content type {essence:?} is not a MIME type such as image/png; send the file's type"
        ))),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The content of the stored attachment `id`; `NotFound` for an id that names none.
pub(crate) async fn read(home: &Path, id: &str) -> Result<Vec<u8>> {
    let missing = || EngineError::NotFound("no such attachment".into());
    if !is_attachment_id(id) {
        return Err(missing());
    }
    tokio::fs::read(folder(home).join(id)).await.map_err(|_| missing())
}

/// Checks a message's attachments: at most [`MAX_ATTACHMENTS`], each a stored file; the
/// name and type are checked as on upload and the size is the stored file's.
pub(crate) async fn check(home: &Path, list: Vec<AttachmentRef>) -> Result<Vec<AttachmentRef>> {
    if list.len() > MAX_ATTACHMENTS {
        return Err(EngineError::Validation(format!(
            "attachments has {} files, more than {MAX_ATTACHMENTS} (the attachments per message limit); send the rest in another message",
            list.len()
        )));
    }
    let mut checked = Vec::with_capacity(list.len());
    for (i, a) in list.into_iter().enumerate() {
        let field = format!("attachments[{i}]");
        if !is_attachment_id(&a.id) {
            return Err(EngineError::Validation(format!(
                "{field}.id is not an attachment id; upload the file with attachment.upload first"
            )));
        }
        let stored = tokio::fs::metadata(folder(home).join(&a.id)).await;
        let Ok(meta) = stored.map_err(|_| ()).and_then(|m| m.is_file().then_some(m).ok_or(()))
        else {
            return Err(EngineError::Validation(format!(
                "{field}.id names no stored attachment; upload the file with attachment.upload first"
            )));
        };
        if meta.len() > MAX_ATTACHMENT_BYTES {
            return Err(too_large(meta.len()));
        }
        let name = kandev_domain::validate::name(&format!("{field}.name"), &a.name)
            .map_err(|e| EngineError::Validation(e.to_string()))?;
        checked.push(AttachmentRef {
            id: a.id,
            name,
            mime: checked_mime(&a.mime)?,
            size: meta.len(),
        });
    }
    Ok(checked)
}

/// A user message's `metadata` with its attachments (`{attachments: [{id, name, mime, size}]}`).
pub(crate) fn metadata(list: &[AttachmentRef]) -> Value {
    if list.is_empty() {
        return json!({});
    }
    let list: Vec<Value> = list
        .iter()
        .map(|a| json!({ "id": a.id, "name": a.name, "mime": a.mime, "size": a.size }))
        .collect();
    json!({ "attachments": list })
}

/// The attachments a user message's `metadata` lists.
pub(crate) fn of_metadata(metadata: &str) -> Vec<AttachmentRef> {
    let value: Value = serde_json::from_str(metadata).unwrap_or(Value::Null);
    let Some(list) = value.get("attachments").and_then(Value::as_array) else { return vec![] };
    let text = |v: &Value, key: &str| v.get(key).and_then(Value::as_str).unwrap_or("").to_owned();
    list.iter()
        .map(|v| AttachmentRef {
            id: text(v, "id"),
            name: text(v, "name"),
            mime: text(v, "mime"),
            size: v.get("size").and_then(Value::as_u64).unwrap_or(0),
        })
        .collect()
}

/// Why an attachment could not be sent: what the agent is told (short, no connection
/// details), and what the server log gets.
struct NotSent {
    agent: String,
    detail: String,
}

impl NotSent {
    fn same(why: &str) -> Self {
        Self { agent: why.to_owned(), detail: why.to_owned() }
    }
}

/// The content blocks of `attachments` for an agent that accepts `accepts`, working in
/// `cwd` on `site` (its host, or why it cannot be reached: kept for the server log). A file
/// that cannot be read or copied becomes a short text block saying so, so the turn still
/// runs and the agent knows something is missing; the details (an ssh error naming the user,
/// host and port) go to the server log only.
pub(crate) async fn blocks(
    home: &Path,
    cwd: &Path,
    site: &std::result::Result<Site, String>,
    attachments: &[AttachmentRef],
    accepts: PromptAccepts,
) -> Vec<ContentBlock> {
    let mut blocks = Vec::with_capacity(attachments.len());
    for a in attachments {
        let block = match block(home, cwd, site, a, accepts).await {
            Ok(block) => block,
            Err(why) => {
                tracing::warn!(
                    attachment = a.id,
                    reason = why.detail,
                    "an attachment could not be sent"
                );
                ContentBlock::text(format!(
                    "(the attached file {} could not be sent: {})",
                    a.name, why.agent
                ))
            }
        };
        blocks.push(block);
    }
    blocks
}

async fn block(
    home: &Path,
    cwd: &Path,
    site: &std::result::Result<Site, String>,
    a: &AttachmentRef,
    accepts: PromptAccepts,
) -> std::result::Result<ContentBlock, NotSent> {
    if !is_attachment_id(&a.id) {
        return Err(NotSent::same("it is not a stored attachment"));
    }
    let bytes = tokio::fs::read(folder(home).join(&a.id))
        .await
        .map_err(|_| NotSent::same("it is no longer stored"))?;
    let text = std::str::from_utf8(&bytes).ok().filter(|t| !t.contains('\0'));
    let raw = match delivery(a, text.is_some(), accepts) {
        Delivery::Image => json!({
            "type": "image",
            "mimeType": a.mime,
            "data": base64::engine::general_purpose::STANDARD.encode(&bytes),
        }),
        Delivery::Embedded => json!({
            "type": "resource",
            "resource": {
                "uri": format!("attachment:///{}/{}", a.id, safe_file_name(&a.name)),
                "mimeType": a.mime,
                "text": text.unwrap_or_default(),
            },
        }),
        Delivery::Link => {
            let site = site.as_ref().map_err(|e| NotSent {
                agent: "its host cannot be reached".into(),
                detail: format!("its host cannot be reached: {e}"),
            })?;
            let file = format!("{}-{}", &a.id[..12], safe_file_name(&a.name));
            let path =
                site.write_attachment_copy(cwd, &file, bytes).await.map_err(|e| NotSent {
                    agent: "it could not be copied to the working directory".into(),
                    detail: format!("copying it to the working directory failed: {e}"),
                })?;
            json!({
                "type": "resource_link",
                "uri": format!("file://{}", path.display()),
                "name": a.name,
                "mimeType": a.mime,
                "size": a.size,
            })
        }
    };
    Ok(ContentBlock::from_json(raw))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 20 (review): an attachment whose host cannot be reached tells the agent that
    /// much, not the ssh error with the user, host and port (that goes to the server log).
    #[tokio::test]
    async fn i20_d23_an_unreachable_host_gives_the_agent_a_short_message() {
        let home = tempfile::tempdir().unwrap();
        let id = "a".repeat(64);
        std::fs::create_dir_all(folder(home.path())).unwrap();
        std::fs::write(folder(home.path()).join(&id), b"\x00\x01binary").unwrap();
        let a = AttachmentRef {
            id,
            name: "data.bin".into(),
            mime: "application/octet-stream".into(),
            size: 8,
        };
        let site = Err("ssh to alice@build.example:2222 failed: Permission denied".to_owned());
        let blocks = blocks(home.path(), home.path(), &site, &[a], PromptAccepts::default()).await;
        let text = blocks[0].as_text().unwrap();
        assert_eq!(
            text,
            "(the attached file data.bin could not be sent: its host cannot be reached)"
        );
    }
}
