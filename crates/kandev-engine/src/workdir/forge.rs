//! Pull (merge) requests on a repository's forge: GitHub (REST v3) and GitLab (REST v4),
//! over HTTP with `reqwest`. `task.pr.create` pushes the task branch when needed and opens
//! one; `task.pr.get` reads its state back from the forge.
//!
//! Invariants:
//! - The only network calls Kandev makes are these, to the repository's forge, when an
//!   action asks. The API root is the repository's `forge_api_base_url`, else derived from
//!   the `origin` URL (`https://api.github.com`, `https://<host>/api/v4`).
//! - The token comes from the environment variable the repository names
//!   (`forge_token_env`, default `GITHUB_TOKEN` / `GITLAB_TOKEN`); it is sent only in the
//!   auth header and never logged or put in an error.
//! - Forge choice: an `api_base_url` ending in `/api/v4`, or an `origin` host containing
//!   `gitlab`, is GitLab; anything else is GitHub.

use std::path::Path;
use std::time::Duration;

use kandev_domain::ship::{Forge, PrState, PullRequest};
use kandev_domain::workspace::Repository;
use kandev_domain::{RepositoryId, TaskId};
use kandev_runtime::git;
use serde_json::{Value, json};

use crate::error::{EngineError, Result, not_found};
use crate::inner::Inner;
use crate::workdir::branch::Target;
use crate::workdir::status::{publish_status, ship_error, targets};

/// How long one forge request may take.
const FORGE_TIMEOUT: Duration = Duration::from_secs(30);

/// Where and how to reach a repository's forge.
struct ForgeApi {
    forge: Forge,
    base_url: String,
    /// `owner/repo` (GitHub) or the URL-encoded project path (GitLab).
    project: String,
    token: String,
}

impl std::fmt::Debug for ForgeApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ForgeApi")
            .field("forge", &self.forge)
            .field("base_url", &self.base_url)
            .field("project", &self.project)
            .field("token", &"********")
            .finish()
    }
}

/// The host and the path of a remote URL (`git@host:owner/repo.git`,
/// `https://host/owner/repo.git`, `ssh://git@host/owner/repo`, or a local path).
fn split_remote(url: &str) -> (Option<String>, String) {
    let url = url.trim().trim_end_matches('/');
    let url = url.strip_suffix(".git").unwrap_or(url);
    if let Some((_, rest)) = url.split_once("://") {
        let rest = rest.rsplit_once('@').map_or(rest, |(_, r)| r);
        let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
        let host = host.split(':').next().unwrap_or(host);
        return (Some(host.to_owned()), path.to_owned());
    }
    if let Some((user_host, path)) = url.split_once(':')
        && !user_host.contains('/')
    {
        let host = user_host.rsplit_once('@').map_or(user_host, |(_, h)| h);
        return (Some(host.to_owned()), path.to_owned());
    }
    // A local path: its last two folders stand for owner and repository.
    let parts: Vec<&str> = url.split('/').filter(|p| !p.is_empty()).collect();
    let tail = parts[parts.len().saturating_sub(2)..].join("/");
    (None, tail)
}

