//! The forge client (moved out of the engine by issue 40): pull (merge) requests on GitHub
//! (REST v3) and GitLab (REST v4), over HTTP with `reqwest`. Knows nothing of sessions or the
//! store: the engine decides when to call it and what to do with the answer
//! (`kandev-engine/src/workdir/forge.rs`). `checks.rs` adds what CI feedback and auto-merge
//! read and do: a commit's jobs and their logs, reviews, approvals, merging. `issues.rs`
//! reads issues as a source of work (and comments on and closes them); `webhook.rs` verifies
//! inbound webhook deliveries (pure, no IO).
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

use std::time::Duration;

use kandev_domain::ship::{Forge, PrState, PullRequest};
use kandev_domain::workspace::Repository;
use kandev_domain::{RepositoryId, TaskId};
use serde_json::{Value, json};

pub mod checks;
pub mod issues;
pub mod webhook;

pub use checks::{CheckJob, CheckState, ReviewNote};
pub use issues::Issue;
/// The HTTP client forge requests go out with ([`client`]).
pub use reqwest::Client as HttpClient;

/// What can go wrong with a forge; each message says what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ForgeError {
    /// The repository's settings do not say which forge or project, or no token is set.
    #[error("{0}")]
    Settings(String),
    /// The forge did not answer, or answered something that is not a pull request.
    #[error("{0}")]
    Unavailable(String),
    /// The forge refused (its own message, and a hint).
    #[error("{0}")]
    Refused(String),
}

type Result<T> = std::result::Result<T, ForgeError>;

/// How long one forge request may take.
const FORGE_TIMEOUT: Duration = Duration::from_secs(30);

/// Where and how to reach a repository's forge.
pub struct ForgeApi {
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
pub fn split_remote(url: &str) -> (Option<String>, String) {
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

/// Where and how to reach `repository`'s forge, from its settings and its `origin` URL. The
/// token is `stored`'s value of the token variable (the secret store's, issue 50), else
/// that variable of the server's environment.
pub fn forge_api(
    repository: &Repository,
    remote_url: &str,
    stored: &std::collections::HashMap<String, String>,
) -> Result<ForgeApi> {
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
            return Err(ForgeError::Settings(format!(
                "cannot tell the forge of repository {} from its origin {remote_url}; set its forge API URL in the repository's settings",
                repository.name
            )));
        }
    };
    let project = match forge {
        Forge::GitHub => path.clone(),
        Forge::GitLab => path.replace('/', "%2F"),
    };
    if project.split('/').filter(|p| !p.is_empty()).count() < 1 || project.is_empty() {
        return Err(ForgeError::Settings(format!(
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
    let token = stored
        .get(variable)
        .cloned()
        .or_else(|| std::env::var(variable).ok())
        .filter(|t| !t.trim().is_empty())
        .ok_or_else(|| {
            ForgeError::Settings(format!(
                "no forge token: add the secret {variable} in Settings → Secrets (or set that environment variable for the server, or name another one in the repository's settings)"
            ))
        })?;
    Ok(ForgeApi { forge, base_url, project, token })
}

/// The HTTP client forge requests go out with (TLS, a bound per request).
pub fn client() -> Result<reqwest::Client> {
    reqwest::Client::builder()
        .timeout(FORGE_TIMEOUT)
        .user_agent(concat!("kandev/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| ForgeError::Unavailable(format!("cannot make an HTTP client: {e}")))
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

    /// Sends `request`; a forge that does not answer is `Unavailable`.
    async fn send(&self, request: reqwest::RequestBuilder) -> Result<reqwest::Response> {
        request.send().await.map_err(|e| {
            ForgeError::Unavailable(format!(
                "the {} API at {} did not answer: {}",
                self.forge.as_str(),
                self.base_url,
                e.without_url()
            ))
        })
    }

    /// Sends and reads a JSON answer; a refusal carries the forge's own message.
    async fn call(&self, request: reqwest::RequestBuilder) -> Result<Value> {
        let response = self.send(request).await?;
        let status = response.status();
        let body: Value = response.json().await.unwrap_or(Value::Null);
        if status.is_success() {
            return Ok(body);
        }
        Err(self.refused(status, &body))
    }

    /// A refusal in words: the forge, its status, its own message (`body`, when it sent one
    /// in JSON) and what to check.
    fn refused(&self, status: reqwest::StatusCode, body: &Value) -> ForgeError {
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
        ForgeError::Refused(format!("{} refused ({status}): {said}{hint}", self.forge.as_str()))
    }

    /// Opens a pull (merge) request of `head` into `base`.
    pub async fn create(
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

    /// Reads pull (merge) request `number`.
    pub async fn get(&self, client: &reqwest::Client, number: u64) -> Result<Value> {
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
    pub async fn read(
        &self,
        client: &reqwest::Client,
        body: &Value,
        task_id: &TaskId,
        repository_id: &RepositoryId,
        now: kandev_domain::Timestamp,
    ) -> Result<PullRequest> {
        let text = |v: Option<&Value>| v.and_then(Value::as_str).unwrap_or_default().to_owned();
        let malformed = || {
            ForgeError::Unavailable(format!(
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
