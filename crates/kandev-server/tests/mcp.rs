//! Issue 17: agents talk back to the board over MCP. The mock agent calls Kandev's tools with
//! the session token it was handed in `session/new` (`mcp <server> <tool> <json>`); tests
//! read the tokens an agent got from the mock's `--mcp-log` and call `/mcp` directly to
//! check the fencing (a token of an older epoch or a deleted session is refused with 401 and
//! changes nothing).
//!
//! The agent's questions (`ask_user`) are in `mcp_questions.rs`, a profile's own MCP servers in
//! `mcp_servers.rs`.

use crate::common;

use common::logs::captured_logs;
use common::mcp::{
    mcp_call, mcp_call_at, mcp_said, script, session_ws, setup, tokens, tool_result, wait_ready,
    wait_session,
};
use common::{TestServer, WAIT, of_kind, step_id};
use kandev_server::ServerConfig;
use serde_json::{Value, json};

#[tokio::test]
async fn i17_a1_create_task_through_mcp_makes_a_subtask_visible_on_the_board() {
    let s = setup(ServerConfig::default()).await;
    let mut ws = s.server.ws().await;
    ws.call("subscribe", json!({"topics": [format!("workspace:{}", s.workspace_id)]})).await;
    let line = r#"mcp kandev create_task {"title":"sub","parent_id":"current","start_agent":true}"#
        .to_owned();
    let messages = s.server.turn(&s.session_id, &script(&[line])).await;
    let said = mcp_said(&messages);
    assert!(said.len() == 1 && said[0].starts_with("mcp create_task ok:"), "{said:?}");
    let created = tokio::time::timeout(WAIT, async {
        loop {
            let frame = ws.notification("task.created").await;
            if frame["payload"]["task"]["title"] == "sub" {
                return frame;
            }
        }
    })
    .await
    .expect("task.created for the subtask");
    assert_eq!(created["payload"]["task"]["parent_id"], s.task_id.as_str());
    let listed = s.server.call("task.list", json!({"workflow_id": s.workflow["id"]})).await;
    let sub = listed["tasks"].as_array().unwrap().iter().find(|t| t["title"] == "sub").cloned();
    let sub = sub.unwrap();
    assert_eq!(sub["parent_id"], s.task_id.as_str(), "on the board as a subtask");
    // Its start step starts its agent, with the creating agent's own profile (issue 38 item
    // 8), whose session/new got a token of its own.
    let own = s.server.call("session.get", json!({"id": s.session_id})).await;
    let session = sub["primary_session_id"].as_str().unwrap();
    let started = wait_ready(&s.server, None, session).await;
    assert_eq!(started["agent_profile_id"], own["session"]["agent_profile_id"]);
    let handed = tokens(&s.log);
    assert!(handed.len() == 2 && handed[0] != handed[1], "a token per session/new");
}

