//! Prompt interpretation: the default echo reply and the `#!mock` script language (pure, no IO).

use std::time::Duration;

/// The line that turns a prompt into a script; everything before it is ignored.
pub const SCRIPT_MARKER: &str = "#!mock";

/// How many chunks the echo reply is split into (at most).
const ECHO_CHUNKS: usize = 3;

/// What a prompt asks the mock agent to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Prompt {
    /// Not a script: reply `echo: <first line>` in a few chunks.
    Echo {
        /// The whole reply text; [`echo_chunks`] splits it.
        reply: String,
    },
    /// A script: run the directives in order.
    Script(Vec<Directive>),
}

/// One script line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Directive {
    /// `say <text>`: one `agent_message_chunk`.
    Say(String),
    /// `think <text>`: one `agent_thought_chunk`.
    Think(String),
    /// `stream <n> <bytes> [stamp] [every <ms>]`: `count` message chunks of `bytes` bytes
    /// each ([`stream_chunk_text`]); with `stamp`, each carries the time it was written
    /// ([`stamped_chunk_text`]), so a reader can measure write-to-receive latency; with
    /// `every`, chunk `i` is written `i × ms` after the first (a paced stream, like a model's
    /// tokens) instead of as fast as the pipe takes them.
    Stream {
        /// Number of chunks.
        count: u64,
        /// Size of each chunk's text in bytes.
        bytes: usize,
        /// Whether each chunk carries its write time.
        stamp: bool,
        /// The spacing of the chunks' writes, if paced.
        every: Option<Duration>,
    },
    /// `sleep <ms>`: wait; a `session/cancel` ends the turn early.
    Sleep(Duration),
    /// `tool <kind> <title>`: a `tool_call` (status `in_progress`).
    Tool {
        /// ACP tool kind (`read`, `edit`, `execute`, ...), passed through as given.
        kind: String,
        /// Tool call title.
        title: String,
    },
    /// `tool_done [failed]`: completes the last `tool` with a `tool_call_update`.
    ToolDone {
        /// `failed` instead of `completed`.
        failed: bool,
    },
    /// `plan <status>:<text>; ...`: a `plan` update.
    Plan(Vec<PlanEntry>),
    /// `ask_permission <title>`: `session/request_permission`; the outcome is said back, on a
    /// line of its own (`permission: allow_once` and a newline).
    AskPermission(String),
    /// `ask_permission_later <title>`: `session/request_permission`, and the script goes on
    /// while it waits for the answer (an agent that streams while a request is pending).
    AskPermissionLater(String),
    /// `await_permission`: waits for the answer of the oldest `ask_permission_later` not
    /// awaited yet and says it back as `ask_permission` does.
    AwaitPermission,
    /// `write <path> <text>`: write a file in the session cwd (`\n`, `\t`, `\\` escapes).
    Write {
        /// Relative to the session cwd (or absolute inside it).
        path: String,
        /// File content.
        content: String,
    },
    /// `read <path>`: read a file in the session cwd and say its content back.
    Read(String),
    /// `selection`: say the session's current mode, model and thought level as the agent
    /// holds them (`selection: mode=default model=mock-fast thought_level=medium`), so a
    /// test sees what a `session/set_config_option` really changed.
    Selection,
    /// `terminal [--cwd=<dir>] [--limit=<bytes>] <command line>`: `terminal/create` with
    /// `sh -c <command line>`, a `tool_call` showing the terminal, `terminal/wait_for_exit`,
    /// `terminal/output`, `terminal/release`; the output and exit code are said back.
    Terminal {
        /// The command line (run by `sh -c`).
        command: String,
        /// `cwd` of `terminal/create`, if given.
        cwd: Option<String>,
        /// `outputByteLimit` of `terminal/create`, if given.
        limit: Option<u64>,
    },
    /// `usage <used> <size> [<input tokens> <output tokens>]`: a `usage_update`; with the
    /// token counts, the prompt's answer also carries `usage` (`inputTokens`,
    /// `outputTokens`, `totalTokens`), as Claude and Codex send it.
    Usage {
        /// Tokens in context.
        used: u64,
        /// Context window size.
        size: u64,
        /// Input and output tokens of the turn, for the answer.
        tokens: Option<(u64, u64)>,
    },
    /// `commands <name>:<description>[:<input hint>]; ...`: an `available_commands_update`
    /// with these commands (none when empty).
    Commands(Vec<(String, String, Option<String>)>),
    /// `stop <reason>`: end the turn with this stop reason.
    Stop(String),
    /// `error <code> <message>`: answer the prompt with a JSON-RPC error.
    Error {
        /// Error code.
        code: i64,
        /// Error message.
        message: String,
    },
    /// `crash [exit code]`: end the process (the run) with this code (default 1).
    Crash(i32),
    /// `hang`: never answer the prompt, ignoring cancel.
    Hang,
    /// `garbage`: one non-JSON line on stdout.
    Garbage,
    /// `bigline <bytes>`: one valid JSON line whose chunk text has this many bytes.
    BigLine(usize),
    /// `mcp <server> <tool> <json>`: call a tool of an MCP server the client handed over in
    /// `mcpServers`; the result is said back as one line (`mcp <tool> ok: <json>`, `mcp <tool>
    /// error: <json>` for a tool error, `mcp <tool> failed: <why>` when no result came).
    Mcp {
        /// The server's `name` in `mcpServers`.
        server: String,
        /// The tool.
        tool: String,
        /// Its arguments (a JSON value; `{}` when left out).
        arguments: serde_json::Value,
    },
}

