//! What CI feedback and auto-merge need from the forge: the jobs of a commit and the tail of
//! a job's log, a pull request's reviews and whether its approvals are met, and merging it.
//! A second `impl ForgeApi` over the same `request`/`call` helpers.
//!
//! Every list is read as one page of at most 100 items (`per_page=100`) and never paged on:
//! a pipeline or a pull request with more jobs, reviews or comments is seen in part (each
//! method says which part).

use std::collections::BTreeMap;

use kandev_domain::ship::Forge;
use reqwest::Method;
use serde_json::{Value, json};

use crate::{ForgeApi, ForgeError, Result};

/// The one page of a list read (see the module's doc).
const PAGE: &str = "per_page=100";

/// One CI job of a commit: a GitHub check run or a GitLab pipeline job.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CheckJob {
    pub id: u64,
    pub name: String,
    pub state: CheckState,
    pub url: String,
}

/// Where a job stands; skipped and neutral jobs count as passed, cancelled ones as failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckState {
    Pending,
    Success,
    Failure,
}

impl CheckState {
    pub fn as_str(self) -> &'static str {
        match self {
            CheckState::Pending => "pending",
            CheckState::Success => "success",
            CheckState::Failure => "failure",
        }
    }
}

/// A review or review comment on a pull request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReviewNote {
    /// Stable and unique per note: `review:<id>`, `comment:<id>` (GitHub), `note:<id>`.
    pub id: String,
    pub author: String,
    /// Written by a bot account (a linter, a CI bot), not a person.
    pub bot: bool,
    /// A GitHub review that requests changes; GitLab notes never do.
    pub changes_requested: bool,
    pub body: String,
    /// The file of a line comment.
    pub path: Option<String>,
    /// Its line: in the new version, else in the old one when the comment is on a removed
    /// line (or the line is gone from the newest diff).
    pub line: Option<u64>,
}

/// A GitHub review with what `ReviewNote` leaves out: its state and when it was submitted.
struct GithubReview {
    state: String,
    at: String,
    note: ReviewNote,
}

impl GithubReview {
    /// Whether it is a note to read: a pending review is its author's unsent draft, an
    /// approval or a dismissed review asks for nothing, and a comment-only review without text
    /// is the wrapper of line comments read on their own.
    fn shown(&self) -> bool {
        match self.state.as_str() {
            "PENDING" | "APPROVED" | "DISMISSED" => false,
            "COMMENTED" => !self.note.body.is_empty(),
            _ => true,
        }
    }
}

/// The end of a text answer: its last bytes, and whether bytes before them were left out.
struct Tail {
    bytes: Vec<u8>,
    cut: bool,
}

impl ForgeApi {
    pub fn forge(&self) -> Forge {
        self.forge
    }

    /// The head commit of a PR as `get` answered it (GitHub `head.sha`, GitLab `sha`); empty
    /// when the answer has none.
    pub fn head_sha(&self, pr: &Value) -> String {
        let at = match self.forge {
            Forge::GitHub => "/head/sha",
            Forge::GitLab => "/sha",
        };
        text(pr, at)
    }

    /// The jobs of commit `sha` of the PR `pr` (as `get` answered it), at most 100.
    /// GitHub: the commit's check runs (the latest run of each). GitLab: the jobs of the
    /// PR's head pipeline (retried ones left out); none when it has no head pipeline, or
    /// when that pipeline is of another commit (`pr` was read before `sha` was pushed).
    pub async fn check_jobs(
        &self,
        client: &reqwest::Client,
        pr: &Value,
        sha: &str,
    ) -> Result<Vec<CheckJob>> {
        match self.forge {
            Forge::GitHub => self.github_check_runs(client, sha).await,
            Forge::GitLab => {
                let pipeline = pr.get("head_pipeline").filter(|p| !p.is_null());
                let of_sha = pipeline
                    .and_then(|p| p.get("sha"))
                    .and_then(Value::as_str)
                    .is_none_or(|s| s == sha);
                match pipeline.and_then(|p| p.get("id")).and_then(Value::as_u64) {
                    Some(id) if of_sha => self.gitlab_pipeline_jobs(client, id).await,
                    _ => Ok(vec![]),
                }
            }
        }
    }

    /// The jobs on the head of branch `base`, at most 100, to tell failures a PR inherited
    /// from its base. GitHub: the check runs of the branch's head commit. GitLab: the jobs of
    /// the branch's newest pipeline; none when it has no pipeline.
    pub async fn base_check_jobs(
        &self,
        client: &reqwest::Client,
        base: &str,
    ) -> Result<Vec<CheckJob>> {
        match self.forge {
            Forge::GitHub => self.github_check_runs(client, base).await,
            Forge::GitLab => match self.gitlab_newest_pipeline(client, base).await? {
                Some(id) => self.gitlab_pipeline_jobs(client, id).await,
                None => Ok(vec![]),
            },
        }
    }

    /// The check runs of `reference` (a commit, or a branch: GitHub takes either).
    async fn github_check_runs(
        &self,
        client: &reqwest::Client,
        reference: &str,
    ) -> Result<Vec<CheckJob>> {
        let reference = path_segment(reference);
        let path = format!("/repos/{}/commits/{reference}/check-runs?{PAGE}", self.project);
        let body = self.call(self.request(client, Method::GET, &path)).await?;
        let runs = self.items(&body, "/check_runs")?;
        runs.iter().map(|run| self.job(run, github_state(run))).collect()
    }

