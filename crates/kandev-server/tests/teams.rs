//! Issue 49: teams. Every action of the table declares the role it needs and one check
//! enforces it for HTTP, the WebSocket and each MCP tool; a viewer cannot start an agent,
//! answer a permission or open a terminal; a member cannot create a profile with a command or
//! set a repository script; the trusted proxy's header is refused from any other address; a
//! user who is not a member of a workspace does not see its tasks anywhere.

use crate::common;

use std::collections::HashMap;

use common::mcp::{logging_profile, mcp_call, mcp_rpc, tokens, tool_result, wait_ready};
use common::worktrees::Board;
use common::{TestServer, WAIT, Ws, git_repository, step_id};
use futures::StreamExt;
use kandev_api_types::access::Need;
use kandev_api_types::actions;
use kandev_server::{ProxyAuth, ServerConfig, TOKEN_PREFIX, new_secret, secret_hash};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

/// The server's own token: the test's setup acts with it (it passes every check).
const SERVER_TOKEN: &str = "the-server-token";

/// A team on one server: `olga` owns it (the first user); in the default workspace `vera` is
/// a viewer, `mike` a member and `ada` an admin; `nora` belongs to no workspace. Each has a
/// personal token.
struct Team {
    server: TestServer,
    workspace_id: String,
    tokens: HashMap<&'static str, String>,
}

const PEOPLE: [&str; 5] = ["olga", "vera", "mike", "ada", "nora"];

impl Team {
    async fn new() -> Team {
        let config = ServerConfig { token: Some(SERVER_TOKEN.into()), ..ServerConfig::default() };
        let server = TestServer::start_with(config, tempfile::tempdir().unwrap()).await;
        let mut tokens = HashMap::new();
        for name in PEOPLE {
            let hash = kandev_server::hash_password("correct horse battery").unwrap();
            let secret = new_secret(TOKEN_PREFIX);
            let mut tx = server.store.begin_write().await.unwrap();
            let user = tx.insert_user(name, &hash).await.unwrap();
            assert_eq!(user.owner, name == "olga", "the first user owns the server");
            tx.insert_token(&user.id, "test", &secret_hash(&secret)).await.unwrap();
            tx.commit().await.unwrap();
            tokens.insert(name, secret);
        }
        let workspaces = server.call("workspace.list", json!({})).await;
        let workspace_id = workspaces["workspaces"][0]["id"].as_str().unwrap().to_owned();
        let team = Team { server, workspace_id, tokens };
        for (name, role) in [("vera", "viewer"), ("mike", "member"), ("ada", "admin")] {
            team.set_role(name, role).await;
        }
        team
    }

    async fn set_role(&self, name: &str, role: &str) {
        let body = json!({"workspace_id": self.workspace_id, "user": name, "role": role});
        let (status, answer) = self.act("olga", "workspace.member.set", body).await;
        assert_eq!(status, 200, "{answer}");
    }

    /// Posts `action` as `who` (their personal token); returns status and body.
    async fn act(&self, who: &str, action: &str, payload: Value) -> (u16, Value) {
        let response = reqwest::Client::new()
            .post(self.server.url(&format!("/api/v1/{action}")))
            .bearer_auth(&self.tokens[who])
            .json(&payload)
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    async fn ws(&self, who: &str) -> Ws {
        let mut request = format!("ws://{}/ws", self.server.addr).into_client_request().unwrap();
        let value = format!("Bearer {}", self.tokens[who]).parse().unwrap();
        request.headers_mut().insert("authorization", value);
        let (stream, _) = tokio_tungstenite::connect_async(request).await.unwrap();
        Ws::new(stream)
    }
}

/// The people whose role is below `need`: each must be refused.
fn below(need: Need) -> &'static [&'static str] {
    match need {
        Need::Anyone => &[],
        Need::Viewer => &["nora"],
        Need::Member => &["nora", "vera"],
        Need::Admin => &["nora", "vera", "mike"],
        Need::Owner => &["nora", "vera", "mike", "ada"],
    }
}

/// The one person whose role is exactly `need` (`Anyone`: nora, who belongs nowhere).
fn at(need: Need) -> &'static str {
    match need {
        Need::Anyone => "nora",
        Need::Viewer => "vera",
        Need::Member => "mike",
        Need::Admin => "ada",
        Need::Owner => "olga",
    }
}

