//! Starting a session's terminal UI: its command (the kind's program, the profile's
//! environment with its secrets put in) and Kandev's MCP handed to it for this session only —
//! a private file under the session's folder or flags and the environment, never the
//! user's own configuration — then the PTY, on the local runner when there is one (it
//! outlives the server) or as this server's child.
//!
//! How each agent is handed the MCP server: [`mcp_handoff`] (docs/terminal-ui.md).

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
            let ui = kind.terminal_ui().ok_or_else(|| {
                EngineError::Validation(format!(
                    "Kandev does not know the terminal UI of {} agents; pick another profile",
                    kind.as_str()
                ))
            })?;
            check_installed(kind, &ui)?;
            (ui.program.to_owned(), ui.args.iter().map(|a| (*a).to_owned()).collect())
        }
    };
    let (env, secrets) = profile_env(inner, session).await?;
    let mut command = TuiCommand { program, args, env, secrets };
    if let Some(offer) = offer {
        hand_mcp(inner, session, kind, offer, &mut command)?;
    }
    Ok(command)
}

/// Refuses a terminal UI whose program is not on this machine's `PATH`, saying what to
/// install (a profile's command is the ACP agent's: it cannot help).
fn check_installed(kind: AgentKind, ui: &kandev_domain::agent::TerminalUi) -> Result<()> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    if std::env::split_paths(&path).any(|dir| dir.join(ui.program).is_file()) {
        return Ok(());
    }
    let title = kind.default_command().title;
    let install = match ui.package {
        Some(package) => format!("install it (`npm install -g {package}`)"),
        None => "install it".to_owned(),
    };
    Err(EngineError::Unavailable(format!(
        "`{}`, {title}'s own terminal UI, is not on this machine's PATH: {install}, then start \
         the session again",
        ui.program
    )))
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
    let file = private_file(inner, session, "mcp.json")?;
    let Some(handoff) = mcp_handoff(kind, &offer.url, offer.token(), &file) else { return Ok(()) };
    if let Some(contents) = &handoff.file {
        write_private(&file, contents)?;
    }
    command.args.extend(handoff.args);
    for (name, value) in handoff.env {
        // Kandev's value replaces the profile's: it names this session's configuration.
        command.env.retain(|(set, _)| set != &name);
        command.env.push((name, value));
    }
    command.secrets.push(offer.token().to_owned());
    Ok(())
}

/// What a kind's terminal UI is handed to reach Kandev's MCP server: arguments, environment
/// variables, and the contents of the session's private file `file` they name.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct McpHandoff {
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    pub file: Option<serde_json::Value>,
}

