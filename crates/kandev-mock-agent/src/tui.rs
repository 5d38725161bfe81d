//! `kandev fake-tui`: a scripted stand-in for an agent's own terminal UI (issue 52, scope 2),
//! for tests of terminal-UI sessions and for recording the screens their state detection is
//! tested on (`kandev-runtime/tests/tui_screens/fake/`).
//!
//! It draws what real agents' terminal UIs draw, as a full-screen redraw per state:
//! - waiting for input: a header "Fake TUI agent", the conversation so far, a rule and a
//!   prompt line `> ` with the cursor after it;
//! - working: on a line of input, a spinner line `⠋ Working… (esc to interrupt)` animated for
//!   `--work-ms`, then `● echo: <line>` and the prompt again;
//! - a permission question: an input line containing `#permission` shows "Allow fake tool to
//!   write notes.txt?" with `1. Yes` / `2. No` and waits for `1` or `2` (and Enter), then
//!   `● allowed` / `● denied` and the prompt;
//! - `#mcp create_task <title>` (with `--mcp-config <file>`, `{"url": …, "token": …}`) calls
//!   the MCP server's `create_task` tool with that title, showing the spinner meanwhile, then
//!   `● created: <the tool's text>` (or `● mcp error: …`).
//!
//! Input is read a line at a time, as a terminal in its ordinary (canonical) mode delivers
//! it: a driver writing `text\r` into a PTY gets `text\n` here (the line discipline's
//! `ICRNL`), and the terminal's echo shows the typed text after the prompt. The end of input
//! (Ctrl-D) ends the program. Escape does not interrupt: the marker is drawn because real
//! agents draw it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWrite, AsyncWriteExt};

use crate::mcp::{McpServer, call_tool};

/// The header line of every screen.
pub const HEADER: &str = "Fake TUI agent";
/// What the working line says after its spinner frame.
pub const WORKING: &str = "Working… (esc to interrupt)";
/// The permission question.
pub const QUESTION: &str = "Allow fake tool to write notes.txt?";
/// The input line's prefix.
pub const PROMPT: &str = "> ";

/// The spinner's frames, drawn in turn every [`FRAME`].
const SPINNER: [char; 10] = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];
const FRAME: Duration = Duration::from_millis(80);
/// How many lines of the conversation a screen shows (the newest).
const HISTORY: usize = 24;
const RULE: &str = "────────────────────────────────────────";

/// `kandev fake-tui` flags.
#[derive(Debug, Clone, PartialEq, Eq, clap::Args)]
pub struct TuiArgs {
    /// How long the spinner runs before a reply, in milliseconds.
    #[arg(long, default_value_t = 300)]
    pub work_ms: u64,
    /// A JSON file `{"url": "…", "token": "…"}`: the MCP server `#mcp create_task <title>`
    /// calls, with the token as a bearer token.
    #[arg(long)]
    pub mcp_config: Option<PathBuf>,
}

impl Default for TuiArgs {
    fn default() -> Self {
        TuiArgs { work_ms: 300, mcp_config: None }
    }
}