/// One entry of a `plan` directive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanEntry {
    /// `pending`, `in_progress` or `completed`.
    pub status: String,
    /// What the step is.
    pub content: String,
}

/// A script line that does not parse; the prompt is answered with -32602 and this message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScriptError {
    /// The first word is not a directive.
    #[error("script line {line}: unknown directive `{name}`")]
    UnknownDirective {
        /// 1-based line number in the prompt text.
        line: usize,
        /// The word found.
        name: String,
    },
    /// A required argument is missing.
    #[error("script line {line}: `{directive}` needs {what}")]
    MissingArgument {
        /// 1-based line number in the prompt text.
        line: usize,
        /// The directive.
        directive: &'static str,
        /// What is missing.
        what: &'static str,
    },
    /// An argument is not what the directive accepts.
    #[error("script line {line}: `{directive}` got invalid argument `{value}`")]
    InvalidArgument {
        /// 1-based line number in the prompt text.
        line: usize,
        /// The directive.
        directive: &'static str,
        /// The argument found.
        value: String,
    },
}

/// Interprets a prompt's text: a script if a line is exactly `#!mock` (trimmed), else echo.
pub fn parse_prompt(text: &str) -> Result<Prompt, ScriptError> {
    let mut lines = text.lines().enumerate();
    let is_script = lines.by_ref().any(|(_, line)| line.trim() == SCRIPT_MARKER);
    if !is_script {
        let first = text.lines().map(str::trim).find(|line| !line.is_empty()).unwrap_or("");
        return Ok(Prompt::Echo { reply: format!("echo: {first}") });
    }
    let mut directives = Vec::new();
    for (index, line) in lines {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        directives.push(parse_directive(index + 1, line)?);
    }
    Ok(Prompt::Script(directives))
}

fn split_word(text: &str) -> (&str, &str) {
    match text.split_once(char::is_whitespace) {
        Some((word, rest)) => (word, rest.trim()),
        None => (text, ""),
    }
}

