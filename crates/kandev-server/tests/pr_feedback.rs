//! Issue 46: CI failures and review comments go back to the agent, and a green pull request
//! merges itself. Real git (a bare `origin`, a clone registered as the repository), the mock
//! agent, and a fake GitHub and GitLab on loopback whose checks decide their outcome from the
//! file `ci-result` in the commit they run on (`fail` fails the job `test`), with logs, reviews,
//! approvals and merges. Polling every 50 ms; the tests wait for what polling causes.

use crate::common;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::response::IntoResponse;
use common::{TestServer, of_kind, step_id};
use kandev_testkit::git::git;
use kandev_testkit::wait::eventually;
use serde_json::{Value, json};

/// The forge token comes from the variable the repository names (tests cannot set one).
const TOKEN_ENV: &str = "CARGO_PKG_NAME";

/// A bare `origin` at `<tmp>/acme/widget.git` whose `main` has `ci-result` (`base`), and a
/// clone of it, the registered repository.
struct Remote {
    _tmp: tempfile::TempDir,
    origin: PathBuf,
    clone: PathBuf,
}

fn identity(repo: &Path) {
    git(repo, &["config", "user.name", kandev_testkit::git::NAME]);
    git(repo, &["config", "user.email", kandev_testkit::git::EMAIL]);
}

impl Remote {
    fn new(base: &str) -> Remote {
        let tmp = tempfile::tempdir().unwrap();
        let origin = tmp.path().join("acme/widget.git");
        std::fs::create_dir_all(&origin).unwrap();
        git(&origin, &["init", "-q", "--bare", "-b", "main"]);
        git(tmp.path(), &["clone", "-q", origin.to_str().unwrap(), "seed"]);
        let seed = tmp.path().join("seed");
        identity(&seed);
        git(&seed, &["checkout", "-q", "-b", "main"]);
        kandev_testkit::git::commit(&seed, &[("ci-result", &format!("{base}\n"))], "initial");
        git(&seed, &["push", "-q", "origin", "main"]);
        git(tmp.path(), &["clone", "-q", origin.to_str().unwrap(), "clone"]);
        let clone = tmp.path().join("clone");
        identity(&clone);
        Remote { _tmp: tmp, origin, clone }
    }
}

/// What the fake forge holds: the pull request's branch and state, the reviews the test
/// writes, and every request it saw.
#[derive(Default)]
struct ForgeState {
    branch: Option<String>,
    merged: bool,
    /// GitHub's `mergeable_state` (`clean` when unset); GitLab's approvals left come from it
    /// too (`blocked`: one).
    mergeable: Option<String>,
    /// GitHub reviews and line comments, GitLab notes, as the APIs answer them.
    reviews: Vec<Value>,
    comments: Vec<Value>,
    notes: Vec<Value>,
    /// Commits seen, by job (and pipeline) number: `shas[n - 1]`.
    shas: Vec<String>,
    seen: Vec<(String, String, Value)>,
}

#[derive(Clone)]
struct FakeForge {
    url: String,
    origin: PathBuf,
    state: Arc<Mutex<ForgeState>>,
}