#[tokio::test]
async fn i17_a1_complete_step_moves_the_task_and_runs_the_next_steps_actions() {
    let s = setup(ServerConfig::default()).await;
    let mut ws = s.server.ws().await;
    ws.call("subscribe", json!({"topics": [format!("workspace:{}", s.workspace_id)]})).await;
    let line = r#"mcp kandev complete_step {"summary":"planned it"}"#.to_owned();
    let messages = s.server.turn(&s.session_id, &script(&[line])).await;
    let said = mcp_said(&messages);
    assert!(said[0].starts_with("mcp complete_step ok:"), "{said:?}");
    assert!(said[0].contains("In Progress"), "{said:?}");
    let statuses: Vec<&str> =
        of_kind(&messages, "status").iter().filter_map(|m| m["content"].as_str()).collect();
    assert!(
        statuses.iter().any(|s| s.contains("\"Backlog\" done: planned it")),
        "the summary is a status message: {statuses:?}"
    );
    // In Progress sends its step prompt (the task's title) and, once that turn completes,
    // moves the task on to Review: its actions ran like a manual move's.
    s.server.wait_turns(&s.session_id, 2).await;
    let review = step_id(&s.workflow, "Review");
    let mut steps = vec![];
    while steps.last() != Some(&review) {
        let frame = ws.notification("task.moved").await;
        steps.push(frame["payload"]["task"]["step_id"].as_str().unwrap().to_owned());
    }
    assert_eq!(steps, [step_id(&s.workflow, "In Progress"), review], "moved on, then to Review");
    let users: Vec<String> = of_kind(&s.server.messages(&s.session_id).await, "user")
        .iter()
        .map(|m| m["content"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(users.last().map(String::as_str), Some("Task"), "the step prompt ran: {users:?}");
}

#[tokio::test]
async fn i17_a1_move_update_get_list_and_note_tools_act_on_the_board() {
    let s = setup(ServerConfig::default()).await;
    let other = s
        .server
        .call(
            "task.create",
            json!({"workflow_id": s.workflow["id"], "title": "Other work",
                   "step_id": step_id(&s.workflow, "Backlog")}),
        )
        .await;
    let other_id = other["task"]["id"].as_str().unwrap().to_owned();
    let lines = vec![
        r#"mcp kandev get_task {}"#.to_owned(),
        r#"mcp kandev list_tasks {"query":"other"}"#.to_owned(),
        format!(r#"mcp kandev update_task {{"task_id":"{other_id}","title":"Renamed"}}"#),
        format!(r#"mcp kandev move_task {{"task_id":"{other_id}","step":"Done"}}"#),
        r#"mcp kandev add_note {"text":"a note from the agent"}"#.to_owned(),
        r#"mcp kandev move_task {"step":"Nowhere"}"#.to_owned(),
    ];
    let messages = s.server.turn(&s.session_id, &script(&lines)).await;
    let said = mcp_said(&messages);
    assert_eq!(said.len(), 6, "{said:?}");
    assert!(said[0].starts_with("mcp get_task ok:") && said[0].contains(r#""step":"Backlog""#));
    assert!(said[0].contains(r#""workflow_steps""#), "{}", said[0]);
    assert!(
        said[1].contains("Other work") && !said[1].contains(r#""title":"Task""#),
        "{}",
        said[1]
    );
    assert!(said[2].starts_with("mcp update_task ok:") && said[2].contains("Renamed"));
    assert!(said[3].starts_with("mcp move_task ok:"), "{}", said[3]);
    assert!(said[4].starts_with("mcp add_note ok:"), "{}", said[4]);
    assert!(
        said[5].starts_with("mcp move_task error:") && said[5].contains("VALIDATION_ERROR"),
        "a tool error carries the API's code: {}",
        said[5]
    );
    let moved = s.server.call("task.get", json!({"id": other_id})).await;
    assert_eq!(moved["task"]["title"], "Renamed");
    assert_eq!(moved["task"]["step_id"], step_id(&s.workflow, "Done").as_str());
    let notes: Vec<&str> =
        of_kind(&messages, "status").iter().filter_map(|m| m["content"].as_str()).collect();
    assert!(notes.contains(&"a note from the agent"), "{notes:?}");
}

async fn task_titles(server: &TestServer, workflow: &Value) -> Vec<String> {
    let listed = server.call("task.list", json!({"workflow_id": workflow["id"]})).await;
    listed["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["title"].as_str().unwrap().into())
        .collect()
}

#[tokio::test]
async fn i17_a3_tokens_of_older_epochs_and_deleted_sessions_are_refused_and_never_logged() {
    let logs = captured_logs();
    let s = setup(ServerConfig::default()).await;
    // The agent uses its token.
    let line = r#"mcp kandev add_note {"text":"first"}"#.to_owned();
    let said = mcp_said(&s.server.turn(&s.session_id, &script(&[line])).await);
    assert!(said[0].starts_with("mcp add_note ok:"), "{said:?}");
    let first = tokens(&s.log)[0].clone();
    let (status, _) = mcp_call(&s.server, Some(&first), "get_task", json!({})).await;
    assert_eq!(status, 200, "the current token works");

    // A context reset opens a new conversation in the same process: a new epoch, a new token.
    let epoch = wait_ready(&s.server, None, &s.session_id).await["epoch"].as_i64().unwrap();
    s.server.call("session.reset_context", json!({"id": s.session_id})).await;
    wait_session(&s.server, None, &s.session_id, |s| s["epoch"].as_i64() > Some(epoch)).await;
    assert_eq!(tokens(&s.log).len(), 2, "the reset's session/new got a new token");
    let before = task_titles(&s.server, &s.workflow).await;
    let (status, body) =
        mcp_call(&s.server, Some(&first), "create_task", json!({"title": "stale"})).await;
    assert_eq!(status, 401, "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("stale session token"), "{body}");
    assert_eq!(
        task_titles(&s.server, &s.workflow).await,
        before,
        "the refused call changed nothing"
    );
    let second = tokens(&s.log)[1].clone();
    let line = r#"mcp kandev add_note {"text":"after the reset"}"#.to_owned();
    let said = mcp_said(&s.server.turn(&s.session_id, &script(&[line])).await);
    assert!(said[0].starts_with("mcp add_note ok:"), "the agent's new token works: {said:?}");

    // Stop and resume: the resumed agent gets a new token, the old one is refused.
    s.server.call("session.stop", json!({"id": s.session_id})).await;
    s.server.call("session.resume", json!({"id": s.session_id})).await;
    wait_ready(&s.server, None, &s.session_id).await;
    let (status, body) =
        mcp_call(&s.server, Some(&second), "add_note", json!({"text": "from the past"})).await;
    assert_eq!(status, 401, "{body}");
    let third = tokens(&s.log).last().unwrap().clone();
    assert_ne!(third, second);
    let (status, _) = mcp_call(&s.server, Some(&third), "get_task", json!({})).await;
    assert_eq!(status, 200, "the resumed agent's token works");
    let notes: Vec<String> = of_kind(&s.server.messages(&s.session_id).await, "status")
        .iter()
        .map(|m| m["content"].as_str().unwrap().to_owned())
        .collect();
    assert!(!notes.iter().any(|n| n == "from the past"), "{notes:?}");

    // A deleted session's token is refused too.
    s.server.call("session.delete", json!({"id": s.session_id})).await;
    let (status, body) =
        mcp_call(&s.server, Some(&third), "create_task", json!({"title": "ghost"})).await;
    assert_eq!(status, 401, "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("deleted"), "{body}");
    assert!(!task_titles(&s.server, &s.workflow).await.contains(&"ghost".to_owned()));

    let logs = logs.lock().unwrap().clone();
    assert!(logs.contains("refused an MCP call"), "refusals are logged");
    for token in [&first, &second, &third] {
        assert!(!logs.contains(token.as_str()), "a token appeared in the logs");
    }
}

#[tokio::test]
async fn i17_a3_the_server_token_reaches_every_tool() {
    let config = ServerConfig { token: Some("server-secret".into()), ..ServerConfig::default() };
    let s = setup(config).await;
    let token = Some("server-secret");
    let calls = [
        ("get_task", json!({"task_id": s.task_id})),
        ("list_tasks", json!({"workflow_id": s.workflow["id"]})),
        (
            "create_task",
            json!({"title": "from an IDE", "workflow_id": s.workflow["id"],
                               "parent_id": s.task_id}),
        ),
        ("update_task", json!({"task_id": s.task_id, "description": "more"})),
        ("add_note", json!({"text": "outside note", "session_id": s.session_id})),
        ("complete_step", json!({"session_id": s.session_id})),
        ("move_task", json!({"task_id": s.task_id, "step": "Done"})),
    ];
    for (tool, args) in calls {
        let (status, body) = mcp_call(&s.server, token, tool, args).await;
        assert_eq!(status, 200, "{tool}: {body}");
        assert_eq!(body["result"]["isError"], false, "{tool}: {body}");
    }
    let (status, _) = mcp_call(&s.server, Some("wrong"), "get_task", json!({})).await;
    assert_eq!(status, 401, "a wrong server token is refused");
    let (status, _) = mcp_call(&s.server, None, "get_task", json!({})).await;
    assert_eq!(status, 401, "no token, on a server with one, is refused");
    assert!(task_titles(&s.server, &s.workflow).await.contains(&"from an IDE".to_owned()));
}

/// Issue 38 item 8: a session token reaches only its own task's workflow, through every
/// argument that names a task: a blocker of another workflow is refused like the task itself
/// (get, update, move, parent), and nothing changes.
#[tokio::test]
async fn i38_8_every_tool_refuses_tasks_of_another_workflow() {
    let s = setup(ServerConfig::default()).await;
    let (_, other_workflow) = s.server.kanban().await;
    let other = s
        .server
        .call(
            "task.create",
            json!({"workflow_id": other_workflow["id"], "title": "Elsewhere",
                   "step_id": step_id(&other_workflow, "Backlog")}),
        )
        .await;
    let other_id = other["task"]["id"].as_str().unwrap().to_owned();
    let token = tokens(&s.log)[0].clone();
    let calls = [
        ("create_task", json!({"title": "blocked", "step": "Backlog", "blocked_by": [other_id]})),
        ("update_task", json!({"task_id": s.task_id, "blocked_by": [other_id]})),
        ("create_task", json!({"title": "child", "step": "Backlog", "parent_id": other_id})),
        ("get_task", json!({"task_id": other_id})),
        ("update_task", json!({"task_id": other_id, "title": "renamed"})),
        ("move_task", json!({"task_id": other_id, "step": "Done"})),
    ];
    for (tool, args) in calls {
        let (status, body) = mcp_call(&s.server, Some(&token), tool, args.clone()).await;
        assert_eq!(status, 200, "{body}");
        let (failed, answer) = tool_result(&body);
        assert!(failed, "{tool} {args}: {body}");
        assert_eq!(answer["code"], "FORBIDDEN", "{tool} {args}: {answer}");
    }
    let own = s.server.call("task.get", json!({"id": s.task_id})).await;
    assert_eq!(own["task"]["blocked_by"], json!([]), "{own}");
    let titles = task_titles(&s.server, &s.workflow).await;
    assert!(!titles.iter().any(|t| t == "blocked" || t == "child"), "{titles:?}");
    let other = s.server.call("task.get", json!({"id": other_id})).await;
    assert_eq!(other["task"]["title"], "Elsewhere");
}

/// Issue 38 item 8: a session holds at most three questions waiting for an answer; a fourth
/// `ask_user` is refused at once (no question, no notification) and says to wait; once one
/// is answered the session may ask again.
#[tokio::test]
async fn i38_8_ask_user_holds_at_most_three_pending_questions_per_session() {
    let s = setup(ServerConfig::default()).await;
    let token = tokens(&s.log)[0].clone();
    let mut ws = session_ws(&s.server, None, &s.session_id).await;
    let ask = |n: u32, timeout_s: u64| {
        let (url, token) = (s.server.url("/mcp"), token.clone());
        let args = json!({"question": format!("Question {n}?"), "timeout_s": timeout_s});
        tokio::spawn(async move { mcp_call_at(url, Some(&token), "ask_user", args).await })
    };
    let mut waiting = vec![];
    for n in 1..=3 {
        waiting.push(ask(n, 3600));
    }
    let mut asked = vec![];
    for _ in 1..=3 {
        asked.push(ws.notification("session.question.asked").await["payload"]["question"].clone());
    }
    // The fourth is refused at once; on a server without the limit it would wait its 1 s
    // and time out.
    let (status, body) = tokio::time::timeout(WAIT, ask(4, 1)).await.unwrap().unwrap();
    assert_eq!(status, 200, "{body}");
    let (failed, answer) = tool_result(&body);
    assert!(failed, "{body}");
    assert_eq!(answer["code"], "QUEUE_FULL", "{answer}");
    let message = answer["message"].as_str().unwrap();
    assert!(message.contains("wait for an answer"), "{message}");
    let listed = s.server.call("question.list", json!({"session_id": s.session_id})).await;
    assert_eq!(listed["questions"].as_array().unwrap().len(), 3, "{listed}");
    let records = s.server.call("notification.list", json!({})).await;
    let questions = records["notifications"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["kind"] == "question_asked")
        .count();
    assert_eq!(questions, 3, "{records}");

    let first = asked.iter().find(|q| q["question"] == "Question 1?").unwrap();
    s.server.call("question.answer", json!({"id": first["id"], "answer": "yes"})).await;
    let (_, first) = tokio::time::timeout(WAIT, waiting.remove(0)).await.unwrap().unwrap();
    assert_eq!(tool_result(&first).1, json!({"answer": "yes"}));
    let _fifth = ask(5, 3600);
    let fifth = ws.notification("session.question.asked").await;
    assert_eq!(fifth["payload"]["question"]["question"], "Question 5?");
}

/// Issue 38 item 8: an agent creates tasks only with its own agent profile (another one,
/// named or picked by the step the task starts in, is refused and nothing is created), and
/// a task it creates runs its profile.
#[tokio::test]
async fn i38_8_an_agent_starts_agents_only_of_its_own_profile() {
    let s = setup(ServerConfig::default()).await;
    let own = s.server.call("session.get", json!({"id": s.session_id})).await["session"]
        ["agent_profile_id"]
        .clone();
    let other = s.server.profile(json!({"name": "Other", "kind": "mock"})).await;
    let token = tokens(&s.log)[0].clone();
    for args in [
        json!({"title": "other one", "start_agent": true, "agent_profile": "Other"}),
        json!({"title": "other two", "step": "Backlog", "agent_profile": "Other"}),
    ] {
        let (_, body) = mcp_call(&s.server, Some(&token), "create_task", args.clone()).await;
        let (failed, answer) = tool_result(&body);
        assert!(failed, "{args}: {body}");
        assert_eq!(answer["code"], "FORBIDDEN", "{answer}");
        assert!(answer["message"].as_str().unwrap().contains("own agent profile"), "{answer}");
    }
    let titles = task_titles(&s.server, &s.workflow).await;
    assert!(!titles.iter().any(|t| t.starts_with("other")), "nothing was created: {titles:?}");

    let args = json!({"title": "mine", "start_agent": true, "step": "Backlog"});
    let (_, body) = mcp_call(&s.server, Some(&token), "create_task", args).await;
    let (failed, created) = tool_result(&body);
    assert!(!failed, "{body}");
    assert_eq!(created["task"]["agent_profile_id"], own, "{created}");
    assert_eq!(created["session"]["agent_profile_id"], own, "{created}");

    // Nor by moving a task of its own into a step that starts another profile's agent.
    let review = step_id(&s.workflow, "Review");
    let start_other = json!({"id": review, "agent_profile_id": other,
        "events": {"on_enter": [{"type": "auto_start_agent"}]}});
    s.server.call("workflow.step.update", start_other).await;
    let args = json!({"title": "sneaky", "step": "Backlog"});
    let (_, body) = mcp_call(&s.server, Some(&token), "create_task", args).await;
    let (failed, created) = tool_result(&body);
    assert!(!failed, "{body}");
    let sneaky = created["task"]["id"].clone();
    let args = json!({"task_id": sneaky, "step": "Review"});
    let (_, body) = mcp_call(&s.server, Some(&token), "move_task", args).await;
    let (failed, answer) = tool_result(&body);
    assert!(failed, "moving into another profile's auto-start step: {body}");
    assert_eq!(answer["code"], "FORBIDDEN", "{answer}");
    assert!(answer["message"].as_str().unwrap().contains("own agent profile"), "{answer}");
    let sessions = s.server.call("task.session.list", json!({"task_id": sneaky})).await;
    assert_eq!(sessions["sessions"], json!([]), "no agent was started: {sessions}");
}

/// Issue 38 item 8: agents started by agents nest at most three levels: the agent of a task
/// three agents deep may still create tasks, but neither starts their agents nor moves such
/// a task into a step that would start one.
#[tokio::test]
async fn i38_8_agents_started_by_agents_nest_at_most_three_levels() {
    let s = setup(ServerConfig::default()).await;
    let mut token = tokens(&s.log)[0].clone();
    for level in 1..=3 {
        let args = json!({"title": format!("level {level}"), "step": "Backlog",
                          "start_agent": true, "agent_profile": "Mock MCP"});
        let (_, body) = mcp_call(&s.server, Some(&token), "create_task", args).await;
        let (failed, created) = tool_result(&body);
        assert!(!failed, "level {level}: {body}");
        let session = created["session"]["id"].as_str().unwrap().to_owned();
        wait_ready(&s.server, None, &session).await;
        token = tokens(&s.log).last().unwrap().clone();
    }
    let args = json!({"title": "level 4", "step": "Backlog", "start_agent": true,
                      "agent_profile": "Mock MCP"});
    let (_, body) = mcp_call(&s.server, Some(&token), "create_task", args).await;
    let (failed, answer) = tool_result(&body);
    assert!(failed, "a fourth level is refused: {body}");
    assert_eq!(answer["code"], "FORBIDDEN", "{answer}");
    assert!(answer["message"].as_str().unwrap().contains("3 levels"), "{answer}");
    assert!(!task_titles(&s.server, &s.workflow).await.contains(&"level 4".to_owned()));

    // Created without an agent, it stays without one: an auto-starting step is refused too.
    let args = json!({"title": "level 4", "step": "Backlog"});
    let (_, body) = mcp_call(&s.server, Some(&token), "create_task", args).await;
    let (failed, created) = tool_result(&body);
    assert!(!failed, "{body}");
    assert_eq!(created["session"], Value::Null);
    let deep = created["task"]["id"].as_str().unwrap().to_owned();
    let args = json!({"task_id": deep, "step": "In Progress"});
    let (_, body) = mcp_call(&s.server, Some(&token), "move_task", args).await;
    let (failed, answer) = tool_result(&body);
    assert!(failed, "{body}");
    assert_eq!(answer["code"], "FORBIDDEN", "{answer}");
    let task = s.server.call("task.get", json!({"id": deep})).await;
    assert_eq!(task["task"]["step_id"], step_id(&s.workflow, "Backlog").as_str());
    assert_eq!(task["task"]["primary_session_id"], Value::Null, "{task}");
    // A person may start it.
    s.server.call("session.launch", json!({"task_id": deep})).await;
}

/// Issue 38 item 13: `complete_step`'s "step done" note appears only with the move it
/// reports. A person moves the task while the agent's call waits to write (both queued
/// behind a held write transaction, the person first): the agent's conditional move does
/// nothing, the call answers `CONFLICT`, and the transcript has no note.
#[tokio::test]
async fn i38_13_complete_step_notes_only_a_move_that_happened() {
    let s = setup(ServerConfig::default()).await;
    let token = tokens(&s.log)[0].clone();
    let done = step_id(&s.workflow, "Done");
    let mut waiting = s.server.store.writers_waiting();
    let held = s.server.store.begin_write().await.unwrap();
    let person = {
        let url = s.server.url("/api/v1/task.move");
        let body = json!({"id": s.task_id, "step_id": done});
        tokio::spawn(async move {
            let response = reqwest::Client::new().post(url).json(&body).send().await.unwrap();
            response.status().as_u16()
        })
    };
    tokio::time::timeout(WAIT, waiting.wait_for(|n| *n >= 1)).await.unwrap().unwrap();
    let agent = {
        let (url, token) = (s.server.url("/mcp"), token.clone());
        let args = json!({"summary": "planned it"});
        tokio::spawn(async move { mcp_call_at(url, Some(&token), "complete_step", args).await })
    };
    tokio::time::timeout(WAIT, waiting.wait_for(|n| *n >= 2)).await.unwrap().unwrap();
    drop(held);
    assert_eq!(person.await.unwrap(), 200);
    let (_, body) = agent.await.unwrap();
    let (failed, answer) = tool_result(&body);
    assert!(failed, "{body}");
    assert_eq!(answer["code"], "CONFLICT", "{answer}");
    let task = s.server.call("task.get", json!({"id": s.task_id})).await;
    assert_eq!(task["task"]["step_id"], done.as_str(), "the person's move stands");
    let notes: Vec<String> = of_kind(&s.server.messages(&s.session_id).await, "status")
        .iter()
        .map(|m| m["content"].as_str().unwrap().to_owned())
        .collect();
    assert!(!notes.iter().any(|n| n.contains("done: planned it")), "{notes:?}");
}
