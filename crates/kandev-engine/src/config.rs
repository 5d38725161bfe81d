//! The engine's settings: where it keeps task folders, how it runs the built-in mock agent,
//! and the lifecycle's durations (defaults from docs/lifecycle.md; tests shrink them).

use std::path::PathBuf;
use std::time::Duration;

/// How the built-in mock agent runs as a process: `program`, then `args` (which select the
/// mock agent: `mock-agent` for `kandev mock-agent`), then `flags` (the mock agent's own,
/// such as `--state-dir <dir>`). A session whose profile is the built-in Mock profile (kind
/// `mock`, no command of its own) runs it; its [`crate::LaunchSpec::builtin_mock`] carries
/// the flags, so [`crate::BuiltinMockLauncher`] can run the same agent in-process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentCommand {
    pub program: String,
    pub args: Vec<String>,
    pub flags: Vec<String>,
}

/// Default of how long a repository's setup script may run before it is killed
/// (`EngineConfig::setup_timeout`, `kandev serve --setup-timeout`).
pub const SETUP_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// Default of how often open pull requests are polled (`EngineConfig::pr_poll_interval`,
/// `kandev serve --pr-poll-interval`): at most once a minute per pull request.
pub const PR_POLL_INTERVAL: Duration = Duration::from_secs(60);
/// The default time between two polls of the intake sources (issue 47).
pub const INTAKE_POLL_INTERVAL: Duration = Duration::from_secs(120);

/// Default number of a session's newest turns whose checkpoints are kept (issue 48;
/// `kandev serve --checkpoint-turns`).
pub const CHECKPOINT_TURNS: usize = 100;
/// Default age beyond which a turn's checkpoints are collected (`--checkpoint-age`).
pub const CHECKPOINT_AGE: Duration = Duration::from_secs(30 * 24 * 3600);

/// Default per-home quota of stored attachments (`kandev serve --attachment-quota`).
pub const ATTACHMENT_QUOTA: u64 = 1 << 30;

/// The bounds of attachments (issue 38, item 5; docs/api.md "Attachments").
#[derive(Debug, Clone)]
pub struct AttachmentSettings {
    /// Most bytes `$KANDEV_HOME/attachments/` may hold; an upload past it is refused.
    pub quota: u64,
    /// Uploads streamed to disk at once; others wait for a slot.
    pub at_once: usize,
    /// How long an upload waits for a slot before it is answered `BUSY`.
    pub slot_wait: Duration,
    /// An upload no stored message or queued prompt names is removed once it is this old.
    pub keep_unreferenced: Duration,
    /// How often unreferenced uploads are looked for.
    pub sweep_every: Duration,
}

impl Default for AttachmentSettings {
    fn default() -> Self {
        AttachmentSettings {
            quota: ATTACHMENT_QUOTA,
            at_once: 8,
            slot_wait: Duration::from_secs(30),
            keep_unreferenced: Duration::from_secs(24 * 3600),
            sweep_every: Duration::from_secs(3600),
        }
    }
}

/// Settings of the engine. Durations are the lifecycle defaults; tests shrink them.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// `$KANDEV_HOME`: tasks without a repository work in `<home>/tasks/<task-id>`.
    pub home: PathBuf,
    pub mock_agent: AgentCommand,
    /// Grace between TERM and KILL when stopping an agent (rule 16).
    pub stop_grace: Duration,
    /// How long a cancelled turn may take before the engine ends it (rule 13).
    pub cancel_timeout: Duration,
    /// Timeout of protocol calls other than prompts (initialize, session/new, ...).
    pub call_timeout: Duration,
    /// Most queued prompts per session; 0 = unlimited (rule 8).
    pub queue_cap: usize,
    /// Quiet time before a stall notice, and before a turn with no output fails (rule 40).
    pub stall_after: Duration,
    /// Bound of a live context reset with the agent (rule 25).
    pub reset_timeout: Duration,
    /// Longest a repository's setup script may run before it is killed.
    pub setup_timeout: Duration,
    /// An agent idle this long (no turn, reset or command) is stopped; the next message
    /// resumes it. Zero: never.
    pub idle_timeout: Duration,
    /// How agents without `mcpCapabilities.http` reach Kandev's MCP server: this program
    /// and args, then `mcp-bridge --url <url>` (`kandev mcp-bridge`); `None` gives such
    /// agents no Kandev server. `flags` is unused.
    pub mcp_bridge: Option<AgentCommand>,
    /// Ports dev servers get (`PORT`), the first free one (default 41000-41999).
    pub dev_server_ports: std::ops::RangeInclusive<u16>,
    /// How often the forge is asked about each open pull request (default once a minute;
    /// zero: never, only `task.pr.get` refreshes).
    pub pr_poll_interval: Duration,
    /// How often every enabled issues source is polled (default every 2 minutes; zero:
    /// never, only `intake.source.poll` and webhooks take issues in).
    pub intake_poll_interval: Duration,
    /// Checkpoints of a session's worktrees are kept for its newest `checkpoint_turns` turns
    /// (0: no checkpoints are taken) and at most `checkpoint_age` (zero: no age limit).
    pub checkpoint_turns: usize,
    pub checkpoint_age: Duration,
    /// Wait after a notification delivery's first failure, doubled after each next one
    /// (default 10 s; tests shrink it).
    pub notification_backoff: Duration,
    /// Whether notifications may go to addresses that are not public (loopback, private,
    /// link-local, ...; `kandev serve --allow-private-notification-targets`). Off by default:
    /// a channel URL must not make the server probe itself or its networks.
    pub allow_private_notification_targets: bool,
    /// Attachment quota, uploads at once, and the sweep of unreferenced uploads.
    pub attachments: AttachmentSettings,
    /// The key secrets are sealed with when it comes from `KANDEV_SECRET_KEY`; `None`: the
    /// file `<home>/secret.key` (made on the first start).
    pub secret_key: Option<crate::sealing::SecretKey>,
}

impl EngineConfig {
    pub fn new(home: PathBuf, mock_agent: AgentCommand) -> Self {
        EngineConfig {
            home,
            mock_agent,
            stop_grace: Duration::from_secs(5),
            cancel_timeout: Duration::from_secs(10),
            call_timeout: Duration::from_secs(60),
            queue_cap: 10,
            stall_after: Duration::from_secs(5 * 60),
            reset_timeout: Duration::from_secs(10),
            setup_timeout: SETUP_TIMEOUT,
            idle_timeout: Duration::from_secs(30 * 60),
            mcp_bridge: None,
            dev_server_ports: 41000..=41999,
            pr_poll_interval: PR_POLL_INTERVAL,
            intake_poll_interval: INTAKE_POLL_INTERVAL,
            checkpoint_turns: CHECKPOINT_TURNS,
            checkpoint_age: CHECKPOINT_AGE,
            notification_backoff: Duration::from_secs(10),
            allow_private_notification_targets: false,
            attachments: AttachmentSettings::default(),
            secret_key: None,
        }
    }
}
