//! The runner protocol: length-delimited frames (a 4-byte big-endian length, then the body;
//! `tokio_util::codec::LengthDelimitedCodec`), each body one JSON object tagged by `type`
//! (serde). Output and input bytes travel base64-encoded. The first frame each way is the
//! handshake (`hello` / `welcome` or `refused`), which carries [`PROTOCOL_VERSION`]; a peer
//! of another version is refused with a message that says how to fix it.
//!
//! Every item a runner produces for an execution (output chunks, then its exit) carries a
//! per-execution sequence number starting at 1; the server acknowledges what it has taken
//! (`ack`) and the runner forgets only what was acknowledged, so a reconnecting server gets
//! every unacknowledged item again, in order.
//!
//! Input goes the same way in the other direction (protocol version 2): every item for an
//! execution's stdin (`input` bytes, then `close_input`) carries a per-execution input
//! sequence number from 1; the runner acknowledges (`input_ack`, covering everything up to
//! a number) what it took into the execution's stdin queue, ignores an item it took already
//! (a resend after a drop), and `welcome` lists each execution's last taken and last
//! acknowledged input number, so a reconnecting server resends exactly what was not taken.
//!
//! Version 3 adds input *keys*: an input item may name the keys of the lines that end in it
//! (a server's own names, e.g. `prompt:<turn id>`), the runner keeps the last [`KEYS_KEPT`]
//! keys it took per execution and lists them in `welcome`, so a server that restarted after
//! committing an input it may never have written asks the runner whether it was taken, and
//! sends it only if not: exactly once across a `kill -9` of the server too.
//!
//! Version 4 adds terminals (docs/terminals.md): a spawn may ask for a pseudo-terminal of a
//! size (`pty`, then `resize` changes it) and for `scrollback`, a number of bytes of
//! acknowledged output the runner keeps; right after `welcome` it sends each execution's kept
//! bytes as one `scrollback` frame, before the unacknowledged items, so a restarted server
//! shows a terminal's recent output and then goes on live.

use std::io;
use std::marker::PhantomData;
use std::path::PathBuf;

use base64::Engine as _;
use bytes::{Bytes, BytesMut};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use tokio_util::codec::{Decoder, Encoder, LengthDelimitedCodec};

use crate::ExitInfo;

/// The protocol's version. Peers of different versions refuse each other at the handshake.
pub const PROTOCOL_VERSION: u32 = 4;

/// How many keys of taken input a runner keeps per execution (the newest).
pub const KEYS_KEPT: usize = 1024;

/// The largest frame either side accepts (a 1 MiB output chunk base64-encoded fits easily).
pub const MAX_FRAME: usize = 8 << 20;

/// Bytes on the wire, as a base64 string.
#[derive(Clone, PartialEq, Eq)]
pub struct Data(pub Bytes);

impl std::fmt::Debug for Data {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Data({} bytes)", self.0.len())
    }
}

impl Serialize for Data {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&base64::engine::general_purpose::STANDARD.encode(&self.0))
    }
}

impl<'de> Deserialize<'de> for Data {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        base64::engine::general_purpose::STANDARD
            .decode(text.as_bytes())
            .map(|bytes| Data(Bytes::from(bytes)))
            .map_err(serde::de::Error::custom)
    }
}

/// What to run. `env` and `secrets` are scrubbed from the stderr tail the runner reports.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpawnSpec {
    pub program: String,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    pub cwd: PathBuf,
    #[serde(default)]
    pub secrets: Vec<String>,
    /// Run in a pseudo-terminal of this size (stdout and stderr are the terminal; input is
    /// typed into it) instead of pipes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pty: Option<PtySize>,
    /// Bytes of acknowledged output kept for a later connection (`scrollback`); 0: none.
    #[serde(default)]
    pub scrollback: usize,
}

/// A pseudo-terminal's size, in cells.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PtySize {
    pub cols: u16,
    pub rows: u16,
}