/// Acceptance 1: built from the action table itself, so an action added to it is checked
/// too. Every action is refused (`FORBIDDEN`) to each person below its declared role, over
/// HTTP and over the WebSocket, and is not refused to the person at that role (the check
/// tells roles apart: the empty payload then fails validation, or the action runs).
#[tokio::test]
async fn i49_1_every_action_of_the_table_refuses_each_role_below_its_own_over_every_transport() {
    let team = Team::new().await;
    let mut sockets = HashMap::new();
    for name in PEOPLE {
        sockets.insert(name, team.ws(name).await);
    }
    for (action, access) in actions::ACCESS {
        let http = !actions::SOCKET_ONLY.contains(action);
        for who in below(access.need) {
            if http {
                let (status, body) = team.act(who, action, json!({})).await;
                assert_eq!(
                    (status, &body["code"]),
                    (403, &json!("FORBIDDEN")),
                    "{action} as {who}"
                );
            }
            let reply = sockets.get_mut(who).unwrap().call(action, json!({})).await;
            assert_eq!(reply["type"], "error", "{action} as {who} over the socket: {reply}");
            assert_eq!(reply["payload"]["code"], "FORBIDDEN", "{action} as {who}: {reply}");
        }
        if http && !matches!(*action, "user.remove" | "user.password.reset") {
            let who = at(access.need);
            let (status, body) = team.act(who, action, json!({})).await;
            assert_ne!(status, 403, "{action} as {who} is allowed: {body}");
        }
    }
    // What anyone let in may call: their own account, and lists that answer only what they
    // may see. An action added as open to everyone must be added here on purpose.
    let open: Vec<&str> =
        actions::ACCESS.iter().filter(|(_, a)| a.need == Need::Anyone).map(|(n, _)| *n).collect();
    let expected = [
        "workspace.list",
        "workflow.template.list",
        "agent.kinds",
        "agent.profile.list",
        "executor.list",
        "notification.list",
        "user.me",
        "user.token.create",
        "user.token.list",
        "user.token.revoke",
        "user.password.set",
        "subscribe",
        "unsubscribe",
        "terminal.detach",
    ];
    assert_eq!(open, expected);
}

/// Acceptance 1, MCP: every tool the server lists declares the action it is, and is refused
/// to each person below that action's role when they call `/mcp` with their own token.
#[tokio::test]
async fn i49_1_every_mcp_tool_refuses_each_role_below_its_own() {
    let team = Team::new().await;
    let url = team.server.url("/mcp");
    let (status, listed) = mcp_rpc(url, Some(&team.tokens["olga"]), "tools/list", json!({})).await;
    assert_eq!(status, 200, "{listed}");
    let tools = listed["result"]["tools"].as_array().unwrap();
    assert!(tools.len() >= 8, "{listed}");
    for tool in tools {
        let name = tool["name"].as_str().unwrap();
        let access = kandev_server::mcp_tool_access(name)
            .unwrap_or_else(|| panic!("tool {name} declares no access rule"));
        assert!(below(access.need).contains(&"nora"), "{name} needs at least a viewer");
        for who in below(access.need) {
            let (status, body) =
                mcp_call(&team.server, Some(&team.tokens[who]), name, json!({})).await;
            assert_eq!(status, 200, "{body}");
            let (failed, answer) = tool_result(&body);
            assert!(failed, "{name} as {who}: {body}");
            assert_eq!(answer["code"], "FORBIDDEN", "{name} as {who}: {answer}");
        }
    }
}

