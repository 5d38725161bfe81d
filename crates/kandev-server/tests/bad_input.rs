//! Issue 2 acceptance 4: bad input gets its api.md error code and a short message, over HTTP
//! and WebSocket, and the WebSocket connection stays usable afterwards.

use crate::common;

use common::{TestServer, step_id};
use serde_json::{Value, json};

/// Each case: action, raw body, expected HTTP status and error code.
fn cases(big: &str) -> Vec<(&'static str, String, u16, &'static str)> {
    vec![
        ("workspace.create", "{\"name\": ".into(), 400, "BAD_REQUEST"),
        ("no.such.action", "{}".into(), 404, "UNKNOWN_ACTION"),
        ("workspace.create", "{}".into(), 422, "VALIDATION_ERROR"),
        ("workspace.create", "{\"name\": [1]}".into(), 422, "VALIDATION_ERROR"),
        ("workspace.create", "{\"name\": \"   \"}".into(), 422, "VALIDATION_ERROR"),
        ("workspace.create", "{\"name\": \"a\", \"extra\": 1}".into(), 422, "VALIDATION_ERROR"),
        ("workspace.create", "[1, 2]".into(), 422, "VALIDATION_ERROR"),
        ("workspace.create", big.to_owned(), 400, "BAD_REQUEST"),
        ("task.get", "{\"id\": \"missing\"}".into(), 404, "NOT_FOUND"),
    ]
}

fn oversized() -> String {
    json!({"name": "x".repeat(4 * 1024 * 1024 + 10)}).to_string()
}

#[tokio::test]
async fn http_errors_have_codes_and_short_messages() {
    let server = TestServer::start().await;
    let big = oversized();
    for (action, body, status, code) in cases(&big) {
        let (got_status, got) = server.post_raw(action, body.clone()).await;
        assert_eq!(
            (got_status, got["code"].as_str()),
            (status, Some(code)),
            "{action} {:.60}: {got}",
            body
        );
        let message = got["message"].as_str().unwrap();
        assert!(!message.is_empty() && message.len() < 300, "short message: {message}");
        assert!(!message.ends_with('.'), "no trailing period: {message}");
    }
}

#[tokio::test]
async fn websocket_errors_keep_the_connection_usable() {
    let server = TestServer::start().await;
    let mut ws = server.ws().await;
    let big = oversized();
    for (action, body, _, code) in cases(&big) {
        let frame = match serde_json::from_str::<Value>(&body) {
            Ok(payload) => {
                json!({"id": "x", "type": "request", "action": action, "payload": payload})
                    .to_string()
            }
            // Malformed or oversized: send the bytes as the whole frame.
            Err(_) => body.clone(),
        };
        ws.send_raw(frame).await;
        let reply = ws.next().await;
        assert_eq!(reply["type"], "error", "{action}: {reply}");
        assert_eq!(reply["payload"]["code"], code, "{action} {:.60}: {reply}", body);
        // Still usable.
        let ok = ws.call("workspace.list", json!({})).await;
        assert_eq!(ok["type"], "response", "after {action}: {ok}");
    }
    ws.send_raw("not json at all").await;
    assert_eq!(ws.next().await["payload"]["code"], "BAD_REQUEST");
    ws.send_raw(json!({"id": 1, "type": "request"}).to_string()).await;
    let reply = ws.next().await;
    assert_eq!(
        (reply["id"].as_i64(), reply["payload"]["code"].as_str()),
        (Some(1), Some("BAD_REQUEST"))
    );
    let ok = ws.call("workspace.list", json!({})).await;
    assert_eq!(ok["type"], "response");
}

#[tokio::test]
async fn moving_a_task_to_a_step_of_another_workflow_is_refused() {
    let server = TestServer::start().await;
    let (_, board) = server.kanban().await;
    let (_, other) = server.kanban().await;
    let backlog = step_id(&board, "Backlog");
    let task = server
        .call("task.create", json!({"workflow_id": board["id"], "title": "t", "step_id": backlog}))
        .await;
    let foreign = step_id(&other, "Review");
    let (status, body) =
        server.post("task.move", json!({"id": task["task"]["id"], "step_id": foreign})).await;
    assert_eq!((status, body["code"].as_str()), (422, Some("VALIDATION_ERROR")), "{body}");
    assert!(body["message"].as_str().unwrap().contains("not a step of the task's workflow"));
    let unchanged = server.call("task.get", json!({"id": task["task"]["id"]})).await;
    assert_eq!(unchanged["task"]["step_id"], backlog.as_str(), "the task did not move");
    let (status, _) = server
        .post("task.create", json!({"workflow_id": board["id"], "title": "t", "step_id": foreign}))
        .await;
    assert_eq!(status, 422);
}

