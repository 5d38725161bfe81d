//! Scrubbing secrets (the values of an agent's env, which hold API keys) out of text the
//! agent printed, before Kandev shows it anywhere.

use std::fmt;

/// Values shorter than this are not scrubbed: they would match ordinary text and are no
/// secret worth the name.
pub const MIN_SECRET_LEN: usize = 4;

/// What a scrubbed value is replaced with.
pub const REDACTED: &str = "[redacted]";

/// Replaces every occurrence of a set of values with [`REDACTED`]; also a value's end at the
/// start of the text and a value's start at its end (a tail cut in the middle of a value, or
/// a value still being written), when at least [`MIN_SECRET_LEN`] characters long. Its
/// `Debug` shows how many values it holds, never the values.
///
/// Limit: only the values as given are recognized; an agent that prints a value encoded
/// (base64, reversed, split by other characters) is not caught.
#[derive(Clone, Default)]
pub struct Redactor {
    /// Longest first, so a value that contains another is replaced whole.
    secrets: Vec<String>,
}

impl Redactor {
    pub fn new<I, S>(values: I) -> Redactor
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut secrets: Vec<String> = values
            .into_iter()
            .map(Into::into)
            .filter(|v| v.chars().count() >= MIN_SECRET_LEN)
            .collect();
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        secrets.dedup();
        Redactor { secrets }
    }

    pub fn is_empty(&self) -> bool {
        self.secrets.is_empty()
    }

    /// `text` with every value scrubbed.
    pub fn redact(&self, text: &str) -> String {
        let mut text = text.to_owned();
        for secret in &self.secrets {
            if text.contains(secret.as_str()) {
                text = text.replace(secret.as_str(), REDACTED);
            }
        }
        for secret in &self.secrets {
            if let Some(cut) = partial_at_start(&text, secret) {
                text.replace_range(..cut, REDACTED);
            }
            if let Some(cut) = partial_at_end(&text, secret) {
                text.replace_range(cut.., REDACTED);
            }
        }
        text
    }
}

/// Length of the longest proper suffix of `secret` (at least [`MIN_SECRET_LEN`] characters)
/// that `text` starts with.
fn partial_at_start(text: &str, secret: &str) -> Option<usize> {
    secret
        .char_indices()
        .skip(1)
        .map(|(at, _)| &secret[at..])
        .take_while(|suffix| suffix.chars().count() >= MIN_SECRET_LEN)
        .find(|suffix| text.starts_with(suffix))
        .map(str::len)
}

/// Where the longest proper prefix of `secret` (at least [`MIN_SECRET_LEN`] characters) that
/// `text` ends with starts.
fn partial_at_end(text: &str, secret: &str) -> Option<usize> {
    let mut prefixes: Vec<&str> =
        secret.char_indices().skip(1).map(|(at, _)| &secret[..at]).collect();
    prefixes.reverse();
    prefixes
        .into_iter()
        .take_while(|prefix| prefix.chars().count() >= MIN_SECRET_LEN)
        .find(|prefix| text.ends_with(prefix))
        .map(|prefix| text.len() - prefix.len())
}

impl fmt::Debug for Redactor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Redactor({} values)", self.secrets.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_scrubbed_wherever_they_appear() {
        let redactor = Redactor::new(["sk-secret-123", "abc", "hunter22"]);
        let text = "key=sk-secret-123\npassword hunter22 and abc stay short\nsk-secret-123";
        assert_eq!(
            redactor.redact(text),
            "key=[redacted]\npassword [redacted] and abc stay short\n[redacted]"
        );
        assert!(!format!("{redactor:?}").contains("hunter"));
    }

    #[test]
    fn a_value_cut_at_either_end_is_scrubbed() {
        let redactor = Redactor::new(["sk-secret-123"]);
        assert_eq!(redactor.redact("ret-123 tail"), "[redacted] tail");
        assert_eq!(redactor.redact("head sk-sec"), "head [redacted]");
        assert_eq!(redactor.redact("head sk-"), "head sk-", "fewer than 4 characters");
    }

    #[test]
    fn longer_values_win() {
        let redactor = Redactor::new(["token", "token-long-value"]);
        assert_eq!(redactor.redact("a token-long-value b token"), "a [redacted] b [redacted]");
    }
}
