//! Attachments (issue 18): files stored once by content hash under
//! `$KANDEV_HOME/attachments/<sha256>`, the checks a message's references go through, and
//! the ACP content blocks each becomes for an agent (`image`, embedded `resource`, or a
//! `resource_link` to a copy in the working directory's `.kandev/attachments/`, written on the
//! agent's host: through the SSH executor's link when the agent runs on a build host).
//! Uploads (issue 38, item 5) are streamed to disk, a bounded number at once, within a quota
//! of the folder's bytes; those no stored message or queued prompt names are swept after a day.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use base64::Engine as _;
use kandev_acp::ContentBlock;
use kandev_domain::attachment::{
    AttachmentRef, Delivery, MAX_ATTACHMENT_BYTES, MAX_ATTACHMENTS, PromptAccepts, delivery,
    is_attachment_id, safe_file_name,
};
use kandev_runtime::site::Site;
use serde_json::json;
use sha2::{Digest, Sha256};

use kandev_store::Store;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

use crate::config::AttachmentSettings;
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

/// The bounds of uploads shared by the engine: slots for uploads at once, and the bytes the
/// folder holds (for the quota), read from disk at the first need and again at each sweep.
/// The byte count's lock also orders an upload's rename, a reference's check and the sweep's
/// removals, so none of them acts on what another is changing.
pub(crate) struct Uploads {
    /// `$KANDEV_HOME/attachments`.
    dir: PathBuf,
    settings: AttachmentSettings,
    slots: Arc<Semaphore>,
    stored: tokio::sync::Mutex<Option<u64>>,
}

impl Uploads {
    pub(crate) fn new(home: &Path, settings: &AttachmentSettings) -> Uploads {
        Uploads {
            dir: folder(home),
            settings: settings.clone(),
            slots: Arc::new(Semaphore::new(settings.at_once.max(1))),
            stored: tokio::sync::Mutex::new(None),
        }
    }
}

/// An upload in progress (`attachment.upload`): its bytes go to a file aside in the
/// attachments folder as they arrive, hashed on the way, and become `<sha256>` at
/// [`Upload::finish`]. It holds one of the upload slots until it ends; dropped unfinished (a
/// client gone, a refusal), it removes its file.
pub struct Upload {
    uploads: Arc<Uploads>,
    name: String,
    mime: String,
    aside: PathBuf,
    file: Option<tokio::fs::File>,
    hasher: Sha256,
    size: u64,
    _slot: OwnedSemaphorePermit,
}

/// Checks an upload's name and type, waits (bounded) for an upload slot and opens the file
/// its bytes go to.
pub(crate) async fn begin(uploads: &Arc<Uploads>, name: &str, mime: &str) -> Result<Upload> {
    let name = kandev_domain::validate::name("name", name)
        .map_err(|e| EngineError::Validation(e.to_string()))?;
    let mime = checked_mime(mime)?;
    let settings = &uploads.settings;
    let slots = uploads.slots.clone();
    let slot = match tokio::time::timeout(settings.slot_wait, slots.acquire_owned()).await {
        Ok(Ok(slot)) => slot,
        Ok(Err(_)) => return Err(EngineError::gone()),
        Err(_) => {
            return Err(EngineError::Busy(format!(
                "too many uploads at once ({}, the limit); try again when one has finished",
                settings.at_once.max(1)
            )));
        }
    };
    let dir = &uploads.dir;
    let aside = dir.join(format!(".{}.part", uuid::Uuid::new_v4()));
    let opened = async {
        tokio::fs::create_dir_all(dir).await?;
        tokio::fs::File::create_new(&aside).await
    };
    let file = opened.await.map_err(|e| io_error("storing the attachment failed", &e))?;
    Ok(Upload {
        uploads: uploads.clone(),
        name,
        mime,
        aside,
        file: Some(file),
        hasher: Sha256::new(),
        size: 0,
        _slot: slot,
    })
}