impl std::fmt::Debug for SpawnSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let env: Vec<String> =
            self.env.iter().map(|(name, _)| format!("{name}=<hidden>")).collect();
        f.debug_struct("SpawnSpec")
            .field("program", &self.program)
            .field("args", &self.args)
            .field("env", &env)
            .field("cwd", &self.cwd)
            .field("secrets", &self.secrets.len())
            .field("pty", &self.pty)
            .field("scrollback", &self.scrollback)
            .finish()
    }
}

/// How an execution ended, on the wire.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExitReport {
    Code(i32),
    Signal(i32),
    Unknown(String),
}

impl From<&ExitInfo> for ExitReport {
    fn from(exit: &ExitInfo) -> Self {
        match exit {
            ExitInfo::Exited { code } => ExitReport::Code(*code),
            ExitInfo::Signaled { signal } => ExitReport::Signal(*signal),
            ExitInfo::Unknown { reason } => ExitReport::Unknown(reason.clone()),
        }
    }
}

impl From<ExitReport> for ExitInfo {
    fn from(exit: ExitReport) -> Self {
        match exit {
            ExitReport::Code(code) => ExitInfo::Exited { code },
            ExitReport::Signal(signal) => ExitInfo::Signaled { signal },
            ExitReport::Unknown(reason) => ExitInfo::Unknown { reason },
        }
    }
}

/// An execution the runner holds, as listed in `welcome`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecutionInfo {
    pub exec: String,
    pub pid: i32,
    /// The last sequence number the server acknowledged; replay starts after it.
    pub acked: u64,
    /// Whether the agent has exited (its exit is among the items still to deliver).
    pub exited: bool,
    /// The last input number the runner took into the agent's stdin queue: a server that
    /// resumes resends only later items, a new server numbers its input from the next one.
    pub input_taken: u64,
    /// The last input number the runner acknowledged (at most `input_taken`: taken items are
    /// acknowledged once the stdin queue is within its bound).
    pub input_acked: u64,
    /// The keys of the input items taken, oldest first (at most [`KEYS_KEPT`], the newest).
    #[serde(default)]
    pub keys: Vec<String>,
}

/// Frames from the server to the runner.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ToRunner {
    /// The first frame of a connection.
    Hello { version: u32 },
    /// Starts an execution under a name of the server's choosing (unique among live ones).
    Spawn { exec: String, spec: SpawnSpec },
    /// Bytes for the agent's stdin: input item `seq` (per execution, from 1, shared with
    /// `close_input`). An item the runner took already is ignored. `keys` name the lines that
    /// end in it (listed in `welcome` once taken).
    Input {
        exec: String,
        seq: u64,
        data: Data,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        keys: Vec<String>,
    },
    /// Closes the agent's stdin, as input item `seq` (after every byte before it).
    CloseInput { exec: String, seq: u64 },
    /// Everything up to and including `seq` was taken; the runner forgets it.
    Ack { exec: String, seq: u64 },
    /// Stops the agent: TERM to its group, `grace_ms`, then KILL. Its exit follows as an item.
    Kill { exec: String, grace_ms: u64 },
    /// Kills the agent (if it runs) and forgets the execution without delivering anything
    /// more of it (what a server does with executions it does not take over).
    Forget { exec: String },
    /// Changes the size of an execution's pseudo-terminal (one spawned with `pty`).
    Resize { exec: String, cols: u16, rows: u16 },
}

