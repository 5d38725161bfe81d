//! Issue 47: work that arrives by itself. A fake GitHub on loopback lists issues, takes
//! comments, closes issues and serves one pull request; the tests poll it, deliver signed
//! webhooks to `/hooks/<id>`, restart the server in the middle, and merge the pull request.

use crate::common;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::response::IntoResponse;
use common::{TestServer, of_kind, step_id};
use kandev_testkit::git::git;
use kandev_testkit::wait::eventually;
use serde_json::{Value, json};

/// The forge token comes from the variable the repository names (tests cannot set one).
const TOKEN_ENV: &str = "CARGO_PKG_NAME";

/// The issue every test takes in.
fn issue_12() -> Value {
    json!({"number": 12, "title": "Crash on empty input", "body": "Steps: run it with nothing.",
           "html_url": "http://forge.test/acme/widget/issues/12", "state": "open",
           "labels": [{"name": "kandev"}]})
}

#[derive(Default)]
struct ForgeState {
    issues: Vec<Value>,
    branch: Option<String>,
    merged: bool,
    seen: Vec<(String, String, Value)>,
}

#[derive(Clone)]
struct FakeGitHub {
    url: String,
    state: Arc<Mutex<ForgeState>>,
}

impl FakeGitHub {
    async fn start() -> FakeGitHub {
        let state =
            Arc::new(Mutex::new(ForgeState { issues: vec![issue_12()], ..ForgeState::default() }));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let forge = FakeGitHub { url, state };
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

    /// The requests that matched `method` and `path`, with their bodies.
    fn seen(&self, method: &str, path: &str) -> Vec<Value> {
        let state = self.lock();
        state
            .seen
            .iter()
            .filter(|(m, p, _)| m == method && p == path)
            .map(|s| s.2.clone())
            .collect()
    }

    fn answer(
        &self,
        method: &str,
        path: &str,
        query: &str,
        body: Value,
    ) -> axum::response::Response {
        self.lock().seen.push((method.to_owned(), path.to_owned(), body.clone()));
        match (method, path.strip_prefix("/repos/acme/widget")) {
            ("GET", Some("/issues")) => {
                let wanted = query.split('&').find_map(|kv| kv.strip_prefix("labels="));
                let issues: Vec<Value> = self
                    .lock()
                    .issues
                    .iter()
                    .filter(|i| {
                        wanted.is_none_or(|l| {
                            i["labels"].as_array().unwrap().iter().any(|x| x["name"] == l)
                        })
                    })
                    .cloned()
                    .collect();
                axum::Json(Value::Array(issues)).into_response()
            }
            ("POST", Some("/issues/12/comments")) => {
                (axum::http::StatusCode::CREATED, axum::Json(json!({"id": 1}))).into_response()
            }
            ("PATCH", Some("/issues/12")) => {
                axum::Json(json!({"number": 12, "state": "closed"})).into_response()
            }
            ("POST", Some("/pulls")) => {
                self.lock().branch = body["head"].as_str().map(str::to_owned);
                axum::Json(self.pr()).into_response()
            }
            ("GET", Some("/pulls/7")) => axum::Json(self.pr()).into_response(),
            _ => (axum::http::StatusCode::NOT_FOUND, axum::Json(json!({"message": "Not Found"})))
                .into_response(),
        }
    }

    fn pr(&self) -> Value {
        let s = self.lock();
        json!({"number": 7, "html_url": "http://forge.test/acme/widget/pull/7",
               "state": if s.merged { "closed" } else { "open" }, "merged": s.merged,
               "head": {"ref": s.branch, "sha": ""}, "base": {"ref": "main"}})
    }
}

/// A bare `origin` at `<tmp>/acme/widget.git` with one commit on `main`, and a clone of it
/// (the registered repository).
struct Remote {
    _tmp: tempfile::TempDir,
    clone: PathBuf,
}

impl Remote {
    fn new() -> Remote {
        let tmp = tempfile::tempdir().unwrap();
        let origin = tmp.path().join("acme/widget.git");
        std::fs::create_dir_all(&origin).unwrap();
        git(&origin, &["init", "-q", "--bare", "-b", "main"]);
        git(tmp.path(), &["clone", "-q", origin.to_str().unwrap(), "clone"]);
        let clone = tmp.path().join("clone");
        git(&clone, &["config", "user.name", kandev_testkit::git::NAME]);
        git(&clone, &["config", "user.email", kandev_testkit::git::EMAIL]);
        git(&clone, &["checkout", "-q", "-b", "main"]);
        kandev_testkit::git::commit(&clone, &[("README", "widget\n")], "initial");
        git(&clone, &["push", "-q", "origin", "main"]);
        Remote { _tmp: tmp, clone }
    }
}

async fn start(dir: tempfile::TempDir, poll: Duration) -> TestServer {
    TestServer::start_tuned(kandev_server::ServerConfig::default(), dir, |c| {
        c.pr_poll_interval = Duration::ZERO;
        c.intake_poll_interval = poll;
    })
    .await
}

/// The workspace's id, its first workflow, and a repository on `forge`.
async fn setup(
    server: &TestServer,
    forge: &FakeGitHub,
    remote: &Remote,
    yaml: Option<&str>,
) -> (Value, Value, String) {
    let workspaces = server.call("workspace.list", json!({})).await;
    let workspace_id = workspaces["workspaces"][0]["id"].clone();
    let workflow = match yaml {
        Some(yaml) => {
            let imported = server
                .call("workflow.import", json!({"workspace_id": workspace_id, "yaml": yaml}))
                .await;
            imported["workflows"][0].clone()
        }
        None => {
            server.call("workflow.list", json!({"workspace_id": workspace_id})).await["workflows"]
                [0]
            .clone()
        }
    };
    let repository = server
        .call(
            "repository.create",
            json!({"workspace_id": workspace_id, "local_path": remote.clone,
                   "forge_api_base_url": forge.url, "forge_token_env": TOKEN_ENV}),
        )
        .await["repository"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    (workspace_id, workflow, repository)
}

/// Posts a GitHub delivery of `event` with `body`, signed with `secret`; status and answer.
async fn deliver(
    server: &TestServer,
    source: &str,
    secret: &str,
    delivery: &str,
    event: &str,
    body: &Value,
) -> (u16, Value) {
    let bytes = serde_json::to_vec(body).unwrap();
    let response = reqwest::Client::new()
        .post(server.url(&format!("/hooks/{source}")))
        .header("X-GitHub-Event", event)
        .header("X-GitHub-Delivery", delivery)
        .header("X-Hub-Signature-256", kandev_forge::webhook::sign(secret, &bytes))
        .header("Content-Type", "application/json")
        .body(bytes)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

fn issue_event() -> Value {
    json!({"action": "labeled", "issue": issue_12(), "repository": {"full_name": "acme/widget"}})
}

/// The tasks of the board made from issue 12.
async fn tasks_from_issue(server: &TestServer, workflow: &Value) -> Vec<Value> {
    let list =
        server.call("task.list", json!({"workflow_id": workflow["id"], "limit": 1000})).await;
    let mut found = vec![];
    for card in list["tasks"].as_array().unwrap() {
        let task = server.call("task.get", json!({"id": card["id"]})).await["task"].clone();
        if task["origin"]["external_id"] == "github:acme/widget#12" {
            found.push(task);
        }
    }
    found
}

/// 50 polls and 50 deliveries side by side (with the background poll every 20 ms too);
/// how many of them made the task.
async fn arrivals(server: &TestServer, source: &str, secret: &str, round: usize) -> usize {
    let polls = (0..50).map(|_| server.post("intake.source.poll", json!({"id": source})));
    let hooks = (0..50).map(|i| {
        let delivery = format!("delivery-{round}-{i}");
        async move { deliver(server, source, secret, &delivery, "issues", &issue_event()).await }
    });
    let (polls, hooks) =
        tokio::join!(futures::future::join_all(polls), futures::future::join_all(hooks));
    let mut made = 0;
    for (status, answer) in polls {
        assert_eq!(status, 200, "{answer}");
        made += answer["created"].as_array().unwrap().len();
    }
    for (status, answer) in hooks {
        assert!(status == 201 || status == 200, "{status} {answer}");
        if status == 201 {
            assert_eq!(answer["outcome"], "created");
            made += 1;
        } else {
            assert!(answer["outcome"] == "known", "{answer}");
        }
    }
    made
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn i47_1_a_hundred_polls_and_a_hundred_deliveries_of_one_issue_make_one_task_across_a_restart()
 {
    let forge = FakeGitHub::start().await;
    let remote = Remote::new();
    let server = start(tempfile::tempdir().unwrap(), Duration::from_millis(20)).await;
    let (workspace_id, workflow, repository) = setup(&server, &forge, &remote, None).await;
    let created = server
        .call(
            "intake.source.create",
            json!({"workspace_id": workspace_id, "name": "Widget issues", "kind": "issues",
                   "repository_id": repository, "label": "kandev", "hook_scheme": "github"}),
        )
        .await;
    let source = created["source"]["id"].as_str().unwrap().to_owned();
    let secret = created["hook_secret"].as_str().unwrap().to_owned();
    assert_eq!(created["source"]["hook_scheme"], "github");

    let before = arrivals(&server, &source, &secret, 1).await;
    let dir = server.stop().await;
    let server = start(dir, Duration::from_millis(20)).await;
    let after = arrivals(&server, &source, &secret, 2).await;

    assert!(before + after <= 1, "at most one arrival made the task ({before} + {after})");
    let tasks = tasks_from_issue(&server, &workflow).await;
    assert_eq!(tasks.len(), 1, "one task for the issue: {tasks:?}");
    let task = &tasks[0];
    assert_eq!(task["title"], "Crash on empty input");
    assert_eq!(task["origin"]["url"], "http://forge.test/acme/widget/issues/12");
    assert!(task["description"].as_str().unwrap().contains("Steps: run it with nothing."));
    assert_eq!(task["repository_ids"], json!([repository]));
    // On the workspace's first workflow, the source's default.
    assert_eq!(task["workflow_id"], workflow["id"]);
    // Polls asked for the label only.
    assert!(forge.lock().seen.iter().any(|(_, p, _)| p == "/repos/acme/widget/issues"));

    // A deleted task's issue is not taken in again.
    server.call("task.delete", json!({"id": task["id"], "force": true})).await;
    let polled = server.call("intake.source.poll", json!({"id": source})).await;
    assert_eq!(polled["created"], json!([]));
    assert_eq!(polled["source"]["last_error"], "");
    assert!(tasks_from_issue(&server, &workflow).await.is_empty());
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn i47_2_a_bad_signature_a_replay_and_an_unknown_event_are_refused_each_in_its_own_way() {
    let forge = FakeGitHub::start().await;
    let remote = Remote::new();
    let server = start(tempfile::tempdir().unwrap(), Duration::ZERO).await;
    let (workspace_id, workflow, repository) = setup(&server, &forge, &remote, None).await;
    let created = server
        .call(
            "intake.source.create",
            json!({"workspace_id": workspace_id, "name": "Widget issues", "kind": "issues",
                   "repository_id": repository, "hook_scheme": "github"}),
        )
        .await;
    let source = created["source"]["id"].as_str().unwrap().to_owned();
    let secret = created["hook_secret"].as_str().unwrap().to_owned();

    let (status, answer) =
        deliver(&server, &source, "not-the-secret", "d-1", "issues", &issue_event()).await;
    assert_eq!((status, answer["error"].as_str()), (401, Some("bad_signature")), "{answer}");
    assert!(!answer["message"].as_str().unwrap().contains(&secret));

    let (status, answer) =
        deliver(&server, &source, &secret, "d-2", "issues", &issue_event()).await;
    assert_eq!((status, answer["outcome"].as_str()), (201, Some("created")), "{answer}");
    let (status, answer) =
        deliver(&server, &source, &secret, "d-2", "issues", &issue_event()).await;
    assert_eq!((status, answer["error"].as_str()), (409, Some("replayed_delivery")), "{answer}");

    let (status, answer) = deliver(&server, &source, &secret, "d-3", "star", &json!({})).await;
    assert_eq!((status, answer["error"].as_str()), (422, Some("unknown_event")), "{answer}");
    assert!(answer["message"].as_str().unwrap().contains("star"));

    // The refused deliveries made nothing; the accepted one made one task.
    assert_eq!(tasks_from_issue(&server, &workflow).await.len(), 1);
    // A bad signature is refused before the id is remembered: the real delivery still goes.
    let (status, _) = deliver(&server, &source, &secret, "d-1", "ping", &json!({})).await;
    assert_eq!(status, 200);
    // An unknown source and a source turned off answer for themselves.
    let (status, answer) = deliver(&server, "nope", &secret, "d-4", "ping", &json!({})).await;
    assert_eq!((status, answer["error"].as_str()), (404, Some("not_found")));
    server.call("intake.source.update", json!({"id": source, "enabled": false})).await;
    let (status, answer) = deliver(&server, &source, &secret, "d-5", "ping", &json!({})).await;
    assert_eq!((status, answer["error"].as_str()), (403, Some("disabled")));

    // The generic HMAC scheme makes a task from its own payload, once per external id.
    let generic = server
        .call(
            "intake.source.create",
            json!({"workspace_id": workspace_id, "name": "Alerts", "kind": "webhook"}),
        )
        .await;
    let (id, key) =
        (generic["source"]["id"].as_str().unwrap(), generic["hook_secret"].as_str().unwrap());
    assert_eq!(generic["source"]["hook_scheme"], "hmac");
    let body = serde_json::to_vec(&json!({"title": "Disk almost full", "external_id": "alert-9"}))
        .unwrap();
    // A sender cannot take Kandev's own keys (it would keep issue 12 from its task).
    let claim =
        serde_json::to_vec(&json!({"title": "x", "external_id": "github:acme/widget#12"})).unwrap();
    let response = reqwest::Client::new()
        .post(server.url(&format!("/hooks/{id}")))
        .header("X-Kandev-Event", "task")
        .header("X-Kandev-Delivery", "g-0")
        .header("X-Kandev-Signature", kandev_forge::webhook::sign(key, &claim))
        .body(claim)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 400);
    assert_eq!(response.json::<Value>().await.unwrap()["error"], "bad_payload");
    for (n, expected) in [(1, 201), (2, 200)] {
        let response = reqwest::Client::new()
            .post(server.url(&format!("/hooks/{id}")))
            .header("X-Kandev-Event", "task")
            .header("X-Kandev-Delivery", format!("g-{n}"))
            .header("X-Kandev-Signature", kandev_forge::webhook::sign(key, &body))
            .body(body.clone())
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), expected);
    }
    server.stop().await;
}

const WRITE_BACK: &str = r#"version: 1
kind: kandev-workflow
workflows:
  - name: Issues
    steps:
      - name: Backlog
        is_start_step: true
      - name: Review
        events:
          on_pr_merged: [{type: comment_issue}, {type: close_issue}, {type: move_to_next}]
      - name: Done
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn i47_4_merging_the_pull_request_comments_on_and_closes_the_issue() {
    let forge = FakeGitHub::start().await;
    let remote = Remote::new();
    let server = start(tempfile::tempdir().unwrap(), Duration::ZERO).await;
    let (workspace_id, workflow, repository) =
        setup(&server, &forge, &remote, Some(WRITE_BACK)).await;
    let created = server
        .call(
            "intake.source.create",
            json!({"workspace_id": workspace_id, "name": "Widget issues", "kind": "issues",
                   "repository_id": repository, "workflow_id": workflow["id"]}),
        )
        .await;
    let polled = server.call("intake.source.poll", json!({"id": created["source"]["id"]})).await;
    let task = polled["created"][0]["id"].as_str().unwrap().to_owned();
    assert_eq!(polled["created"][0]["step_id"], step_id(&workflow, "Backlog"));

    let session = server.call("session.launch", json!({"task_id": task})).await["session"].clone();
    let session_id = session["id"].as_str().unwrap().to_owned();
    server.wait_state(&session_id, "WAITING_FOR_INPUT").await;
    let worktree = PathBuf::from(session["cwd"].as_str().unwrap());
    kandev_testkit::git::commit(&worktree, &[("fix.txt", "fixed\n")], "the fix");
    server.call("task.pr.create", json!({"task_id": task})).await;
    server.call("task.move", json!({"id": task, "step_id": step_id(&workflow, "Review")})).await;
    assert!(forge.seen("POST", "/repos/acme/widget/issues/12/comments").is_empty());

    forge.lock().merged = true;
    server.call("task.pr.get", json!({"task_id": task})).await;

    let comments = forge.seen("POST", "/repos/acme/widget/issues/12/comments");
    assert_eq!(comments.len(), 1, "one comment");
    assert!(
        comments[0]["body"]
            .as_str()
            .unwrap()
            .contains("http://forge.test/acme/widget/pull/7 (merged)")
    );
    assert_eq!(
        forge.seen("PATCH", "/repos/acme/widget/issues/12"),
        vec![json!({"state": "closed"})]
    );
    let moved = eventually("the task moved to Done", || async {
        let task = server.call("task.get", json!({"id": task})).await["task"].clone();
        (task["step_id"] == step_id(&workflow, "Done")).then_some(task)
    })
    .await;
    assert_eq!(moved["origin"]["external_id"], "github:acme/widget#12");
    let messages = server.messages(&session_id).await;
    let notes: Vec<&str> = of_kind(&messages, "status")
        .iter()
        .filter(|m| m["metadata"]["reason"] == "issue_update")
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert_eq!(notes, vec!["commented on issue #12", "closed issue #12"]);
    server.stop().await;
}