fn parse_directive(line: usize, text: &str) -> Result<Directive, ScriptError> {
    let (name, rest) = split_word(text);
    let missing = |directive: &'static str, what: &'static str| ScriptError::MissingArgument {
        line,
        directive,
        what,
    };
    let number = |directive: &'static str, what: &'static str, value: &str| {
        if value.is_empty() {
            return Err(missing(directive, what));
        }
        value.parse::<u64>().map_err(|_| ScriptError::InvalidArgument {
            line,
            directive,
            value: value.to_owned(),
        })
    };
    let size = |directive: &'static str, what: &'static str, value: &str| {
        let n = number(directive, what, value)?;
        usize::try_from(n).map_err(|_| ScriptError::InvalidArgument {
            line,
            directive,
            value: value.to_owned(),
        })
    };
    let directive = match name {
        "say" => Directive::Say(rest.to_owned()),
        "think" => Directive::Think(rest.to_owned()),
        "stream" => {
            let (count, rest) = split_word(rest);
            let (bytes, mut options) = split_word(rest);
            let (mut stamp, mut every) = (false, None);
            while !options.is_empty() {
                let (option, rest) = split_word(options);
                options = rest;
                match option {
                    "stamp" if !stamp => stamp = true,
                    "every" if every.is_none() => {
                        let (ms, rest) = split_word(options);
                        options = rest;
                        every = Some(Duration::from_millis(number(
                            "stream",
                            "milliseconds after `every`",
                            ms,
                        )?));
                    }
                    other => {
                        return Err(ScriptError::InvalidArgument {
                            line,
                            directive: "stream",
                            value: other.to_owned(),
                        });
                    }
                }
            }
            let bytes = size("stream", "a chunk size in bytes", bytes)?;
            if stamp && bytes < STAMPED_MIN_BYTES {
                return Err(ScriptError::InvalidArgument {
                    line,
                    directive: "stream",
                    value: format!(
                        "{bytes} (stamped chunks need at least {STAMPED_MIN_BYTES} bytes)"
                    ),
                });
            }
            let count = number("stream", "a chunk count", count)?;
            Directive::Stream { count, bytes, stamp, every }
        }
        "sleep" => Directive::Sleep(Duration::from_millis(number("sleep", "milliseconds", rest)?)),
        "tool" => {
            let (kind, title) = split_word(rest);
            if kind.is_empty() {
                return Err(missing("tool", "a kind"));
            }
            let title = if title.is_empty() { kind } else { title };
            Directive::Tool { kind: kind.to_owned(), title: title.to_owned() }
        }
        "tool_done" => match rest {
            "" | "completed" => Directive::ToolDone { failed: false },
            "failed" => Directive::ToolDone { failed: true },
            other => {
                return Err(ScriptError::InvalidArgument {
                    line,
                    directive: "tool_done",
                    value: other.to_owned(),
                });
            }
        },
        "plan" => Directive::Plan(parse_plan(rest)),
        "ask_permission" => {
            let title = if rest.is_empty() { "permission" } else { rest };
            Directive::AskPermission(title.to_owned())
        }
        "ask_permission_later" => {
            let title = if rest.is_empty() { "permission" } else { rest };
            Directive::AskPermissionLater(title.to_owned())
        }
        "await_permission" => Directive::AwaitPermission,
        "write" => {
            let (path, content) = split_word(rest);
            if path.is_empty() {
                return Err(missing("write", "a path"));
            }
            Directive::Write { path: path.to_owned(), content: unescape(content) }
        }
        "selection" => Directive::Selection,
        "read" => {
            if rest.is_empty() {
                return Err(missing("read", "a path"));
            }
            Directive::Read(rest.to_owned())
        }
        "terminal" => {
            let (mut cwd, mut limit, mut command) = (None, None, rest);
            loop {
                let (word, after) = split_word(command);
                if let Some(dir) = word.strip_prefix("--cwd=") {
                    cwd = Some(dir.to_owned());
                } else if let Some(bytes) = word.strip_prefix("--limit=") {
                    limit = Some(number("terminal", "a byte limit", bytes)?);
                } else {
                    break;
                }
                command = after;
            }
            if command.is_empty() {
                return Err(missing("terminal", "a command line"));
            }
            Directive::Terminal { command: command.to_owned(), cwd, limit }
        }
        "usage" => {
            let (used, rest) = split_word(rest);
            let (size, rest) = split_word(rest);
            let (input, output) = split_word(rest);
            let tokens = if input.is_empty() {
                None
            } else {
                Some((
                    number("usage", "the input token count", input)?,
                    number("usage", "the output token count", output)?,
                ))
            };
            Directive::Usage {
                used: number("usage", "the used token count", used)?,
                size: number("usage", "the context size", size)?,
                tokens,
            }
        }
        "commands" => Directive::Commands(
            rest.split(';')
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .map(|c| {
                    let mut parts = c.splitn(3, ':').map(str::trim);
                    let name = parts.next().unwrap_or_default().to_owned();
                    let description = parts.next().unwrap_or_default().to_owned();
                    (name, description, parts.next().map(str::to_owned))
                })
                .collect(),
        ),
        "stop" => {
            if rest.is_empty() {
                return Err(missing("stop", "a stop reason"));
            }
            Directive::Stop(rest.to_owned())
        }
        "error" => {
            let (code, message) = split_word(rest);
            if code.is_empty() {
                return Err(missing("error", "a code"));
            }
            let code = code.parse::<i64>().map_err(|_| ScriptError::InvalidArgument {
                line,
                directive: "error",
                value: code.to_owned(),
            })?;
            let message = if message.is_empty() { "scripted error" } else { message };
            Directive::Error { code, message: message.to_owned() }
        }
        "crash" => {
            let code = if rest.is_empty() {
                1
            } else {
                rest.parse::<i32>().map_err(|_| ScriptError::InvalidArgument {
                    line,
                    directive: "crash",
                    value: rest.to_owned(),
                })?
            };
            Directive::Crash(code)
        }
        "hang" => Directive::Hang,
        "mcp" => {
            let (server, rest) = split_word(rest);
            let (tool, arguments) = split_word(rest);
            if server.is_empty() || tool.is_empty() {
                return Err(ScriptError::MissingArgument {
                    line,
                    directive: "mcp",
                    what: "a server name, a tool name and JSON arguments",
                });
            }
            let arguments = if arguments.trim().is_empty() { "{}" } else { arguments.trim() };
            let Ok(arguments) = serde_json::from_str::<serde_json::Value>(arguments) else {
                return Err(ScriptError::InvalidArgument {
                    line,
                    directive: "mcp",
                    value: arguments.to_owned(),
                });
            };
            Directive::Mcp { server: server.to_owned(), tool: tool.to_owned(), arguments }
        }
        "garbage" => Directive::Garbage,
        "bigline" => Directive::BigLine(size("bigline", "a size in bytes", rest)?),
        other => return Err(ScriptError::UnknownDirective { line, name: other.to_owned() }),
    };
    Ok(directive)
}

