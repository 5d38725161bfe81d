//! The typed errors of ACP calls, and the JSON-RPC error codes they are classified by.

use std::time::Duration;

use serde_json::Value;

/// JSON-RPC and ACP error codes (acp.md, "Error codes").
pub mod codes {
    /// The agent sent something that is not JSON.
    pub const PARSE_ERROR: i64 = -32700;
    /// The message is not a valid JSON-RPC request.
    pub const INVALID_REQUEST: i64 = -32600;
    /// The method does not exist or is not supported.
    pub const METHOD_NOT_FOUND: i64 = -32601;
    /// The params do not match the method.
    pub const INVALID_PARAMS: i64 = -32602;
    /// Any other failure while handling a request.
    pub const INTERNAL_ERROR: i64 = -32603;
    /// ACP: the agent needs `authenticate` first.
    pub const AUTH_REQUIRED: i64 = -32000;
    /// ACP: the session (or another resource) does not exist.
    pub const RESOURCE_NOT_FOUND: i64 = -32002;
    /// ACP: the request was cancelled.
    pub const REQUEST_CANCELLED: i64 = -32800;
}

/// Why a call to the agent failed.
///
/// The variants are deliberately distinct: lifecycle rule 30 falls back from `session/load` to
/// `session/new` only for [`AcpError::is_method_not_found`] and
/// [`AcpError::is_resource_not_found`], never for a timeout, `closed` or auth required.
#[derive(Debug, thiserror::Error)]
pub enum AcpError {
    /// The agent answered with a JSON-RPC error.
    #[error("agent rejected {method} with error {code}: {message}")]
    Rpc {
        /// The method that was called.
        method: String,
        /// The JSON-RPC error code.
        code: i64,
        /// The agent's message.
        message: String,
        /// The optional `data` of the error, as sent.
        data: Option<Value>,
    },
    /// The agent did not answer within the call's timeout.
    #[error("agent did not answer {method} within {timeout:?}")]
    Timeout {
        /// The method that was called.
        method: String,
        /// The timeout that expired.
        timeout: Duration,
    },
    /// The connection closed (agent exited, stdout closed, or `close()` was called) before an
    /// answer arrived.
    #[error("connection to agent closed during {method}")]
    Closed {
        /// The method that was called.
        method: String,
    },
    /// A message could not be built or the agent's answer did not have the expected shape.
    #[error("bad {method} message: {message}")]
    Protocol {
        /// The method that was called.
        method: String,
        /// What was wrong.
        message: String,
    },
    /// Writing to the agent's stdin failed.
    #[error("writing {method} to agent failed: {source}")]
    Io {
        /// The method that was called.
        method: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

impl AcpError {
    /// The JSON-RPC error code, if the agent answered with an error.
    pub fn rpc_code(&self) -> Option<i64> {
        match self {
            AcpError::Rpc { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// The agent does not know the method (-32601).
    pub fn is_method_not_found(&self) -> bool {
        self.rpc_code() == Some(codes::METHOD_NOT_FOUND)
    }

    /// The agent does not know the session or another resource (-32002).
    pub fn is_resource_not_found(&self) -> bool {
        self.rpc_code() == Some(codes::RESOURCE_NOT_FOUND)
    }

    /// The agent needs `authenticate` first (-32000).
    pub fn is_auth_required(&self) -> bool {
        self.rpc_code() == Some(codes::AUTH_REQUIRED)
    }

    /// The call timed out.
    pub fn is_timeout(&self) -> bool {
        matches!(self, AcpError::Timeout { .. })
    }

    /// The connection closed before an answer arrived.
    pub fn is_closed(&self) -> bool {
        matches!(self, AcpError::Closed { .. })
    }

    pub(crate) fn protocol(method: &str, message: impl Into<String>) -> Self {
        AcpError::Protocol { method: method.to_owned(), message: message.into() }
    }

    pub(crate) fn closed(method: &str) -> Self {
        AcpError::Closed { method: method.to_owned() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rpc(code: i64) -> AcpError {
        AcpError::Rpc { method: "session/load".into(), code, message: "nope".into(), data: None }
    }

    #[test]
    fn classification_helpers_match_exact_codes() {
        assert!(rpc(-32601).is_method_not_found());
        assert!(rpc(-32002).is_resource_not_found());
        assert!(rpc(-32000).is_auth_required());
        assert!(!rpc(-32603).is_method_not_found());
        assert!(!rpc(-32603).is_resource_not_found());
        assert!(!rpc(-32603).is_auth_required());
        assert!(!rpc(-32000).is_resource_not_found());
    }

    #[test]
    fn non_rpc_errors_are_never_classified_as_rpc_codes() {
        let timeout =
            AcpError::Timeout { method: "session/load".into(), timeout: Duration::from_secs(1) };
        assert!(timeout.is_timeout());
        assert!(!timeout.is_method_not_found());
        assert_eq!(timeout.rpc_code(), None);
        let closed = AcpError::closed("session/load");
        assert!(closed.is_closed());
        assert!(!closed.is_resource_not_found());
        assert!(!closed.is_auth_required());
    }

    #[test]
    fn messages_are_lowercase_without_trailing_period() {
        let message = rpc(-32000).to_string();
        assert_eq!(message, "agent rejected session/load with error -32000: nope");
    }
}
