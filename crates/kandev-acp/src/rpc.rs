//! JSON-RPC 2.0 framing: classifying incoming messages and encoding outgoing ones.

use serde_json::{Map, Value, json};

use crate::error::codes;

/// A JSON-RPC error object.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RpcErrorBody {
    pub(crate) code: i64,
    pub(crate) message: String,
    pub(crate) data: Option<Value>,
}

impl RpcErrorBody {
    pub(crate) fn new(code: i64, message: impl Into<String>) -> Self {
        RpcErrorBody { code, message: message.into(), data: None }
    }

    /// Parses an `error` member; a malformed one is kept as an internal error.
    fn from_json(error: &Value) -> Self {
        let code = error.get("code").and_then(Value::as_i64);
        let message = error.get("message").and_then(Value::as_str);
        match (code, message) {
            (Some(code), message) => RpcErrorBody {
                code,
                message: message.unwrap_or_default().to_owned(),
                data: error.get("data").cloned(),
            },
            (None, _) => RpcErrorBody {
                code: codes::INTERNAL_ERROR,
                message: format!("malformed error from agent: {error}"),
                data: None,
            },
        }
    }

    fn to_json(&self) -> Value {
        let mut error = json!({ "code": self.code, "message": self.message });
        if let (Some(data), Some(object)) = (&self.data, error.as_object_mut()) {
            object.insert("data".to_owned(), data.clone());
        }
        error
    }
}

/// A message from the agent, by JSON-RPC shape.
#[derive(Debug, PartialEq)]
pub(crate) enum Incoming {
    /// The agent asks the client something and waits for a response.
    Request { id: Value, method: String, params: Value },
    /// The agent tells the client something.
    Notification { method: String, params: Value },
    /// The agent answers one of the client's requests.
    Response { id: Value, outcome: Result<Value, RpcErrorBody> },
}

impl Incoming {
    /// Classifies a parsed line; `Err` describes why it is not a JSON-RPC message.
    pub(crate) fn classify(message: Value) -> Result<Self, String> {
        let Value::Object(mut object) = message else {
            return Err(format!("agent sent a non-object json message: {message}"));
        };
        let id = object.remove("id").filter(|id| !id.is_null());
        let method = object.remove("method");
        match (id, method) {
            (id, Some(Value::String(method))) => {
                let params = object.remove("params").unwrap_or(Value::Null);
                Ok(match id {
                    Some(id) => Incoming::Request { id, method, params },
                    None => Incoming::Notification { method, params },
                })
            }
            (Some(id), None) => response(id, object),
            (_, _) => Err(format!(
                "agent sent a json message that is neither request, notification nor response: {}",
                Value::Object(object)
            )),
        }
    }
}

fn response(id: Value, mut object: Map<String, Value>) -> Result<Incoming, String> {
    if let Some(error) = object.remove("error").filter(|error| !error.is_null()) {
        let outcome = Err(RpcErrorBody::from_json(&error));
        return Ok(Incoming::Response { id, outcome });
    }
    match object.remove("result") {
        Some(result) => Ok(Incoming::Response { id, outcome: Ok(result) }),
        None => Err(format!("agent sent a response without result or error for id {id}")),
    }
}

/// Encodes one message as a line (compact JSON never contains a raw newline).
pub(crate) fn encode_line(message: &Value) -> Vec<u8> {
    let mut line = message.to_string().into_bytes();
    line.push(b'\n');
    line
}

pub(crate) fn request(id: u64, method: &str, params: Value) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params })
}

pub(crate) fn notification(method: &str, params: Value) -> Value {
    json!({ "jsonrpc": "2.0", "method": method, "params": params })
}

pub(crate) fn response_message(id: Value, outcome: Result<Value, RpcErrorBody>) -> Value {
    match outcome {
        Ok(result) => json!({ "jsonrpc": "2.0", "id": id, "result": result }),
        Err(error) => json!({ "jsonrpc": "2.0", "id": id, "error": error.to_json() }),
    }
}

/// The numeric id of a response to one of our requests (we only send `u64` ids).
pub(crate) fn request_id(id: &Value) -> Option<u64> {
    match id {
        Value::Number(number) => number.as_u64(),
        Value::String(text) => text.parse().ok(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn classify(message: Value) -> Result<Incoming, String> {
        Incoming::classify(message)
    }

    #[test]
    fn classifies_the_three_shapes() {
        let request = classify(json!({"jsonrpc": "2.0", "id": 0, "method": "m", "params": {}}));
        assert!(matches!(request, Ok(Incoming::Request { .. })));
        let note = classify(json!({"jsonrpc": "2.0", "method": "m"}));
        assert_eq!(note, Ok(Incoming::Notification { method: "m".into(), params: Value::Null }));
        let response = classify(json!({"jsonrpc": "2.0", "id": 3, "result": null}));
        assert_eq!(response, Ok(Incoming::Response { id: json!(3), outcome: Ok(Value::Null) }));
    }

    #[test]
    fn error_responses_keep_code_message_and_data() {
        let response = classify(json!({
            "id": 1, "error": {"code": -32002, "message": "no such session", "data": {"x": 1}}
        }));
        let Ok(Incoming::Response { outcome: Err(error), .. }) = response else {
            panic!("expected an error response, got {response:?}");
        };
        assert_eq!(error.code, -32002);
        assert_eq!(error.message, "no such session");
        assert_eq!(error.data, Some(json!({"x": 1})));
    }

    #[test]
    fn rejects_non_messages() {
        assert!(classify(json!([1, 2])).is_err());
        assert!(classify(json!({"foo": 1})).is_err());
        assert!(classify(json!({"id": 1})).is_err());
    }

    #[test]
    fn encoded_lines_have_exactly_one_newline() {
        let line = encode_line(&notification("m", json!({"text": "a\nb"})));
        assert_eq!(line.iter().filter(|&&b| b == b'\n').count(), 1);
        assert_eq!(line.last(), Some(&b'\n'));
    }
}