impl Upload {
    /// Writes the next bytes of the file; past [`MAX_ATTACHMENT_BYTES`] in all, the size
    /// limit's refusal.
    pub async fn write(&mut self, chunk: &[u8]) -> Result<()> {
        use tokio::io::AsyncWriteExt;
        self.size = self.size.saturating_add(chunk.len() as u64);
        if self.size > MAX_ATTACHMENT_BYTES {
            return Err(too_large_error());
        }
        self.hasher.update(chunk);
        let Some(file) = self.file.as_mut() else { return Err(EngineError::gone()) };
        file.write_all(chunk).await.map_err(|e| io_error("storing the attachment failed", &e))
    }

    /// The whole file arrived: stores it under its SHA-256 (a file of that hash already
    /// stored is kept: same hash, same bytes) unless it would take the folder past its quota.
    pub async fn finish(mut self) -> Result<AttachmentRef> {
        use tokio::io::AsyncWriteExt;
        let Some(mut file) = self.file.take() else { return Err(EngineError::gone()) };
        let written = async {
            file.flush().await?;
            file.sync_all().await
        };
        written.await.map_err(|e| io_error("storing the attachment failed", &e))?;
        drop(file);
        let id = hex(&self.hasher.clone().finalize());
        let dir = &self.uploads.dir;
        let path = dir.join(&id);
        let quota = self.uploads.settings.quota;
        let mut stored = self.uploads.stored.lock().await;
        let used = match *stored {
            Some(used) => used,
            None => folder_bytes(dir).await?,
        };
        *stored = Some(used);
        let size = self.size;
        if tokio::fs::metadata(&path).await.is_ok_and(|m| m.is_file()) {
            // Already stored: nothing more on disk (the file aside goes with `self`); made new
            // again, under the lock the sweep removes by, so an old unreferenced copy is not
            // swept between this answer and the message that names it.
            touch(path.clone()).await.map_err(|e| io_error("storing the attachment failed", &e))?;
        } else if used.saturating_add(size) > quota {
            return Err(EngineError::Unavailable(format!(
                "the attachments take {} of their {} quota and this file is {}; delete tasks \
                 whose attachments are no longer needed (uploads no message names go after a \
                 day), or restart the server with a larger --attachment-quota",
                human(used),
                human(quota),
                human(size)
            )));
        } else {
            // Renamed whole: a reader never sees half a file under its hash.
            tokio::fs::rename(&self.aside, &path)
                .await
                .map_err(|e| io_error("storing the attachment failed", &e))?;
            *stored = Some(used.saturating_add(size));
        }
        let (name, mime) = (std::mem::take(&mut self.name), std::mem::take(&mut self.mime));
        Ok(AttachmentRef { id, name, mime, size })
    }
}

impl Drop for Upload {
    fn drop(&mut self) {
        // Gone already once renamed; otherwise the unfinished or duplicate file aside.
        let _ = std::fs::remove_file(&self.aside);
    }
}

