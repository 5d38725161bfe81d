//! The text frames of `/ws` (docs/api.md), typed at both ends (issue 40): what a client sends
//! ([`RequestFrame`]) and what the server sends ([`Frame`]). The web's `Frame` and
//! `RequestFrame` types are written by [`typescript_frames`] next to the generated `Actions`
//! map, so a response's payload is typed by its action and a notification by its topic.
//!
//! Payloads the server already holds as JSON text (a dispatched answer, a stored event) are
//! borrowed as [`RawValue`] and copied into the frame as they are.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;

use crate::error::ErrorBody;

/// A frame from the client: a request by id (`type` may be left out; it can only be
/// `request`). The id is echoed in the answer.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct RequestFrame {
    #[serde(default)]
    pub id: Option<Value>,
    #[serde(rename = "type", default)]
    pub kind: Option<String>,
    #[serde(default)]
    pub action: Option<String>,
    #[serde(default)]
    pub payload: Value,
}

/// A frame from the server. Serialize only: serde cannot read a `RawValue` inside an
/// internally tagged enum (clients read frames as the JSON they are).
#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Frame<'a> {
    /// The answer to request `id`.
    Response { id: Cow<'a, Value>, action: Cow<'a, str>, payload: Cow<'a, RawValue> },
    /// Request `id` failed (`id` is null when the frame could not be read).
    Error { id: Cow<'a, Value>, action: Cow<'a, str>, payload: ErrorBody },
    /// Rule 47: `topic` is no longer followed; reload and subscribe again.
    ResyncRequired { topic: Cow<'a, str>, oldest_seq: i64 },
    /// A committed event of a followed topic.
    Notification { topic: Cow<'a, str>, action: Cow<'a, str>, seq: i64, payload: Cow<'a, RawValue> },
}

impl Frame<'_> {
    /// The frame's `type`: every variant is named here, so a new one cannot be left out of
    /// the TypeScript ([`typescript_frames`] lists these).
    pub fn type_name(&self) -> &'static str {
        match self {
            Frame::Response { .. } => "response",
            Frame::Error { .. } => "error",
            Frame::ResyncRequired { .. } => "resync_required",
            Frame::Notification { .. } => "notification",
        }
    }

    /// The frame as JSON text.
    pub fn to_text(&self) -> serde_json::Result<String> {
        serde_json::to_string(self)
    }
}

/// The TypeScript of the frames (the `Notification` union is `notifications::typescript_frame`'s).
pub fn typescript_frames() -> String {
    "/** A request's id as the client chose it, echoed in the answer. */\n\
     export type RequestId = string | number | null;\n\n\
     /** A frame the client sends on /ws. */\n\
     export type RequestFrame = { [A in keyof SocketActions | keyof Actions]: {\n  \
     id: RequestId, type: \"request\", action: A,\n  \
     payload: A extends keyof SocketActions ? SocketActions[A][\"request\"] : A extends keyof Actions ? Actions[A][\"request\"] : never,\n\
     } }[keyof SocketActions | keyof Actions];\n\n\
     /** The answer to a request, its payload typed by its action. */\n\
     export type ResponseFrame = { [A in keyof SocketActions | keyof Actions]: {\n  \
     type: \"response\", id: RequestId, action: A,\n  \
     payload: A extends keyof SocketActions ? SocketActions[A][\"response\"] : A extends keyof Actions ? Actions[A][\"response\"] : never,\n\
     } }[keyof SocketActions | keyof Actions];\n\n\
     export type ErrorFrame = { type: \"error\", id: RequestId, action: string, payload: ErrorBody };\n\n\
     export type ResyncRequiredFrame = { type: \"resync_required\", topic: string, oldest_seq: number };\n\n\
     /** A frame the server sends on /ws. */\n\
     export type Frame = ResponseFrame | ErrorFrame | ResyncRequiredFrame | Notification;\n"
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorCode;

    fn raw(text: &str) -> Cow<'static, RawValue> {
        Cow::Owned(RawValue::from_string(text.to_owned()).unwrap())
    }

    /// Each frame serializes to the shape of docs/api.md, and its `type` is one the
    /// TypeScript declares.
    #[test]
    fn i40_frames_have_the_documented_shapes_and_their_types_are_declared() {
        let id = || Cow::Owned(Value::from("c1"));
        let frames = [
            Frame::Response { id: id(), action: "task.get".into(), payload: raw(r#"{"task":1}"#) },
            Frame::Error {
                id: id(),
                action: "task.get".into(),
                payload: ErrorBody {
                    code: ErrorCode::NotFound,
                    message: "no".into(),
                    details: None,
                },
            },
            Frame::ResyncRequired { topic: "session:s".into(), oldest_seq: 4 },
            Frame::Notification {
                topic: "session:s".into(),
                action: "session.updated".into(),
                seq: 7,
                payload: raw(r#"{"a":[true,null]}"#),
            },
        ];
        let ts = typescript_frames();
        let expected = [
            r#"{"type":"response","id":"c1","action":"task.get","payload":{"task":1}}"#,
            r#"{"type":"error","id":"c1","action":"task.get","payload":{"code":"NOT_FOUND","message":"no"}}"#,
            r#"{"type":"resync_required","topic":"session:s","oldest_seq":4}"#,
            r#"{"type":"notification","topic":"session:s","action":"session.updated","seq":7,"payload":{"a":[true,null]}}"#,
        ];
        for (frame, expected) in frames.iter().zip(expected) {
            let text = frame.to_text().unwrap();
            assert_eq!(text, expected);
            let declared = format!("type: \"{}\"", frame.type_name());
            let notification = frame.type_name() == "notification"; // in `Notification`
            assert!(notification || ts.contains(&declared), "{declared} is not in the TypeScript");
        }
    }

    #[test]
    fn i40_a_request_frame_may_leave_out_its_type() {
        let frame: RequestFrame =
            serde_json::from_str(r#"{"id":1,"action":"task.get","payload":{"id":"t"}}"#).unwrap();
        assert_eq!((frame.kind, frame.action.as_deref()), (None, Some("task.get")));
    }
}
