//! Issue 45 acceptance 3: no text a person reads names an API action or a request field.
//! The words are the action table's names (`repository.update`) and the request fields
//! written with an underscore (`forge_api_base_url`; one-word fields such as `url` or
//! `title` are ordinary words). The texts are the string literals of the server's crates
//! that hold a space (messages, not keys), without their `{placeholders}` and SQL, and the
//! web's string, template and JSX texts that hold a space, without their `${...}` parts.
//! Left out on purpose: the MCP tools (`kandev-server/src/mcp/`), whose errors go to agents
//! and name the tool parameters the agent must give, and the store's SQL.

use std::collections::BTreeSet;

/// The words no such text may hold.
pub struct Words {
    actions: BTreeSet<String>,
    fields: BTreeSet<String>,
}

impl Words {
    pub fn new(actions: &[&str], requests_rs: &str) -> Words {
        let mut fields = BTreeSet::new();
        for line in requests_rs.lines() {
            let Some(rest) = line.trim().strip_prefix("pub ") else { continue };
            let Some((name, _)) = rest.split_once(':') else { continue };
            if name.contains('_') && name.chars().all(|c| c.is_ascii_lowercase() || c == '_') {
                fields.insert(name.to_owned());
            }
        }
        // One-word actions (`search`) are ordinary words.
        let actions = actions.iter().filter(|a| a.contains('.')).map(|a| (*a).to_owned()).collect();
        Words { actions, fields }
    }

    /// The words of `text` that name an action or a field.
    fn named_in(&self, text: &str) -> Vec<String> {
        let mut found = vec![];
        let word_char =
            |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '.';
        for word in text.split(|c: char| !word_char(c)) {
            let word = word.trim_matches('.');
            if self.actions.contains(word) || self.fields.contains(word) {
                found.push(word.to_owned());
            }
        }
        found
    }
}

/// `text` without its `{...}` (Rust) or `${...}` (JavaScript) parts, nested braces included.
fn without_placeholders(text: &str) -> String {
    let mut out = String::new();
    let mut depth = 0usize;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '{' if chars.peek() == Some(&'{') && depth == 0 => {
                chars.next(); // `{{`: a brace in a format string
                out.push('{');
            }
            '{' => depth += 1,
            '}' if depth > 0 => depth -= 1,
            '$' if chars.peek() == Some(&'{') => {}
            c if depth == 0 => out.push(c),
            _ => {}
        }
    }
    out
}

fn is_sql(text: &str) -> bool {
    const SQL: [&str; 9] = [
        "SELECT ", "INSERT ", "UPDATE ", "DELETE ", " FROM ", " WHERE ", " AND ", " SET ",
        "ORDER BY",
    ];
    SQL.iter().any(|k| text.contains(k))
}

/// The string literals of a Rust source with their line numbers (comments skipped; raw
/// strings read as written).
fn rust_strings(source: &str) -> Vec<(usize, String)> {
    let bytes: Vec<char> = source.chars().collect();
    let (mut out, mut i, mut line) = (vec![], 0, 1);
    while i < bytes.len() {
        let c = bytes[i];
        if c == '\n' {
            line += 1;
        }
        if c == '/' && bytes.get(i + 1) == Some(&'/') {
            while i < bytes.len() && bytes[i] != '\n' {
                i += 1;
            }
            continue;
        }
        if c == '\'' {
            // A char literal ('"', '\'', 'x'); a lifetime has no closing quote two on.
            if bytes.get(i + 1) == Some(&'\\') {
                i += 4;
                continue;
            }
            if bytes.get(i + 2) == Some(&'\'') {
                i += 3;
                continue;
            }
        }
        if c == '"' {
            let (start, mut text) = (line, String::new());
            i += 1;
            while i < bytes.len() && bytes[i] != '"' {
                if bytes[i] == '\\' {
                    i += 1;
                }
                if bytes[i] == '\n' {
                    line += 1;
                }
                text.push(bytes[i]);
                i += 1;
            }
            out.push((start, text));
        }
        i += 1;
    }
    out
}

/// The Rust texts that name an action or a field: `(line, words, text)`.
pub fn rust_findings(words: &Words, source: &str) -> Vec<(usize, Vec<String>, String)> {
    let mut found = vec![];
    for (line, text) in rust_strings(source) {
        let shown = without_placeholders(&text);
        if !shown.contains(' ') || is_sql(&shown) {
            continue;
        }
        let named = words.named_in(&shown);
        if !named.is_empty() {
            found.push((line, named, text));
        }
    }
    found
}

/// The web's texts that name an action or a field: `(line, words, text)`. Reads quoted
/// strings, template strings and JSX text one line at a time.
pub fn web_findings(words: &Words, source: &str) -> Vec<(usize, Vec<String>, String)> {
    let mut found = vec![];
    for (n, line) in source.lines().enumerate() {
        let trimmed = line.trim_start();
        let comment = ["//", "/*", "*"].iter().any(|c| trimmed.starts_with(c));
        if comment || trimmed.starts_with("import ") {
            continue;
        }
        for text in web_texts(line) {
            let shown = without_placeholders(&text);
            if !shown.trim().contains(' ') {
                continue;
            }
            let named = words.named_in(&shown);
            if !named.is_empty() {
                found.push((n + 1, named, text));
            }
        }
    }
    found
}

/// The quoted, template and JSX texts of one line of TypeScript.
fn web_texts(line: &str) -> Vec<String> {
    let chars: Vec<char> = line.chars().collect();
    let (mut out, mut i) = (vec![], 0);
    while i < chars.len() {
        let c = chars[i];
        if c == '/' && chars.get(i + 1) == Some(&'/') {
            break;
        }
        if matches!(c, '\'' | '"' | '`') {
            let (mut text, mut depth) = (String::new(), 0usize);
            i += 1;
            while i < chars.len() && (chars[i] != c || depth > 0) {
                if chars[i] == '\\' {
                    i += 1;
                } else if c == '`' && chars[i] == '{' {
                    depth += 1;
                } else if c == '`' && chars[i] == '}' {
                    depth = depth.saturating_sub(1);
                }
                if let Some(&ch) = chars.get(i) {
                    text.push(ch);
                }
                i += 1;
            }
            out.push(text);
        } else if c == '>' && i > 0 && !matches!(chars[i - 1], '=' | '-' | ' ') {
            // The end of a JSX tag (`<p>`, `<b className="x">`), not an arrow or a comparison.
            let text: String =
                chars[i + 1..].iter().take_while(|c| !matches!(c, '<' | '{' | '}')).collect();
            if !text.trim().is_empty() {
                out.push(text);
            }
        }
        i += 1;
    }
    out
}