impl FakeForge {
    async fn start(origin: &Path) -> FakeForge {
        let state = Arc::new(Mutex::new(ForgeState::default()));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let forge = FakeForge { url, origin: origin.to_owned(), state };
        let serving = forge.clone();
        let app = axum::Router::new().fallback(
            move |method: axum::http::Method, uri: axum::http::Uri, body: axum::body::Bytes| {
                let forge = serving.clone();
                async move {
                    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                    forge.answer(method.as_str(), uri.path(), uri.query().unwrap_or(""), body)
                }
            },
        );
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        forge
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ForgeState> {
        self.state.lock().unwrap()
    }

    /// How many requests matched `method` and a path ending in `tail`.
    fn count(&self, method: &str, tail: &str) -> usize {
        self.lock().seen.iter().filter(|(m, p, _)| m == method && p.ends_with(tail)).count()
    }

    /// The commit `rev` names in `origin`.
    fn resolve(&self, rev: &str) -> String {
        git(&self.origin, &["rev-parse", rev])
    }

    /// Whether the job of commit `sha` fails: its `ci-result` says `fail`.
    fn fails(&self, sha: &str) -> bool {
        let result = std::process::Command::new("git")
            .args(["show", &format!("{sha}:ci-result")])
            .current_dir(&self.origin)
            .output()
            .unwrap();
        String::from_utf8_lossy(&result.stdout).trim().starts_with("fail")
    }

    /// The job number of a commit (its pipeline's too).
    fn job(&self, sha: &str) -> usize {
        let mut state = self.lock();
        match state.shas.iter().position(|s| s == sha) {
            Some(i) => i + 1,
            None => {
                state.shas.push(sha.to_owned());
                state.shas.len()
            }
        }
    }

    fn head(&self) -> String {
        let branch = self.lock().branch.clone().unwrap_or_else(|| "main".into());
        self.resolve(&format!("refs/heads/{branch}"))
    }

    fn answer(
        &self,
        method: &str,
        path: &str,
        query: &str,
        body: Value,
    ) -> axum::response::Response {
        self.lock().seen.push((method.to_owned(), path.to_owned(), body.clone()));
        let github = path.strip_prefix("/repos/acme/widget");
        let gitlab = path.strip_prefix("/api/v4/projects/acme%2Fwidget");
        match (method, github, gitlab) {
            ("POST", Some("/pulls"), _) => {
                self.lock().branch = body["head"].as_str().map(str::to_owned);
                axum::Json(self.github_pr()).into_response()
            }
            ("GET", Some("/pulls/7"), _) => axum::Json(self.github_pr()).into_response(),
            ("GET", Some(p), _) if p.ends_with("/status") => {
                axum::Json(json!({"state": "success", "total_count": 0})).into_response()
            }
            ("GET", Some(p), _) if p.ends_with("/check-runs") => {
                let rev = p.trim_start_matches("/commits/").trim_end_matches("/check-runs");
                let sha = self.resolve(&rev.replace("%2F", "/"));
                let (id, failed) = (self.job(&sha), self.fails(&sha));
                let conclusion = if failed { "failure" } else { "success" };
                axum::Json(json!({"total_count": 1, "check_runs": [{"id": id, "name": "test",
                    "status": "completed", "conclusion": conclusion,
                    "html_url": format!("http://ci.test/runs/{id}")}]}))
                .into_response()
            }
            ("GET", Some(p), _) if p.starts_with("/actions/jobs/") => self.log(p),
            ("GET", Some("/pulls/7/reviews"), _) => {
                axum::Json(Value::Array(self.lock().reviews.clone())).into_response()
            }
            ("GET", Some("/pulls/7/comments"), _) => {
                axum::Json(Value::Array(self.lock().comments.clone())).into_response()
            }
            ("PUT", Some("/pulls/7/merge"), _) => {
                self.lock().merged = true;
                axum::Json(json!({"merged": true})).into_response()
            }
            ("POST", _, Some("/merge_requests")) => {
                self.lock().branch = body["source_branch"].as_str().map(str::to_owned);
                axum::Json(self.gitlab_mr()).into_response()
            }
            ("GET", _, Some("/merge_requests/3")) => axum::Json(self.gitlab_mr()).into_response(),
            ("GET", _, Some("/pipelines")) => {
                let base =
                    query.split('&').find_map(|kv| kv.strip_prefix("ref=")).unwrap_or("main");
                let id = self.job(&self.resolve(base));
                axum::Json(json!([{"id": id}])).into_response()
            }
            ("GET", _, Some(p)) if p.starts_with("/pipelines/") && p.ends_with("/jobs") => {
                let id: usize = p.split('/').nth(2).unwrap().parse().unwrap();
                let sha = self.lock().shas[id - 1].clone();
                let status = if self.fails(&sha) { "failed" } else { "success" };
                axum::Json(json!([{"id": id, "name": "test", "status": status,
                    "web_url": format!("http://ci.test/jobs/{id}")}]))
                .into_response()
            }
            ("GET", _, Some(p)) if p.starts_with("/jobs/") => self.log(p),
            ("GET", _, Some("/merge_requests/3/notes")) => {
                axum::Json(Value::Array(self.lock().notes.clone())).into_response()
            }
            ("GET", _, Some("/merge_requests/3/approvals")) => {
                let left = u64::from(self.lock().mergeable.as_deref() == Some("blocked"));
                axum::Json(json!({"approved": left == 0, "approvals_left": left})).into_response()
            }
            ("PUT", _, Some("/merge_requests/3/merge")) => {
                self.lock().merged = true;
                axum::Json(self.gitlab_mr()).into_response()
            }
            _ => (axum::http::StatusCode::NOT_FOUND, axum::Json(json!({"message": "Not Found"})))
                .into_response(),
        }
    }

    /// A job's log: its commit's verdict at the end.
    fn log(&self, path: &str) -> axum::response::Response {
        let id: usize = path.split('/').find_map(|p| p.parse().ok()).unwrap();
        let sha = self.lock().shas[id - 1].clone();
        let verdict = if self.fails(&sha) { "error: ci-result says fail" } else { "ok" };
        format!("running the tests of {sha}\n\u{1b}[31m{verdict}\u{1b}[0m\n").into_response()
    }

    fn github_pr(&self) -> Value {
        let (merged, mergeable, branch) = {
            let s = self.lock();
            (s.merged, s.mergeable.clone().unwrap_or_else(|| "clean".into()), s.branch.clone())
        };
        json!({"number": 7, "html_url": "http://forge.test/acme/widget/pull/7",
               "state": if merged { "closed" } else { "open" }, "merged": merged,
               "head": {"ref": branch, "sha": self.head()}, "base": {"ref": "main"},
               "mergeable_state": mergeable})
    }

    fn gitlab_mr(&self) -> Value {
        let (merged, branch) = {
            let s = self.lock();
            (s.merged, s.branch.clone())
        };
        let sha = self.head();
        let pipeline = self.job(&sha);
        json!({"iid": 3, "web_url": "http://forge.test/acme/widget/-/merge_requests/3",
               "state": if merged { "merged" } else { "opened" }, "sha": sha,
               "source_branch": branch, "target_branch": "main",
               "head_pipeline": {"id": pipeline, "sha": sha, "status": "success"}})
    }
}

/// A test's server (polling every 50 ms), board and task on a repository of `remote`.
struct Flow {
    server: TestServer,
    workflow: Value,
    task: String,
    session: String,
    worktree: PathBuf,
}

/// Imports `yaml` (steps Backlog, PR, Done), registers the repository on `forge` (GitHub, or
/// GitLab when `gitlab`), starts a task and commits `ci-result` as `result` on its branch.
async fn flow(forge: &FakeForge, remote: &Remote, yaml: &str, gitlab: bool, result: &str) -> Flow {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir).await;
    let workspaces = server.call("workspace.list", json!({})).await;
    let workspace_id = workspaces["workspaces"][0]["id"].clone();
    let imported =
        server.call("workflow.import", json!({"workspace_id": workspace_id, "yaml": yaml})).await;
    let workflow = imported["workflows"][0].clone();
    let api = if gitlab { format!("{}/api/v4", forge.url) } else { forge.url.clone() };
    let repository = server
        .call(
            "repository.create",
            json!({"workspace_id": workspace_id, "local_path": remote.clone,
                   "forge_api_base_url": api, "forge_token_env": TOKEN_ENV}),
        )
        .await;
    let task = server
        .call(
            "task.create",
            json!({"workflow_id": workflow["id"], "title": "Ship it",
                   "step_id": step_id(&workflow, "Backlog"),
                   "repositories": [{"id": repository["repository"]["id"]}]}),
        )
        .await["task"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let session = server.call("session.launch", json!({"task_id": task})).await["session"].clone();
    let id = session["id"].as_str().unwrap().to_owned();
    server.wait_state(&id, "WAITING_FOR_INPUT").await;
    let worktree = PathBuf::from(session["cwd"].as_str().unwrap());
    let files = [("ci-result", format!("{result}\n")), ("work.txt", "the work\n".to_owned())];
    let files: Vec<(&str, &str)> = files.iter().map(|(p, c)| (*p, c.as_str())).collect();
    kandev_testkit::git::commit(&worktree, &files, "the work");
    Flow { server, workflow, task, session: id, worktree }
}

async fn start(dir: tempfile::TempDir) -> TestServer {
    TestServer::start_tuned(kandev_server::ServerConfig::default(), dir, |c| {
        c.pr_poll_interval = Duration::from_millis(50);
    })
    .await
}

impl Flow {
    async fn move_to(&self, step: &str) {
        let to = step_id(&self.workflow, step);
        self.server.call("task.move", json!({"id": self.task, "step_id": to})).await;
    }

