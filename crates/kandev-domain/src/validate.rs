//! Validation of user-supplied names and texts, shared by every entity: the one place that
//! defines how long each kind of field may be and which characters a name may hold.
//!
//! Every path that sets one of these fields goes through the function for its kind: the API
//! handlers (create and update) and the workflow YAML import. The limits are in bytes for
//! free text (what storage and the wire pay for) and in characters for one-line labels.

use thiserror::Error;

/// Longest accepted name (workspace, workflow, step, repository, profile), in characters.
pub const MAX_NAME_CHARS: usize = 200;
/// Longest accepted task title, in characters.
pub const MAX_TITLE_CHARS: usize = 500;
/// Longest accepted step prompt, in bytes. Every client that lists workflows receives every
/// prompt, so this is far below the limit of a message.
pub const MAX_PROMPT_BYTES: usize = 64 * 1024;
/// Longest accepted description of a workflow or a task, in bytes (task lists carry them).
pub const MAX_DESCRIPTION_BYTES: usize = 64 * 1024;
/// Longest accepted repository setup script, in bytes.
pub const MAX_SCRIPT_BYTES: usize = 64 * 1024;
/// Longest accepted step color (`#64748b`, a CSS color name), in characters.
pub const MAX_COLOR_CHARS: usize = 32;
/// Most steps in one workflow.
pub const MAX_STEPS: usize = 100;
/// Longest accepted free text sent to an agent (a message, a queued prompt), in bytes.
pub const MAX_TEXT_BYTES: usize = 1024 * 1024;

/// A field that did not pass validation: `field` is the request field (`details.field` of
/// the API's error, for programs), and the message names it in words ([`spoken`]:
/// `forge_api_base_url` reads "forge API base URL", `mcp_servers[0].url` "MCP servers 1 URL").
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{} {problem}", spoken(field))]
pub struct FieldError {
    pub field: String,
    pub problem: String,
}

impl FieldError {
    pub fn new(field: impl Into<String>, problem: impl Into<String>) -> Self {
        Self { field: field.into(), problem: problem.into() }
    }
}

/// A request field's path in words, for people (issue 45: no error names an API field): `_`
/// and `.` are spaces, a list index counts from 1, abbreviations are capitalized, and a unit
/// suffix (`_s`, `_ms`) is left out.
pub fn spoken(field: &str) -> String {
    const CAPITALS: [(&str, &str); 7] = [
        ("url", "URL"),
        ("api", "API"),
        ("ssh", "SSH"),
        ("mcp", "MCP"),
        ("id", "ID"),
        ("ids", "IDs"),
        ("http", "HTTP"),
    ];
    let mut words = vec![];
    for part in field.split('.') {
        let (name, index) = match part.split_once('[') {
            Some((name, rest)) => (name, rest.trim_end_matches(']').parse::<usize>().ok()),
            None => (part, None),
        };
        let mut parts: Vec<&str> = name.split('_').filter(|w| !w.is_empty()).collect();
        // A unit suffix (`timeout_s`, `grace_ms`) is said by the message, not the name.
        if parts.len() > 1 && matches!(parts.last(), Some(&("s" | "ms"))) {
            parts.pop();
        }
        for word in parts {
            let capital = CAPITALS.iter().find(|(w, _)| *w == word).map(|(_, c)| *c);
            words.push(capital.unwrap_or(word).to_owned());
        }
        if let Some(index) = index {
            words.push((index + 1).to_string());
        }
    }
    words.join(" ")
}

/// A required name (workspace, workflow, step, repository, profile): see [`label`].
pub fn name(field: &str, value: &str) -> Result<String, FieldError> {
    label(field, value, MAX_NAME_CHARS)
}

/// A required task title: see [`label`].
pub fn title(field: &str, value: &str) -> Result<String, FieldError> {
    label(field, value, MAX_TITLE_CHARS)
}