const PLAN_STATUSES: [&str; 3] = ["pending", "in_progress", "completed"];

fn parse_plan(text: &str) -> Vec<PlanEntry> {
    text.split(';')
        .map(str::trim)
        .filter(|entry| !entry.is_empty())
        .map(|entry| match entry.split_once(':') {
            Some((status, content)) if PLAN_STATUSES.contains(&status.trim()) => {
                PlanEntry { status: status.trim().to_owned(), content: content.trim().to_owned() }
            }
            _ => PlanEntry { status: "pending".to_owned(), content: entry.to_owned() },
        })
        .collect()
}

fn unescape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('\\') => out.push('\\'),
            Some(other) => {
                out.push('\\');
                out.push(other);
            }
            None => out.push('\\'),
        }
    }
    out
}

/// Splits the echo reply into at most three non-empty chunks (on char boundaries) whose
/// concatenation is the reply.
pub fn echo_chunks(reply: &str) -> Vec<&str> {
    let chars = reply.chars().count();
    let per_chunk = chars.div_ceil(ECHO_CHUNKS).max(1);
    let mut chunks = Vec::with_capacity(ECHO_CHUNKS);
    let mut start = 0;
    for (n, (offset, _)) in reply.char_indices().enumerate() {
        if n > 0 && n % per_chunk == 0 {
            chunks.push(&reply[start..offset]);
            start = offset;
        }
    }
    if start < reply.len() {
        chunks.push(&reply[start..]);
    }
    chunks
}

/// The text of chunk `index` (0-based) of a `stream` directive: the index zero-padded to six
/// digits, a `|`, then a letter (`a` + index mod 26) repeated up to `bytes` bytes (truncated
/// when `bytes` is smaller than the prefix). Readers can check order and completeness.
/// The smallest stamped chunk: `000003|` then 16 digits of microseconds and `|`.
pub const STAMPED_MIN_BYTES: usize = 24;

/// Where a stamped chunk's digits of microseconds start.
pub const STAMP_OFFSET: usize = 7;

/// How many digits a stamp has.
pub const STAMP_DIGITS: usize = 16;

