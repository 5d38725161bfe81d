//! The client side of the Agent Client Protocol (JSON-RPC 2.0 over stdio).
//!
//! [`AcpClient::connect`] takes the agent's stdout and stdin (any `AsyncRead`/`AsyncWrite`)
//! and returns a cloneable client for the typed client → agent calls plus a receiver of
//! [`AgentEvent`]s for everything the agent sends on its own: session updates, permission
//! and file requests (answered later through their responders), protocol errors, and the
//! final `Closed`.
//!
//! Invariants:
//! - The read loop never blocks on a consumer: a permission waiting minutes for a human never
//!   delays other updates or responses.
//! - Nothing the agent sends is fatal except the end of its output: garbage lines, lines over
//!   the limit, unknown update kinds and malformed params are reported and skipped.
//! - Errors keep their cause apart: an agent error (with its code), a timeout, a closed
//!   connection, a bad message and an IO failure are different [`AcpError`] variants.
//! - This crate decides nothing about policy: path confinement, auto-approve and which
//!   option to choose belong to the engine.

#![cfg_attr(
    test,
    allow(
        clippy::disallowed_methods,
        reason = "unit tests spawn tasks and start processes freely"
    )
)]

mod client;
mod dispatch;
mod error;
mod events;
mod lenient;
mod line_reader;
mod peer;
pub mod quirks;
mod rpc;
mod schema;
mod update;

pub use client::{AcpClient, AcpConfig, PROTOCOL_VERSION};
pub use error::{AcpError, codes};
pub use events::{
    AgentEvent, Outcome, PermissionOption, PermissionOptionKind, PermissionResponder,
    PermissionToolCall, ReadTextFileResponder, RequestError, TerminalAnswer, TerminalExitStatus,
    TerminalRequest, TerminalResponder, WriteTextFileResponder,
};
pub use peer::InputKeys;
pub use schema::{
    AgentCapabilities, AgentInfo, AuthMethod, ConfigOption, ContentBlock, InitializeResponse,
    LoadSessionResponse, McpCapabilities, ModelInfo, NewSessionResponse, PromptCapabilities,
    PromptResponse, SessionMode, SessionModeState, SessionModelState, StopReason,
};
pub use update::{
    AvailableCommand, PlanEntry, PlanEntryPriority, PlanEntryStatus, SessionUpdate, ToolCall,
    ToolCallContent, ToolCallLocation, ToolCallStatus, ToolCallUpdate, ToolKind,
};
