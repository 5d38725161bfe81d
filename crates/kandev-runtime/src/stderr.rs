//! A bounded ring of an agent's most recent stderr bytes, fed by a background reader.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::watch;

/// Keeps only the last `limit` bytes written to it.
#[derive(Debug)]
pub(crate) struct StderrRing {
    buf: VecDeque<u8>,
    limit: usize,
    truncated: bool,
}

impl StderrRing {
    pub(crate) fn new(limit: usize) -> Self {
        Self { buf: VecDeque::with_capacity(limit.min(8 * 1024)), limit, truncated: false }
    }

    pub(crate) fn push(&mut self, bytes: &[u8]) {
        // Only the tail of an oversized chunk can survive.
        let bytes = if bytes.len() > self.limit {
            self.truncated = true;
            &bytes[bytes.len() - self.limit..]
        } else {
            bytes
        };
        let overflow = (self.buf.len() + bytes.len()).saturating_sub(self.limit);
        if overflow > 0 {
            self.truncated = true;
            self.buf.drain(..overflow);
        }
        self.buf.extend(bytes);
    }

    /// The kept bytes as text. When older output was dropped, the partial first line is cut
    /// off so the tail starts at a line boundary (unless that would leave nothing).
    pub(crate) fn tail(&self) -> String {
        let (a, b) = self.buf.as_slices();
        let mut bytes = Vec::with_capacity(a.len() + b.len());
        bytes.extend_from_slice(a);
        bytes.extend_from_slice(b);
        let start = if self.truncated {
            match bytes.iter().position(|&b| b == b'\n') {
                Some(nl) if nl + 1 < bytes.len() => nl + 1,
                _ => 0,
            }
        } else {
            0
        };
        String::from_utf8_lossy(&bytes[start..]).into_owned()
    }
}

/// Reads `reader` to its end into `ring`, then reports completion on `done`.
pub(crate) async fn drain_into(
    mut reader: impl AsyncRead + Unpin,
    ring: Arc<Mutex<StderrRing>>,
    done: watch::Sender<bool>,
    pid: i32,
) {
    let mut chunk = vec![0u8; 8 * 1024];
    loop {
        match reader.read(&mut chunk).await {
            Ok(0) => break,
            Ok(n) => ring.lock().unwrap_or_else(PoisonError::into_inner).push(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                tracing::debug!(pid, error = %e, "reading agent stderr failed");
                break;
            }
        }
    }
    done.send_replace(true);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_everything_below_the_limit() {
        let mut ring = StderrRing::new(16);
        ring.push(b"abc\n");
        ring.push(b"def\n");
        assert_eq!(ring.tail(), "abc\ndef\n");
    }

    #[test]
    fn keeps_only_the_tail_and_starts_at_a_line() {
        let mut ring = StderrRing::new(10);
        ring.push(b"first line\n");
        ring.push(b"ab\ncd\n");
        // Kept bytes are "ine\nab\ncd\n"; the partial first line is cut off.
        assert_eq!(ring.tail(), "ab\ncd\n");
    }

    #[test]
    fn oversized_chunk_keeps_its_end() {
        let mut ring = StderrRing::new(4);
        ring.push(b"0123456789");
        assert_eq!(ring.tail(), "6789");
    }

    #[test]
    fn zero_limit_keeps_nothing() {
        let mut ring = StderrRing::new(0);
        ring.push(b"abc");
        assert_eq!(ring.tail(), "");
    }
}
