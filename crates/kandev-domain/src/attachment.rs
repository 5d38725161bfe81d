//! Files attached to a prompt (issue 18): the reference a message or a queue entry keeps, the
//! limits, and how each file goes to an agent given what its prompts accept.

/// Largest attachment (20 MiB).
pub const MAX_ATTACHMENT_BYTES: u64 = 20 * 1024 * 1024;
/// Most attachments on one message.
pub const MAX_ATTACHMENTS: usize = 10;

/// A stored file as a message refers to it. `id` is the SHA-256 of the content in lowercase
/// hex: the file is stored once under that name, whatever it was called. Stored in a user
/// message's metadata (`message_meta.rs`) in this shape.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct AttachmentRef {
    pub id: String,
    pub name: String,
    pub mime: String,
    pub size: u64,
}

impl AttachmentRef {
    pub fn is_image(&self) -> bool {
        self.mime.starts_with("image/")
    }
}

/// Whether `id` can name a stored attachment: 64 lowercase hex digits (so it is also a safe
/// file name).
pub fn is_attachment_id(id: &str) -> bool {
    id.len() == 64 && id.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// What an agent's prompts accept (ACP `promptCapabilities`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PromptAccepts {
    pub image: bool,
    pub embedded_context: bool,
}

/// How one attachment is sent (composer spec): an `image` block when the agent takes images,
/// a text file embedded as a `resource` when it takes embedded context, otherwise a
/// `resource_link` to a copy in the worktree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    Image,
    Embedded,
    Link,
}

/// Chooses the [`Delivery`] of `attachment`; `is_text` says whether its content is text
/// (UTF-8 without NUL bytes).
pub fn delivery(attachment: &AttachmentRef, is_text: bool, accepts: PromptAccepts) -> Delivery {
    if attachment.is_image() && accepts.image {
        Delivery::Image
    } else if !attachment.is_image() && is_text && accepts.embedded_context {
        Delivery::Embedded
    } else {
        Delivery::Link
    }
}

/// A file name safe to create in a worktree: the last path component of `name`, with every
/// character other than ASCII letters, digits, `.`, `-` and `_` replaced by `_`, no leading
/// dot, at most 100 bytes; `attachment` when nothing is left.
pub fn safe_file_name(name: &str) -> String {
    let last = name.rsplit(['/', '\\']).next().unwrap_or_default();
    let mut safe: String = last
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') { c } else { '_' })
        .collect();
    while safe.starts_with('.') {
        safe.remove(0);
    }
    safe.truncate(100);
    if safe.is_empty() { "attachment".to_owned() } else { safe }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(mime: &str) -> AttachmentRef {
        AttachmentRef { id: "0".repeat(64), name: "f".into(), mime: mime.into(), size: 1 }
    }

    #[test]
    fn every_delivery_follows_the_agents_capabilities() {
        let all = PromptAccepts { image: true, embedded_context: true };
        let none = PromptAccepts::default();
        assert_eq!(delivery(&file("image/png"), false, all), Delivery::Image);
        assert_eq!(delivery(&file("image/png"), false, none), Delivery::Link);
        assert_eq!(delivery(&file("text/plain"), true, all), Delivery::Embedded);
        assert_eq!(delivery(&file("text/plain"), true, none), Delivery::Link);
        assert_eq!(delivery(&file("application/zip"), false, all), Delivery::Link);
        // An SVG is text, but an image: never embedded as a resource.
        let svg = PromptAccepts { image: false, embedded_context: true };
        assert_eq!(delivery(&file("image/svg+xml"), true, svg), Delivery::Link);
    }

    #[test]
    fn ids_are_sha256_hex_and_names_cannot_leave_their_folder() {
        assert!(is_attachment_id(&"ab".repeat(32)));
        assert!(!is_attachment_id(&"AB".repeat(32)));
        assert!(!is_attachment_id("../etc/passwd"));
        assert_eq!(safe_file_name("../../etc/passwd"), "passwd");
        assert_eq!(safe_file_name("..."), "attachment");
        assert_eq!(safe_file_name("my shot (1).png"), "my_shot__1_.png");
        assert_eq!(safe_file_name("C:\\x\\.env"), "env");
    }
}