/// Item 1: an agent acts with the rights of the member who started its session, at most,
/// whether the session came from `session.launch`, `task.create` with a start or
/// `task.attempt.create`: once
/// that member is made a viewer, the agent's writing tools are refused and reading goes on;
/// made a member again, it writes again.
#[tokio::test]
async fn i49_1_an_agent_acts_with_the_rights_of_whoever_started_its_session() {
    let team = Team::new().await;
    let log = team.server.dir.path().join("mcp.log");
    let profile = logging_profile(&team.server, &log).await;
    let (_, workflow) = team.server.kanban().await;
    let backlog = step_id(&workflow, "Backlog");
    let task = json!({"workflow_id": workflow["id"], "title": "Launched", "step_id": backlog});
    let task = team.server.call("task.create", task).await;
    let launch = json!({"task_id": task["task"]["id"], "agent_profile_id": profile});
    let (status, launched) = team.act("mike", "session.launch", launch).await;
    assert_eq!(status, 200, "{launched}");
    let started = json!({"workflow_id": workflow["id"], "title": "Started", "step_id": backlog,
                         "agent_profile_id": profile, "start_agent": true});
    let (status, created) = team.act("mike", "task.create", started).await;
    assert_eq!(status, 200, "{created}");
    let (_repo_dir, path) = git_repository();
    let repository = json!({"workspace_id": team.workspace_id, "local_path": path});
    let repository = team.server.call("repository.create", repository).await;
    let raced = json!({"workflow_id": workflow["id"], "title": "Raced", "step_id": backlog,
                       "repository_ids": [repository["repository"]["id"]]});
    let raced = team.server.call("task.create", raced).await;
    let attempts = json!({"task_id": raced["task"]["id"],
                          "attempts": [{"profile_id": profile, "prompt": "go"}]});
    let (status, attempt) = team.act("mike", "task.attempt.create", attempts).await;
    assert_eq!(status, 200, "{attempt}");
    for session in [&launched["session"], &created["session"], &attempt["sessions"][0]] {
        let id = session["id"].as_str().unwrap();
        wait_ready(&team.server, Some(SERVER_TOKEN), id).await;
    }
    let agents = tokens(&log);
    let mut titles = vec![];
    let create = json!({"title": "Subtask", "step": "Backlog"});
    for agent in &agents {
        team.set_role("mike", "viewer").await;
        let (_, body) = mcp_call(&team.server, Some(agent), "create_task", create.clone()).await;
        let (failed, answer) = tool_result(&body);
        assert!(failed && answer["code"] == "FORBIDDEN", "{body}");
        let (_, body) = mcp_call(&team.server, Some(agent), "get_task", json!({})).await;
        let (failed, read) = tool_result(&body);
        assert!(!failed, "reading goes on: {body}");
        titles.push(read["task"]["title"].as_str().unwrap_or_default().to_owned());

        team.set_role("mike", "member").await;
        let (_, body) = mcp_call(&team.server, Some(agent), "create_task", create.clone()).await;
        assert!(!tool_result(&body).0, "{body}");
    }
    titles.sort();
    assert_eq!(titles, ["Launched", "Raced", "Started"], "each way of starting an agent");
}

/// Acceptance 2: a viewer cannot start an agent, answer a permission or open a terminal; a
/// member cannot create a profile with a command of their own or set a repository script; an
/// admin can do all of it.
#[tokio::test]
async fn i49_2_what_viewers_members_and_admins_may_do() {
    let team = Team::new().await;
    let board = Board::new(&team.server).await;
    let (_repo_dir, path) = git_repository();
    let repository_id = board.repository(&path, json!({})).await;
    let task_id = board.task("Work", &[&repository_id]).await;
    let (session_id, _) = board.started(&task_id).await;
    let refused = |(status, body): (u16, Value)| {
        assert_eq!((status, &body["code"]), (403, &json!("FORBIDDEN")), "{body}");
        body["message"].as_str().unwrap().to_owned()
    };

    let message = refused(team.act("vera", "session.launch", json!({"task_id": task_id})).await);
    let upload = reqwest::Client::new()
        .post(team.server.url("/api/v1/attachment.upload?name=a.txt"))
        .bearer_auth(&team.tokens["vera"])
        .header("x-kandev-upload", "1")
        .header("content-type", "text/plain")
        .body("hello")
        .send()
        .await
        .unwrap();
    assert_eq!(upload.status().as_u16(), 403, "a viewer sends no messages, so uploads none");
    assert!(message.contains("member role") && message.contains("viewer"), "{message}");
    let answer = json!({"session_id": session_id, "request_id": "r1", "option_id": "allow"});
    refused(team.act("vera", "permission.respond", answer).await);
    let open = json!({"task_id": task_id, "cols": 80, "rows": 24});
    refused(team.act("vera", "terminal.open", open.clone()).await);
    refused(team.act("mike", "terminal.open", open.clone()).await);

    let profile = json!({"name": "Shell", "kind": "custom", "command": "/bin/sh"});
    refused(team.act("mike", "agent.profile.create", profile.clone()).await);
    let script = json!({"id": repository_id, "setup_script": "echo hi"});
    refused(team.act("mike", "repository.update", script.clone()).await);
    let (status, body) = team.act("mike", "session.launch", json!({"task_id": task_id})).await;
    assert_eq!(status, 200, "a member starts agents: {body}");

    let (status, body) = team.act("ada", "agent.profile.create", profile).await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = team.act("ada", "repository.update", script).await;
    assert_eq!((status, &body["repository"]["setup_script"]), (200, &json!("echo hi")), "{body}");
    let (status, body) = team.act("ada", "terminal.open", open).await;
    assert_eq!(status, 200, "{body}");
    let terminal_id = body["terminal"]["id"].as_str().unwrap();
    let mut vera = team.ws("vera").await;
    let attach = vera.call("terminal.attach", json!({"terminal_id": terminal_id})).await;
    assert_eq!(attach["payload"]["code"], "FORBIDDEN", "a shell is an admin's: {attach}");
    team.server.call("terminal.close", json!({"terminal_id": terminal_id})).await;

    // A dev server a member starts: its log is reading the task, so a viewer follows it.
    let dev = json!({"id": repository_id, "dev_script": "echo serving on $PORT; sleep 30"});
    team.server.call("repository.update", dev).await;
    let (status, started) = team.act("mike", "devserver.start", json!({"task_id": task_id})).await;
    assert_eq!(status, 200, "{started}");
    let log = started["dev_server"]["terminal_id"].as_str().unwrap();
    let attach = vera.call("terminal.attach", json!({"terminal_id": log})).await;
    assert_eq!(attach["type"], "response", "a viewer follows a dev server's log: {attach}");
    let stop = json!({"task_id": task_id});
    refused(team.act("vera", "devserver.stop", stop.clone()).await);
    team.server.call("devserver.stop", stop).await;
}