    async fn gitlab_pipeline_jobs(
        &self,
        client: &reqwest::Client,
        pipeline: u64,
    ) -> Result<Vec<CheckJob>> {
        let path = format!("/projects/{}/pipelines/{pipeline}/jobs?{PAGE}", self.project);
        let body = self.call(self.request(client, Method::GET, &path)).await?;
        let jobs = self.items(&body, "")?;
        jobs.iter().map(|job| self.job(job, gitlab_state(&text(job, "/status")))).collect()
    }

    /// The id of branch `base`'s newest pipeline (GitLab lists the newest first).
    async fn gitlab_newest_pipeline(
        &self,
        client: &reqwest::Client,
        base: &str,
    ) -> Result<Option<u64>> {
        let path = format!("/projects/{}/pipelines", self.project);
        let request =
            self.request(client, Method::GET, &path).query(&[("ref", base), ("per_page", "1")]);
        let body = self.call(request).await?;
        Ok(self.items(&body, "")?.first().and_then(|p| p.get("id")).and_then(Value::as_u64))
    }

    /// A job as either forge lists it; only the field of its link differs.
    fn job(&self, item: &Value, state: CheckState) -> Result<CheckJob> {
        let url = match self.forge {
            Forge::GitHub => "/html_url",
            Forge::GitLab => "/web_url",
        };
        Ok(CheckJob { id: self.id(item)?, name: text(item, "/name"), state, url: text(item, url) })
    }

    /// The last `max_bytes` of job `job`'s log, with its terminal escape sequences (colours)
    /// removed. When the log is longer, the tail starts at a line start (unless its last
    /// line alone is longer) and never inside a UTF-8 character. Only twice `max_bytes` of
    /// the log is held in memory, however long it is. GitHub: the log of an Actions job (a
    /// check run of another app has none: the forge refuses); GitLab: the job's trace.
    pub async fn job_log_tail(
        &self,
        client: &reqwest::Client,
        job: &CheckJob,
        max_bytes: usize,
    ) -> Result<String> {
        let path = match self.forge {
            Forge::GitHub => format!("/repos/{}/actions/jobs/{}/logs", self.project, job.id),
            Forge::GitLab => format!("/projects/{}/jobs/{}/trace", self.project, job.id),
        };
        // Escape sequences can take as many bytes as the text they colour: twice the bound
        // of raw log still fills the bound with text once they are gone.
        let window = max_bytes.saturating_mul(2);
        let raw = self.call_text(self.request(client, Method::GET, &path), window).await?;
        Ok(log_tail(&raw, max_bytes))
    }

    /// Sends and reads a text answer, keeping its last `window` bytes; a refusal is mapped
    /// as `call` maps it.
    async fn call_text(&self, request: reqwest::RequestBuilder, window: usize) -> Result<Tail> {
        let response = self.send(request).await?;
        let status = response.status();
        // A refusal's body is a short JSON message: read enough of it to show.
        let window = if status.is_success() { window } else { 64 * 1024 };
        let tail = self.read_tail(response, window).await?;
        if status.is_success() {
            return Ok(tail);
        }
        let body = serde_json::from_slice(&tail.bytes).unwrap_or(Value::Null);
        Err(self.refused(status, &body))
    }

    /// Reads `response` to its end, keeping its last `window` bytes.
    async fn read_tail(&self, mut response: reqwest::Response, window: usize) -> Result<Tail> {
        let mut tail = Tail { bytes: vec![], cut: false };
        while let Some(chunk) = response.chunk().await.map_err(|e| self.broke_off(e))? {
            tail.bytes.extend_from_slice(&chunk);
            // Drop the front only once twice the window is held, so the copy stays amortised.
            if tail.bytes.len() > window.saturating_mul(2) {
                keep_last(&mut tail, window);
            }
        }
        keep_last(&mut tail, window);
        Ok(tail)
    }

    fn broke_off(&self, e: reqwest::Error) -> ForgeError {
        ForgeError::Unavailable(format!(
            "the {} API stopped answering in the middle of a job's log: {}; try again",
            self.forge.as_str(),
            e.without_url()
        ))
    }

    /// Reviews and review comments, oldest first. GitHub: the reviews (the first 100; those
    /// still pending and comment-only reviews without text left out) and the newest 100
    /// line comments. GitLab: the newest 100 notes that people or bots wrote (the forge's own
    /// "added 1 commit" notes left out).
    pub async fn review_notes(
        &self,
        client: &reqwest::Client,
        number: u64,
    ) -> Result<Vec<ReviewNote>> {
        match self.forge {
            Forge::GitHub => {
                let reviews = self.github_reviews(client, number).await?;
                let mut dated: Vec<(String, ReviewNote)> = reviews
                    .into_iter()
                    .filter(GithubReview::shown)
                    .map(|r| (r.at, r.note))
                    .collect();
                dated.extend(self.github_comments(client, number).await?);
                // A stable sort: notes of the same second keep the order the forge gave.
                dated.sort_by(|a, b| a.0.cmp(&b.0));
                Ok(dated.into_iter().map(|(_, note)| note).collect())
            }
            Forge::GitLab => self.gitlab_notes(client, number).await,
        }
    }

    /// All reviews of the first page, in the order they were submitted.
    async fn github_reviews(
        &self,
        client: &reqwest::Client,
        number: u64,
    ) -> Result<Vec<GithubReview>> {
        let path = format!("/repos/{}/pulls/{number}/reviews?{PAGE}", self.project);
        let body = self.call(self.request(client, Method::GET, &path)).await?;
        let review = |item: &Value| -> Result<GithubReview> {
            let (state, (author, bot)) = (text(item, "/state"), github_author(item));
            let note = ReviewNote {
                id: format!("review:{}", self.id(item)?),
                author,
                bot,
                changes_requested: state == "CHANGES_REQUESTED",
                body: text(item, "/body"),
                path: None,
                line: None,
            };
            Ok(GithubReview { state, at: text(item, "/submitted_at"), note })
        };
        self.items(&body, "")?.iter().map(review).collect()
    }

