//! JSON-RPC 2.0 framing: classifying incoming lines and building outgoing ones (one per line).

use serde_json::{Value, json};

/// The error codes of ACP (acp.md, "Error codes").
pub mod codes {
    /// The line is not JSON.
    pub const PARSE_ERROR: i64 = -32700;
    /// The JSON is not a JSON-RPC message.
    pub const INVALID_REQUEST: i64 = -32600;
    /// The method does not exist (or is not offered, like `session/load` without `loadSession`).
    pub const METHOD_NOT_FOUND: i64 = -32601;
    /// The params do not fit the method, or a script does not parse.
    pub const INVALID_PARAMS: i64 = -32602;
    /// Something went wrong inside the agent.
    pub const INTERNAL_ERROR: i64 = -32603;
    /// Authentication required.
    pub const AUTH_REQUIRED: i64 = -32000;
    /// Resource (session) not found.
    pub const RESOURCE_NOT_FOUND: i64 = -32002;
    /// The request was cancelled.
    pub const REQUEST_CANCELLED: i64 = -32800;
}

/// A JSON-RPC error object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RpcError {
    /// The error code.
    pub code: i64,
    /// A short lowercase message.
    pub message: String,
}

impl RpcError {
    /// An error with this code and message.
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        RpcError { code, message: message.into() }
    }

    pub(crate) fn invalid_params(message: impl std::fmt::Display) -> Self {
        RpcError::new(codes::INVALID_PARAMS, format!("invalid params: {message}"))
    }

    pub(crate) fn unknown_session(session_id: &str) -> Self {
        RpcError::new(codes::RESOURCE_NOT_FOUND, format!("unknown session {session_id}"))
    }

    fn to_json(&self) -> Value {
        json!({ "code": self.code, "message": self.message })
    }

    fn from_json(value: &Value) -> Self {
        let code = value.get("code").and_then(Value::as_i64).unwrap_or(codes::INTERNAL_ERROR);
        let message = value.get("message").and_then(Value::as_str).unwrap_or("").to_owned();
        RpcError { code, message }
    }
}

/// One parsed incoming message.
#[derive(Debug, PartialEq)]
pub(crate) enum Incoming {
    /// A call that expects an answer.
    Request { id: Value, method: String, params: Value },
    /// A call without an id.
    Notification { method: String, params: Value },
    /// The client's answer to one of our requests.
    Response { id: Value, outcome: Result<Value, RpcError> },
    /// JSON that is not a JSON-RPC message; answered with -32600 (id null when unknown).
    Invalid { id: Value },
}

/// Classifies a parsed JSON value. Unknown fields are ignored.
pub(crate) fn classify(mut value: Value) -> Incoming {
    let Some(object) = value.as_object_mut() else {
        return Incoming::Invalid { id: Value::Null };
    };
    let id = object.remove("id");
    let params = object.remove("params").unwrap_or(Value::Null);
    match (object.remove("method"), id) {
        (Some(Value::String(method)), Some(id)) => Incoming::Request { id, method, params },
        (Some(Value::String(method)), None) => Incoming::Notification { method, params },
        (None, Some(id)) => {
            if let Some(error) = object.get("error") {
                Incoming::Response { id, outcome: Err(RpcError::from_json(error)) }
            } else if let Some(result) = object.remove("result") {
                Incoming::Response { id, outcome: Ok(result) }
            } else {
                Incoming::Invalid { id }
            }
        }
        (_, id) => Incoming::Invalid { id: id.unwrap_or(Value::Null) },
    }
}

/// A successful answer.
pub(crate) fn response_line(id: &Value, result: Value) -> String {
    json!({ "jsonrpc": "2.0", "id": id, "result": result }).to_string()
}

/// An error answer.
pub(crate) fn error_line(id: &Value, error: &RpcError) -> String {
    json!({ "jsonrpc": "2.0", "id": id, "error": error.to_json() }).to_string()
}

/// A notification to the client.
pub(crate) fn notification_line(method: &str, params: Value) -> String {
    json!({ "jsonrpc": "2.0", "method": method, "params": params }).to_string()
}

/// A request to the client.
pub(crate) fn request_line(id: u64, method: &str, params: Value) -> String {
    json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }).to_string()
}

/// A `session/update` notification carrying `update`.
pub(crate) fn update_line(session_id: &str, update: &Value) -> String {
    notification_line("session/update", json!({ "sessionId": session_id, "update": update }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_requests_notifications_and_responses() {
        let request = classify(json!({"jsonrpc":"2.0","id":3,"method":"initialize","extra":1}));
        assert_eq!(
            request,
            Incoming::Request { id: json!(3), method: "initialize".into(), params: Value::Null }
        );
        let note = classify(json!({"jsonrpc":"2.0","method":"session/cancel","params":{"a":1}}));
        assert_eq!(
            note,
            Incoming::Notification { method: "session/cancel".into(), params: json!({"a":1}) }
        );
        let ok = classify(json!({"jsonrpc":"2.0","id":7,"result":{}}));
        assert_eq!(ok, Incoming::Response { id: json!(7), outcome: Ok(json!({})) });
        let err = classify(json!({"jsonrpc":"2.0","id":7,"error":{"code":-1,"message":"no"}}));
        assert_eq!(err, Incoming::Response { id: json!(7), outcome: Err(RpcError::new(-1, "no")) });
        assert_eq!(classify(json!([1, 2])), Incoming::Invalid { id: Value::Null });
        assert_eq!(classify(json!({"id": 4})), Incoming::Invalid { id: json!(4) });
    }

    #[test]
    fn lines_are_single_line_json() {
        let line = update_line("s", &json!({"text": "a\nb"}));
        assert!(!line.contains('\n'));
        let parsed: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(parsed["params"]["update"]["text"], "a\nb");
    }
}