/// The one check of every name and title shown on a card, a column or a list.
///
/// Trims white space, then refuses, naming `field`:
/// - nothing visible: empty, or only white space and invisible characters (zero-width
///   spaces and joiners, other format characters, fillers; see [`is_invisible`]);
/// - more than `max_chars` characters;
/// - control characters (C0, DEL, C1) and line or paragraph separators: a label is one line;
/// - bidirectional embedding, override and isolate controls (U+202A–U+202E, U+2066–U+2069),
///   which reorder the text around them and can make a card read as something else.
///
/// Other invisible characters inside visible text are kept: zero-width joiners build emoji
/// and non-joiners are needed by several scripts; the marks U+200E, U+200F and U+061C only
/// set the direction of neutral characters and cannot reorder others.
pub fn label(field: &str, value: &str, max_chars: usize) -> Result<String, FieldError> {
    let trimmed = value.trim();
    if trimmed.chars().count() > max_chars {
        return Err(FieldError::new(field, format!("is longer than {max_chars} characters")));
    }
    if trimmed.chars().any(|c| c.is_control() || matches!(c, '\u{2028}' | '\u{2029}')) {
        return Err(FieldError::new(field, "must be a single line without control characters"));
    }
    if trimmed.chars().any(is_bidi_control) {
        return Err(FieldError::new(
            field,
            "must not contain bidirectional override or isolate characters \
             (U+202A to U+202E, U+2066 to U+2069); remove them",
        ));
    }
    if trimmed.is_empty() {
        return Err(FieldError::new(field, "is required"));
    }
    if trimmed.chars().all(|c| c.is_whitespace() || is_invisible(c)) {
        return Err(FieldError::new(
            field,
            "has no visible characters; write a name that can be read",
        ));
    }
    Ok(trimmed.to_owned())
}

/// Bidirectional embedding, override and isolate controls: U+202A–U+202E (LRE, RLE, PDF,
/// LRO, RLO) and U+2066–U+2069 (LRI, RLI, FSI, PDI).
pub fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// Whether `c` draws nothing: Unicode's Default_Ignorable_Code_Point set (zero-width space,
/// joiners, word joiner, soft hyphen, bidi marks and controls, variation selectors, fillers,
/// tags, BOM; DerivedCoreProperties.txt, Unicode 15.1), plus U+2800 (braille blank), which
/// renders as an empty cell. White space is tested separately.
pub fn is_invisible(c: char) -> bool {
    matches!(
        c,
        '\u{00ad}'
            | '\u{034f}'
            | '\u{061c}'
            | '\u{115f}'..='\u{1160}'
            | '\u{17b4}'..='\u{17b5}'
            | '\u{180b}'..='\u{180f}'
            | '\u{200b}'..='\u{200f}'
            | '\u{202a}'..='\u{202e}'
            | '\u{2060}'..='\u{206f}'
            | '\u{2800}'
            | '\u{3164}'
            | '\u{fe00}'..='\u{fe0f}'
            | '\u{feff}'
            | '\u{ffa0}'
            | '\u{fff0}'..='\u{fff8}'
            | '\u{1bca0}'..='\u{1bca3}'
            | '\u{1d173}'..='\u{1d17a}'
            | '\u{e0000}'..='\u{e0fff}'
    )
}

/// A free text sent to an agent (a message, a queued prompt), at most [`MAX_TEXT_BYTES`].
/// White space is kept as written.
pub fn text(field: &str, value: &str) -> Result<String, FieldError> {
    bounded_text(field, value, MAX_TEXT_BYTES, "message")
}

/// A step prompt, at most [`MAX_PROMPT_BYTES`]; white space is kept.
pub fn prompt(field: &str, value: &str) -> Result<String, FieldError> {
    bounded_text(field, value, MAX_PROMPT_BYTES, "prompt")
}

/// A workflow's or a task's description, at most [`MAX_DESCRIPTION_BYTES`]; white space is
/// kept.
pub fn description(field: &str, value: &str) -> Result<String, FieldError> {
    bounded_text(field, value, MAX_DESCRIPTION_BYTES, "description")
}

/// A repository setup script, at most [`MAX_SCRIPT_BYTES`]; white space is kept.
pub fn script(field: &str, value: &str) -> Result<String, FieldError> {
    bounded_text(field, value, MAX_SCRIPT_BYTES, "setup script")
}

