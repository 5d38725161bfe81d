//! Starting a session's terminal UI: its command (the kind's program, the profile's
//! environment with its secrets put in) and Kandev's MCP handed to it for this session only —
//! a private file under the session's folder or flags and the environment, never the
//! user's own configuration — then the PTY, on the local runner when there is one (it
//! outlives the server) or as this server's child.
//!
//! How each agent is handed the MCP server:
//! - `mock` (`kandev fake-tui`): `--mcp-config <file>`, the file `{"url", "token"}`;
//! - `claude`: `--mcp-config <file>`, the file Claude Code's `{"mcpServers": {"kandev":
//!   {"type": "http", "url", "headers"}}}`;
//! - `codex`: `-c mcp_servers.kandev.url=…` and `-c
//!   mcp_servers.kandev.bearer_token_env_var=KANDEV_MCP_TOKEN`, the token in that variable;
//! - the others: not yet (their terminal UI runs without Kandev's MCP).

use std::path::{Path, PathBuf};

use kandev_domain::RepositoryId;
use kandev_domain::agent::AgentKind;
use kandev_domain::transcript::Session;
use kandev_runtime::confine::Root;
use kandev_runtime::pty::{SHELL_REPLAY_BYTES, ShellSpec, spawn_shell};
use kandev_runtime::runner::SpawnSpec;
use kandev_runtime::runner::proto::PtySize;
use kandev_store::{ChildProcess, RunnerTerminal};
use serde_json::json;

use crate::error::{EngineError, Result};
use crate::inner::Inner;
use crate::mcp::{BRIDGE_TOKEN_ENV, McpOffer, SERVER_NAME};
use crate::shells::{TUI_COLS, TUI_ROWS, TuiTerminal};

/// What runs in the PTY.
pub(crate) struct TuiCommand {
    pub program: String,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    /// Values to keep out of logs (the MCP token, the profile's secrets).
    pub secrets: Vec<String>,
}

impl std::fmt::Debug for TuiCommand {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TuiCommand")
            .field("program", &self.program)
            .field("args", &self.args)
            .finish_non_exhaustive()
    }
}

/// The command of `session`'s terminal UI (`kind`'s), Kandev's MCP handed to it by `offer`.
pub(crate) async fn command(
    inner: &Inner,
    session: &Session,
    kind: AgentKind,
    offer: Option<&McpOffer>,
) -> Result<TuiCommand> {
    let (program, args) = match kind {
        AgentKind::Mock => (inner.config.mock_agent.program.clone(), vec!["fake-tui".to_owned()]),
        kind => {
            let (program, args) = kind.terminal_ui().ok_or_else(|| {
                EngineError::Validation(format!(
                    "Kandev does not know the terminal UI of {} agents; pick another profile",
                    kind.as_str()
                ))
            })?;
            (program.to_owned(), args.iter().map(|a| (*a).to_owned()).collect())
        }
    };
    let (env, secrets) = profile_env(inner, session).await?;
    let mut command = TuiCommand { program, args, env, secrets };
    if let Some(offer) = offer {
        hand_mcp(inner, session, kind, offer, &mut command)?;
    }
    Ok(command)
}

/// The profile's environment, its secrets put in, and their values.
async fn profile_env(
    inner: &Inner,
    session: &Session,
) -> Result<(Vec<(String, String)>, Vec<String>)> {
    let Some(id) = &session.agent_profile_id else { return Ok((vec![], vec![])) };
    let profile = inner.store.get_profile(id).await?;
    let names = crate::secrets::profile_references(&profile);
    let (profile, secrets) = if names.is_empty() {
        (profile, vec![])
    } else {
        let task = inner.store.get_task(&session.task_id).await?;
        let repository = task.repository_ids.first().map(|r| r.as_str());
        let values =
            crate::secrets::resolve(inner, &names, task.workspace_id.as_str(), repository).await?;
        let secrets = values.values().cloned().collect();
        (crate::secrets::fill_profile(profile, &values), secrets)
    };
    let env = profile.env.into_iter().map(|e| (e.name, e.value)).collect();
    Ok((env, secrets))
}