/// Frames from the runner to the server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum FromRunner {
    /// The answer to `hello`: the executions the runner holds. Their unacknowledged items
    /// follow.
    Welcome {
        version: u32,
        executions: Vec<ExecutionInfo>,
    },
    /// The answer to a `hello` of another version; the connection closes after it.
    Refused {
        message: String,
    },
    Spawned {
        exec: String,
        pid: i32,
    },
    SpawnFailed {
        exec: String,
        message: String,
    },
    /// A chunk of the agent's stdout.
    Output {
        exec: String,
        seq: u64,
        data: Data,
    },
    /// The agent exited; always the execution's last item.
    Exited {
        exec: String,
        seq: u64,
        exit: ExitReport,
        stderr: String,
    },
    /// Every input item up to and including `seq` was taken into the agent's stdin queue
    /// (which outlives the connection): the server may forget them.
    InputAck {
        exec: String,
        seq: u64,
    },
    /// The output an execution kept (its `scrollback`) that the server acknowledged before
    /// this connection: sent right after `welcome`, before the execution's items.
    Scrollback {
        exec: String,
        data: Data,
    },
    /// A frame the runner could not act on (unknown execution, ...); the connection stays.
    Error {
        message: String,
    },
}

/// What can go wrong on a runner connection.
#[derive(Debug, thiserror::Error)]
pub enum ProtocolError {
    #[error("runner connection failed: {0}")]
    Io(#[from] io::Error),
    #[error("a runner frame is larger than {MAX_FRAME} bytes; the peer is not a kandev runner")]
    TooLarge,
    #[error("a runner frame is not valid: {reason}")]
    BadFrame { reason: String },
    #[error(
        "the runner speaks protocol version {theirs}, this kandev {ours}: stop the old runner \
         (it stops by itself when no server is connected) or run the same kandev version on both sides"
    )]
    VersionMismatch { ours: u32, theirs: u32 },
    #[error("the runner refused the connection: {0}")]
    Refused(String),
    #[error("the runner connection closed during the handshake")]
    Closed,
    #[error("the runner sent {got} where {expected} was expected")]
    Unexpected { expected: &'static str, got: String },
}

/// Frames of type `In` from the peer, frames of type `Out` to it.
pub struct FrameCodec<In, Out> {
    inner: LengthDelimitedCodec,
    _types: PhantomData<fn(Out) -> In>,
}

impl<In, Out> Default for FrameCodec<In, Out> {
    fn default() -> Self {
        Self {
            inner: LengthDelimitedCodec::builder().max_frame_length(MAX_FRAME).new_codec(),
            _types: PhantomData,
        }
    }
}

fn frame_error(err: io::Error) -> ProtocolError {
    let too_long = err
        .get_ref()
        .is_some_and(|inner| inner.is::<tokio_util::codec::LengthDelimitedCodecError>());
    if too_long { ProtocolError::TooLarge } else { ProtocolError::Io(err) }
}

impl<In: DeserializeOwned, Out> Decoder for FrameCodec<In, Out> {
    type Item = In;
    type Error = ProtocolError;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<In>, ProtocolError> {
        let Some(body) = self.inner.decode(src).map_err(frame_error)? else {
            return Ok(None);
        };
        serde_json::from_slice(&body)
            .map(Some)
            .map_err(|err| ProtocolError::BadFrame { reason: err.to_string() })
    }
}

impl<In, Out: Serialize> Encoder<Out> for FrameCodec<In, Out> {
    type Error = ProtocolError;

    fn encode(&mut self, item: Out, dst: &mut BytesMut) -> Result<(), ProtocolError> {
        let body = serde_json::to_vec(&item)
            .map_err(|err| ProtocolError::BadFrame { reason: err.to_string() })?;
        self.inner.encode(Bytes::from(body), dst).map_err(frame_error)
    }
}

/// The runner's side of the codec.
pub type RunnerCodec = FrameCodec<ToRunner, FromRunner>;
/// The server's side of the codec.
pub type ServerCodec = FrameCodec<FromRunner, ToRunner>;

