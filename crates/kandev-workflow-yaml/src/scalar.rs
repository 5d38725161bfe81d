//! Writing strings as YAML scalars: plain when unambiguous, a literal block for multi-line
//! text, double-quoted otherwise; every form reads back as exactly the same string.

/// Words some YAML parser would read as a boolean or null rather than a string.
const RESERVED_WORDS: &[&str] = &["true", "false", "yes", "no", "on", "off", "y", "n", "null"];

/// Characters a plain scalar may contain besides letters and digits. None of them is a YAML
/// indicator in the middle of a scalar, in block or flow context.
const PLAIN_PUNCTUATION: &[char] = &[' ', '_', '-', '.', '/', '(', ')', '&', '\'', '+', '?'];

/// More characters a plain scalar may contain in block context (not inside a flow mapping),
/// provided it has no `": "`, `" #"` and does not end with `:`.
const BLOCK_PUNCTUATION: &[char] = &[
    ',', ';', ':', '"', '!', '%', '@', '*', '=', '<', '>', '[', ']', '{', '}', '`', '|', '~', '$',
    '^', '#',
];

/// `value` as a single-line scalar, safe both in block context and inside a flow mapping.
pub(crate) fn inline(value: &str) -> String {
    if is_plain_safe(value, false) { value.to_owned() } else { double_quoted(value) }
}

/// A complete `key: value` entry at `indent` spaces, ending with a newline. Multi-line text
/// becomes a literal block (`|`) when that reads back exactly, so prompts stay readable.
pub(crate) fn block_entry(indent: usize, key: &str, value: &str) -> String {
    let pad = " ".repeat(indent);
    match literal_block(indent + 2, value) {
        Some(block) => format!("{pad}{key}: {block}"),
        None if is_plain_safe(value, true) => format!("{pad}{key}: {value}\n"),
        None => format!("{pad}{key}: {}\n", double_quoted(value)),
    }
}

/// Whether `value` reads back as itself when written without quotes. Conservative: it must
/// start with a letter, so it is never a number, and must not be a reserved word.
fn is_plain_safe(value: &str, block: bool) -> bool {
    let mut chars = value.chars();
    let Some(first) = chars.next() else { return false };
    let allowed = |c: char| {
        (c.is_alphanumeric() && !needs_escape(c))
            || PLAIN_PUNCTUATION.contains(&c)
            || (block && BLOCK_PUNCTUATION.contains(&c))
    };
    first.is_alphabetic()
        && !needs_escape(first)
        && !value.ends_with([' ', ':'])
        && !value.contains(": ")
        && !value.contains(" #")
        && chars.all(allowed)
        && !RESERVED_WORDS.iter().any(|w| w.eq_ignore_ascii_case(value))
}

fn double_quoted(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 2);
    out.push('"');
    for c in value.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            '\0' => out.push_str("\\0"),
            c if needs_escape(c) => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Characters that YAML does not allow unescaped, or that some parsers read as line breaks.
fn needs_escape(c: char) -> bool {
    c.is_control() || matches!(c, '\u{2028}' | '\u{2029}' | '\u{feff}' | '\u{fffe}' | '\u{ffff}')
}