/// Bytes as `1 GiB`, `600 KiB`, `1.5 MiB` or `12 bytes`.
fn human(bytes: u64) -> String {
    const UNITS: [(u64, &str); 3] = [(1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")];
    for (size, unit) in UNITS {
        if bytes >= size {
            let value = bytes as f64 / size as f64;
            let shown = format!("{value:.1}");
            return format!("{} {unit}", shown.trim_end_matches(".0"));
        }
    }
    format!("{bytes} bytes")
}

/// The bytes of the stored files in `dir` (named by their hash; files aside are uploads in
/// progress, not counted).
async fn folder_bytes(dir: &Path) -> Result<u64> {
    let dir = dir.to_owned();
    let counted = tokio::task::spawn_blocking(move || -> std::io::Result<u64> {
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(0),
            Err(err) => return Err(err),
        };
        let mut total = 0u64;
        for entry in entries {
            let entry = entry?;
            if !entry.file_name().to_str().is_some_and(is_attachment_id) {
                continue;
            }
            if let Ok(meta) = entry.metadata()
                && meta.is_file()
            {
                total = total.saturating_add(meta.len());
            }
        }
        Ok(total)
    })
    .await
    .map_err(|e| io_error("reading the attachments folder failed", &std::io::Error::other(e)))?;
    counted.map_err(|e| io_error("reading the attachments folder failed", &e))
}

/// One pass of the sweep: removes the uploads no stored message or queued prompt names that
/// were not written or referenced for `keep_unreferenced` (and files aside that old, left by
/// a crash), then counts the folder again for the quota. Reads the store only when such old
/// files exist.
pub(crate) async fn sweep(uploads: &Uploads, store: &Store) -> Result<usize> {
    let dir = uploads.dir.clone();
    let keep = uploads.settings.keep_unreferenced;
    let Some(cutoff) = SystemTime::now().checked_sub(keep) else { return Ok(0) };
    let old = {
        let dir = dir.clone();
        tokio::task::spawn_blocking(move || old_files(&dir, cutoff)).await.map_err(|e| {
            io_error("reading the attachments folder failed", &std::io::Error::other(e))
        })?
    };
    if old.is_empty() {
        return Ok(0);
    }
    // The queue first: a prompt that leaves it meanwhile is a stored message by the next read.
    let mut in_use = store.queued_attachment_ids().await?;
    in_use.extend(store.message_attachment_ids().await?);
    let unused: Vec<String> = old.into_iter().filter(|name| !in_use.contains(name)).collect();
    let mut stored = uploads.stored.lock().await;
    let removed = {
        let dir = dir.clone();
        tokio::task::spawn_blocking(move || {
            // Looked at again under the lock: a message that named one meanwhile made it new.
            let still_old = |path: &Path| {
                std::fs::metadata(path).and_then(|m| m.modified()).is_ok_and(|t| t < cutoff)
            };
            unused
                .iter()
                .map(|name| dir.join(name))
                .filter(|path| still_old(path) && std::fs::remove_file(path).is_ok())
                .count()
        })
        .await
        .map_err(|e| io_error("removing old attachments failed", &std::io::Error::other(e)))?
    };
    *stored = Some(folder_bytes(&dir).await?);
    Ok(removed)
}

/// The names of the stored files and files aside in `dir` last modified before `cutoff`.
fn old_files(dir: &Path, cutoff: SystemTime) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else { return vec![] };
    entries
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().into_string().ok()?;
            let ours =
                is_attachment_id(&name) || (name.starts_with('.') && name.ends_with(".part"));
            let modified = entry.metadata().ok()?.modified().ok()?;
            (ours && modified < cutoff).then_some(name)
        })
        .collect()
}

/// Runs [`sweep`] every `sweep_every` until `stop` (the server runs it as one of its tasks).
pub(crate) async fn sweep_until(uploads: Arc<Uploads>, store: Store, stop: CancellationToken) {
    let mut ticks = tokio::time::interval(uploads.settings.sweep_every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = ticks.tick() => {}
        }
        match sweep(&uploads, &store).await {
            Ok(0) => {}
            Ok(removed) => tracing::info!(removed, "removed attachments no message names"),
            Err(err) => tracing::warn!(error = %err, "sweeping old attachments failed; will retry"),
        }
    }
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
/// name and type are checked as on upload and the size is the stored file's. Each file is
/// marked new (its modification time set to now), under the lock the sweep removes by, so the
/// sweep keeps it until the message that names it is stored.
pub(crate) async fn check(
    uploads: &Uploads,
    list: Vec<AttachmentRef>,
) -> Result<Vec<AttachmentRef>> {
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
        let _sweep = uploads.stored.lock().await;
        let stored = touch(uploads.dir.join(&a.id)).await;
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

/// Sets a stored file's modification time to now; its metadata.
async fn touch(path: PathBuf) -> std::io::Result<std::fs::Metadata> {
    let touched = tokio::task::spawn_blocking(move || {
        let file = std::fs::File::open(&path)?;
        file.set_modified(SystemTime::now())?;
        file.metadata()
    });
    touched.await.map_err(std::io::Error::other)?
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

    #[test]
    fn i38_5_sizes_are_said_in_binary_units() {
        assert_eq!(human(1 << 30), "1 GiB");
        assert_eq!(human(600 * 1024), "600 KiB");
        assert_eq!(human(3 << 19), "1.5 MiB");
        assert_eq!(human(12), "12 bytes");
    }

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