/// Acceptance 3: the user header is taken only from the configured proxy addresses; from any
/// other address the request is refused, whatever else it carries. From the proxy, a name
/// Kandev does not know becomes a viewer of the `--proxy-join` workspaces, or is refused when
/// the server refuses new users.
#[tokio::test]
async fn i49_3_the_proxy_header_from_an_address_not_configured_as_a_proxy_is_refused() {
    let proxy = |proxies: &[&str], create_users| {
        let join = vec!["Default".to_owned()];
        let proxies: Vec<String> = proxies.iter().map(ToString::to_string).collect();
        let proxy = ProxyAuth::new("X-Forwarded-User", &proxies, create_users, join).unwrap();
        ServerConfig { proxy: Some(proxy), ..ServerConfig::default() }
    };
    let me = |server: &TestServer, name: &str| {
        reqwest::Client::new()
            .post(server.url("/api/v1/user.me"))
            .header("x-forwarded-user", name)
            .json(&json!({}))
            .send()
    };
    let elsewhere = proxy(&["10.9.9.9", "10.1.0.0/16"], true);
    let server = TestServer::start_with(elsewhere, tempfile::tempdir().unwrap()).await;
    let response = me(&server, "mallory").await.unwrap();
    assert_eq!(response.status().as_u16(), 403);
    let body: Value = response.json().await.unwrap();
    assert!(body["message"].as_str().unwrap().contains("trusted proxy"), "{body}");
    assert!(!server.store.has_users().await.unwrap(), "nobody was made a user");
    let (status, _) = server.post("workspace.list", json!({})).await;
    assert_eq!(status, 200, "without the header, loopback stays zero-setup");

    let trusted = proxy(&["10.9.9.9", "127.0.0.0/8"], true);
    let server = TestServer::start_with(trusted, tempfile::tempdir().unwrap()).await;
    let body: Value = me(&server, "pat@example.com").await.unwrap().json().await.unwrap();
    let named = (&body["user"]["name"], &body["via"]);
    assert_eq!(named, (&json!("pat@example.com"), &json!("proxy")), "an e-mail address: {body}");
    assert_eq!(body["owner"], false, "a first proxy sign-in never owns the server");
    assert_eq!(body["roles"][0]["role"], "viewer", "{body}");

    let refusing = proxy(&["127.0.0.1"], false);
    let server = TestServer::start_with(refusing, tempfile::tempdir().unwrap()).await;
    let response = me(&server, "pat").await.unwrap();
    assert_eq!(response.status().as_u16(), 403);
}