    /// The newest page of line comments with when each was written, oldest first.
    async fn github_comments(
        &self,
        client: &reqwest::Client,
        number: u64,
    ) -> Result<Vec<(String, ReviewNote)>> {
        let path = format!(
            "/repos/{}/pulls/{number}/comments?sort=created&direction=desc&{PAGE}",
            self.project
        );
        let body = self.call(self.request(client, Method::GET, &path)).await?;
        let comment = |item: &Value| -> Result<(String, ReviewNote)> {
            let (author, bot) = github_author(item);
            let line = ["/line", "/original_line"].iter().find_map(|at| item.pointer(at)?.as_u64());
            let note = ReviewNote {
                id: format!("comment:{}", self.id(item)?),
                author,
                bot,
                changes_requested: false,
                body: text(item, "/body"),
                path: Some(text(item, "/path")).filter(|p| !p.is_empty()),
                line,
            };
            Ok((text(item, "/created_at"), note))
        };
        self.items(&body, "")?.iter().rev().map(comment).collect()
    }

    /// The newest page of notes (asked newest first so a long discussion shows its end),
    /// returned oldest first.
    async fn gitlab_notes(&self, client: &reqwest::Client, number: u64) -> Result<Vec<ReviewNote>> {
        let path = format!(
            "/projects/{}/merge_requests/{number}/notes?sort=desc&order_by=created_at&{PAGE}",
            self.project
        );
        let body = self.call(self.request(client, Method::GET, &path)).await?;
        let items = self.items(&body, "")?;
        let written = items.iter().rev().filter(|n| n.get("system") != Some(&Value::Bool(true)));
        written.map(|item| self.gitlab_note(item)).collect()
    }

    fn gitlab_note(&self, item: &Value) -> Result<ReviewNote> {
        let author = text(item, "/author/username");
        let bot = item.pointer("/author/bot") == Some(&Value::Bool(true))
            || author.ends_with("-bot")
            || author.ends_with("[bot]");
        let path = ["/position/new_path", "/position/old_path"]
            .iter()
            .map(|at| text(item, at))
            .find(|p| !p.is_empty());
        let line = ["/position/new_line", "/position/old_line"]
            .iter()
            .find_map(|at| item.pointer(at)?.as_u64());
        Ok(ReviewNote {
            id: format!("note:{}", self.id(item)?),
            author,
            bot,
            changes_requested: false,
            body: text(item, "/body"),
            path,
            line,
        })
    }

    /// Whether the forge's required approvals are met; `Err(reason)` says what is missing.
    /// GitHub: the PR's `mergeable_state` (in `pr`, as `get` answered it); while GitHub has
    /// not computed it, met unless a reviewer's latest review requests changes. GitLab: the
    /// approvals the merge request still needs.
    pub async fn approvals(
        &self,
        client: &reqwest::Client,
        number: u64,
        pr: &Value,
    ) -> Result<std::result::Result<(), String>> {
        match self.forge {
            Forge::GitHub => match github_mergeable(&text(pr, "/mergeable_state")) {
                Some(met) => Ok(met),
                None => Ok(match self.github_changes_requested(client, number).await? {
                    Some(who) => Err(format!(
                        "{who} requested changes; address them and ask for a new review"
                    )),
                    None => Ok(()),
                }),
            },
            Forge::GitLab => self.gitlab_approvals(client, number).await,
        }
    }

    /// A reviewer whose latest decisive review requests changes. As on GitHub, a reviewer's
    /// latest approval, request for changes or dismissal counts; a comment does not lift a
    /// request.
    async fn github_changes_requested(
        &self,
        client: &reqwest::Client,
        number: u64,
    ) -> Result<Option<String>> {
        let mut latest = BTreeMap::new();
        for review in self.github_reviews(client, number).await? {
            if matches!(review.state.as_str(), "APPROVED" | "CHANGES_REQUESTED" | "DISMISSED") {
                latest.insert(review.note.author, review.note.changes_requested);
            }
        }
        Ok(latest.into_iter().find(|(_, requested)| *requested).map(|(who, _)| who))
    }

    async fn gitlab_approvals(
        &self,
        client: &reqwest::Client,
        number: u64,
    ) -> Result<std::result::Result<(), String>> {
        let path = format!("/projects/{}/merge_requests/{number}/approvals", self.project);
        let body = self.call(self.request(client, Method::GET, &path)).await?;
        Ok(match body.get("approvals_left").and_then(Value::as_u64).unwrap_or(0) {
            0 => Ok(()),
            1 => Err("the merge request needs 1 more approval".to_owned()),
            left => Err(format!("the merge request needs {left} more approvals")),
        })
    }