/// Why the fake terminal UI stopped.
#[derive(Debug, thiserror::Error)]
pub enum TuiError {
    /// Reading the terminal failed.
    #[error("reading input failed: {0}")]
    Read(#[source] std::io::Error),
    /// Drawing on the terminal failed.
    #[error("writing output failed: {0}")]
    Write(#[source] std::io::Error),
}

/// What an input line asks for.
#[derive(Debug, PartialEq, Eq)]
enum Request<'a> {
    Echo(&'a str),
    Permission,
    CreateTask(&'a str),
}

fn request(line: &str) -> Request<'_> {
    if line.contains("#permission") {
        return Request::Permission;
    }
    match line.trim().strip_prefix("#mcp create_task ") {
        Some(title) => Request::CreateTask(title.trim()),
        None => Request::Echo(line),
    }
}

/// The screen: the conversation so far, drawn above whatever the current state shows.
struct Screen<W> {
    out: W,
    history: Vec<String>,
}

impl<W: AsyncWrite + Unpin> Screen<W> {
    async fn write(&mut self, text: &str) -> Result<(), TuiError> {
        self.out.write_all(text.as_bytes()).await.map_err(TuiError::Write)?;
        self.out.flush().await.map_err(TuiError::Write)
    }

    /// Clears the screen and draws the header, the conversation and `bottom` (written as
    /// given: the cursor stays where it ends).
    async fn draw(&mut self, bottom: &str) -> Result<(), TuiError> {
        let mut text = format!("\x1b[H\x1b[2J\x1b[1m{HEADER}\x1b[0m\r\n\r\n");
        let skip = self.history.len().saturating_sub(HISTORY);
        for line in &self.history[skip..] {
            text.push_str(line);
            text.push_str("\r\n");
        }
        text.push_str(bottom);
        self.write(&text).await
    }

    async fn prompt(&mut self) -> Result<(), TuiError> {
        let bottom = format!(
            "\x1b[2m{RULE}\r\n#permission asks, #mcp create_task <title>, Ctrl-D quits\x1b[0m\r\n{PROMPT}"
        );
        self.draw(&bottom).await
    }

    async fn spinner(&mut self, frame: usize) -> Result<(), TuiError> {
        let glyph = SPINNER[frame % SPINNER.len()];
        self.write(&format!("\r\x1b[2K\x1b[33m{glyph}\x1b[0m {WORKING}")).await
    }

    /// Draws the working screen and animates its spinner until `work` is done.
    async fn working<T>(&mut self, work: impl Future<Output = T>) -> Result<T, TuiError> {
        self.draw("").await?;
        tokio::pin!(work);
        let mut frame = 0;
        loop {
            self.spinner(frame).await?;
            tokio::select! {
                value = &mut work => return Ok(value),
                () = tokio::time::sleep(FRAME) => frame += 1,
            }
        }
    }
}

/// Runs the fake terminal UI on the process's terminal until the end of input; the exit code.
pub async fn run_terminal(args: TuiArgs) -> i32 {
    let input = tokio::io::BufReader::new(tokio::io::stdin());
    match run(args, input, tokio::io::stdout()).await {
        Ok(()) => 0,
        Err(error) => {
            eprintln!("error: {error}");
            1
        }
    }
}

/// Runs the fake terminal UI on `input` and `output` until the end of input.
pub async fn run<R, W>(args: TuiArgs, mut input: R, output: W) -> Result<(), TuiError>
where
    R: AsyncBufRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut screen = Screen { out: output, history: Vec::new() };
    let work = Duration::from_millis(args.work_ms);
    screen.prompt().await?;
    while let Some(line) = read_line(&mut input).await? {
        screen.history.push(format!("{PROMPT}{line}"));
        match request(&line) {
            Request::Echo(text) => {
                screen.working(tokio::time::sleep(work)).await?;
                screen.history.push(format!("● echo: {text}"));
            }
            Request::Permission => {
                let Some(allowed) = ask_permission(&mut screen, &mut input).await? else {
                    break;
                };
                screen.history.push(if allowed { "● allowed" } else { "● denied" }.to_owned());
            }
            Request::CreateTask(title) => {
                let answer = match &args.mcp_config {
                    Some(path) => screen.working(create_task(path, title)).await?,
                    None => Err("no MCP config (--mcp-config)".to_owned()),
                };
                screen.history.push(match answer {
                    Ok(text) => format!("● created: {text}"),
                    Err(error) => format!("● mcp error: {error}"),
                });
            }
        }
        screen.prompt().await?;
    }
    screen.write("\r\n").await
}

/// Shows the permission question until `1` or `2` is entered: whether it was allowed, or
/// `None` at the end of input.
async fn ask_permission<R, W>(
    screen: &mut Screen<W>,
    input: &mut R,
) -> Result<Option<bool>, TuiError>
where
    R: AsyncBufRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let question = format!(
        "\x1b[1m{QUESTION}\x1b[0m\r\n\r\n  \x1b[36m1. Yes\x1b[0m\r\n  2. No\r\n\r\nEnter 1 or 2: "
    );
    loop {
        screen.draw(&question).await?;
        match read_line(input).await?.as_deref().map(str::trim) {
            None => return Ok(None),
            Some("1") => return Ok(Some(true)),
            Some("2") => return Ok(Some(false)),
            Some(_) => {}
        }
    }
}

/// The next line without its line end, or `None` at the end of input.
async fn read_line<R: AsyncBufRead + Unpin>(input: &mut R) -> Result<Option<String>, TuiError> {
    let mut bytes = Vec::new();
    if input.read_until(b'\n', &mut bytes).await.map_err(TuiError::Read)? == 0 {
        return Ok(None);
    }
    let line = String::from_utf8_lossy(&bytes);
    Ok(Some(line.trim_end_matches(['\n', '\r']).to_owned()))
}