/// Longest time limit a repository's scripts may have: a day.
pub const MAX_SCRIPT_TIMEOUT_S: u32 = 24 * 60 * 60;

/// A repository's script time limit in seconds: at most [`MAX_SCRIPT_TIMEOUT_S`]; 0 means
/// the server's.
pub fn script_timeout(field: &str, seconds: u32) -> Result<u32, FieldError> {
    if seconds > MAX_SCRIPT_TIMEOUT_S {
        return Err(FieldError::new(
            field,
            format!(
                "is more than a day ({MAX_SCRIPT_TIMEOUT_S} seconds); give fewer seconds, or 0 \
                 for the server's limit"
            ),
        ));
    }
    Ok(seconds)
}

/// An optional step color: empty (the default color) or one trimmed line of at most
/// [`MAX_COLOR_CHARS`] characters.
pub fn color(field: &str, value: &str) -> Result<String, FieldError> {
    let trimmed = value.trim();
    if trimmed.chars().count() > MAX_COLOR_CHARS {
        return Err(FieldError::new(
            field,
            format!("is longer than {MAX_COLOR_CHARS} characters; write a color like #64748b"),
        ));
    }
    if trimmed.chars().any(|c| c.is_control() || is_invisible(c)) {
        return Err(FieldError::new(field, "must be a color like #64748b"));
    }
    Ok(trimmed.to_owned())
}

/// `value` unchanged if it has at most `max_bytes`; the error names the `kind` of limit.
fn bounded_text(
    field: &str,
    value: &str,
    max_bytes: usize,
    kind: &str,
) -> Result<String, FieldError> {
    if value.len() > max_bytes {
        return Err(FieldError::new(
            field,
            format!("is longer than {} (the {kind} limit); shorten it", size(max_bytes)),
        ));
    }
    Ok(value.to_owned())
}

/// The placeholders a branch template may hold: the task title's slug and the task's short id.
pub const BRANCH_PLACEHOLDERS: [&str; 2] = ["{task-slug}", "{short-id}"];

/// Whether `name` is accepted by `git check-ref-format --branch`, implemented here so that
/// names are checked without running git: the rules for `refs/heads/<name>` (no `..`, `@{`,
/// `\`, space, `~ ^ : ? * [` or control characters; no empty component, none starting with
/// `.` or ending with `.lock`; not ending with `.`; not `@`), plus no leading `-` and not
/// `HEAD`. Non-ASCII letters are valid, as in git.
pub fn is_valid_branch_name(name: &str) -> bool {
    if name.is_empty() || name == "@" || name == "HEAD" || name.starts_with('-') {
        return false;
    }
    if name.contains("..") || name.contains("@{") || name.ends_with('.') {
        return false;
    }
    if name.chars().any(|c| c.is_ascii_control() || " ~^:?*[\\".contains(c)) {
        return false;
    }
    name.split('/').all(|component| {
        !component.is_empty() && !component.starts_with('.') && !component.ends_with(".lock")
    })
}

/// A branch name given by the user (a repository's default branch, a local or
/// remote-tracking branch such as `origin/main`): trimmed, valid by [`is_valid_branch_name`],
/// and a short name, never a full ref (`refs/...`).
pub fn branch_name(field: &str, value: &str) -> Result<String, FieldError> {
    let trimmed = value.trim();
    if trimmed.starts_with("refs/") {
        return Err(FieldError::new(
            field,
            format!("{trimmed:?} is a full ref name; write the branch name only, like main"),
        ));
    }
    if !is_valid_branch_name(trimmed) {
        return Err(FieldError::new(
            field,
            format!("{trimmed:?} is not a valid git branch name (see git check-ref-format)"),
        ));
    }
    Ok(trimmed.to_owned())
}