/// Acceptance 4: a workspace `nora` and `mike` do not belong to: its tasks are not in their
/// lists, search or notifications, and its live topics are refused or filtered, while the
/// owner sees it all.
#[tokio::test]
async fn i49_4_a_non_member_does_not_see_a_workspaces_tasks() {
    let team = Team::new().await;
    let (status, created) = team.act("olga", "workspace.create", json!({"name": "Secret"})).await;
    assert_eq!(status, 200, "{created}");
    let secret = created["workspace"]["id"].as_str().unwrap().to_owned();
    let workflow = json!({"workspace_id": secret, "name": "Board", "template_id": "kanban"});
    let (_, workflow) = team.act("olga", "workflow.create", workflow).await;
    let workflow = &workflow["workflow"];
    let task = json!({"workflow_id": workflow["id"], "title": "Hidden plan",
                      "step_id": step_id(workflow, "Backlog")});
    let (_, task) = team.act("olga", "task.create", task).await;
    let task_id = task["task"]["id"].as_str().unwrap().to_owned();
    let mut mike = team.ws("mike").await;
    mike.call("subscribe", json!({"topics": ["workspaces", "notifications"]})).await;
    // A turn that ends writes a notification record of the hidden task.
    let (_, launched) =
        team.act("olga", "session.launch", json!({"task_id": task_id, "prompt": "hello"})).await;
    let session_id = launched["session"]["id"].as_str().unwrap().to_owned();
    team.server.wait_turns(&session_id, 1).await;

    for who in ["mike", "nora"] {
        let (_, list) = team.act(who, "workspace.list", json!({})).await;
        let names: Vec<&str> = list["workspaces"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w["name"].as_str().unwrap())
            .collect();
        assert!(!names.contains(&"Secret"), "{who}: {names:?}");
        let (status, _) = team.act(who, "task.list", json!({"workflow_id": workflow["id"]})).await;
        assert!(status == 404 || status == 403, "{who} lists the hidden board: {status}");
        let (status, _) = team.act(who, "task.get", json!({"id": task_id})).await;
        assert!(status == 404 || status == 403, "{who} reads the hidden task: {status}");
        let search = json!({"workspace_id": secret, "query": "Hidden"});
        let (status, _) = team.act(who, "search", search).await;
        assert!(status == 404 || status == 403, "{who} searches the hidden workspace: {status}");
        let (_, notes) = team.act(who, "notification.list", json!({})).await;
        let about: Vec<&Value> = notes["notifications"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|n| n["task_id"] == json!(task_id))
            .collect();
        assert!(about.is_empty(), "{who} sees {about:?}");
    }
    // A task of a workspace one does not belong to reads like one that does not exist.
    let (_, hidden) = team.act("mike", "task.get", json!({"id": task_id})).await;
    let (_, missing) = team.act("mike", "task.get", json!({"id": "no-such-task"})).await;
    let hidden = hidden["message"].as_str().unwrap().replace(&task_id, "ID");
    assert_eq!(hidden, missing["message"].as_str().unwrap().replace("no-such-task", "ID"));
    let (_, notes) = team.act("olga", "notification.list", json!({})).await;
    assert!(
        notes["notifications"].as_array().unwrap().iter().any(|n| n["task_id"] == json!(task_id)),
        "the owner sees the record: {notes}"
    );

    for topic in [format!("workspace:{secret}"), format!("session:{session_id}")] {
        let reply = mike.call("subscribe", json!({"topics": [topic]})).await;
        assert_eq!(reply["type"], "error", "{reply}");
        assert_eq!(reply["payload"]["code"], "NOT_FOUND", "{reply}");
    }
    // Renaming both workspaces: mike hears of his own only.
    let rename = |id: &str, name: &str| json!({"id": id, "name": name});
    team.act("olga", "workspace.update", rename(&secret, "Secret 2")).await;
    team.act("olga", "workspace.update", rename(&team.workspace_id, "Ours")).await;
    let mut seen = vec![];
    loop {
        let frame = mike.next().await;
        seen.push(frame.clone());
        if frame["action"] == "workspace.updated" && frame["payload"]["workspace"]["name"] == "Ours"
        {
            break;
        }
    }
    let leaked: Vec<&Value> = seen
        .iter()
        .filter(|f| f.to_string().contains(&secret) || f.to_string().contains("Hidden"))
        .collect();
    assert!(leaked.is_empty(), "mike's socket carried {leaked:?}");

    // Made a viewer there, mike reads it, and is told his role there when he would change it.
    let viewer = json!({"workspace_id": secret, "user": "mike", "role": "viewer"});
    team.act("olga", "workspace.member.set", viewer).await;
    let (status, _) = team.act("mike", "task.get", json!({"id": task_id})).await;
    assert_eq!(status, 200);
    let (status, body) =
        team.act("mike", "task.update", json!({"id": task_id, "title": "Mine"})).await;
    assert_eq!(status, 403, "{body}");
    assert!(body["message"].as_str().unwrap().contains("you are a viewer there"), "{body}");
}