#[tokio::test]
async fn a_repository_path_that_is_not_a_git_repository_is_refused() {
    let server = TestServer::start().await;
    let (workspace_id, _) = server.kanban().await;
    let plain = tempfile::tempdir().unwrap();
    let (status, body) = server
        .post(
            "repository.create",
            json!({"workspace_id": workspace_id, "local_path": plain.path()}),
        )
        .await;
    assert_eq!((status, body["code"].as_str()), (422, Some("VALIDATION_ERROR")), "{body}");
    assert!(body["message"].as_str().unwrap().contains("is not a git repository"));
    let listed = server.call("repository.list", json!({"workspace_id": workspace_id})).await;
    assert!(listed["repositories"].as_array().unwrap().is_empty(), "nothing was created");

    std::fs::create_dir(plain.path().join(".git")).unwrap();
    std::fs::write(plain.path().join(".git/HEAD"), "ref: refs/heads/trunk\n").unwrap();
    let created = server
        .call(
            "repository.create",
            json!({"workspace_id": workspace_id, "local_path": plain.path()}),
        )
        .await;
    assert_eq!(created["repository"]["default_branch"], "trunk");
    assert_eq!(created["repository"]["branch_template"], "kandev/{task-slug}-{short-id}");
    let (status, body) = server
        .post(
            "repository.create",
            json!({"workspace_id": workspace_id, "local_path": plain.path()}),
        )
        .await;
    assert_eq!((status, body["code"].as_str()), (409, Some("CONFLICT")), "registered twice");
}

/// Issue 38, finding 9b: a repository is registered once, whatever the spelling of its
/// folder: its `.git` folder (or a work tree's separate git folder) is refused naming the
/// folder to register, and a trailing slash, `./` or a symlink is the same repository.
#[tokio::test]
async fn i38_9_a_repository_is_registered_once_whatever_the_spelling() {
    let server = TestServer::start().await;
    let (workspace_id, _) = server.kanban().await;
    let (tmp, repo) = common::git_repository();
    let repo = repo.canonicalize().unwrap();
    let create = |path: String| {
        let server = &server;
        let payload = json!({"workspace_id": workspace_id, "local_path": path});
        async move { server.post("repository.create", payload).await }
    };
    let (status, body) = create(repo.display().to_string()).await;
    assert_eq!(status, 200, "{body}");

    for git_dir in [format!("{}/.git", repo.display()), format!("{}/.git/", repo.display())] {
        let (status, body) = create(git_dir.clone()).await;
        assert_eq!(
            (status, body["code"].as_str()),
            (422, Some("VALIDATION_ERROR")),
            "{git_dir}: {body}"
        );
        let message = body["message"].as_str().unwrap();
        assert!(message.contains(&format!("register {} instead", repo.display())), "{message}");
    }
    std::os::unix::fs::symlink(&repo, tmp.path().join("link")).unwrap();
    let parent = repo.parent().unwrap().display().to_string();
    for spelling in [
        format!("{}/", repo.display()),
        format!("{parent}/./repo"),
        format!(
            "{parent}/../{}/repo",
            repo.parent().unwrap().file_name().unwrap().to_str().unwrap()
        ),
        tmp.path().join("link").display().to_string(),
    ] {
        let (status, body) = create(spelling.clone()).await;
        assert_eq!((status, body["code"].as_str()), (409, Some("CONFLICT")), "{spelling}: {body}");
    }

    // A work tree whose git folder is elsewhere (`git init --separate-git-dir`).
    let work = tmp.path().join("work");
    let separate = tmp.path().join("separate.git");
    let init = std::process::Command::new("git")
        .args(["init", "-q", "--separate-git-dir"])
        .arg(&separate)
        .arg(&work)
        .status()
        .unwrap();
    assert!(init.success());
    let (status, body) = create(separate.display().to_string()).await;
    assert_eq!((status, body["code"].as_str()), (422, Some("VALIDATION_ERROR")), "{body}");
    assert!(body["message"].as_str().unwrap().contains("work tree"), "{body}");
    let (status, body) = create(work.display().to_string()).await;
    assert_eq!(status, 200, "the work tree registers: {body}");

    // A bare repository is a repository of its own.
    let bare = tmp.path().join("bare.git");
    let init = std::process::Command::new("git")
        .args(["init", "-q", "--bare"])
        .arg(&bare)
        .status()
        .unwrap();
    assert!(init.success());
    let (status, body) = create(bare.display().to_string()).await;
    assert_eq!(status, 200, "a bare repository registers: {body}");

    let listed = server.call("repository.list", json!({"workspace_id": workspace_id})).await;
    assert_eq!(listed["repositories"].as_array().unwrap().len(), 3, "{listed}");
}

