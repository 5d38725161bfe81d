//! A newline-delimited reader that never buffers more than a configured number of bytes.

use tokio::io::{AsyncBufRead, AsyncBufReadExt};

/// One line read from the agent.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Line {
    /// A complete line, without its `\n` (and without a trailing `\r`).
    Complete(Vec<u8>),
    /// A line longer than the limit; its bytes were discarded up to and including its `\n`.
    TooLong {
        /// How many bytes the discarded line had.
        len: usize,
    },
}

/// Reads lines of at most `max_len` bytes; a longer line is skipped, not buffered.
///
/// Memory use is bounded by `max_len` plus the inner reader's buffer whatever the agent sends.
pub(crate) struct LineReader<R> {
    inner: R,
    max_len: usize,
    current: PartialLine,
}

impl<R: AsyncBufRead + Unpin> LineReader<R> {
    pub(crate) fn new(inner: R, max_len: usize) -> Self {
        LineReader { inner, max_len, current: PartialLine::default() }
    }

    /// The next line, or `None` at end of input. A last line without `\n` is still returned.
    pub(crate) async fn next_line(&mut self) -> std::io::Result<Option<Line>> {
        loop {
            let buf = self.inner.fill_buf().await?;
            if buf.is_empty() {
                return Ok(self.current.finish());
            }
            let newline = buf.iter().position(|&b| b == b'\n');
            let chunk_len = newline.unwrap_or(buf.len());
            self.current.push(&buf[..chunk_len], self.max_len);
            self.inner.consume(chunk_len + usize::from(newline.is_some()));
            if newline.is_some()
                && let Some(line) = self.current.finish()
            {
                return Ok(Some(line));
            }
        }
    }
}

/// The part of a line read so far.
#[derive(Default)]
struct PartialLine {
    bytes: Vec<u8>,
    /// Length of the line once it exceeded the limit (its bytes are then dropped).
    overflow: Option<usize>,
}

impl PartialLine {
    fn push(&mut self, chunk: &[u8], max_len: usize) {
        if let Some(len) = self.overflow.as_mut() {
            *len += chunk.len();
        } else if self.bytes.len() + chunk.len() > max_len {
            self.overflow = Some(self.bytes.len() + chunk.len());
            self.bytes = Vec::new();
        } else {
            self.bytes.extend_from_slice(chunk);
        }
    }

    /// Takes the line gathered so far; `None` if nothing was gathered.
    fn finish(&mut self) -> Option<Line> {
        if let Some(len) = self.overflow.take() {
            return Some(Line::TooLong { len });
        }
        if self.bytes.is_empty() {
            return None;
        }
        let mut line = std::mem::take(&mut self.bytes);
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        Some(Line::Complete(line))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::BufReader;

    async fn read_all(input: &[u8], max_len: usize, buf_capacity: usize) -> Vec<Line> {
        let reader = BufReader::with_capacity(buf_capacity, input);
        let mut lines = LineReader::new(reader, max_len);
        let mut out = Vec::new();
        while let Some(line) = lines.next_line().await.unwrap() {
            out.push(line);
        }
        out
    }

    fn complete(text: &str) -> Line {
        Line::Complete(text.as_bytes().to_vec())
    }

    #[tokio::test]
    async fn splits_lines_and_strips_carriage_returns() {
        let lines = read_all(b"one\r\ntwo\nthree", 100, 4).await;
        assert_eq!(lines, vec![complete("one"), complete("two"), complete("three")]);
    }

    #[tokio::test]
    async fn skips_empty_lines() {
        let lines = read_all(b"\n\na\n\n", 100, 4).await;
        assert_eq!(lines, vec![complete("a")]);
    }

    #[tokio::test]
    async fn a_line_at_the_limit_is_kept() {
        let lines = read_all(b"12345\n", 5, 2).await;
        assert_eq!(lines, vec![complete("12345")]);
    }

    #[tokio::test]
    async fn an_over_limit_line_is_discarded_and_reading_continues() {
        let lines = read_all(b"ok\n1234567890\nafter\n", 5, 3).await;
        assert_eq!(lines, vec![complete("ok"), Line::TooLong { len: 10 }, complete("after")]);
    }

    #[tokio::test]
    async fn an_over_limit_last_line_without_newline_is_reported() {
        let lines = read_all(b"1234567890", 5, 4).await;
        assert_eq!(lines, vec![Line::TooLong { len: 10 }]);
    }
}