fn forge_api(repository: &Repository, remote_url: &str) -> Result<ForgeApi> {
    let (host, path) = split_remote(remote_url);
    let configured = repository.forge_api_base_url.trim().trim_end_matches('/');
    let forge = if configured.ends_with("/api/v4")
        || (configured.is_empty() && host.as_deref().is_some_and(|h| h.contains("gitlab")))
    {
        Forge::GitLab
    } else {
        Forge::GitHub
    };
    let base_url = match (configured, forge, &host) {
        (c, _, _) if !c.is_empty() => c.to_owned(),
        (_, Forge::GitHub, Some(h)) if h == "github.com" => "https://api.github.com".to_owned(),
        (_, Forge::GitHub, Some(h)) => format!("https://{h}/api/v3"),
        (_, Forge::GitLab, Some(h)) => format!("https://{h}/api/v4"),
        (_, _, None) => {
            return Err(EngineError::Validation(format!(
                "cannot tell the forge of repository {} from its origin {remote_url}; set its forge API URL (forge_api_base_url)",
                repository.name
            )));
        }
    };
    let project = match forge {
        Forge::GitHub => path.clone(),
        Forge::GitLab => path.replace('/', "%2F"),
    };
    if project.split('/').filter(|p| !p.is_empty()).count() < 1 || project.is_empty() {
        return Err(EngineError::Validation(format!(
            "cannot tell the project of repository {} from its origin {remote_url}",
            repository.name
        )));
    }
    let variable = match repository.forge_token_env.trim() {
        "" => match forge {
            Forge::GitHub => "GITHUB_TOKEN",
            Forge::GitLab => "GITLAB_TOKEN",
        },
        named => named,
    };
    let token = std::env::var(variable).ok().filter(|t| !t.trim().is_empty()).ok_or_else(|| {
        EngineError::Validation(format!(
            "no forge token: set the environment variable {variable} for the server (or name another one in the repository's forge_token_env)"
        ))
    })?;
    Ok(ForgeApi { forge, base_url, project, token })
}