#[tokio::test]
async fn many_hostile_requests_never_take_the_server_down() {
    let server = TestServer::start().await;
    let payloads = [
        "null".to_string(),
        "\"string\"".into(),
        "12345678901234567890123".into(),
        "[".repeat(10_000),
        format!("{}1{}", "[".repeat(200), "]".repeat(200)),
        "{\"id\": {\"$ne\": 1}}".into(),
        "{\"id\": \"\\u0000\"}".into(),
        "\u{feff}{}".into(),
    ];
    let actions =
        ["task.get", "task.move", "workflow.import", "subscribe", "task.list", "", "../../etc"];
    for action in actions {
        for payload in &payloads {
            let (status, body) = server.post_raw(action, payload.clone()).await;
            assert!((400..500).contains(&status), "{action} {payload:.40}: {status} {body}");
            assert!(body["code"].is_string());
        }
    }
    let health: Value =
        reqwest::get(server.url("/api/v1/health")).await.unwrap().json().await.unwrap();
    assert_eq!(health["status"], "ok");
}

/// Issue 12, finding 9: names and titles with nothing visible (zero-width characters only)
/// or with bidi override and isolate controls are refused for every entity, naming the
/// field; visible text with joiners is kept.
#[tokio::test]
async fn i12_f9_invisible_and_bidi_names_are_refused_everywhere() {
    let server = TestServer::start().await;
    let (workspace_id, workflow) = server.kanban().await;
    let workflow_id = workflow["id"].as_str().unwrap();
    let step = workflow["steps"][0]["id"].as_str().unwrap();
    let task = server.call("task.create", json!({"workflow_id": workflow_id, "title": "T"})).await;
    let task_id = task["task"]["id"].as_str().unwrap();
    let profile = server.call("agent.profile.create", json!({"name": "P", "kind": "mock"})).await;
    let profile_id = profile["profile"]["id"].as_str().unwrap();
    let repo = tempfile::tempdir().unwrap();
    std::fs::create_dir(repo.path().join(".git")).unwrap();
    std::fs::write(repo.path().join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
    let repository = server
        .call("repository.create", json!({"workspace_id": workspace_id, "local_path": repo.path()}))
        .await;
    let repository_id = repository["repository"]["id"].as_str().unwrap();

    /// A payload setting the name or title under test.
    type Payload<'a> = Box<dyn Fn(&str) -> Value + 'a>;
    let paths: Vec<(&str, Payload<'_>, &str)> = vec![
        ("task.create", Box::new(|t| json!({"workflow_id": workflow_id, "title": t})), "title"),
        ("task.update", Box::new(|t| json!({"id": task_id, "title": t})), "title"),
        ("workspace.create", Box::new(|t| json!({"name": t})), "name"),
        ("workspace.update", Box::new(|t| json!({"id": workspace_id, "name": t})), "name"),
        ("workflow.create", Box::new(|t| json!({"workspace_id": workspace_id, "name": t})), "name"),
        ("workflow.update", Box::new(|t| json!({"id": workflow_id, "name": t})), "name"),
        (
            "workflow.step.create",
            Box::new(|t| json!({"workflow_id": workflow_id, "name": t})),
            "name",
        ),
        ("workflow.step.update", Box::new(|t| json!({"id": step, "name": t})), "name"),
        ("agent.profile.create", Box::new(|t| json!({"name": t, "kind": "mock"})), "name"),
        ("agent.profile.update", Box::new(|t| json!({"id": profile_id, "name": t})), "name"),
        ("repository.update", Box::new(|t| json!({"id": repository_id, "name": t})), "name"),
    ];
    let hostile = [
        ("\u{200b}\u{200c}\u{200d}", "no visible characters"),
        ("\u{feff}\u{2060} \u{00ad}", "no visible characters"),
        ("Fix login \u{202e}gub", "bidirectional"),
        ("\u{2067}Fix\u{2069}", "bidirectional"),
    ];
    for (action, payload, field) in &paths {
        for (text, problem) in hostile {
            let (status, body) = server.post(action, payload(text)).await;
            assert_eq!(
                (status, body["code"].as_str()),
                (422, Some("VALIDATION_ERROR")),
                "{action} {text:?}: {body}"
            );
            assert_eq!(body["details"]["field"], *field, "{action}: {body}");
            let message = body["message"].as_str().unwrap();
            assert!(message.starts_with(field) && message.contains(problem), "{message}");
        }
    }
    let kept = "👩\u{200d}💻 pair on it";
    let renamed = server.call("task.update", json!({"id": task_id, "title": kept})).await;
    assert_eq!(renamed["task"]["title"], kept);
}
