//! The mock agent's flags (`kandev mock-agent [flags]`) and the configuration they resolve to.

use std::path::PathBuf;
use std::time::Duration;

use crate::rpc::{RpcError, codes};

/// How a `session/load` or `session/new` should fail (`--fail-load <kind>`, `--fail-new <kind>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FailKind {
    /// JSON-RPC -32601: the method does not exist.
    MethodNotFound,
    /// ACP -32002 (resource not found): the session is unknown.
    UnknownSession,
    /// ACP -32000: authentication required.
    Auth,
    /// JSON-RPC -32603: internal error.
    Internal,
    /// Never answer the request.
    Timeout,
}

impl FailKind {
    /// The error answer for `method`, or `None` for [`FailKind::Timeout`] (no answer at all).
    pub fn error(self, method: &str) -> Option<RpcError> {
        let (code, message) = match self {
            FailKind::MethodNotFound => {
                (codes::METHOD_NOT_FOUND, format!("method not found: {method}"))
            }
            FailKind::UnknownSession => {
                (codes::RESOURCE_NOT_FOUND, "resource not found: unknown session".to_owned())
            }
            FailKind::Auth => (codes::AUTH_REQUIRED, "authentication required".to_owned()),
            FailKind::Internal => (codes::INTERNAL_ERROR, "internal error".to_owned()),
            FailKind::Timeout => return None,
        };
        Some(RpcError::new(code, message))
    }
}

/// The command-line flags, for `#[command(flatten)]` into the `kandev` CLI.
///
/// Convert with `MockConfig::from(args)`; [`MockConfig::from_args`] parses a plain argument list.
#[derive(Debug, Clone, Default, PartialEq, Eq, clap::Args)]
#[command(about = None, long_about = None)]
pub struct MockArgs {
    /// Directory where conversations and call counters persist across restarts
    #[arg(long, value_name = "PATH")]
    pub state_dir: Option<PathBuf>,
    /// Make every session/load fail this way
    #[arg(long, value_name = "KIND")]
    pub fail_load: Option<FailKind>,
    /// Make every session/new fail this way
    #[arg(long, value_name = "KIND")]
    pub fail_new: Option<FailKind>,
    /// Ignore session/cancel: running turns keep going
    #[arg(long)]
    pub hang_on_cancel: bool,
    /// Do not advertise loadSession (session/load answers method not found)
    #[arg(long)]
    pub no_load_session: bool,
    /// Delay before answering initialize, in milliseconds
    #[arg(long, value_name = "MS", default_value_t = 0)]
    pub startup_delay_ms: u64,
    /// Delay before answering a session/new that is not the first conversation of this process
    #[arg(long, value_name = "MS", default_value_t = 0)]
    pub reset_delay_ms: u64,
    /// Advertise stdio MCP servers only (`mcpCapabilities.http: false`)
    #[arg(long)]
    pub no_mcp_http: bool,
    /// Do not advertise image prompts (`promptCapabilities.image: false`)
    #[arg(long)]
    pub no_image: bool,
    /// Require `authenticate` (with an advertised method) on each connection before
    /// `session/prompt`; until then prompts answer -32000. Advertises a second auth method.
    #[arg(long)]
    pub require_auth: bool,
    /// Append every `mcpServers` list received to this file, one JSON line each (tests read
    /// the credentials an agent was given from it)
    #[arg(long, value_name = "PATH")]
    pub mcp_log: Option<PathBuf>,
}

/// Everything that shapes one mock agent run. `Default` is a well-behaved agent with no state dir.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MockConfig {
    /// Where conversations (`sessions/`) and the call log (`calls.log`) live; `None` keeps
    /// conversations in memory and records no calls.
    pub state_dir: Option<PathBuf>,
    /// How `session/load` fails, if it should.
    pub fail_load: Option<FailKind>,
    /// How `session/new` fails, if it should.
    pub fail_new: Option<FailKind>,
    /// Ignore `session/cancel`.
    pub hang_on_cancel: bool,
    /// Advertise (and serve) `session/load`.
    pub load_session: bool,
    /// Delay before answering `initialize`.
    pub startup_delay: Duration,
    /// Delay before answering a `session/new` after this process already opened a conversation
    /// (a context reset on a live process).
    pub reset_delay: Duration,
    /// Advertise `mcpCapabilities.http`.
    pub mcp_http: bool,
    /// Advertise `promptCapabilities.image`.
    pub image_prompts: bool,
    /// Prompts answer -32000 until `authenticate` succeeded on this connection.
    pub require_auth: bool,
    /// Where received `mcpServers` lists are appended.
    pub mcp_log: Option<PathBuf>,
}