/// The literal block form (`|-`, `|` or `|+`, then the lines) of multi-line text, or `None`
/// when the text cannot be written that way without changing it.
fn literal_block(indent: usize, value: &str) -> Option<String> {
    if !value.contains('\n') || value.chars().any(|c| c != '\n' && c != '\t' && needs_escape(c)) {
        return None;
    }
    let body = value.trim_end_matches('\n');
    let trailing_newlines = value.len() - body.len();
    let lines: Vec<&str> = body.split('\n').collect();
    // Whitespace-only lines would be taken for indentation, and the first non-empty line
    // fixes the block's indentation, so it must not start with whitespace itself.
    let whitespace_only = lines.iter().any(|l| !l.is_empty() && l.trim().is_empty());
    let first = lines.iter().find(|l| !l.is_empty())?;
    if whitespace_only || first.starts_with([' ', '\t']) {
        return None;
    }
    let chomping = match trailing_newlines {
        0 => "|-",
        1 => "|",
        _ => "|+",
    };
    let pad = " ".repeat(indent);
    let mut out = format!("{chomping}\n");
    for line in &lines {
        if !line.is_empty() {
            out.push_str(&pad);
            out.push_str(line);
        }
        out.push('\n');
    }
    for _ in 1..trailing_newlines {
        out.push('\n');
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::{Limits, Value, load};

    /// Strings chosen to hit every branch: plain, reserved words, numbers, indicators, flow
    /// punctuation, escapes, and every chomping mode of literal blocks.
    const TRICKY: &[&str] = &[
        "Review",
        "In Progress",
        "Plan & Build",
        "true",
        "No",
        "null",
        "~",
        "",
        " padded ",
        "trailing ",
        "12",
        "0x1F",
        "1e3",
        "-dash",
        "#64748b",
        "a: b",
        "a:b",
        "ends:",
        "a #b",
        "a# b",
        "a, b; c [d] {e} \"f\" `g` *h !i %j @k |l ~m $n ^o =p <q>",
        "Überprüfung 日本語",
        "plain\u{a0}nbsp",
        "[x]",
        "{{task_prompt}}",
        "a, b",
        "quote \" and \\ backslash",
        "tab\there",
        "bell\u{7}",
        "nel\u{85}",
        "sep\u{2028}",
        "bom\u{feff}",
        "émoji 🚀",
        "line one\nline two",
        "ends with newline\n",
        "two trailing\n\n",
        "\nleading newline",
        "  indented first\nsecond",
        "first\n  indented second\n\tTabbed third",
        "blank\n   \nwhitespace-only line",
        "crlf\r\nline",
        "---\n...\n# not a comment",
        "\n",
        "\n\n",
    ];

    fn parse(entry: &str) -> Value {
        load(entry, &Limits::DEFAULT).unwrap_or_else(|e| panic!("{entry}: {}", e.message))
    }

    fn read_back(entry: &str) -> String {
        parse(entry).get("k").and_then(|v| v.as_str()).unwrap().to_owned()
    }

    #[test]
    fn every_block_entry_reads_back_as_the_same_string() {
        for s in TRICKY {
            let entry = format!("m:\n{}", block_entry(2, "k", s));
            let value = parse(&entry);
            let got = value.get("m").and_then(|m| m.get("k")).and_then(Value::as_str);
            let got = got.unwrap_or_else(|| panic!("{entry}"));
            assert_eq!(got, *s, "written as:\n{entry}");
        }
    }

    #[test]
    fn every_inline_scalar_reads_back_in_flow_and_block_context() {
        for s in TRICKY {
            assert_eq!(read_back(&format!("k: {}", inline(s))), *s);
            assert_eq!(read_back(&format!("{{k: {}, other: 1}}", inline(s))), *s);
        }
    }

    #[test]
    fn plain_only_when_unambiguous() {
        assert_eq!(inline("In Progress"), "In Progress");
        assert_eq!(inline("true"), "\"true\"");
        assert_eq!(inline("12"), "\"12\"");
        assert_eq!(inline("#64748b"), "\"#64748b\"");
        assert_eq!(inline("a\u{7}"), "\"a\\u0007\"");
        assert_eq!(inline("a, b"), "\"a, b\"");
        assert_eq!(block_entry(0, "k", "a, b; c"), "k: a, b; c\n");
        assert_eq!(block_entry(0, "k", "a: b"), "k: \"a: b\"\n");
    }

    #[test]
    fn multi_line_text_becomes_a_literal_block() {
        assert_eq!(block_entry(0, "k", "a\nb"), "k: |-\n  a\n  b\n");
        assert_eq!(block_entry(0, "k", "a\n\nb\n"), "k: |\n  a\n\n  b\n");
        assert_eq!(block_entry(0, "k", "a\n\n"), "k: |+\n  a\n\n");
        assert_eq!(block_entry(0, "k", " a\nb"), "k: \" a\\nb\"\n");
    }
}
