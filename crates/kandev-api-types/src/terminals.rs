//! User terminals and dev servers as the API shows them (`terminal.*`, `devserver.*`,
//! docs/terminals.md), and the binary WebSocket frames their input and output travel in.

use serde::{Deserialize, Serialize};
use ts_rs::TS;

/// A task's dev server: the port it got in `PORT`, the link to open, whether it still runs,
/// and its most recent output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
pub struct DevServerDto {
    pub task_id: String,
    pub repository_id: String,
    pub port: u16,
    pub url: String,
    /// The id its log streams under (`terminal.attach`): `dev_<port>`.
    pub terminal_id: String,
    /// `running` or `exited`.
    pub state: String,
    pub exit_code: Option<i32>,
    pub log: String,
    /// Older output was dropped (the log keeps the last 256 KiB).
    pub truncated: bool,
}

/// A user terminal (a shell in a PTY in a task's worktree), or a dev server's log when
/// attached by its `terminal_id`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
pub struct TerminalDto {
    pub id: String,
    pub task_id: String,
    pub repository_id: String,
    /// `running` or `exited`.
    pub state: String,
    pub exit_code: Option<i32>,
    /// The signal that ended it (`SIGKILL`), if one did.
    pub signal: Option<String>,
}

/// Binary WebSocket frames of terminals (docs/api.md, "Terminal frames"):
/// `[kind: u8][id length n: u8][id: n bytes of ASCII][payload]`.
pub mod frame {
    /// Client to server: typed input; the payload is the bytes.
    pub const INPUT: u8 = 0x01;
    /// Client to server: a new size; the payload is `cols: u16, rows: u16`, big-endian.
    pub const RESIZE: u8 = 0x02;
    /// Server to client: output; the payload is the bytes.
    pub const OUTPUT: u8 = 0x81;
    /// Server to client: output before this was dropped from the replay buffer (empty
    /// payload); the output frames that follow start at the oldest byte kept.
    pub const SKIPPED: u8 = 0x82;
    /// Server to client: the shell exited (after its last output); the payload is JSON
    /// `{"exit_code": i32 | null, "signal": string | null}`.
    pub const EXIT: u8 = 0x83;

    /// Encodes one frame; `None` when the id is empty or longer than 255 bytes.
    pub fn encode(kind: u8, id: &str, payload: &[u8]) -> Option<Vec<u8>> {
        let len = u8::try_from(id.len()).ok().filter(|n| *n > 0)?;
        let mut frame = Vec::with_capacity(2 + id.len() + payload.len());
        frame.push(kind);
        frame.push(len);
        frame.extend_from_slice(id.as_bytes());
        frame.extend_from_slice(payload);
        Some(frame)
    }

    /// Decodes a frame into its kind, id and payload; `None` when it is too short for its
    /// id or the id is not UTF-8.
    pub fn decode(frame: &[u8]) -> Option<(u8, &str, &[u8])> {
        let (&kind, rest) = frame.split_first()?;
        let (&len, rest) = rest.split_first()?;
        let len = usize::from(len);
        if len == 0 || rest.len() < len {
            return None;
        }
        let (id, payload) = rest.split_at(len);
        Some((kind, std::str::from_utf8(id).ok()?, payload))
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn frames_round_trip_and_bad_ones_are_refused() {
            let frame = encode(INPUT, "term_1", b"ls\n").unwrap();
            assert_eq!(&frame[..2], &[INPUT, 6]);
            assert_eq!(decode(&frame), Some((INPUT, "term_1", &b"ls\n"[..])));
            assert_eq!(decode(&[INPUT]), None);
            assert_eq!(decode(&[INPUT, 0]), None, "an empty id");
            assert_eq!(decode(&[INPUT, 5, b'a']), None, "shorter than its id");
            assert_eq!(encode(OUTPUT, "", b"x"), None);
            assert_eq!(encode(OUTPUT, &"x".repeat(256), b"x"), None);
        }
    }
}