/// Calls `create_task` with `title` on the MCP server `config` names: the result's text.
async fn create_task(config: &Path, title: &str) -> Result<String, String> {
    let text = tokio::fs::read_to_string(config)
        .await
        .map_err(|e| format!("cannot read {}: {e}", config.display()))?;
    let server = mcp_server(&text).map_err(|e| format!("{}: {e}", config.display()))?;
    let result = call_tool(&server, "create_task", json!({ "title": title })).await?;
    let text = result
        .pointer("/content/0/text")
        .and_then(Value::as_str)
        .map(|text| text.replace(['\r', '\n'], " "))
        .unwrap_or_else(|| result.to_string());
    if result.get("isError").and_then(Value::as_bool) == Some(true) {
        return Err(text);
    }
    Ok(text)
}

/// The MCP server of an `--mcp-config` file's text.
fn mcp_server(text: &str) -> Result<McpServer, String> {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Config {
        url: String,
        token: String,
    }
    let config: Config = serde_json::from_str(text).map_err(|e| e.to_string())?;
    Ok(McpServer::Http {
        name: "kandev".to_owned(),
        url: config.url,
        headers: vec![("authorization".to_owned(), format!("Bearer {}", config.token))],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs the fake on `input` and returns everything it drew.
    async fn drawn(args: TuiArgs, input: &str) -> String {
        let mut output = Vec::new();
        run(args, input.as_bytes(), &mut output).await.unwrap();
        String::from_utf8(output).unwrap()
    }

    fn quick() -> TuiArgs {
        TuiArgs { work_ms: 0, mcp_config: None }
    }

    /// Where each of `needles` first appears after the one before it (panics if one does not).
    fn in_order(text: &str, needles: &[&str]) {
        let mut from = 0;
        for needle in needles {
            let at = text[from..].find(needle).unwrap_or_else(|| {
                panic!("{needle:?} not drawn after byte {from} of:\n{text}");
            });
            from += at + needle.len();
        }
    }

    #[tokio::test]
    async fn a_line_is_worked_on_then_echoed_and_the_prompt_comes_back() {
        let text = drawn(quick(), "hello there\r\n").await;
        in_order(
            &text,
            &[HEADER, "\r\n> ", "> hello there", WORKING, "● echo: hello there", "\r\n> "],
        );
        assert!(text.ends_with("> \r\n"), "the last screen is the prompt: {text:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn the_spinner_animates_for_the_work_time() {
        let text = drawn(TuiArgs { work_ms: 300, mcp_config: None }, "hi\n").await;
        let frames: Vec<char> = SPINNER.iter().copied().filter(|c| text.contains(*c)).collect();
        // 300 ms at one frame per 80 ms: frames 0..=3.
        assert_eq!(frames, SPINNER[..4], "{text}");
    }

    #[tokio::test]
    async fn a_permission_question_waits_for_one_or_two() {
        let text = drawn(quick(), "please #permission\nmaybe\n2\nagain #permission\n1\n").await;
        in_order(
            &text,
            &[QUESTION, "1. Yes", "2. No", QUESTION, "● denied", "> ", QUESTION, "● allowed"],
        );
        assert_eq!(text.matches(QUESTION).count(), 3, "asked again after `maybe`");
        assert!(!text.contains(WORKING), "a question is not work");
    }

    #[tokio::test]
    async fn without_an_mcp_config_create_task_says_so() {
        let text = drawn(quick(), "#mcp create_task Write docs\n").await;
        assert!(text.contains("● mcp error: no MCP config (--mcp-config)"), "{text}");
    }

    #[test]
    fn an_mcp_config_names_the_url_and_the_bearer_token() {
        let server = mcp_server(r#"{"url": "http://127.0.0.1:1/mcp", "token": "t0k"}"#).unwrap();
        assert_eq!(
            server,
            McpServer::Http {
                name: "kandev".to_owned(),
                url: "http://127.0.0.1:1/mcp".to_owned(),
                headers: vec![("authorization".to_owned(), "Bearer t0k".to_owned())],
            }
        );
        assert!(mcp_server(r#"{"url": "x"}"#).is_err(), "a token is required");
    }

    #[test]
    fn input_lines_are_read_as_requests() {
        assert_eq!(request("do #permission now"), Request::Permission);
        assert_eq!(request("#mcp create_task  Fix it "), Request::CreateTask("Fix it"));
        assert_eq!(request("#mcp other"), Request::Echo("#mcp other"));
    }
}