/// How `kind`'s terminal UI takes an MCP server at `url` with `token`, through its own
/// flags, environment or a configuration file of its own (never the user's); `None` for a
/// kind Kandev does not know how to hand it to.
pub(crate) fn mcp_handoff(
    kind: AgentKind,
    url: &str,
    token: &str,
    file: &Path,
) -> Option<McpHandoff> {
    let bearer = json!({ "Authorization": format!("Bearer {token}") });
    let path = file.display().to_string();
    let with_file = |args: Vec<String>, env: Vec<(&str, &str)>, contents| McpHandoff {
        args,
        env: env.into_iter().map(|(n, v)| (n.to_owned(), v.to_owned())).collect(),
        file: Some(contents),
    };
    // Gemini CLI and its fork Qwen Code: a system settings file, merged over the user's.
    let gemini_settings =
        json!({ "mcpServers": { SERVER_NAME: { "httpUrl": url, "headers": bearer } } });
    // OpenCode and its fork Kilo Code: a configuration file merged with the user's.
    let opencode_config = json!({ "mcp": { SERVER_NAME: {
        "type": "remote", "url": url, "headers": bearer, "oauth": false } } });
    let config_flag = vec!["--mcp-config".to_owned(), path.clone()];
    Some(match kind {
        AgentKind::Mock => with_file(config_flag, vec![], json!({ "url": url, "token": token })),
        AgentKind::Claude => {
            let server = json!({ "type": "http", "url": url, "headers": bearer });
            with_file(config_flag, vec![], json!({ "mcpServers": { SERVER_NAME: server } }))
        }
        AgentKind::Codex => McpHandoff {
            args: vec![
                "-c".to_owned(),
                format!("mcp_servers.{SERVER_NAME}.url={}", json!(url)),
                "-c".to_owned(),
                format!(
                    "mcp_servers.{SERVER_NAME}.bearer_token_env_var={}",
                    json!(BRIDGE_TOKEN_ENV)
                ),
            ],
            env: vec![(BRIDGE_TOKEN_ENV.to_owned(), token.to_owned())],
            file: None,
        },
        AgentKind::Gemini => {
            with_file(vec![], vec![("GEMINI_CLI_SYSTEM_SETTINGS_PATH", &path)], gemini_settings)
        }
        AgentKind::Qwen => {
            // Its deferred MCP tools would not reach the model (issue 51's quirk).
            let quirk = kandev_acp::quirks::mcp_launch("qwen");
            let mut env = vec![("QWEN_CODE_SYSTEM_SETTINGS_PATH", path.as_str())];
            env.extend(quirk.env.iter().copied());
            let args = quirk.args.iter().map(|a| (*a).to_owned()).collect();
            with_file(args, env, gemini_settings)
        }
        AgentKind::OpenCode => with_file(vec![], vec![("OPENCODE_CONFIG", &path)], opencode_config),
        AgentKind::Kilo => with_file(vec![], vec![("KILO_CONFIG", &path)], opencode_config),
        AgentKind::Copilot | AgentKind::Auggie | AgentKind::Custom => return None,
    })
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

/// Removes the session's private files (its MCP configuration) once it is deleted.
pub(crate) fn remove_files(inner: &Inner, session: &Session) {
    let dir = inner.config.home.join("sessions").join(session.id.as_str());
    if let Err(err) = std::fs::remove_dir_all(&dir)
        && err.kind() != std::io::ErrorKind::NotFound
    {
        tracing::warn!(dir = %dir.display(), error = %err, "cannot remove a deleted session's files");
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    const URL: &str = "http://127.0.0.1:9/mcp";

    fn handoff(kind: AgentKind) -> McpHandoff {
        mcp_handoff(kind, URL, "kst_t", Path::new("/h/sessions/s/tui/mcp.json")).unwrap()
    }

    #[test]
    fn claude_and_the_fake_take_a_config_file_named_by_a_flag() {
        let claude = handoff(AgentKind::Claude);
        assert_eq!(claude.args, ["--mcp-config", "/h/sessions/s/tui/mcp.json"]);
        let server = &claude.file.unwrap()["mcpServers"]["kandev"];
        assert_eq!((&server["type"], &server["url"]), (&json!("http"), &json!(URL)));
        assert_eq!(server["headers"]["Authorization"], "Bearer kst_t");
        let fake = handoff(AgentKind::Mock);
        assert_eq!(fake.file, Some(json!({"url": URL, "token": "kst_t"})));
    }

    #[test]
    fn codex_takes_flags_and_the_token_from_the_environment_not_the_command_line() {
        let codex = handoff(AgentKind::Codex);
        assert_eq!(
            codex.args,
            [
                "-c",
                "mcp_servers.kandev.url=\"http://127.0.0.1:9/mcp\"",
                "-c",
                "mcp_servers.kandev.bearer_token_env_var=\"KANDEV_MCP_TOKEN\""
            ]
        );
        assert!(codex.args.iter().all(|a| !a.contains("kst_t")));
        assert_eq!(codex.env, [("KANDEV_MCP_TOKEN".to_owned(), "kst_t".to_owned())]);
    }

    #[test]
    fn gemini_qwen_opencode_and_kilo_take_a_settings_file_named_by_a_variable() {
        let named = |kind, var: &str| {
            let got = handoff(kind);
            assert!(
                got.env.contains(&(var.to_owned(), "/h/sessions/s/tui/mcp.json".to_owned())),
                "{got:?}"
            );
            got.file.unwrap()
        };
        let gemini = named(AgentKind::Gemini, "GEMINI_CLI_SYSTEM_SETTINGS_PATH");
        assert_eq!(gemini["mcpServers"]["kandev"]["httpUrl"], URL);
        let qwen = handoff(AgentKind::Qwen);
        assert!(qwen.args.contains(&"--exclude-tools".to_owned()), "{qwen:?}");
        named(AgentKind::Qwen, "QWEN_CODE_SYSTEM_SETTINGS_PATH");
        let opencode = named(AgentKind::OpenCode, "OPENCODE_CONFIG");
        assert_eq!(opencode["mcp"]["kandev"]["type"], "remote");
        assert_eq!(named(AgentKind::Kilo, "KILO_CONFIG"), opencode);
        assert!(mcp_handoff(AgentKind::Copilot, URL, "t", Path::new("/f")).is_none());
    }
}