impl Default for MockConfig {
    fn default() -> Self {
        MockConfig {
            state_dir: None,
            fail_load: None,
            fail_new: None,
            hang_on_cancel: false,
            load_session: true,
            startup_delay: Duration::ZERO,
            reset_delay: Duration::ZERO,
            mcp_http: true,
            image_prompts: true,
            require_auth: false,
            mcp_log: None,
        }
    }
}

impl From<MockArgs> for MockConfig {
    fn from(args: MockArgs) -> Self {
        MockConfig {
            state_dir: args.state_dir,
            fail_load: args.fail_load,
            fail_new: args.fail_new,
            hang_on_cancel: args.hang_on_cancel,
            load_session: !args.no_load_session,
            startup_delay: Duration::from_millis(args.startup_delay_ms),
            reset_delay: Duration::from_millis(args.reset_delay_ms),
            mcp_http: !args.no_mcp_http,
            image_prompts: !args.no_image,
            require_auth: args.require_auth,
            mcp_log: args.mcp_log,
        }
    }
}

/// The arguments could not be parsed. This includes `--help` and `--version`, which clap
/// reports as errors: `error.0.exit()` prints them (or the usage error) the way clap does.
#[derive(Debug)]
pub struct ArgsError(pub clap::Error);

impl From<clap::Error> for ArgsError {
    fn from(error: clap::Error) -> Self {
        ArgsError(error)
    }
}

impl std::fmt::Display for ArgsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let rendered = self.0.to_string();
        let first = rendered.lines().next().unwrap_or_default();
        let message = first.strip_prefix("error: ").unwrap_or(first);
        write!(f, "invalid mock-agent arguments: {message}")
    }
}

impl std::error::Error for ArgsError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.0)
    }
}

#[derive(clap::Parser)]
#[command(name = "mock-agent", no_binary_name = true)]
struct Cli {
    #[command(flatten)]
    args: MockArgs,
}

impl MockConfig {
    /// Parses flags such as `["--fail-load", "auth", "--state-dir", "/tmp/x"]` (no program name).
    pub fn from_args(args: &[String]) -> Result<MockConfig, ArgsError> {
        use clap::Parser as _;
        let cli = Cli::try_parse_from(args)?;
        Ok(cli.args.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(args: &[&str]) -> Vec<String> {
        args.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn no_flags_is_the_default_config() {
        assert_eq!(MockConfig::from_args(&[]).unwrap(), MockConfig::default());
    }

    #[test]
    fn every_flag_parses() {
        let config = MockConfig::from_args(&strings(&[
            "--state-dir",
            "/tmp/state",
            "--fail-load",
            "unknown-session",
            "--fail-new",
            "timeout",
            "--hang-on-cancel",
            "--no-load-session",
            "--startup-delay-ms",
            "250",
            "--reset-delay-ms",
            "1500",
            "--no-image",
            "--require-auth",
        ]))
        .unwrap();
        assert_eq!(
            config,
            MockConfig {
                state_dir: Some(PathBuf::from("/tmp/state")),
                fail_load: Some(FailKind::UnknownSession),
                fail_new: Some(FailKind::Timeout),
                hang_on_cancel: true,
                load_session: false,
                startup_delay: Duration::from_millis(250),
                reset_delay: Duration::from_millis(1500),
                mcp_http: true,
                image_prompts: false,
                require_auth: true,
                mcp_log: None,
            }
        );
    }

    #[test]
    fn fail_kinds_use_kebab_case_names() {
        for (name, kind) in [
            ("method-not-found", FailKind::MethodNotFound),
            ("unknown-session", FailKind::UnknownSession),
            ("auth", FailKind::Auth),
            ("internal", FailKind::Internal),
            ("timeout", FailKind::Timeout),
        ] {
            let config = MockConfig::from_args(&strings(&["--fail-load", name])).unwrap();
            assert_eq!(config.fail_load, Some(kind), "{name}");
        }
    }

    #[test]
    fn unknown_flag_and_bad_kind_are_errors() {
        assert!(MockConfig::from_args(&strings(&["--frobnicate"])).is_err());
        let error = MockConfig::from_args(&strings(&["--fail-new", "sometimes"])).unwrap_err();
        assert_eq!(
            error.to_string(),
            "invalid mock-agent arguments: invalid value 'sometimes' for '--fail-new <KIND>'"
        );
    }

    #[test]
    fn fail_kinds_map_to_acp_error_codes() {
        let code = |kind: FailKind| kind.error("session/load").map(|e| e.code);
        assert_eq!(code(FailKind::MethodNotFound), Some(-32601));
        assert_eq!(code(FailKind::UnknownSession), Some(-32002));
        assert_eq!(code(FailKind::Auth), Some(-32000));
        assert_eq!(code(FailKind::Internal), Some(-32603));
        assert_eq!(code(FailKind::Timeout), None);
    }
}