    /// Merges the PR at head `sha` (the forge refuses when the head moved since) with
    /// `strategy`: "merge", "squash" or "rebase" (GitHub only: GitLab rebases on its own,
    /// asynchronously, so it is refused here).
    pub async fn merge(
        &self,
        client: &reqwest::Client,
        number: u64,
        sha: &str,
        strategy: &str,
    ) -> Result<()> {
        if !matches!(strategy, "merge" | "squash" | "rebase") {
            return Err(ForgeError::Settings(format!(
                "cannot merge with {strategy:?}; choose merge, squash or rebase"
            )));
        }
        match self.forge {
            Forge::GitHub => {
                let path = format!("/repos/{}/pulls/{number}/merge", self.project);
                let payload = json!({"merge_method": strategy, "sha": sha});
                let body =
                    self.call(self.request(client, Method::PUT, &path).json(&payload)).await?;
                self.github_merged(&body)
            }
            Forge::GitLab if strategy == "rebase" => Err(ForgeError::Refused(
                "GitLab merges with merge or squash; choose one of them".to_owned(),
            )),
            Forge::GitLab => {
                let path = format!("/projects/{}/merge_requests/{number}/merge", self.project);
                let payload = json!({"sha": sha, "squash": strategy == "squash"});
                self.call(self.request(client, Method::PUT, &path).json(&payload)).await?;
                Ok(())
            }
        }
    }

    /// GitHub answers a merge it did not do with `merged: false` and why.
    fn github_merged(&self, body: &Value) -> Result<()> {
        if body.get("merged") == Some(&Value::Bool(false)) {
            let why = text(body, "/message");
            return Err(ForgeError::Refused(format!("github did not merge: {why}")));
        }
        Ok(())
    }

    /// The array at `pointer` of an answer (`""`: the answer itself).
    fn items<'a>(&self, body: &'a Value, pointer: &str) -> Result<&'a [Value]> {
        let list = body.pointer(pointer).and_then(Value::as_array);
        list.map(Vec::as_slice).ok_or_else(|| self.malformed("a list"))
    }

    fn id(&self, item: &Value) -> Result<u64> {
        item.get("id").and_then(Value::as_u64).ok_or_else(|| self.malformed("an id"))
    }

    /// An answer without what every answer of the real API has: not the forge it seems.
    fn malformed(&self, what: &str) -> ForgeError {
        ForgeError::Unavailable(format!(
            "the {} API answered without {what}; check the repository's forge API URL",
            self.forge.as_str()
        ))
    }
}

/// What GitHub's `mergeable_state` says of the approvals; `None` when it says nothing
/// (`unknown` while GitHub computes it, `draft`): then the reviews decide.
fn github_mergeable(state: &str) -> Option<std::result::Result<(), String>> {
    let missing = match state {
        "clean" | "unstable" | "has_hooks" => return Some(Ok(())),
        "blocked" => "the pull request needs the approvals its branch protection requires",
        "dirty" => {
            "the pull request conflicts with its base branch; rebase it or merge the base into it"
        }
        "behind" => "the pull request's branch is behind its base branch; update it from the base",
        _ => return None,
    };
    Some(Err(missing.to_owned()))
}

/// A check run: only a completed one has a conclusion.
fn github_state(run: &Value) -> CheckState {
    match (text(run, "/status").as_str(), text(run, "/conclusion").as_str()) {
        ("completed", "success" | "neutral" | "skipped") => CheckState::Success,
        ("completed", _) => CheckState::Failure,
        _ => CheckState::Pending,
    }
}

/// A GitLab job: a manual job nobody started does not hold a pipeline back.
fn gitlab_state(status: &str) -> CheckState {
    match status {
        "success" | "skipped" | "manual" => CheckState::Success,
        "failed" | "canceled" => CheckState::Failure,
        _ => CheckState::Pending,
    }
}

/// The author of a GitHub review or comment, and whether it is a bot (an app's account).
fn github_author(item: &Value) -> (String, bool) {
    let author = text(item, "/user/login");
    let bot = text(item, "/user/type") == "Bot" || author.ends_with("[bot]");
    (author, bot)
}

/// The string at `pointer`, empty when there is none.
fn text(item: &Value, pointer: &str) -> String {
    item.pointer(pointer).and_then(Value::as_str).unwrap_or_default().to_owned()
}

/// `value` as one segment of a URL path, so a branch `release/1.2` stays one segment.
fn path_segment(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for byte in value.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// Keeps the last `window` bytes of `tail`.
fn keep_last(tail: &mut Tail, window: usize) {
    if tail.bytes.len() > window {
        let extra = tail.bytes.len() - window;
        tail.bytes.drain(..extra);
        tail.cut = true;
    }
}

/// The last `max_bytes` of a raw log tail, without escape sequences; when anything before
/// it is left out, from the first line start on (a line longer than the bound is cut
/// anywhere, but at a character boundary).
fn log_tail(raw: &Tail, max_bytes: usize) -> String {
    // A cut raw tail may begin inside a character: it becomes U+FFFD on the partial line.
    let text = strip_ansi(&String::from_utf8_lossy(&raw.bytes));
    let start = text.ceil_char_boundary(text.len().saturating_sub(max_bytes));
    if start == 0 && !raw.cut {
        return text;
    }
    // Cut exactly after a newline: already at a line start.
    if start > 0 && text.as_bytes()[start - 1] == b'\n' {
        return text[start..].to_owned();
    }
    let tail = &text[start..];
    match tail.find('\n') {
        Some(end) if end + 1 < tail.len() => tail[end + 1..].to_owned(),
        _ => tail.trim_start_matches('\u{FFFD}').to_owned(),
    }
}

/// `text` without terminal escape sequences (colours, cursor moves, erased lines, titles),
/// and with CRLF line ends made LF.
fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\u{1b}' => skip_escape(&mut chars),
            '\r' if chars.peek() == Some(&'\n') => {}
            c => out.push(c),
        }
    }
    out
}

