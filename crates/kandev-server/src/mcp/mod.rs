//! `/mcp`: the board as MCP tools (Streamable HTTP, served by the official Rust SDK `rmcp`,
//! stateless, plain JSON answers). Who calls is decided here, before the SDK sees the request:
//! a session token (`Bearer kst_…`) is checked against its session's current epoch by the
//! engine and refused with `401` naming the cause (logged with the session, never with the
//! token); anything else already passed the server's own guard (the server token, or
//! loopback without one) and acts as the server. The tools (`tools.rs`) are thin calls into
//! the action table.

mod tools;

pub(crate) use tools::tool_access;

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::http::header::AUTHORIZATION;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use kandev_engine::mcp::{McpSession, SESSION_TOKEN_PREFIX};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, Implementation, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::AppState;
use crate::accounts::Identity;

/// Who is calling `/mcp`.
#[derive(Debug, Clone)]
pub(crate) enum Caller {
    /// Whoever passed the server's guard with their own credential (the server token, a
    /// user's token or login, or loopback on an open server): the tools act with their rights.
    Server(Identity),
    /// An agent's session token: its task's workflow, at its epoch.
    Session(McpSession),
}

/// The bearer token of a request, if it is a session token.
pub(crate) fn session_token(headers: &axum::http::HeaderMap) -> Option<&str> {
    headers
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
        .filter(|t| t.starts_with(SESSION_TOKEN_PREFIX))
}

/// The `/mcp` service: the SDK's Streamable HTTP server, stateless with JSON answers, behind
/// [`authenticate`]. `shutdown` ends calls in flight when the server stops.
pub(crate) fn service(
    state: AppState,
    shutdown: CancellationToken,
) -> StreamableHttpService<Board, NeverSessionManager> {
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_sse_keep_alive(None)
        .with_sse_retry(None)
        .with_cancellation_token(shutdown)
        // Host and Origin are checked by the server's own guard, like every route.
        .disable_allowed_hosts()
        .disable_allowed_origins();
    StreamableHttpService::new(
        move || Ok(Board { state: state.clone() }),
        Arc::new(NeverSessionManager::default()),
        config,
    )
}

/// Middleware of `/mcp`: resolves the caller. A session token that is unknown, of an older
/// epoch or of a deleted session is refused here (`401`), so the call changes nothing.
pub(crate) async fn authenticate(
    State(state): State<AppState>,
    mut request: Request,
    next: Next,
) -> Response {
    let caller = match session_token(request.headers()) {
        None => Caller::Server(
            request.extensions().get::<Identity>().cloned().unwrap_or_else(Identity::open),
        ),
        Some(token) => match state.engine().mcp_session(token).await {
            Ok(Ok(session)) => Caller::Session(session),
            Ok(Err(refusal)) => {
                let session = refusal.session_id().map(ToString::to_string);
                tracing::warn!(
                    session = session.as_deref().unwrap_or("unknown"),
                    reason = %refusal,
                    "refused an MCP call"
                );
                return refused(StatusCode::UNAUTHORIZED, -32001, &refusal.to_string());
            }
            Err(err) => {
                tracing::error!(error = %err, "cannot check an MCP session token");
                let message = "the server cannot check the token now; try again";
                return refused(StatusCode::SERVICE_UNAVAILABLE, -32603, message);
            }
        },
    };
    if let Caller::Session(session) = &caller {
        tracing::debug!(session = %session.session_id, epoch = session.epoch, "MCP call");
    }
    request.extensions_mut().insert(caller);
    next.run(request).await
}

/// A JSON-RPC error answer with an HTTP status (the agent's MCP client shows the message).
fn refused(status: StatusCode, code: i64, message: &str) -> Response {
    let body = json!({
        "jsonrpc": "2.0",
        "id": Value::Null,
        "error": { "code": code, "message": message },
    });
    (status, axum::Json(body)).into_response()
}

/// The MCP server handler: one per request (stateless), holding the app state.
#[derive(Clone)]
pub(crate) struct Board {
    state: AppState,
}

const INSTRUCTIONS: &str = "Kandev's board: read the task you work on (get_task), split work \
    into subtasks (create_task with parent_id \"current\"), say when your step is done \
    (complete_step), ask the developer a question and wait for the answer (ask_user), and \
    leave notes in the session's transcript (add_note).";

impl ServerHandler for Board {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("kandev", crate::VERSION))
            .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tools::list()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let caller = context
            .extensions
            .get::<axum::http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<Caller>())
            .cloned()
            .ok_or_else(|| ErrorData::internal_error("the caller is unknown", None))?;
        let arguments = Value::Object(request.arguments.unwrap_or_default());
        let call = tools::call(&self.state, &caller, &request.name, arguments, &context.ct);
        let result = match call.await {
            Ok(value) => CallToolResult::structured(value),
            Err(err) => {
                if let Caller::Session(session) = &caller {
                    tracing::info!(
                        session = %session.session_id,
                        tool = %request.name,
                        code = ?err.code,
                        "an MCP tool call failed"
                    );
                }
                CallToolResult::structured_error(json!({
                    "code": err.code,
                    "message": err.message,
                }))
            }
        };
        Ok(result.into())
    }
}