    /// The user messages the forge's feedback queued and sent, oldest first.
    async fn feedback(&self) -> Vec<String> {
        let messages = self.server.messages(&self.session).await;
        of_kind(&messages, "user")
            .iter()
            .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
            .filter(|text| text.contains("pull request #"))
            .collect()
    }

    /// The events recorded so far, read from the store: waiting on them leaves the polling
    /// alone to cause them (`task.pr.get` would read the forge itself).
    /// Waits until `n` feedback messages reached the agent (queued ones start once it is idle).
    async fn delivered(&self, n: usize) -> Vec<String> {
        let what = format!("{n} feedback messages sent to the agent");
        eventually(what, || async {
            let sent = self.feedback().await;
            (sent.len() >= n).then_some(sent)
        })
        .await
    }

    async fn events(&self) -> Vec<Value> {
        let task = kandev_domain::TaskId::new(&self.task);
        let events = self.server.store.pr_events(&task).await.unwrap();
        events
            .iter()
            .map(
                |e| json!({"kind": e.kind, "key": e.key, "outcome": e.outcome, "detail": e.detail}),
            )
            .collect()
    }

    async fn needs_you(&self) -> Value {
        let got = self.server.call("task.get", json!({"id": self.task})).await;
        got["task"]["needs_you"].clone()
    }

