//! Task branch names: filling the repository's branch template and making the result a
//! valid git branch name. The validity rule itself is `kandev_domain::validate`'s, shared
//! with the API's check of templates.

pub use kandev_domain::validate::is_valid_branch_name;

/// The branch template used when a repository has none, or has one that cannot give a
/// valid branch name (templates are validated when set; older ones may not have been).
pub const DEFAULT_BRANCH_TEMPLATE: &str = "kandev/{task-slug}-{short-id}";

/// Longest `{task-slug}`.
const SLUG_MAX: usize = 40;

/// The branch name for a task: `template` with `{task-slug}` replaced by [`task_slug`] of
/// the title and `{short-id}` by [`short_id`] of the task id, sanitized into a valid git
/// branch name. An empty template, or one whose result is not a valid branch name or lies
/// under `refs/`, means [`DEFAULT_BRANCH_TEMPLATE`].
///
/// The name is not unique by itself (two tasks may share a title and a template without
/// `{short-id}`): [`create_worktree`](super::create_worktree) never reuses another task's
/// branch and picks a free suffix instead.
pub fn branch_name(template: &str, task_title: &str, task_id: &str) -> String {
    let fill = |template: &str| {
        sanitize_branch_name(
            &template
                .replace("{task-slug}", &task_slug(task_title))
                .replace("{short-id}", &short_id(task_id)),
        )
    };
    let name = if template.trim().is_empty() { String::new() } else { fill(template) };
    if is_valid_branch_name(&name) && !name.starts_with("refs/") {
        name
    } else {
        fill(DEFAULT_BRANCH_TEMPLATE)
    }
}

/// Lowercase ASCII letters and digits of `title`, everything else collapsed into single
/// `-`, at most 40 characters, no leading or trailing `-`; `task` when nothing is left.
pub fn task_slug(title: &str) -> String {
    let mut slug = String::with_capacity(SLUG_MAX);
    for c in title.chars() {
        if slug.len() >= SLUG_MAX {
            break;
        }
        if c.is_ascii_alphanumeric() {
            slug.push(c.to_ascii_lowercase());
        } else if !slug.is_empty() && !slug.ends_with('-') {
            slug.push('-');
        }
    }
    let slug = slug.trim_end_matches('-');
    if slug.is_empty() { "task".to_owned() } else { slug.to_owned() }
}

/// Eight hex digits derived from the whole of `id` (a 64-bit FNV-1a hash folded to 32 bits),
/// so ids that share a prefix (UUIDv7s made within the same ~65 s share their first eight
/// digits, which are a timestamp) still get different short ids. Stable across versions
/// and platforms.
pub fn short_id(id: &str) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in id.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{:08x}", (hash ^ (hash >> 32)) as u32)
}

/// Characters git never allows in a ref name (besides control characters).
const FORBIDDEN_CHARS: &str = " ~^:?*[\\";

/// Replaces or drops whatever git would refuse. Components are also trimmed of `-`, which
/// keeps names tidy when a placeholder is empty.
fn sanitize_branch_name(raw: &str) -> String {
    let replaced: String = raw
        .chars()
        .map(|c| if c.is_ascii_control() || FORBIDDEN_CHARS.contains(c) { '-' } else { c })
        .collect();
    let replaced = replaced.replace("@{", "-{");
    let components: Vec<String> =
        replaced.split('/').map(sanitize_component).filter(|c| !c.is_empty()).collect();
    let name = components.join("/");
    if name == "@" || name == "HEAD" { String::new() } else { name }
}

fn sanitize_component(component: &str) -> String {
    let mut c = component.to_owned();
    while c.contains("..") {
        c = c.replace("..", ".");
    }
    loop {
        let before = c.len();
        c = c.trim_matches('-').trim_start_matches('.').trim_end_matches('.').to_owned();
        if let Some(stripped) = c.strip_suffix(".lock") {
            c = stripped.to_owned();
        }
        if c.len() == before {
            return c;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "0194f3a2-7b1c-7000-8000-000000000000";

    #[test]
    fn default_template_uses_slug_and_short_id() {
        let short = short_id(ID);
        assert_eq!(
            branch_name("", "Fix the Login bug!", ID),
            format!("kandev/fix-the-login-bug-{short}")
        );
        assert_eq!(short.len(), 8);
        assert!(short.chars().all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
    }

    #[test]
    fn i12_f6_short_ids_of_ids_made_together_differ() {
        // UUIDv7s of the same minute: the first eight hex digits are the same timestamp.
        let ids = [
            "0194f3a2-7b1c-7000-8000-000000000001",
            "0194f3a2-7b1c-7000-8000-000000000002",
            "0194f3a2-7b1d-7abc-9def-0123456789ab",
        ];
        let shorts: std::collections::HashSet<String> = ids.iter().map(|id| short_id(id)).collect();
        assert_eq!(shorts.len(), ids.len(), "{shorts:?}");
        assert_eq!(short_id(ids[0]), short_id(ids[0]), "stable");
        // Known value, so a change of the hash (and of every future branch name) is noticed.
        assert_eq!(short_id(""), "4fd0bfc1");
    }

    #[test]
    fn slug_is_bounded_and_never_empty() {
        let slug = task_slug(&"word ".repeat(30));
        assert!(slug.len() <= SLUG_MAX, "{slug}");
        assert!(!slug.ends_with('-'));
        assert_eq!(task_slug("¿¡ !!"), "task");
        assert_eq!(task_slug("Ünïcode title"), "n-code-title");
    }

    #[test]
    fn hostile_templates_become_valid_names() {
        let cases = [
            ("{task-slug}", "x"),
            ("-lead/{short-id}", "x"),
            ("a..b/.hidden/c.lock/{task-slug}", "x"),
            ("feat/@{{short-id}}", "x"),
            ("we ird~^:?*[\\name", "x"),
            ("/{task-slug}//", "x"),
            ("HEAD", "x"),
            ("@", "x"),
            ("...", "x"),
        ];
        for (template, title) in cases {
            let name = branch_name(template, title, "abc");
            assert!(is_valid_branch_name(&name), "{template:?} gave {name:?}");
        }
        let fallback = format!("kandev/x-{}", short_id("abc"));
        assert_eq!(branch_name("HEAD", "x", "abc"), fallback);
        assert_eq!(branch_name("refs/heads/{task-slug}", "x", "abc"), fallback);
    }
}