fn client() -> Result<reqwest::Client> {
    reqwest::Client::builder()
        .timeout(FORGE_TIMEOUT)
        .user_agent(concat!("kandev/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| EngineError::Unavailable(format!("cannot make an HTTP client: {e}")))
}

impl ForgeApi {
    fn request(
        &self,
        client: &reqwest::Client,
        method: reqwest::Method,
        path: &str,
    ) -> reqwest::RequestBuilder {
        let url = format!("{}{path}", self.base_url);
        let request = client.request(method, url);
        match self.forge {
            Forge::GitHub => request
                .bearer_auth(&self.token)
                .header("Accept", "application/vnd.github+json")
                .header("X-GitHub-Api-Version", "2022-11-28"),
            Forge::GitLab => request.header("PRIVATE-TOKEN", &self.token),
        }
    }

    /// Sends and reads a JSON answer; a refusal carries the forge's own message.
    async fn call(&self, request: reqwest::RequestBuilder) -> Result<Value> {
        let name = self.forge.as_str();
        let response = request.send().await.map_err(|e| {
            EngineError::Unavailable(format!(
                "the {name} API at {} did not answer: {}",
                self.base_url,
                e.without_url()
            ))
        })?;
        let status = response.status();
        let body: Value = response.json().await.unwrap_or(Value::Null);
        if status.is_success() {
            return Ok(body);
        }
        let said = body
            .get("message")
            .map(|m| {
                if m.is_string() {
                    m.as_str().unwrap_or_default().to_owned()
                } else {
                    m.to_string()
                }
            })
            .or_else(|| body.get("error").and_then(Value::as_str).map(str::to_owned))
            .unwrap_or_else(|| "no message".to_owned());
        let hint = match status.as_u16() {
            401 | 403 => "; check the forge token",
            404 => "; check the repository's forge API URL and that the token can see the project",
            _ => "",
        };
        Err(EngineError::Conflict(format!("{name} refused ({status}): {said}{hint}")))
    }

    async fn create(
        &self,
        client: &reqwest::Client,
        head: &str,
        base: &str,
        title: &str,
        body: &str,
        draft: bool,
    ) -> Result<Value> {
        match self.forge {
            Forge::GitHub => {
                let path = format!("/repos/{}/pulls", self.project);
                let payload = json!({"title": title, "head": head, "base": base, "body": body, "draft": draft});
                self.call(self.request(client, reqwest::Method::POST, &path).json(&payload)).await
            }
            Forge::GitLab => {
                let path = format!("/projects/{}/merge_requests", self.project);
                let title = if draft { format!("Draft: {title}") } else { title.to_owned() };
                let payload = json!({"source_branch": head, "target_branch": base, "title": title, "description": body});
                self.call(self.request(client, reqwest::Method::POST, &path).json(&payload)).await
            }
        }
    }

    async fn get(&self, client: &reqwest::Client, number: u64) -> Result<Value> {
        let path = match self.forge {
            Forge::GitHub => format!("/repos/{}/pulls/{number}", self.project),
            Forge::GitLab => format!("/projects/{}/merge_requests/{number}", self.project),
        };
        self.call(self.request(client, reqwest::Method::GET, &path)).await
    }

    /// The combined status of a commit's checks (GitHub); `None` when it cannot be read.
    async fn checks(&self, client: &reqwest::Client, sha: &str) -> Option<String> {
        let path = format!("/repos/{}/commits/{sha}/status", self.project);
        let body = self.call(self.request(client, reqwest::Method::GET, &path)).await.ok()?;
        let state = body.get("state")?.as_str()?;
        let total = body.get("total_count").and_then(Value::as_u64).unwrap_or(1);
        (total > 0).then(|| state.to_owned())
    }

    /// A forge answer as the task's pull request.
    async fn read(
        &self,
        client: &reqwest::Client,
        body: &Value,
        task_id: &TaskId,
        repository_id: &RepositoryId,
        now: kandev_domain::Timestamp,
    ) -> Result<PullRequest> {
        let text = |v: Option<&Value>| v.and_then(Value::as_str).unwrap_or_default().to_owned();
        let malformed = || {
            EngineError::Unavailable(format!(
                "the {} API answered without a pull request number",
                self.forge.as_str()
            ))
        };
        let pr = match self.forge {
            Forge::GitHub => {
                let merged = body.get("merged").and_then(Value::as_bool).unwrap_or(false)
                    || body.get("merged_at").is_some_and(|m| !m.is_null());
                let state = match (text(body.get("state")).as_str(), merged) {
                    (_, true) => PrState::Merged,
                    ("closed", false) => PrState::Closed,
                    _ => PrState::Open,
                };
                let sha = text(body.pointer("/head/sha"));
                let checks = if sha.is_empty() { None } else { self.checks(client, &sha).await };
                PullRequest {
                    task_id: task_id.clone(),
                    repository_id: repository_id.clone(),
                    forge: Forge::GitHub,
                    number: body.get("number").and_then(Value::as_u64).ok_or_else(malformed)?,
                    url: text(body.get("html_url")),
                    state,
                    checks,
                    review_decision: None,
                    head_branch: text(body.pointer("/head/ref")),
                    base_branch: text(body.pointer("/base/ref")),
                    updated_at: now,
                }
            }
            Forge::GitLab => {
                let state = match text(body.get("state")).as_str() {
                    "merged" => PrState::Merged,
                    "closed" | "locked" => PrState::Closed,
                    _ => PrState::Open,
                };
                let checks =
                    body.pointer("/head_pipeline/status").and_then(Value::as_str).map(|s| {
                        match s {
                            "success" => "success",
                            "failed" | "canceled" => "failure",
                            _ => "pending",
                        }
                        .to_owned()
                    });
                let approved = body.get("approved").and_then(Value::as_bool);
                PullRequest {
                    task_id: task_id.clone(),
                    repository_id: repository_id.clone(),
                    forge: Forge::GitLab,
                    number: body.get("iid").and_then(Value::as_u64).ok_or_else(malformed)?,
                    url: text(body.get("web_url")),
                    state,
                    checks,
                    review_decision: approved
                        .map(|a| if a { "approved" } else { "review_required" }.to_owned()),
                    head_branch: text(body.get("source_branch")),
                    base_branch: text(body.get("target_branch")),
                    updated_at: now,
                }
            }
        };
        Ok(pr)
    }
}

/// The branch name on the remote for a base (`origin/main` → `main`).
fn remote_base(base_branch: &str, remote: &str) -> String {
    base_branch.strip_prefix(&format!("{remote}/")).unwrap_or(base_branch).to_owned()
}

/// The default title and body of a task's pull request: its title; its description and the
/// summaries of its commits.
async fn default_text(inner: &Inner, target: &Target) -> Result<(String, String)> {
    let task = inner.store.get_task(&target.record.task_id).await.map_err(not_found)?;
    let status = target.branch_status().await?;
    let summaries = target.commit_summaries(&status.base_tip).await?;
    let mut body = task.description.trim().to_owned();
    if !summaries.is_empty() {
        if !body.is_empty() {
            body.push_str("\n\n");
        }
        body.push_str("Commits:\n");
        for summary in summaries {
            body.push_str(&format!("- {summary}\n"));
        }
    }
    Ok((task.title, body))
}

/// Opens (or returns the open) pull request of one repository of the task.
async fn create_one(
    inner: &Inner,
    target: &Target,
    title: Option<&str>,
    body: Option<&str>,
    draft: bool,
) -> Result<PullRequest> {
    let task_id = &target.record.task_id;
    let existing = inner.store.pull_requests(task_id).await?;
    if let Some(open) = existing
        .into_iter()
        .find(|p| p.repository_id == target.repository.id && p.state == PrState::Open)
    {
        return Ok(open);
    }
    let dirty = target.dirty().await?;
    if !dirty.is_clean() {
        return Err(EngineError::Refused {
            message: format!(
                "the task has uncommitted changes in repository {}; commit them first (task.commit), then open the pull request",
                target.repository.name
            ),
            details: json!({ "dirty": dirty.paths() }),
        });
    }
    // The server's repository and a worktree of it share their remotes; a build host's
    // worktree has none (its branch is pushed from the server's repository).
    let remote_url = git::remote_url(Path::new(&target.repository.local_path), "origin")
        .await
        .map_err(ship_error)?;
    let api = forge_api(&target.repository, &remote_url)?;
    let status = target.branch_status().await?;
    if status.ahead == 0 {
        return Err(EngineError::Validation(format!(
            "the task branch has no commits beyond {} in repository {}; commit the work first",
            target.base_branch, target.repository.name
        )));
    }
    let pushed = status.upstream.as_ref().is_some_and(|u| u.ahead == 0 && u.behind == 0);
    if !pushed {
        target.push("origin", false).await?;
    }
    let (default_title, default_body) = default_text(inner, target).await?;
    let title = title.unwrap_or(&default_title);
    let body = body.unwrap_or(&default_body);
    let base = remote_base(&target.base_branch, "origin");
    let client = client()?;
    let answer = api.create(&client, &target.record.branch, &base, title, body, draft).await?;
    let mut pr =
        api.read(&client, &answer, task_id, &target.repository.id, inner.store.now()).await?;
    if pr.head_branch.is_empty() {
        pr.head_branch = target.record.branch.clone();
    }
    if pr.base_branch.is_empty() {
        pr.base_branch = base;
    }
    let mut tx = inner.store.begin_write().await?;
    tx.save_pull_request(&pr).await?;
    tx.commit().await?;
    Ok(pr)
}

/// Reads a recorded pull request from its forge again and stores it. Returns the record and
/// the state stored before, when this refresh is the one that changed it.
pub(crate) async fn refresh_one(
    inner: &Inner,
    pr: &PullRequest,
) -> Result<(PullRequest, Option<PrState>)> {
    let repository = inner.store.get_repository(&pr.repository_id).await.map_err(not_found)?;
    let remote_url =
        git::remote_url(Path::new(&repository.local_path), "origin").await.map_err(ship_error)?;
    let api = forge_api(&repository, &remote_url)?;
    let client = client()?;
    let answer = api.get(&client, pr.number).await?;
    let mut fresh =
        api.read(&client, &answer, &pr.task_id, &pr.repository_id, inner.store.now()).await?;
    if fresh.url.is_empty() {
        fresh.url = pr.url.clone();
    }
    if fresh.head_branch.is_empty() {
        fresh.head_branch = pr.head_branch.clone();
    }
    if fresh.base_branch.is_empty() {
        fresh.base_branch = pr.base_branch.clone();
    }
    let mut tx = inner.store.begin_write().await?;
    let before = tx.update_pull_request(&fresh).await?;
    let changed = before.filter(|b| *b != fresh.state);
    if let Some(was) = changed {
        pr_attention(&mut tx, &fresh, was).await?;
    }
    tx.commit().await?;
    Ok((fresh, changed))
}

/// A pull request changed state: a status note in the task's primary session and a
/// notification record (browser, webhooks, ntfy) with the note's seq. A task without a
/// session gets neither (a record belongs to a session).
async fn pr_attention(
    tx: &mut kandev_store::WriteTx,
    pr: &PullRequest,
    was: PrState,
) -> Result<()> {
    let task = tx.get_task(&pr.task_id).await?;
    let Some(session_id) = &task.primary_session_id else { return Ok(()) };
    let session = tx.get_session(session_id).await?;
    let (number, state) = (pr.number, pr.state.as_str());
    let text = format!("pull request #{number} is {state} (was {})", was.as_str());
    let data = json!({
        "repository_id": pr.repository_id.to_string(),
        "number": number,
        "url": pr.url,
        "state": state,
        "was": was.as_str(),
    });
    let kind = kandev_domain::transcript::MessageKind::Status;
    let note = crate::write::add_message(tx, &session, None, kind, &text, data.clone()).await?;
    let title = format!("{}: {text}", task.title);
    let notification = kandev_domain::notify::NotificationKind::PrStateChanged;
    crate::publish::attention(tx, notification, &session, note.seq, title, data).await
}

/// Opens pull requests for each repository of the task (or one): pushes the task branch
/// when the remote does not have it yet; an open one is returned as it is. Publishes the
/// task's git status.
pub(crate) async fn create_prs(
    inner: &Inner,
    task_id: &TaskId,
    only: Option<&RepositoryId>,
    title: Option<&str>,
    body: Option<&str>,
    draft: bool,
) -> Result<Vec<PullRequest>> {
    let targets = targets(inner, task_id, only).await?;
    let mut prs = vec![];
    {
        let _guard = inner.task_locks.lock(task_id).await;
        for target in &targets {
            prs.push(create_one(inner, target, title, body, draft).await?);
        }
    }
    if let Err(err) = publish_status(inner, task_id).await {
        tracing::debug!(task = %task_id, error = %err, "git status not published");
    }
    Ok(prs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remotes_split_into_host_and_project() {
        let cases = [
            ("git@github.com:acme/widget.git", Some("github.com"), "acme/widget"),
            ("https://github.com/acme/widget", Some("github.com"), "acme/widget"),
            (
                "ssh://git@gitlab.example.com:22/group/sub/app.git",
                Some("gitlab.example.com"),
                "group/sub/app",
            ),
            ("https://user:pw@gitlab.com/g/app.git/", Some("gitlab.com"), "g/app"),
            ("/tmp/x/acme/widget.git", None, "acme/widget"),
        ];
        for (url, host, path) in cases {
            let (h, p) = split_remote(url);
            assert_eq!((h.as_deref(), p.as_str()), (host, path), "{url}");
        }
    }

    /// A forge at an `https://` address is reached over TLS (the client was once built
    /// without it: every GitHub call failed with "scheme is not http"). A plain listener on
    /// loopback reads the first byte the client sends: 0x16 opens a TLS handshake record.
    #[tokio::test]
    async fn i16_s3_an_https_forge_is_spoken_to_over_tls() {
        use tokio::io::AsyncReadExt;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url =
            format!("https://127.0.0.1:{}/repos/a/b/pulls", listener.local_addr().unwrap().port());
        let first_byte = async {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut first = [0u8; 1];
            socket.read_exact(&mut first).await.unwrap();
            first[0]
        };
        let client = client().unwrap();
        let request = tokio::time::timeout(Duration::from_secs(10), client.get(&url).send());
        let first_byte = tokio::time::timeout(Duration::from_secs(10), first_byte);
        let (first, _refused) = tokio::join!(first_byte, request);
        assert_eq!(first.ok(), Some(0x16), "a TLS handshake record within 10 s");
    }

    #[test]
    fn the_token_never_shows_in_debug_output() {
        let api = ForgeApi {
            forge: Forge::GitHub,
            base_url: "http://127.0.0.1:1".into(),
            project: "a/b".into(),
            token: "secret-token-value".into(),
        };
        assert!(!format!("{api:?}").contains("secret-token-value"));
    }
}
