//! Lines from the agent: tokio-util's `LinesCodec` with a length limit, and the lenient
//! handling around it, so that nothing the agent sends ends the stream.
//!
//! The codec finds each newline within the limit, strips a trailing `\r` and checks UTF-8.
//! Around it, [`AgentLines`]:
//! - reports a line over the limit as [`Line::TooLong`] with its full length (the codec only
//!   says "too long", as soon as the limit is passed): the rest of the line is counted and
//!   dropped here, never buffered, and a fresh codec starts at the next line;
//! - reports a line that is not UTF-8 as [`Line::NotUtf8`] (the codec's error would end a
//!   `FramedRead`);
//! - skips empty lines, and returns a last line that has no `\n` at end of input.
//!
//! Memory use is bounded by the limit plus the read buffer, whatever the agent sends.

use std::io;

use tokio_util::bytes::{Buf, BytesMut};
use tokio_util::codec::{Decoder, LinesCodec, LinesCodecError};

/// One line read from the agent.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Line {
    /// A complete line, without its `\n` (and without a trailing `\r`).
    Complete(String),
    /// A line longer than the limit; its bytes were discarded up to and including its `\n`.
    TooLong {
        /// How many bytes the discarded line had.
        len: usize,
    },
    /// A line within the limit that is not UTF-8 text; it was discarded.
    NotUtf8,
}

/// Decodes lines of at most `max_len` bytes; a longer line is skipped, not buffered. Never
/// fails on what the agent sends: only a read error ends the stream early.
#[derive(Debug)]
pub(crate) struct AgentLines {
    codec: LinesCodec,
    max_len: usize,
    /// While dropping an over-long line: its length so far.
    discarding: Option<usize>,
    /// Bytes of the stream taken so far: after a line is returned, the offset where it ends.
    consumed: u64,
}

impl AgentLines {
    pub(crate) fn new(max_len: usize) -> Self {
        AgentLines {
            codec: LinesCodec::new_with_max_length(max_len),
            max_len,
            discarding: None,
            consumed: 0,
        }
    }

    /// The offset in the stream right after the last line returned (its `\n` included): the
    /// tag of what that line carries (issue 20: the runner item it came from).
    pub(crate) fn consumed(&self) -> u64 {
        self.consumed
    }

    /// Drops the buffered part of the over-long line; returns it once its `\n` was seen.
    fn discard(&mut self, buf: &mut BytesMut, len: usize) -> Option<Line> {
        match buf.iter().position(|&b| b == b'\n') {
            None => {
                self.discarding = Some(len + buf.len());
                buf.clear();
                None
            }
            Some(end) => {
                buf.advance(end + 1);
                self.discarding = None;
                // The codec is still skipping this line; the next line starts afresh.
                self.codec = LinesCodec::new_with_max_length(self.max_len);
                Some(Line::TooLong { len: len + end })
            }
        }
    }
}

/// What the codec made of the buffered bytes.
enum Step {
    Line(Line),
    /// No complete line yet.
    NeedMore,
    /// The line passed the limit; its bytes are still in the buffer.
    OverLimit,
}

fn step(decoded: Result<Option<String>, LinesCodecError>) -> Step {
    match decoded {
        Ok(Some(line)) => Step::Line(Line::Complete(line)),
        Ok(None) => Step::NeedMore,
        Err(LinesCodecError::MaxLineLengthExceeded) => Step::OverLimit,
        // The only I/O error the codec makes up itself: the line is not UTF-8.
        Err(LinesCodecError::Io(_)) => Step::Line(Line::NotUtf8),
    }
}

impl Decoder for AgentLines {
    type Item = Line;
    type Error = io::Error;

    fn decode(&mut self, buf: &mut BytesMut) -> io::Result<Option<Line>> {
        let before = buf.len();
        let line = self.decode_lines(buf);
        self.consumed += (before - buf.len()) as u64;
        line
    }

    fn decode_eof(&mut self, buf: &mut BytesMut) -> io::Result<Option<Line>> {
        let before = buf.len();
        let line = self.decode_lines_eof(buf);
        self.consumed += (before - buf.len()) as u64;
        line
    }
}

impl AgentLines {
    fn decode_lines(&mut self, buf: &mut BytesMut) -> io::Result<Option<Line>> {
        loop {
            if let Some(len) = self.discarding {
                return Ok(self.discard(buf, len));
            }
            match step(self.codec.decode(buf)) {
                Step::Line(Line::Complete(line)) if line.is_empty() => {}
                Step::Line(line) => return Ok(Some(line)),
                Step::NeedMore => return Ok(None),
                Step::OverLimit => self.discarding = Some(0),
            }
        }
    }