/// Hands Kandev's MCP server to the program, the way its agent takes it.
fn hand_mcp(
    inner: &Inner,
    session: &Session,
    kind: AgentKind,
    offer: &McpOffer,
    command: &mut TuiCommand,
) -> Result<()> {
    let token = offer.token().to_owned();
    let bearer = format!("Bearer {token}");
    match kind {
        AgentKind::Mock => {
            let file = private_file(inner, session, "mcp.json")?;
            write_private(&file, &json!({ "url": offer.url, "token": token }))?;
            command.args.extend(["--mcp-config".to_owned(), file.display().to_string()]);
        }
        AgentKind::Claude => {
            let file = private_file(inner, session, "mcp.json")?;
            let server =
                json!({ "type": "http", "url": offer.url, "headers": { "Authorization": bearer } });
            write_private(&file, &json!({ "mcpServers": { SERVER_NAME: server } }))?;
            command.args.extend(["--mcp-config".to_owned(), file.display().to_string()]);
        }
        AgentKind::Codex => {
            let url = format!("mcp_servers.{SERVER_NAME}.url={}", json!(offer.url));
            let env = format!(
                "mcp_servers.{SERVER_NAME}.bearer_token_env_var={}",
                json!(BRIDGE_TOKEN_ENV)
            );
            command.args.extend(["-c".to_owned(), url, "-c".to_owned(), env]);
            command.env.push((BRIDGE_TOKEN_ENV.to_owned(), token.clone()));
        }
        _ => return Ok(()),
    }
    command.secrets.push(token);
    Ok(())
}

/// `<home>/sessions/<session>/tui/<name>`, its folder made private to this user.
fn private_file(inner: &Inner, session: &Session, name: &str) -> Result<PathBuf> {
    let dir = inner.config.home.join("sessions").join(session.id.as_str()).join("tui");
    let failed = |e: std::io::Error| {
        EngineError::Unavailable(format!("cannot write {}: {e}", dir.display()))
    };
    std::fs::create_dir_all(&dir).map_err(failed)?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).map_err(failed)?;
    Ok(dir.join(name))
}

/// Writes `value` to `path`, readable by this user only (it holds a token).
fn write_private(path: &Path, value: &serde_json::Value) -> Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let failed = |e: std::io::Error| {
        EngineError::Unavailable(format!("cannot write {}: {e}", path.display()))
    };
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(failed)?;
    file.write_all(value.to_string().as_bytes()).map_err(failed)
}

/// Starts `command` in a PTY in `cwd`, recorded so that the next start takes it over (on
/// the runner) or kills what a `kill -9` of this server left (a child of the server).
pub(crate) async fn spawn(
    inner: &Inner,
    session: &Session,
    epoch: i64,
    cwd: &str,
    command: TuiCommand,
) -> Result<TuiTerminal> {
    let task = inner.store.get_task(&session.task_id).await?;
    let repository_id =
        task.repository_ids.first().cloned().unwrap_or_else(|| RepositoryId::new(""));
    let started =
        |e: String| EngineError::Unavailable(format!("the terminal UI did not start: {e}"));
    let shell = match inner.launcher.local_runner() {
        Some(client) => {
            let exec = format!("tui_{}_{epoch}", session.id);
            let spec = SpawnSpec {
                program: command.program,
                args: command.args,
                env: [("PWD".to_owned(), cwd.to_owned())].into_iter().chain(command.env).collect(),
                cwd: PathBuf::from(cwd),
                secrets: command.secrets,
                pty: Some(PtySize { cols: TUI_COLS, rows: TUI_ROWS }),
                scrollback: SHELL_REPLAY_BYTES,
            };
            let execution = client.spawn(&exec, spec).await.map_err(|e| started(e.to_string()))?;
            let kept = RunnerTerminal {
                id: session.id.to_string(),
                task_id: task.id.clone(),
                repository_id: repository_id.clone(),
                kind: "tui".into(),
                exec,
                port: None,
            };
            let mut tx = inner.store.begin_write().await?;
            tx.record_runner_terminal(&kept).await?;
            tx.commit().await?;
            kandev_runtime::pty::through_runner(execution)
        }
        None => {
            let root = Root::open(Path::new(cwd))
                .map_err(|e| started(format!("the working directory is not available: {e}")))?;
            let spec = ShellSpec {
                program: command.program.into(),
                args: command.args.into_iter().map(Into::into).collect(),
                env: command.env,
                cols: TUI_COLS,
                rows: TUI_ROWS,
            };
            let shell = spawn_shell(&spec, &root).map_err(|e| started(e.to_string()))?;
            let child = ChildProcess {
                pgid: shell.pid(),
                kind: "terminal".into(),
                task_id: task.id.clone(),
            };
            let mut tx = inner.store.begin_write().await?;
            tx.record_child(&child).await?;
            tx.commit().await?;
            shell
        }
    };
    Ok(TuiTerminal::new(session.task_id.clone(), repository_id, shell))
}

/// Drops the record of a terminal UI that is gone (logged when the store refuses).
pub(crate) async fn forget(inner: &Inner, session: &Session, terminal: &TuiTerminal) {
    match terminal.shell.exec() {
        Some(_) => crate::shells::forget_runner_terminal(&inner.store, session.id.as_str()).await,
        None => crate::shells::forget_child(&inner.store, terminal.shell.pid()).await,
    }
}