/// Skips the rest of an escape sequence after its `ESC`: CSI (`[`, parameters, one final
/// byte), OSC (`]` up to BEL or `ESC \`) or a two-character escape. A malformed sequence
/// ends where it stops looking like one, and never takes a line end with it.
fn skip_escape(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) {
    match chars.next_if(|c| *c != '\n') {
        Some('[') => {
            while chars.next_if(|c| (' '..='?').contains(c)).is_some() {}
            chars.next_if(|c| ('@'..='~').contains(c));
        }
        Some(']') => {
            while let Some(c) = chars.next_if(|c| *c != '\n') {
                if c == '\u{1b}' {
                    chars.next_if_eq(&'\\');
                }
                if c == '\u{7}' || c == '\u{1b}' {
                    break;
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use axum::http::{Method as HttpMethod, StatusCode, Uri};
    use axum::response::IntoResponse;

    use super::CheckState::{Failure, Pending, Success};
    use super::*;

    const GITHUB: &str = "/repos/acme/widget";
    const GITLAB: &str = "/api/v4/projects/acme%2Fwidget";
    const TOKEN: &str = "test-token-secret";

    /// A request the fake forge saw: method, path with its query, JSON body.
    #[derive(Debug, Clone)]
    struct Seen {
        method: String,
        target: String,
        body: Value,
    }

    /// What the fake forge answers a route: a status and a JSON or text body.
    #[derive(Clone)]
    enum Answer {
        Json(u16, Value),
        Text(String),
    }

    type Route = (&'static str, String, Answer);

    fn get(target: String, body: Value) -> Route {
        ("GET", target, Answer::Json(200, body))
    }

    /// A fake GitHub and GitLab on loopback: answers exactly the routes it is given (method,
    /// path and query as the client must spell them), 404 with a forge-style message
    /// otherwise, and records every request.
    struct FakeForge {
        url: String,
        seen: Arc<Mutex<Vec<Seen>>>,
        _server: tokio::task::JoinSet<()>,
    }

    impl FakeForge {
        async fn start(routes: Vec<Route>) -> FakeForge {
            let seen = Arc::new(Mutex::new(vec![]));
            let (routes, seen2) = (Arc::new(routes), seen.clone());
            let app = axum::Router::new().fallback(
                move |method: HttpMethod, uri: Uri, body: axum::body::Bytes| {
                    let (routes, seen) = (routes.clone(), seen2.clone());
                    async move {
                        let target = uri.path_and_query().unwrap().as_str().to_owned();
                        let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
                        let route = routes.iter().find(|r| r.0 == method.as_str() && r.1 == target);
                        seen.lock().unwrap().push(Seen {
                            method: method.to_string(),
                            target,
                            body,
                        });
                        match route.map(|r| r.2.clone()) {
                            Some(Answer::Json(status, body)) => {
                                (StatusCode::from_u16(status).unwrap(), axum::Json(body))
                                    .into_response()
                            }
                            Some(Answer::Text(text)) => text.into_response(),
                            None => {
                                (StatusCode::NOT_FOUND, axum::Json(json!({"message": "Not Found"})))
                                    .into_response()
                            }
                        }
                    }
                },
            );
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let url = format!("http://{}", listener.local_addr().unwrap());
            let mut server = tokio::task::JoinSet::new();
            server.spawn(async move { axum::serve(listener, app).await.unwrap() });
            FakeForge { url, seen, _server: server }
        }

        fn api(&self, forge: Forge) -> ForgeApi {
            let (base_url, project) = match forge {
                Forge::GitHub => (self.url.clone(), "acme/widget"),
                Forge::GitLab => (format!("{}/api/v4", self.url), "acme%2Fwidget"),
            };
            ForgeApi { forge, base_url, project: project.to_owned(), token: TOKEN.to_owned() }
        }

        fn seen(&self) -> Vec<Seen> {
            self.seen.lock().unwrap().clone()
        }
    }

    fn http() -> reqwest::Client {
        crate::client().unwrap()
    }

    #[tokio::test]
    async fn i46_github_check_runs_map_to_pending_success_and_failure() {
        let cases = [
            ("queued", None, Pending),
            ("in_progress", None, Pending),
            ("completed", Some("success"), Success),
            ("completed", Some("neutral"), Success),
            ("completed", Some("skipped"), Success),
            ("completed", Some("failure"), Failure),
            ("completed", Some("cancelled"), Failure),
            ("completed", Some("timed_out"), Failure),
            ("completed", Some("action_required"), Failure),
        ];
        let runs: Vec<Value> = (0..cases.len())
            .map(|i| {
                let url = format!("https://forge.test/runs/{i}");
                json!({"id": i, "name": format!("job {i}"), "status": cases[i].0,
                       "conclusion": cases[i].1, "html_url": url})
            })
            .collect();
        let body = json!({"total_count": runs.len(), "check_runs": runs});
        let target = format!("{GITHUB}/commits/abc123/check-runs?per_page=100");
        let fake = FakeForge::start(vec![get(target, body)]).await;
        let api = fake.api(Forge::GitHub);
        let pr = json!({"number": 7, "head": {"sha": "abc123"}});

        let jobs = api.check_jobs(&http(), &pr, &api.head_sha(&pr)).await.unwrap();
        let states: Vec<CheckState> = jobs.iter().map(|j| j.state).collect();
        assert_eq!(states, cases.map(|c| c.2));
        let expected = CheckJob {
            id: 5,
            name: "job 5".into(),
            state: Failure,
            url: "https://forge.test/runs/5".into(),
        };
        assert_eq!(jobs[5], expected);
    }

    #[tokio::test]
    async fn i46_gitlab_pipeline_jobs_map_to_pending_success_and_failure() {
        let cases = [
            ("created", Pending),
            ("pending", Pending),
            ("running", Pending),
            ("canceling", Pending),
            ("success", Success),
            ("skipped", Success),
            ("manual", Success),
            ("failed", Failure),
            ("canceled", Failure),
        ];
        let jobs: Vec<Value> = (0..cases.len())
            .map(|i| {
                json!({"id": 100 + i, "name": format!("job {i}"), "status": cases[i].0,
                       "web_url": format!("https://forge.test/jobs/{i}")})
            })
            .collect();
        let target = format!("{GITLAB}/pipelines/55/jobs?per_page=100");
        let fake = FakeForge::start(vec![get(target, json!(jobs))]).await;
        let api = fake.api(Forge::GitLab);
        let pr = json!({"iid": 3, "sha": "abc123", "head_pipeline": {"id": 55, "sha": "abc123"}});

        let read = api.check_jobs(&http(), &pr, &api.head_sha(&pr)).await.unwrap();
        assert_eq!(read.iter().map(|j| j.state).collect::<Vec<_>>(), cases.map(|c| c.1));
        assert_eq!((read[7].id, read[7].url.as_str()), (107, "https://forge.test/jobs/7"));

        // No head pipeline, or one of an older commit: no jobs yet, and nothing is asked.
        let none = json!({"iid": 3, "sha": "abc123", "head_pipeline": null});
        let older = json!({"iid": 3, "sha": "abc123", "head_pipeline": {"id": 54, "sha": "0ld"}});
        for pr in [none, older] {
            assert_eq!(api.check_jobs(&http(), &pr, "abc123").await.unwrap(), vec![]);
        }
        assert_eq!(fake.seen().len(), 1, "{:?}", fake.seen());
    }

    #[tokio::test]
    async fn i46_base_jobs_are_those_of_the_base_branch_head() {
        let run = json!({"id": 1, "name": "test", "status": "completed", "conclusion": "failure"});
        let job = json!({"id": 2, "name": "test", "status": "failed"});
        let fake = FakeForge::start(vec![
            get(
                format!("{GITHUB}/commits/release%2F1.2/check-runs?per_page=100"),
                json!({"check_runs": [run]}),
            ),
            get(format!("{GITLAB}/pipelines?ref=release%2F1.2&per_page=1"), json!([{"id": 77}])),
            get(format!("{GITLAB}/pipelines/77/jobs?per_page=100"), json!([job])),
            get(format!("{GITLAB}/pipelines?ref=fresh&per_page=1"), json!([])),
        ])
        .await;
        for forge in [Forge::GitHub, Forge::GitLab] {
            let jobs = fake.api(forge).base_check_jobs(&http(), "release/1.2").await.unwrap();
            let read: Vec<_> = jobs.iter().map(|j| (j.name.as_str(), j.state)).collect();
            assert_eq!(read, [("test", Failure)], "{forge:?}");
        }
        let fresh = fake.api(Forge::GitLab).base_check_jobs(&http(), "fresh").await.unwrap();
        assert_eq!(fresh, vec![], "a branch without a pipeline has no jobs");
    }

    #[tokio::test]
    async fn i46_a_log_tail_is_cut_at_the_byte_bound_at_a_line_start_without_colours() {
        let log: String =
            (1..=40).map(|i| format!("step {i:02}: \u{1b}[32mok\u{1b}[0m\r\n")).collect();
        let job = |id| CheckJob { id, name: "test".into(), state: Failure, url: String::new() };
        let fake = FakeForge::start(vec![
            ("GET", format!("{GITHUB}/actions/jobs/5/logs"), Answer::Text(log.clone())),
            ("GET", format!("{GITLAB}/jobs/9/trace"), Answer::Text(log)),
        ])
        .await;
        for (forge, id) in [(Forge::GitHub, 5), (Forge::GitLab, 9)] {
            let tail = fake.api(forge).job_log_tail(&http(), &job(id), 40).await.unwrap();
            // 40 bytes hold three lines of 12 and part of a fourth, which is left out.
            assert_eq!(tail, "step 38: ok\nstep 39: ok\nstep 40: ok\n", "{forge:?}");
        }
        let whole = fake.api(Forge::GitHub).job_log_tail(&http(), &job(5), 10_000).await.unwrap();
        assert_eq!(whole.len(), 40 * 12);
        assert!(whole.starts_with("step 01: ok\n"), "{whole}");
    }

    #[test]
    fn i46_escape_sequences_are_removed_and_no_text_with_them() {
        let cases = [
            ("\u{1b}[1;31merror\u{1b}[0m: x", "error: x"),
            ("a\u{1b}]0;title\u{7}b", "ab"),
            ("a\u{1b}]8;;https://x.test\u{1b}\\link\u{1b}]8;;\u{1b}\\b", "alinkb"),
            ("section_start:1:build\r\u{1b}[0Kbuild", "section_start:1:build\rbuild"),
            ("line\r\nnext", "line\nnext"),
            ("half \u{1b}[12", "half "),
            ("\u{1b}(Bplain", "Bplain"),
            ("at the end\u{1b}", "at the end"),
            ("\u{1b}\nkept", "\nkept"),
            ("\u{1b}[31\nkept", "\nkept"),
        ];
        for (raw, text) in cases {
            assert_eq!(strip_ansi(raw), text, "{raw:?}");
        }
    }

    #[test]
    fn i46_a_tail_starts_at_a_line_start_and_a_character_boundary() {
        let with_partial_char = |rest: &str| [&[0xA9u8][..], rest.as_bytes()].concat();
        // (raw bytes, whether the raw bytes are already a tail, bound, tail)
        let cases: [(Vec<u8>, bool, usize, &str); 8] = [
            (b"one\ntwo\nthree\n".to_vec(), false, 100, "one\ntwo\nthree\n"),
            (b"one\ntwo\nthree\n".to_vec(), false, 10, "two\nthree\n"),
            (b"one\ntwo\nthree\n".to_vec(), false, 8, "three\n"),
            ("ééé\nßßß\n".as_bytes().to_vec(), false, 5, "ßß\n"),
            ("ééé\nßßß\n".as_bytes().to_vec(), false, 4, "ß\n"),
            (with_partial_char("x\nyz\n"), true, 100, "yz\n"),
            (with_partial_char("abc"), true, 100, "abc"),
            (b"one\ntwo\n".to_vec(), false, 0, ""),
        ];
        for (bytes, cut, max, expected) in cases {
            let tail = log_tail(&Tail { bytes: bytes.clone(), cut }, max);
            assert_eq!(tail, expected, "{:?} cut {cut} max {max}", String::from_utf8_lossy(&bytes));
            assert!(tail.len() <= max);
        }
    }

    #[tokio::test]
    async fn i46_github_review_notes_flag_bots_and_line_comments_carry_path_and_line() {
        let reviews = json!([
            {"id": 1, "user": {"login": "alice", "type": "User"}, "state": "COMMENTED", "body": "",
             "submitted_at": "2026-01-01T10:00:00Z"},
            {"id": 2, "user": {"login": "bob", "type": "User"}, "state": "CHANGES_REQUESTED",
             "body": "Handle the empty list", "submitted_at": "2026-01-01T10:05:00Z"},
            {"id": 3, "user": {"login": "lint-app", "type": "Bot"}, "state": "COMMENTED",
             "body": "Two problems", "submitted_at": "2026-01-01T10:10:00Z"},
            {"id": 4, "user": {"login": "carol", "type": "User"}, "state": "PENDING",
             "body": "draft"},
            // An approval asks for nothing, even with words.
            {"id": 5, "user": {"login": "dave", "type": "User"}, "state": "APPROVED",
             "body": "LGTM", "submitted_at": "2026-01-01T10:11:00Z"},
        ]);
        // Newest first, as asked.
        let comments = json!([
            {"id": 12, "user": {"login": "renovate[bot]", "type": "User"}, "body": "bump",
             "path": "Cargo.toml", "line": null, "original_line": 3,
             "created_at": "2026-01-01T10:07:00Z"},
            {"id": 11, "user": {"login": "bob", "type": "User"}, "body": "can be empty",
             "path": "src/lib.rs", "line": 42, "original_line": 40,
             "created_at": "2026-01-01T10:04:00Z"},
        ]);
        let fake = FakeForge::start(vec![
            get(format!("{GITHUB}/pulls/7/reviews?per_page=100"), reviews),
            get(
                format!("{GITHUB}/pulls/7/comments?sort=created&direction=desc&per_page=100"),
                comments,
            ),
        ])
        .await;
        let notes = fake.api(Forge::GitHub).review_notes(&http(), 7).await.unwrap();
        let note = |id: &str, author: &str, bot, changes, body: &str, at: Option<(&str, u64)>| {
            ReviewNote {
                id: id.into(),
                author: author.into(),
                bot,
                changes_requested: changes,
                body: body.into(),
                path: at.map(|a| a.0.to_owned()),
                line: at.map(|a| a.1),
            }
        };
        let expected = vec![
            note("comment:11", "bob", false, false, "can be empty", Some(("src/lib.rs", 42))),
            note("review:2", "bob", false, true, "Handle the empty list", None),
            note("comment:12", "renovate[bot]", true, false, "bump", Some(("Cargo.toml", 3))),
            note("review:3", "lint-app", true, false, "Two problems", None),
        ];
        assert_eq!(notes, expected);
    }

    #[tokio::test]
    async fn i46_gitlab_review_notes_leave_out_system_notes_and_flag_bots() {
        // Newest first, as asked.
        let notes = json!([
            {"id": 303, "body": "added 1 commit", "system": true, "author": {"username": "alice"}},
            {"id": 302, "body": "Coverage dropped", "system": false,
             "author": {"username": "coverage-bot", "bot": false}},
            {"id": 301, "body": "Off by one", "system": false,
             "author": {"username": "bob", "bot": false},
             "position": {"new_path": "src/a.rs", "old_path": "src/a.rs", "new_line": null,
                          "old_line": 7}},
            {"id": 300, "body": "Build passed", "system": false,
             "author": {"username": "project_5_bot_1a2b", "bot": true}},
        ]);
        let target =
            format!("{GITLAB}/merge_requests/3/notes?sort=desc&order_by=created_at&per_page=100");
        let fake = FakeForge::start(vec![get(target, notes)]).await;
        let read = fake.api(Forge::GitLab).review_notes(&http(), 3).await.unwrap();
        let summary: Vec<_> = read
            .iter()
            .map(|n| (n.id.as_str(), n.bot, n.path.as_deref(), n.line, n.changes_requested))
            .collect();
        assert_eq!(
            summary,
            [
                ("note:300", true, None, None, false),
                ("note:301", false, Some("src/a.rs"), Some(7), false),
                ("note:302", true, None, None, false),
            ]
        );
        assert_eq!((read[1].author.as_str(), read[1].body.as_str()), ("bob", "Off by one"));
    }

    #[tokio::test]
    async fn i46_approvals_are_met_or_say_what_is_missing() {
        let review = |id, state| {
            json!({"id": id, "user": {"login": "bob"}, "state": state,
                                        "body": "", "submitted_at": "2026-01-01T10:00:00Z"})
        };
        let fake = FakeForge::start(vec![
            get(
                format!("{GITHUB}/pulls/8/reviews?per_page=100"),
                json!([review(1, "CHANGES_REQUESTED"), review(2, "COMMENTED")]),
            ),
            get(
                format!("{GITHUB}/pulls/9/reviews?per_page=100"),
                json!([review(1, "CHANGES_REQUESTED"), review(2, "APPROVED")]),
            ),
            get(
                format!("{GITLAB}/merge_requests/3/approvals"),
                json!({"approved": false, "approvals_left": 2}),
            ),
            get(
                format!("{GITLAB}/merge_requests/4/approvals"),
                json!({"approved": true, "approvals_left": 0}),
            ),
        ])
        .await;
        let needs = |s: &str| Err::<(), String>(s.to_owned());
        let cases = [
            (Forge::GitHub, 7, "clean", Ok(())),
            (Forge::GitHub, 7, "unstable", Ok(())),
            (
                Forge::GitHub,
                7,
                "blocked",
                needs("the pull request needs the approvals its branch protection requires"),
            ),
            (
                Forge::GitHub,
                7,
                "dirty",
                needs(
                    "the pull request conflicts with its base branch; rebase it or merge the base into it",
                ),
            ),
            (
                Forge::GitHub,
                7,
                "behind",
                needs(
                    "the pull request's branch is behind its base branch; update it from the base",
                ),
            ),
            (
                Forge::GitHub,
                8,
                "unknown",
                needs("bob requested changes; address them and ask for a new review"),
            ),
            (Forge::GitHub, 9, "unknown", Ok(())),
            (Forge::GitLab, 3, "", needs("the merge request needs 2 more approvals")),
            (Forge::GitLab, 4, "", Ok(())),
        ];
        for (forge, number, state, expected) in cases {
            let pr = json!({"number": number, "mergeable_state": state});
            let met = fake.api(forge).approvals(&http(), number, &pr).await.unwrap();
            assert_eq!(met, expected, "{forge:?} {number} {state}");
        }
    }

    #[tokio::test]
    async fn i46_merge_sends_the_method_and_the_head_sha() {
        let merged =
            json!({"sha": "m1", "merged": true, "message": "Pull Request successfully merged"});
        let fake = FakeForge::start(vec![
            ("PUT", format!("{GITHUB}/pulls/7/merge"), Answer::Json(200, merged)),
            (
                "PUT",
                format!("{GITHUB}/pulls/8/merge"),
                Answer::Json(405, json!({"message": "Pull Request is not mergeable"})),
            ),
            (
                "PUT",
                format!("{GITLAB}/merge_requests/3/merge"),
                Answer::Json(200, json!({"iid": 3, "state": "merged"})),
            ),
        ])
        .await;
        let (github, gitlab) = (fake.api(Forge::GitHub), fake.api(Forge::GitLab));
        github.merge(&http(), 7, "abc123", "squash").await.unwrap();
        gitlab.merge(&http(), 3, "abc123", "squash").await.unwrap();
        gitlab.merge(&http(), 3, "abc123", "merge").await.unwrap();
        let sent: Vec<(String, Value)> =
            fake.seen().into_iter().map(|s| (s.target, s.body)).collect();
        let expected = [
            (format!("{GITHUB}/pulls/7/merge"), json!({"merge_method": "squash", "sha": "abc123"})),
            (format!("{GITLAB}/merge_requests/3/merge"), json!({"sha": "abc123", "squash": true})),
            (format!("{GITLAB}/merge_requests/3/merge"), json!({"sha": "abc123", "squash": false})),
        ];
        assert_eq!(sent, expected);
        assert!(fake.seen().iter().all(|s| s.method == "PUT"));

        let refused = github.merge(&http(), 8, "abc123", "merge").await.unwrap_err();
        let ForgeError::Refused(why) = refused else { panic!("{refused:?}") };
        assert!(why.contains("405") && why.contains("Pull Request is not mergeable"), "{why}");
        let rebase = gitlab.merge(&http(), 3, "abc123", "rebase").await.unwrap_err();
        let expected = "GitLab merges with merge or squash; choose one of them";
        assert_eq!(rebase, ForgeError::Refused(expected.into()));
        let unknown = github.merge(&http(), 7, "abc123", "fast_forward").await.unwrap_err();
        assert!(matches!(unknown, ForgeError::Settings(_)), "{unknown:?}");
        assert_eq!(fake.seen().len(), 4, "neither of the last two reached the forge");
    }

    #[tokio::test]
    async fn i46_a_refused_log_names_the_forge_status_and_never_the_token() {
        let fake = FakeForge::start(vec![(
            "GET",
            format!("{GITLAB}/jobs/9/trace"),
            Answer::Json(403, json!({"message": "403 Forbidden"})),
        )])
        .await;
        let job = |id| CheckJob { id, name: "test".into(), state: Failure, url: String::new() };
        let cases = [
            (
                Forge::GitHub,
                5,
                "github refused (404 Not Found): Not Found; check the repository's forge API URL",
            ),
            (
                Forge::GitLab,
                9,
                "gitlab refused (403 Forbidden): 403 Forbidden; check the forge token",
            ),
        ];
        for (forge, id, start) in cases {
            let err = fake.api(forge).job_log_tail(&http(), &job(id), 100).await.unwrap_err();
            let ForgeError::Refused(why) = &err else { panic!("{err:?}") };
            assert!(why.starts_with(start), "{why}");
            assert!(!format!("{err:?}").contains(TOKEN));
        }
    }
}