    fn decode_lines_eof(&mut self, buf: &mut BytesMut) -> io::Result<Option<Line>> {
        if let Some(line) = self.decode_lines(buf)? {
            return Ok(Some(line));
        }
        // An over-long last line without `\n`.
        if let Some(len) = self.discarding.take() {
            self.codec = LinesCodec::new_with_max_length(self.max_len);
            return Ok(Some(Line::TooLong { len }));
        }
        match step(self.codec.decode_eof(buf)) {
            Step::Line(Line::Complete(line)) if line.is_empty() => Ok(None),
            Step::Line(line) => Ok(Some(line)),
            Step::NeedMore => Ok(None),
            // Not expected (`decode` saw the rest within the limit), but never buffered.
            Step::OverLimit => {
                let len = buf.len();
                buf.clear();
                self.codec = LinesCodec::new_with_max_length(self.max_len);
                Ok(Some(Line::TooLong { len }))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use futures::StreamExt;
    use tokio::io::AsyncWriteExt;
    use tokio_util::codec::FramedRead;

    use super::*;

    /// The lines of `input` as the agent's output, arriving at most `chunk` bytes at a time.
    async fn read_all(input: &[u8], max_len: usize, chunk: usize) -> Vec<Line> {
        let (mut agent, reader) = tokio::io::duplex(chunk);
        let input = input.to_vec();
        let writer = tokio::spawn(async move { agent.write_all(&input).await.unwrap() });
        let mut lines = FramedRead::new(reader, AgentLines::new(max_len));
        let mut out = Vec::new();
        while let Some(line) = lines.next().await {
            out.push(line.unwrap());
        }
        writer.await.unwrap();
        out
    }

    fn complete(text: &str) -> Line {
        Line::Complete(text.into())
    }

    #[tokio::test]
    async fn i20_a1_each_line_is_tagged_with_the_offset_where_it_ends() {
        let input = b"ab\r\n\n{\"x\":1}\n" as &[u8];
        let long = [b'z'; 40];
        let mut bytes = input.to_vec();
        bytes.extend_from_slice(&long);
        bytes.extend_from_slice(b"\nbad\xff\nlast");
        let (mut writer, reader) = tokio::io::duplex(3);
        let feed = bytes.clone();
        tokio::spawn(async move { writer.write_all(&feed).await });
        let mut lines = FramedRead::new(reader, AgentLines::new(16));
        let mut tagged = Vec::new();
        while let Some(line) = lines.next().await {
            tagged.push((line.unwrap(), lines.decoder().consumed()));
        }
        let expected = vec![
            (complete("ab"), 4),
            // The empty line is skipped; its byte belongs to the next line.
            (complete("{\"x\":1}"), 13),
            (Line::TooLong { len: 40 }, 54),
            (Line::NotUtf8, 59),
            (complete("last"), 63),
        ];
        assert_eq!(tagged, expected);
        assert_eq!(63, bytes.len());
    }

    #[tokio::test]
    async fn splits_lines_and_strips_carriage_returns() {
        let lines = read_all(b"one\r\ntwo\nthree", 100, 4).await;
        assert_eq!(lines, vec![complete("one"), complete("two"), complete("three")]);
    }

    #[tokio::test]
    async fn skips_empty_lines() {
        let lines = read_all(b"\n\na\n\r\n\n", 100, 4).await;
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
    async fn over_limit_lines_in_a_row_are_each_reported_with_their_length() {
        let input = b"1234567\n12345678901234567890\r\nok\n";
        for chunk in [1, 3, 64] {
            let lines = read_all(input, 5, chunk).await;
            let expected =
                vec![Line::TooLong { len: 7 }, Line::TooLong { len: 21 }, complete("ok")];
            assert_eq!(lines, expected, "chunk {chunk}");
        }
    }

    #[tokio::test]
    async fn an_over_limit_last_line_without_newline_is_reported() {
        let lines = read_all(b"1234567890", 5, 4).await;
        assert_eq!(lines, vec![Line::TooLong { len: 10 }]);
    }

    #[tokio::test]
    async fn a_line_that_is_not_utf8_is_reported_and_reading_continues() {
        let lines = read_all(b"ok\n\xff\xfe\nafter\n\xc3", 100, 3).await;
        assert_eq!(lines, vec![complete("ok"), Line::NotUtf8, complete("after"), Line::NotUtf8]);
    }
}
