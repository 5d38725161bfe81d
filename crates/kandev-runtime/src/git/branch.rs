//! Task branch names: filling the repository's branch template and making the result a
//! valid git branch name.

/// The branch template used when a repository has none.
pub const DEFAULT_BRANCH_TEMPLATE: &str = "kandev/{task-slug}-{short-id}";

/// Longest `{task-slug}`.
const SLUG_MAX: usize = 40;

/// Length of `{short-id}`.
const SHORT_ID_LEN: usize = 8;

/// Used when sanitizing leaves nothing usable.
const FALLBACK_BRANCH: &str = "kandev/task";

/// The branch name for a task: `template` with `{task-slug}` replaced by [`task_slug`] of
/// the title and `{short-id}` by [`short_id`] of the task id, sanitized into a valid git
/// branch name. An empty template means [`DEFAULT_BRANCH_TEMPLATE`].
pub fn branch_name(template: &str, task_title: &str, task_id: &str) -> String {
    let template = if template.trim().is_empty() { DEFAULT_BRANCH_TEMPLATE } else { template };
    let raw = template
        .replace("{task-slug}", &task_slug(task_title))
        .replace("{short-id}", &short_id(task_id));
    let name = sanitize_branch_name(&raw);
    if is_valid_branch_name(&name) { name } else { FALLBACK_BRANCH.to_owned() }
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

/// The first eight ASCII letters and digits of `task_id`, lowercased (for a UUID: its first
/// eight hex digits).
pub fn short_id(task_id: &str) -> String {
    task_id
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .take(SHORT_ID_LEN)
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

/// Whether `name` is accepted by `git check-ref-format --branch`: the rules for
/// `refs/heads/<name>`, plus no leading `-` and not `HEAD`.
pub fn is_valid_branch_name(name: &str) -> bool {
    if name.is_empty() || name == "@" || name == "HEAD" || name.starts_with('-') {
        return false;
    }
    if name.contains("..") || name.contains("@{") || name.ends_with('.') {
        return false;
    }
    if name.chars().any(|c| c.is_ascii_control() || FORBIDDEN_CHARS.contains(c)) {
        return false;
    }
    name.split('/').all(|component| {
        !component.is_empty() && !component.starts_with('.') && !component.ends_with(".lock")
    })
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

    #[test]
    fn default_template_uses_slug_and_short_id() {
        assert_eq!(
            branch_name("", "Fix the Login bug!", "0194F3A2-7b1c-7000-8000-000000000000"),
            "kandev/fix-the-login-bug-0194f3a2"
        );
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
        assert_eq!(branch_name("HEAD", "x", "abc"), FALLBACK_BRANCH);
    }

    #[test]
    fn validity_follows_git_rules() {
        for bad in ["", "-x", "a..b", "a/.b", "a.lock", "a/", "a//b", "a b", "a@{b", "a.", "HEAD"] {
            assert!(!is_valid_branch_name(bad), "{bad:?} must be invalid");
        }
        for good in ["main", "kandev/fix-1", "release/1.2", "a@b", "x-"] {
            assert!(is_valid_branch_name(good), "{good:?} must be valid");
        }
    }
}