/// The frame type's name, for messages.
pub(crate) fn kind_of(frame: &FromRunner) -> String {
    serde_json::to_value(frame)
        .ok()
        .and_then(|v| v.get("type").and_then(|t| t.as_str()).map(str::to_owned))
        .unwrap_or_else(|| "a frame".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encode_to(frame: ToRunner) -> BytesMut {
        let mut codec = ServerCodec::default();
        let mut buf = BytesMut::new();
        codec.encode(frame, &mut buf).unwrap();
        buf
    }

    #[test]
    fn i20_s1_frames_round_trip_with_binary_data() {
        let frames = vec![
            ToRunner::Hello { version: PROTOCOL_VERSION },
            ToRunner::Input {
                exec: "x1".into(),
                seq: 1,
                data: Data(Bytes::from_static(b"\0\xff{\"a\":1}\n")),
                keys: vec!["prompt:t1".into()],
            },
            ToRunner::CloseInput { exec: "x1".into(), seq: 2 },
            ToRunner::Ack { exec: "x1".into(), seq: 42 },
            ToRunner::Spawn {
                exec: "x2".into(),
                spec: SpawnSpec {
                    program: "sh".into(),
                    args: vec!["-c".into(), "cat".into()],
                    env: vec![("K".into(), "v".into())],
                    cwd: "/tmp".into(),
                    secrets: vec![],
                    pty: Some(PtySize { cols: 80, rows: 24 }),
                    scrollback: 1024,
                },
            },
            ToRunner::Resize { exec: "x2".into(), cols: 100, rows: 30 },
        ];
        let mut buf = BytesMut::new();
        for frame in &frames {
            buf.extend_from_slice(&encode_to(frame.clone()));
        }
        // Delivered one byte at a time, the frames still come out whole and in order.
        let mut codec = RunnerCodec::default();
        let mut partial = BytesMut::new();
        let mut got = Vec::new();
        for byte in buf {
            partial.extend_from_slice(&[byte]);
            if let Some(frame) = codec.decode(&mut partial).unwrap() {
                got.push(frame);
            }
        }
        assert_eq!(got, frames);
    }

    #[test]
    fn i20_s1_a_bad_frame_gets_a_clear_error() {
        let mut codec = RunnerCodec::default();
        let mut buf = BytesMut::new();
        let body = br#"{"type":"launch_rockets"}"#;
        buf.extend_from_slice(&(body.len() as u32).to_be_bytes());
        buf.extend_from_slice(body);
        let err = codec.decode(&mut buf).unwrap_err();
        assert!(matches!(err, ProtocolError::BadFrame { .. }), "{err:?}");
        assert!(err.to_string().contains("launch_rockets"), "{err}");

        let mut buf = BytesMut::new();
        buf.extend_from_slice(&(4u32).to_be_bytes());
        buf.extend_from_slice(b"nope");
        let err = codec.decode(&mut buf).unwrap_err();
        assert!(err.to_string().starts_with("a runner frame is not valid"), "{err}");

        // Not base64 where bytes are expected.
        let mut buf = BytesMut::new();
        let body = br#"{"type":"input","exec":"x","seq":1,"data":"***"}"#;
        buf.extend_from_slice(&(body.len() as u32).to_be_bytes());
        buf.extend_from_slice(body);
        assert!(matches!(codec.decode(&mut buf), Err(ProtocolError::BadFrame { .. })));
    }

    #[test]
    fn i20_s1_an_oversized_frame_is_refused_before_it_is_read() {
        let mut codec = RunnerCodec::default();
        let mut buf = BytesMut::new();
        buf.extend_from_slice(&((MAX_FRAME as u32) + 1).to_be_bytes());
        buf.extend_from_slice(b"{}");
        let err = codec.decode(&mut buf).unwrap_err();
        assert!(matches!(err, ProtocolError::TooLarge), "{err:?}");
    }

    #[test]
    fn i20_s1_exit_reports_keep_their_meaning() {
        for exit in [
            ExitInfo::Exited { code: 3 },
            ExitInfo::Signaled { signal: 9 },
            ExitInfo::Unknown { reason: "x".into() },
        ] {
            assert_eq!(ExitInfo::from(ExitReport::from(&exit)), exit);
        }
    }
}