/// Items 2 and 5: members are managed by the workspace's admins (not the last admin away),
/// a changed role closes the user's sockets so their pages reconnect, and each write is in
/// the audit log with who did it, readable by admins with filters.
#[tokio::test]
async fn i49_5_members_change_and_every_write_is_audited() {
    let team = Team::new().await;
    let (status, _) = team
        .act(
            "mike",
            "workspace.member.set",
            json!({"workspace_id": team.workspace_id,
            "user": "nora", "role": "viewer"}),
        )
        .await;
    assert_eq!(status, 403, "a member does not manage members");
    let last = json!({"workspace_id": team.workspace_id, "user": "ada", "role": "member"});
    let (status, body) = team.act("ada", "workspace.member.set", last).await;
    assert_eq!((status, &body["code"]), (409, &json!("CONFLICT")), "the last admin stays: {body}");

    let mut vera = team.ws("vera").await;
    vera.call("subscribe", json!({"topics": [format!("workspace:{}", team.workspace_id)]})).await;
    team.set_role("vera", "member").await;
    let closed = tokio::time::timeout(WAIT, async {
        loop {
            match vera.stream.next().await {
                Some(Ok(Message::Close(frame))) => return frame.map(|f| u16::from(f.code)),
                Some(Ok(_)) => continue,
                _ => return None,
            }
        }
    })
    .await
    .expect("the socket closes");
    assert_eq!(closed, Some(4409), "a changed role closes the socket with its own code");

    let (_, workflow) = team.server.kanban().await;
    let task = json!({"workflow_id": workflow["id"], "title": "By vera",
                      "step_id": step_id(&workflow, "Backlog")});
    let (status, created) = team.act("vera", "task.create", task).await;
    assert_eq!(status, 200, "vera is a member now: {created}");
    let task_id = created["task"]["id"].as_str().unwrap();
    team.act("vera", "task.update", json!({"id": task_id, "title": "Renamed"})).await;

    let (status, _) = team.act("mike", "audit.list", json!({})).await;
    assert_eq!(status, 403, "members do not read the audit log");
    let (status, log) = team.act("ada", "audit.list", json!({"by": "vera"})).await;
    assert_eq!(status, 200, "{log}");
    let actions: Vec<&str> =
        log["entries"].as_array().unwrap().iter().map(|e| e["action"].as_str().unwrap()).collect();
    assert_eq!(actions, ["task.update", "task.create"], "newest first: {log}");
    assert_eq!(log["entries"][0]["target"], json!(task_id));
    assert_eq!(log["entries"][0]["workspace_id"], json!(team.workspace_id));
    let (_, members) = team.act("ada", "audit.list", json!({"action": "workspace.member."})).await;
    let by: Vec<&str> =
        members["entries"].as_array().unwrap().iter().map(|e| e["by"].as_str().unwrap()).collect();
    assert!(by.len() >= 4 && by.iter().all(|b| *b == "olga"), "{members}");
    let whom: Vec<&str> = members["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["target"].as_str())
        .collect();
    assert!(
        ["vera", "mike", "ada"].iter().all(|n| whom.contains(n)),
        "the member is named: {whom:?}"
    );
    let (_, reads) = team.act("ada", "audit.list", json!({"action": "task.get"})).await;
    assert_eq!(reads["entries"], json!([]), "reads are not audited");

    // The owner manages every workspace, so the owner may leave one without an admin.
    team.set_role("ada", "member").await;
    let (status, _) = team.act("ada", "audit.list", json!({})).await;
    assert_eq!(status, 403, "no longer an admin");
    let gone = json!({"workspace_id": team.workspace_id, "user": "nora"});
    let (status, body) = team.act("olga", "workspace.member.remove", gone).await;
    assert_eq!(status, 404, "{body}");
    assert_eq!(body["message"], "nora is not a member of this workspace");
}

/// Issue 50 scope 2: a workspace's secrets are its admins' to set and remove, the server's
/// the owner's, and no answer (nor the audit log) ever holds a value.
#[tokio::test]
async fn i50_2_secrets_are_set_by_workspace_admins_and_the_servers_by_the_owner() {
    const VALUE: &str = "sk-i50-team-value-41";
    let team = Team::new().await;
    let ws = team.workspace_id.clone();
    let mut answers = vec![];
    let set = |name: &str, value: &str| json!({"workspace_id": ws, "name": name, "value": value});

    let (status, body) = team.act("ada", "secret.set", set("TEAM_KEY", VALUE)).await;
    assert_eq!(status, 200, "an admin sets the workspace's: {body}");
    answers.push(body);
    let (status, body) =
        team.act("ada", "secret.set", json!({"name": "SERVER_KEY", "value": VALUE})).await;
    assert_eq!(status, 403, "an admin does not set the server's: {body}");
    assert!(body["message"].as_str().unwrap().contains("owner"), "{body}");
    let (status, body) = team.act("mike", "secret.set", set("MEMBER_KEY", VALUE)).await;
    assert_eq!(status, 403, "a member sets none: {body}");
    let (status, body) = team.act("vera", "secret.list", json!({"workspace_id": ws})).await;
    assert_eq!(status, 403, "a viewer lists none: {body}");
    let (status, body) = team.act("nora", "secret.list", json!({"workspace_id": ws})).await;
    assert_eq!(status, 403, "someone of no workspace lists none: {body}");
    let (status, body) =
        team.act("olga", "secret.set", json!({"name": "SERVER_KEY", "value": VALUE})).await;
    assert_eq!(status, 200, "the owner sets the server's: {body}");
    answers.push(body);

    // Bad names and values are refused, saying what a good one is.
    let (status, body) = team.act("ada", "secret.set", set("1BAD", VALUE)).await;
    assert_eq!(status, 422, "{body}");
    assert!(body["message"].as_str().unwrap().contains("letters, digits and _"), "{body}");
    let (status, body) = team.act("ada", "secret.set", set("EMPTY", "")).await;
    assert_eq!(status, 422, "{body}");
    // A repository of another workspace is not one of this workspace's.
    let (_, other) = team.act("olga", "workspace.create", json!({"name": "Other"})).await;
    let (_keep, repo) = git_repository();
    let (status, created) = team
        .act(
            "olga",
            "repository.create",
            json!({"workspace_id": other["workspace"]["id"], "local_path": repo}),
        )
        .await;
    assert_eq!(status, 200, "{created}");
    let mut body = set("REPO_KEY", VALUE);
    body["repository_id"] = created["repository"]["id"].clone();
    let (status, body) = team.act("ada", "secret.set", body).await;
    assert_eq!((status, body["code"].as_str()), (404, Some("NOT_FOUND")), "{body}");

    let (status, listed) = team.act("ada", "secret.list", json!({"workspace_id": ws})).await;
    assert_eq!(status, 200, "{listed}");
    let names: Vec<&str> =
        listed["secrets"].as_array().unwrap().iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["TEAM_KEY", "SERVER_KEY"], "the workspace's, then the server's: {listed}");
    answers.push(listed);
    let (status, body) = team.act("ada", "secret.key.rotate", json!({})).await;
    assert_eq!(status, 403, "rotation is the owner's: {body}");
    let (status, rotated) = team.act("olga", "secret.key.rotate", json!({})).await;
    assert_eq!((status, rotated["resealed"].as_u64()), (200, Some(2)), "{rotated}");
    let (_, audit) = team.act("olga", "audit.list", json!({"action": "secret."})).await;
    let actions: Vec<&str> = audit["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions, ["secret.key.rotate", "secret.set", "secret.set"], "{audit}");
    answers.push(audit);
    let (status, body) =
        team.act("ada", "secret.remove", json!({"workspace_id": ws, "name": "TEAM_KEY"})).await;
    assert_eq!(status, 200, "{body}");
    for answer in &answers {
        assert!(!answer.to_string().contains(VALUE), "an answer holds the value: {answer}");
    }
}