    /// Waits until an event of `kind` with `outcome` is recorded.
    async fn event(&self, kind: &str, outcome: &str) -> Value {
        let what = format!("a {kind} event with outcome {outcome}");
        eventually(what, || async {
            self.events().await.into_iter().find(|e| e["kind"] == kind && e["outcome"] == outcome)
        })
        .await
    }

    async fn step(&self) -> String {
        let got = self.server.call("task.get", json!({"id": self.task})).await;
        got["task"]["step_id"].as_str().unwrap().to_owned()
    }
}

/// The PR step: opens the pull request on entry; the agent's answer to feedback is the step's
/// prompt (a mock script): write `ci-result` as `{fix}` and commit; each turn is pushed.
fn pr_flow(fix: &str, rounds: u32) -> String {
    format!(
        "version: 1
kind: kandev-workflow
workflows:
  - name: CI flow
    steps:
      - name: Backlog
      - name: PR
        prompt: \"#!mock\\nwrite ci-result {fix}\\\\n\\nterminal git commit -qam fix-ci\\nsay fixed\"
        events:
          on_enter: [{{type: create_pull_request}}]
          on_turn_complete: [{{type: push}}]
          on_pr_checks_failed: [{{type: send_feedback, max_rounds: {rounds}}}]
          on_pr_checks_passed: [{{type: auto_merge}}]
          on_pr_review: [{{type: send_feedback, max_rounds: {rounds}}}]
          on_pr_merged: [{{type: move_to_step, step: Done}}]
      - name: Done
"
    )
}

#[tokio::test]
async fn i46_a1_a_failing_check_is_sent_once_the_fix_turns_it_green_and_auto_merge_merges() {
    for gitlab in [false, true] {
        let remote = Remote::new("pass");
        let forge = FakeForge::start(&remote.origin).await;
        let flow = flow(&forge, &remote, &pr_flow("pass", 3), gitlab, "fail").await;
        flow.move_to("PR").await;

        // The failing head gets one feedback message, with the job, its link and its log.
        let failed = flow.event("checks_failed", "sent").await;
        let fix = flow.event("checks_passed", "merged").await;
        let feedback = flow.feedback().await;
        assert_eq!(feedback.len(), 1, "one message for the failing commit: {feedback:?}");
        let text = &feedback[0];
        assert!(text.contains("`test` failed: http://ci.test/"), "{text}");
        assert!(text.contains("error: ci-result says fail") && !text.contains('\u{1b}'), "{text}");
        assert!(text.contains("feedback round 1 of 3"), "{text}");
        assert_ne!(failed["key"], fix["key"], "the fix is a new head commit");
        // The agent's fix commit was pushed; its green checks merged the pull request once.
        let merges = if gitlab { "/merge_requests/3/merge" } else { "/pulls/7/merge" };
        assert_eq!(forge.count("PUT", merges), 1);
        let merged_at =
            forge.lock().seen.iter().find(|(m, p, _)| m == "PUT" && p.ends_with(merges)).unwrap().2
                ["sha"]
                .clone();
        assert_eq!(merged_at, fix["key"], "merged at the commit whose checks passed");
        eventually("the merged pull request moves the task to Done", || async {
            (flow.step().await == step_id(&flow.workflow, "Done")).then_some(())
        })
        .await;
        let head = git(&flow.worktree, &["rev-parse", "HEAD"]);
        assert_eq!(fix["key"], head.as_str(), "the passing commit is the agent's fix");
        let checks = flow.server.call("task.pr.get", json!({"task_id": flow.task})).await;
        assert_eq!(checks["checks"][0]["state"], "success", "{checks}");
        assert_eq!(checks["feedback_rounds"], 1, "{checks}");
    }
}

#[tokio::test]
async fn i46_a1_after_the_rounds_are_used_up_the_task_needs_you_with_the_reason() {
    let remote = Remote::new("pass");
    let forge = FakeForge::start(&remote.origin).await;
    // The agent's "fix" fails again: one round allowed, then auto-fix stops.
    let flow = flow(&forge, &remote, &pr_flow("fail-again", 1), false, "fail").await;
    flow.move_to("PR").await;
    flow.event("checks_failed", "sent").await;
    let capped = flow.event("checks_failed", "capped").await;
    assert!(capped["detail"].as_str().unwrap().contains("auto-fix stopped"), "{capped}");
    assert_eq!(flow.feedback().await.len(), 1, "nothing sent past the cap");
    assert_eq!(flow.needs_you().await, "pull_request");
    let got = flow.server.call("task.pr.get", json!({"task_id": flow.task})).await;
    assert!(got["stopped"].as_str().unwrap().contains("auto-fix stopped"), "{got}");
    assert_eq!(forge.count("PUT", "/pulls/7/merge"), 0, "a red pull request is not merged");
    // Merged by hand on the forge: nothing needs the developer for its auto-fix any more.
    forge.lock().merged = true;
    eventually("the task needs nobody once its pull request is merged", || async {
        flow.needs_you().await.is_null().then_some(())
    })
    .await;
}

#[tokio::test]
async fn i46_a2_a_check_red_on_the_base_too_is_inherited_and_not_sent() {
    let remote = Remote::new("fail");
    let forge = FakeForge::start(&remote.origin).await;
    let flow = flow(&forge, &remote, &pr_flow("pass", 3), false, "fail").await;
    flow.move_to("PR").await;
    let event = flow.event("checks_failed", "inherited").await;
    assert!(event["detail"].as_str().unwrap().contains("also fail on main"), "{event}");
    let got = flow.server.call("task.pr.get", json!({"task_id": flow.task})).await;
    assert_eq!(got["checks"][0]["inherited"], true, "{got}");
    assert!(flow.feedback().await.is_empty(), "not the agent's fault: nothing sent");
}

#[tokio::test]
async fn i46_a2_bot_comments_are_ignored_unless_asked_and_a_reviewer_is_heard() {
    let remote = Remote::new("pass");
    let forge = FakeForge::start(&remote.origin).await;
    // Green checks, but approvals are missing: auto-merge is refused with the reason.
    forge.lock().mergeable = Some("blocked".into());
    let flow = flow(&forge, &remote, &pr_flow("pass", 3), false, "pass").await;
    flow.move_to("PR").await;
    let refused = flow.event("checks_passed", "merge_refused").await;
    assert!(refused["detail"].as_str().unwrap().contains("approvals"), "{refused}");
    assert_eq!(forge.count("PUT", "/pulls/7/merge"), 0, "not merged without its approvals");
    let comment = |id: u64, login: &str, kind: &str, body: &str| {
        json!({"id": id, "user": {"login": login, "type": kind}, "body": body,
               "path": "src/lib.rs", "line": 12, "created_at": format!("2026-01-01T00:00:0{id}Z")})
    };
    forge.lock().comments.push(comment(1, "lint-bot[bot]", "Bot", "consider renaming"));
    flow.event("review", "ignored").await;
    assert!(flow.feedback().await.is_empty(), "a bot's comment is not a review request");
    forge.lock().comments.push(comment(2, "ana", "User", "this needs a test"));
    flow.event("review", "sent").await;
    let feedback = flow.delivered(1).await;
    assert_eq!(feedback.len(), 1, "{feedback:?}");
    assert!(
        feedback[0].contains("ana wrote on src/lib.rs:12:\n  this needs a test"),
        "{feedback:?}"
    );
    assert!(!feedback[0].contains("consider renaming"), "{feedback:?}");
    // The approval comes later: the same green commit is merged then, once.
    forge.lock().mergeable = None;
    flow.event("checks_passed", "merged").await;
    assert_eq!(forge.count("PUT", "/pulls/7/merge"), 1);
}

#[tokio::test]
async fn i46_a3_a_restart_between_two_polls_sends_no_duplicate_feedback() {
    let remote = Remote::new("pass");
    let forge = FakeForge::start(&remote.origin).await;
    // The agent does not fix anything: the same head keeps failing across the restart.
    let yaml = pr_flow("pass", 3)
        .replace("write ci-result pass\\\\n\\nterminal git commit -qam fix-ci\\n", "");
    let flow = flow(&forge, &remote, &yaml, false, "fail").await;
    flow.move_to("PR").await;
    flow.event("checks_failed", "sent").await;
    flow.delivered(1).await;
    let Flow { server, task, session, workflow, worktree } = flow;
    let dir = server.stop().await;
    let polled = forge.count("GET", "/pulls/7");
    let server = start(dir).await;
    let flow = Flow { server, task, session, workflow, worktree };
    // Several polls of the same failing head by the new server...
    eventually("the restarted server polls twice", || async {
        (forge.count("GET", "/pulls/7") >= polled + 2).then_some(())
    })
    .await;
    // ...and each event once.
    let events = flow.events().await;
    let failures: Vec<&Value> = events.iter().filter(|e| e["kind"] == "checks_failed").collect();
    assert_eq!(failures.len(), 1, "{events:?}");
    assert_eq!(flow.feedback().await.len(), 1, "the feedback was sent once");
    let queue = flow.server.call("message.queue.list", json!({"session_id": flow.session})).await;
    assert_eq!(queue["queue"], json!([]), "and not queued again");
    flow.server.stop().await;
}