/// A repository's branch template: trimmed; holds `{task-slug}` or `{short-id}` (so each
/// task gets its own branch) and no other `{...}`; not under `refs/`; and, filled in with
/// sample values, a valid branch name by [`is_valid_branch_name`]. Slugs are lowercase ASCII
/// letters, digits and `-`, and short ids hex digits, so the sample stands for every task.
pub fn branch_template(field: &str, value: &str) -> Result<String, FieldError> {
    let trimmed = value.trim();
    let example = "; for example kandev/{task-slug}-{short-id}";
    if !BRANCH_PLACEHOLDERS.iter().any(|p| trimmed.contains(p)) {
        return Err(FieldError::new(
            field,
            format!(
                "must contain {{task-slug}} or {{short-id}} so each task gets its own branch{example}"
            ),
        ));
    }
    let mut rest = trimmed.to_owned();
    for placeholder in BRANCH_PLACEHOLDERS {
        rest = rest.replace(placeholder, "");
    }
    if let Some(start) = rest.find('{') {
        let unknown: String = rest[start..].chars().take_while(|c| *c != '}').collect();
        return Err(FieldError::new(
            field,
            format!("has an unknown placeholder {unknown}}}; use {{task-slug}} and {{short-id}}"),
        ));
    }
    if trimmed.starts_with("refs/") {
        return Err(FieldError::new(
            field,
            format!("must be a branch name, not a full ref under refs/{example}"),
        ));
    }
    let sample = trimmed.replace("{task-slug}", "fix-login-bug").replace("{short-id}", "0a1b2c3d");
    if !is_valid_branch_name(&sample) {
        return Err(FieldError::new(
            field,
            format!(
                "gives {sample:?}, which is not a valid git branch name (see git check-ref-format){example}"
            ),
        ));
    }
    Ok(trimmed.to_owned())
}