/// A `stream ... stamp` chunk: `{index:06}|{unix micros:016}|` then the fill of
/// [`stream_chunk_text`], `bytes` long in all (at least [`STAMPED_MIN_BYTES`]). The agent
/// writes it with the time its line goes into the pipe in place of `unix_micros`
/// (`Outgoing::Stamped`); a `session/load` replay carries the time it was made.
pub fn stamped_chunk_text(index: u64, bytes: usize, unix_micros: u64) -> String {
    let mut text = format!("{index:06}|{unix_micros:016}|");
    let fill = char::from(b'a' + (index % 26) as u8);
    text.extend(std::iter::repeat_n(fill, bytes.saturating_sub(text.len())));
    text
}

/// Now, in Unix microseconds (a stamp).
pub fn unix_micros() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// The write time of a [`stamped_chunk_text`] chunk, in Unix microseconds.
pub fn chunk_stamp(chunk: &str) -> Option<u64> {
    chunk.get(STAMP_OFFSET..STAMP_OFFSET + STAMP_DIGITS)?.parse().ok()
}

pub fn stream_chunk_text(index: u64, bytes: usize) -> String {
    let mut text = format!("{index:06}|");
    if text.len() >= bytes {
        text.truncate(bytes);
        return text;
    }
    let fill = char::from(b'a' + (index % 26) as u8);
    text.extend(std::iter::repeat_n(fill, bytes - text.len()));
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn script(text: &str) -> Vec<Directive> {
        match parse_prompt(text).unwrap() {
            Prompt::Script(directives) => directives,
            Prompt::Echo { reply } => panic!("expected a script, got echo {reply}"),
        }
    }

    #[test]
    fn plain_prompt_echoes_its_first_non_empty_line() {
        assert_eq!(
            parse_prompt("\n  hello world  \nsecond").unwrap(),
            Prompt::Echo { reply: "echo: hello world".into() }
        );
        assert_eq!(parse_prompt("").unwrap(), Prompt::Echo { reply: "echo: ".into() });
    }

    #[test]
    fn text_before_marker_comments_and_blank_lines_are_ignored() {
        let text = "Step prompt: do the task\nsay not a directive\n  #!mock  \n\n# comment\nsay hi there\nthink  hmm \n";
        assert_eq!(
            script(text),
            vec![Directive::Say("hi there".into()), Directive::Think("hmm".into())]
        );
    }

    #[test]
    fn every_directive_parses() {
        let text = "#!mock
stream 2000 100
sleep 250
tool execute Run the tests
tool_done
tool_done failed
plan completed:Read code; in_progress: Fix bug ; Write tests
ask_permission Delete the repo
ask_permission_later Deploy
await_permission
write notes/a.txt line one\\nline two
read notes/a.txt
selection
terminal echo hi; exit 3
terminal --cwd=sub --limit=8 ls -l
usage 1200 200000
stop max_tokens
error -32000 please log in
crash
crash 3
hang
garbage
bigline 1048576";
        assert_eq!(
            script(text),
            vec![
                Directive::Stream { count: 2000, bytes: 100, stamp: false, every: None },
                Directive::Sleep(Duration::from_millis(250)),
                Directive::Tool { kind: "execute".into(), title: "Run the tests".into() },
                Directive::ToolDone { failed: false },
                Directive::ToolDone { failed: true },
                Directive::Plan(vec![
                    PlanEntry { status: "completed".into(), content: "Read code".into() },
                    PlanEntry { status: "in_progress".into(), content: "Fix bug".into() },
                    PlanEntry { status: "pending".into(), content: "Write tests".into() },
                ]),
                Directive::AskPermission("Delete the repo".into()),
                Directive::AskPermissionLater("Deploy".into()),
                Directive::AwaitPermission,
                Directive::Write {
                    path: "notes/a.txt".into(),
                    content: "line one\nline two".into()
                },
                Directive::Read("notes/a.txt".into()),
                Directive::Selection,
                Directive::Terminal { command: "echo hi; exit 3".into(), cwd: None, limit: None },
                Directive::Terminal {
                    command: "ls -l".into(),
                    cwd: Some("sub".into()),
                    limit: Some(8)
                },
                Directive::Usage { used: 1200, size: 200000, tokens: None },
                Directive::Stop("max_tokens".into()),
                Directive::Error { code: -32000, message: "please log in".into() },
                Directive::Crash(1),
                Directive::Crash(3),
                Directive::Hang,
                Directive::Garbage,
                Directive::BigLine(1048576),
            ]
        );
    }

    #[test]
    fn bad_lines_name_their_line_number() {
        assert_eq!(
            parse_prompt("intro\n#!mock\nsay ok\nfly away").unwrap_err(),
            ScriptError::UnknownDirective { line: 4, name: "fly".into() }
        );
        assert_eq!(
            parse_prompt("#!mock\nsleep soon").unwrap_err(),
            ScriptError::InvalidArgument { line: 2, directive: "sleep", value: "soon".into() }
        );
        assert_eq!(
            parse_prompt("#!mock\nstream 5").unwrap_err(),
            ScriptError::MissingArgument {
                line: 2,
                directive: "stream",
                what: "a chunk size in bytes"
            }
        );
        assert_eq!(
            parse_prompt("#!mock\nstream 5").unwrap_err().to_string(),
            "script line 2: `stream` needs a chunk size in bytes"
        );
    }

    #[test]
    fn i15_stamped_chunks_keep_their_size_and_carry_their_write_time() {
        assert_eq!(
            script("#!mock\nstream 3 40 stamp"),
            vec![Directive::Stream { count: 3, bytes: 40, stamp: true, every: None }]
        );
        let chunk = stamped_chunk_text(7, 40, 1_733_030_000_123_456);
        assert_eq!(chunk, "000007|1733030000123456|hhhhhhhhhhhhhhhh");
        assert_eq!(chunk.len(), 40);
        assert_eq!(chunk_stamp(&chunk), Some(1_733_030_000_123_456));
        assert!(parse_prompt("#!mock\nstream 3 10 stamp").is_err(), "too small for a stamp");
        assert!(parse_prompt("#!mock\nstream 3 40 stomp").is_err());
    }

    #[test]
    fn i15_a1_paced_stream_takes_every_in_milliseconds_in_any_option_order() {
        let paced = Directive::Stream {
            count: 3,
            bytes: 40,
            stamp: true,
            every: Some(Duration::from_millis(2)),
        };
        assert_eq!(script("#!mock\nstream 3 40 stamp every 2"), vec![paced.clone()]);
        assert_eq!(script("#!mock\nstream 3 40 every 2 stamp"), vec![paced]);
        assert_eq!(
            parse_prompt("#!mock\nstream 3 40 every").unwrap_err().to_string(),
            "script line 2: `stream` needs milliseconds after `every`"
        );
        assert!(parse_prompt("#!mock\nstream 3 40 every soon").is_err());
        assert!(parse_prompt("#!mock\nstream 3 40 stamp stamp").is_err(), "an option twice");
    }

    #[test]
    fn i18_usage_with_token_counts_and_commands_directives() {
        assert_eq!(
            script("#!mock\nusage 10 100 7 3\ncommands a:Do a:hint; b:Do b\ncommands"),
            vec![
                Directive::Usage { used: 10, size: 100, tokens: Some((7, 3)) },
                Directive::Commands(vec![
                    ("a".into(), "Do a".into(), Some("hint".into())),
                    ("b".into(), "Do b".into(), None),
                ]),
                Directive::Commands(vec![]),
            ]
        );
        assert!(parse_prompt("#!mock\nusage 10 100 7").is_err(), "output tokens missing");
    }

    #[test]
    fn echo_chunks_cover_the_reply_in_at_most_three_pieces() {
        for reply in ["echo: ", "echo: hello world", "echo: ünïcödé ✓ text", "e"] {
            let chunks = echo_chunks(reply);
            assert!(!chunks.is_empty() && chunks.len() <= 3, "{reply}: {chunks:?}");
            assert!(chunks.iter().all(|c| !c.is_empty()));
            assert_eq!(chunks.concat(), reply);
        }
        assert_eq!(echo_chunks("echo: hello"), vec!["echo", ": he", "llo"]);
    }

    #[test]
    fn stream_chunks_have_the_requested_size_and_encode_their_index() {
        assert_eq!(stream_chunk_text(3, 12), "000003|ddddd");
        assert_eq!(stream_chunk_text(3, 12).len(), 12);
        assert_eq!(stream_chunk_text(42, 4), "0000");
        assert_eq!(stream_chunk_text(1999, 100).len(), 100);
        assert!(stream_chunk_text(1999, 100).starts_with("001999|"));
    }
}