/// `bytes` for a message: `64 KiB`, `1 MiB`, `1000 bytes`.
pub fn size(bytes: usize) -> String {
    const KIB: usize = 1024;
    const MIB: usize = 1024 * 1024;
    if bytes >= MIB && bytes.is_multiple_of(MIB) {
        format!("{} MiB", bytes / MIB)
    } else if bytes >= KIB && bytes.is_multiple_of(KIB) {
        format!("{} KiB", bytes / KIB)
    } else {
        format!("{bytes} bytes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn i45_a3_a_field_is_named_in_words() {
        assert_eq!(spoken("forge_api_base_url"), "forge API base URL");
        assert_eq!(spoken("mcp_servers[0].url"), "MCP servers 1 URL");
        assert_eq!(spoken("ssh.identity_file"), "SSH identity file");
        assert_eq!(spoken("title"), "title");
        assert_eq!(spoken("script_timeout_s"), "script timeout");
        assert_eq!(spoken("s"), "s");
        let err = FieldError::new("blocked_by", "would make a cycle");
        assert_eq!(err.to_string(), "blocked by would make a cycle");
    }

    #[test]
    fn names_are_trimmed_and_required() {
        assert_eq!(name("name", "  Board ").unwrap(), "Board");
        assert_eq!(name("name", "   ").unwrap_err().to_string(), "name is required");
        assert!(name("name", "a\nb").is_err());
        assert!(name("name", &"x".repeat(MAX_NAME_CHARS + 1)).is_err());
        assert!(name("name", &"x".repeat(MAX_NAME_CHARS)).is_ok());
    }

    #[test]
    fn i12_f9_invisible_only_names_are_refused() {
        for value in [
            "\u{200b}",
            "\u{200b}\u{200c}\u{200d}",
            " \u{2060}\u{feff} ",
            "\u{00ad}",
            "\u{3164}\u{3164}",
            "\u{2800}",
            "\u{e0041}\u{e0042}",
            "\u{fe0f}",
        ] {
            let err = title("title", value).unwrap_err();
            assert_eq!(err.field, "title");
            assert!(err.problem.contains("no visible characters"), "{value:?}: {err}");
        }
    }

    #[test]
    fn i12_f9_bidi_overrides_and_isolates_are_refused() {
        for c in
            ['\u{202a}', '\u{202b}', '\u{202c}', '\u{202d}', '\u{202e}', '\u{2066}', '\u{2069}']
        {
            let err = name("name", &format!("invoice{c}fdp.exe")).unwrap_err();
            assert!(err.problem.contains("bidirectional"), "{c:?}: {err}");
        }
    }

    #[test]
    fn visible_text_with_joiners_and_marks_is_kept() {
        for value in ["👩\u{200d}💻 pairing", "می\u{200c}خواهم", "abc\u{200f}", "Fix login bug"]
        {
            assert_eq!(title("title", value).unwrap(), value);
        }
        assert!(name("name", "a\u{2028}b").unwrap_err().problem.contains("single line"));
        assert!(name("name", "a\u{85}b").is_err());
    }

    #[test]
    fn texts_keep_whitespace_and_name_their_limit() {
        assert_eq!(text("description", " a\n b ").unwrap(), " a\n b ");
        assert!(text("content", &"x".repeat(MAX_TEXT_BYTES + 1)).is_err());
        let err = prompt("prompt", &"x".repeat(MAX_PROMPT_BYTES + 1)).unwrap_err();
        assert_eq!(err.to_string(), "prompt is longer than 64 KiB (the prompt limit); shorten it");
        assert!(prompt("prompt", &"x".repeat(MAX_PROMPT_BYTES)).is_ok());
        assert!(description("description", &"x".repeat(MAX_DESCRIPTION_BYTES + 1)).is_err());
        assert!(script("setup_script", &"x".repeat(MAX_SCRIPT_BYTES + 1)).is_err());
    }

    #[test]
    fn colors_are_short_single_lines() {
        assert_eq!(color("color", " #64748b ").unwrap(), "#64748b");
        assert_eq!(color("color", "").unwrap(), "");
        assert!(color("color", &"x".repeat(MAX_COLOR_CHARS + 1)).is_err());
        assert!(color("color", "red\n").is_ok());
        assert!(color("color", "r\ned").is_err());
    }

    #[test]
    fn validity_follows_git_check_ref_format() {
        for bad in [
            "", "-x", "a..b", "a/.b", "a.lock", "a/", "/a", "a//b", "a b", "a@{b", "a.", "HEAD",
            "@", "a\\b", "a\u{7f}",
        ] {
            assert!(!is_valid_branch_name(bad), "{bad:?} must be invalid");
        }
        for good in ["main", "kandev/fix-1", "release/1.2", "a@b", "x-", "ブランチ", "@x"] {
            assert!(is_valid_branch_name(good), "{good:?} must be valid");
        }
    }

    #[test]
    fn i12_f6_bad_branch_templates_are_refused() {
        assert!(branch_template("t", " kandev/{task-slug}-{short-id} ").is_ok());
        assert!(branch_template("t", "tasks/{short-id}").is_ok());
        let refused = [
            ("refs/heads/main", "{task-slug} or {short-id}"),
            ("refs/heads/{task-slug}", "not a full ref"),
            ("main", "{task-slug} or {short-id}"),
            ("kandev/{title}-{short-id}", "unknown placeholder {title}"),
            ("kandev/{task-slug} x", "not a valid git branch name"),
            ("kandev/{task-slug}.lock", "not a valid git branch name"),
            ("-{short-id}", "not a valid git branch name"),
            ("kandev/{task-slug}/", "not a valid git branch name"),
            ("kandev..{short-id}", "not a valid git branch name"),
            ("k@{{short-id}}", "unknown placeholder"),
        ];
        for (template, problem) in refused {
            let err = branch_template("branch_template", template).unwrap_err();
            assert_eq!(err.field, "branch_template");
            assert!(err.problem.contains(problem), "{template:?}: {err}");
        }
        assert!(branch_name("default_branch", "refs/heads/main").is_err());
        assert_eq!(branch_name("default_branch", " origin/main ").unwrap(), "origin/main");
    }

    #[test]
    fn sizes_read_naturally() {
        assert_eq!(size(64 * 1024), "64 KiB");
        assert_eq!(size(1024 * 1024), "1 MiB");
        assert_eq!(size(1000), "1000 bytes");
    }
}
