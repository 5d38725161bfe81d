//! Issue 5: workflows driving sessions — step prompts, moves on turn start and completion,
//! plan mode, and the context reset of lifecycle section D (rules 18-27).

use crate::common;

use std::time::Instant;

use common::{TestServer, WAIT, of_kind, step_id};
use kandev_mock_agent::CallKind;
use serde_json::{Value, json};

async fn board(server: &TestServer, template: &str) -> Value {
    let workspaces = server.call("workspace.list", json!({})).await;
    let workspace_id = workspaces["workspaces"][0]["id"].clone();
    let created = server
        .call(
            "workflow.create",
            json!({"workspace_id": workspace_id, "name": template, "template_id": template}),
        )
        .await;
    created["workflow"].clone()
}

async fn task_in(
    server: &TestServer,
    workflow: &Value,
    step: &str,
    title: &str,
) -> (String, String) {
    let created = server
        .call("task.create", json!({"workflow_id": workflow["id"], "title": title, "step_id": step_id(workflow, step)}))
        .await;
    let session = created["session"]["id"].as_str().unwrap_or_default().to_owned();
    (created["task"]["id"].as_str().unwrap().to_owned(), session)
}

async fn step_of(server: &TestServer, task: &str) -> String {
    server.call("task.get", json!({"id": task})).await["task"]["step_id"]
        .as_str()
        .unwrap()
        .to_owned()
}

async fn session(server: &TestServer, id: &str) -> Value {
    server.call("session.get", json!({"id": id})).await["session"].clone()
}

/// Waits (bounded) until the task is in `step`, following its workspace's notifications.
async fn wait_step(server: &TestServer, workflow: &Value, task: &str, step: &str) {
    let target = step_id(workflow, step);
    let mut ws = server.ws().await;
    ws.call(
        "subscribe",
        json!({"topics": [format!("workspace:{}", workflow["workspace_id"].as_str().unwrap())]}),
    )
    .await;
    if step_of(server, task).await == target {
        return;
    }
    let deadline = Instant::now() + WAIT;
    loop {
        assert!(Instant::now() < deadline, "task did not reach {step}");
        let frame = ws.next().await;
        if frame["action"] == "task.moved"
            && frame["payload"]["task"]["id"] == task
            && frame["payload"]["task"]["step_id"] == target.as_str()
        {
            return;
        }
    }
}

#[tokio::test]
async fn i5_kanban_starts_in_progress_moves_to_review_and_back_when_the_user_writes() {
    let server = TestServer::start().await;
    let kanban = board(&server, "kanban").await;
    let (task, session) = task_in(&server, &kanban, "In Progress", "Write the changelog").await;
    assert!(!session.is_empty(), "the In Progress step started the agent");
    wait_step(&server, &kanban, &task, "Review").await;
    let messages = server.messages(&session).await;
    assert_eq!(
        of_kind(&messages, "user")[0]["content"],
        "Write the changelog",
        "the step prompt, filled in"
    );
    server.wait_turns(&session, 1).await;

    let mut ws = server.ws().await;
    ws.call(
        "subscribe",
        json!({"topics": [format!("workspace:{}", kanban["workspace_id"].as_str().unwrap())]}),
    )
    .await;
    server.call("message.add", json!({"session_id": session, "content": "one more thing"})).await;
    let mut steps = vec![];
    while steps.len() < 2 {
        let frame = ws.notification("task.moved").await;
        steps.push((
            frame["payload"]["task"]["step_id"].as_str().unwrap().to_owned(),
            frame["payload"]["trigger"].as_str().unwrap().to_owned(),
        ));
    }
    assert_eq!(
        steps,
        [
            (step_id(&kanban, "In Progress"), "on_turn_start".to_owned()),
            (step_id(&kanban, "Review"), "on_turn_complete".to_owned())
        ],
        "back to In Progress when the user writes, then to Review when that turn ends"
    );
    server.wait_turns(&session, 2).await;
    let counters = server.counters();
    assert_eq!(counters.prompt(), 2, "the user's message was the turn; no second step prompt");
    let history = server.call("task.get", json!({"id": task})).await;
    assert!(history["task"].is_object());
}

#[tokio::test]
async fn i5_plan_and_build_plans_then_builds_in_a_fresh_conversation() {
    let server = TestServer::start().await;
    let plan_build = board(&server, "plan-build").await;
    let (task, session) = task_in(&server, &plan_build, "Plan", "Add dark mode").await;
    server.wait_turns(&session, 1).await;
    let planned = session_state(&server, &session).await;
    assert_eq!(planned["plan_mode"], true, "plan mode is on in Plan");
    let plan_conversation = planned["acp_session_id"].as_str().unwrap().to_owned();
    let counters = server.counters();
    assert!(
        counters.prompts_in(&plan_conversation)[0].contains("[plan mode]"),
        "the agent was told to plan"
    );

    server.call("task.move", json!({"id": task, "step_id": step_id(&plan_build, "Build")})).await;
    server.wait_turns(&session, 2).await;
    let built = session_state(&server, &session).await;
    assert_eq!(built["plan_mode"], false, "plan mode is off after leaving Plan");
    let build_conversation = built["acp_session_id"].as_str().unwrap().to_owned();
    assert_ne!(build_conversation, plan_conversation, "a fresh conversation");
    let counters = server.counters();
    assert_eq!(counters.count(CallKind::New), 2, "one session/new for the reset");
    let build_prompts = counters.sessions_prompted_with("Implement");
    assert_eq!(
        build_prompts,
        [build_conversation.as_str()],
        "the Build prompt went to the new conversation only"
    );
    assert!(counters.prompts_in(&plan_conversation).iter().all(|p| !p.contains("Implement")));
    wait_step(&server, &plan_build, &task, "Review").await;
}

async fn session_state(server: &TestServer, id: &str) -> Value {
    session(server, id).await
}

#[tokio::test]
async fn l18_l20_a_live_reset_finishes_before_the_step_prompt_and_replaces_the_token() {
    let server = TestServer::start().await;
    let plan_build = board(&server, "plan-build").await;
    let (task, session) = task_in(&server, &plan_build, "Plan", "t").await;
    server.wait_turns(&session, 1).await;
    server
        .call("message.add", json!({"session_id": session, "content": "#!mock\nusage 500 1000"}))
        .await;
    server.wait_turns(&session, 2).await;
    let before = session_state(&server, &session).await;
    assert!(!before["context_window"].is_null());
    server.call("task.move", json!({"id": task, "step_id": step_id(&plan_build, "Build")})).await;
    server.wait_turns(&session, 3).await;
    let after = session_state(&server, &session).await;
    assert!(after["epoch"].as_i64() > before["epoch"].as_i64(), "the reset moved to a new epoch");
    assert_ne!(after["acp_session_id"], before["acp_session_id"]);
    let counters = server.counters();
    let calls = counters.calls();
    let new_at = calls.iter().rposition(|c| c.kind == CallKind::New).unwrap();
    let prompt_at = calls.iter().rposition(|c| c.kind == CallKind::Prompt).unwrap();
    assert!(new_at < prompt_at, "session/new before the step prompt (rule 18)");
    assert_eq!(
        counters.sessions_prompted_with("Implement").len(),
        1,
        "the step prompt exactly once"
    );
    let notes: Vec<String> = of_kind(&server.messages(&session).await, "status")
        .iter()
        .map(|m| m["content"].as_str().unwrap().to_owned())
        .collect();
    assert!(notes.iter().any(|n| n.starts_with("context reset for step Build")), "{notes:?}");
    assert_eq!(counters.count(CallKind::Initialize), 1, "the same process (rule 20)");
}

#[tokio::test]
async fn l19_a_created_session_needs_no_reset_and_starts_once() {
    let server = TestServer::start().await;
    let plan_build = board(&server, "plan-build").await;
    let (_, session) = task_in(&server, &plan_build, "Build", "straight to build").await;
    server.wait_turns(&session, 1).await;
    let counters = server.counters();
    assert_eq!((counters.count(CallKind::Initialize), counters.count(CallKind::New)), (1, 1));
    assert_eq!(counters.prompt(), 1);
}

#[tokio::test]
async fn l21_a_lazy_reset_forgets_the_conversation_without_contacting_the_agent() {
    let server = TestServer::start().await;
    let plan_build = board(&server, "plan-build").await;
    let (task, session) = task_in(&server, &plan_build, "Plan", "t").await;
    server.wait_turns(&session, 1).await;
    server.call("session.stop", json!({"id": session})).await;
    let initializes = server.counters().count(CallKind::Initialize);
    let old = session_state(&server, &session).await["acp_session_id"].clone();
    // Review has no auto-start: the reset is lazy and nothing is launched.
    server.call("workflow.step.update", json!({"id": step_id(&plan_build, "Review"), "events": {"on_enter": [{"type": "reset_agent_context"}]}})).await;
    server.call("task.move", json!({"id": task, "step_id": step_id(&plan_build, "Review")})).await;
    let after = session_state(&server, &session).await;
    assert!(after["acp_session_id"].is_null(), "token and conversation id cleared");
    assert!(after["context_window"].is_null());
    assert_eq!(
        server.counters().count(CallKind::Initialize),
        initializes,
        "no agent was contacted"
    );
    server.turn(&session, "hello again").await;
    let counters = server.counters();
    assert_eq!(counters.count(CallKind::Load), 0, "the next start uses session/new");
    assert_ne!(session_state(&server, &session).await["acp_session_id"], old);
}

#[tokio::test]
async fn l23_an_active_turn_is_cancelled_internally_before_the_reset() {
    let server = TestServer::start().await;
    let plan_build = board(&server, "plan-build").await;
    let (task, session) = task_in(&server, &plan_build, "Todo", "t").await;
    assert!(session.is_empty());
    let launched = server
        .call(
            "session.launch",
            json!({"task_id": task, "prompt": "#!mock\nsleep 60000\nsay never"}),
        )
        .await;
    let session = launched["session"]["id"].as_str().unwrap().to_owned();
    server.wait_state(&session, "RUNNING").await;
    server.call("task.move", json!({"id": task, "step_id": step_id(&plan_build, "Build")})).await;
    server.wait_turns(&session, 2).await;
    let notes: Vec<String> = of_kind(&server.messages(&session).await, "status")
        .iter()
        .map(|m| m["content"].as_str().unwrap().to_owned())
        .collect();
    assert!(
        !notes.iter().any(|n| n == "turn cancelled"),
        "no user-facing cancel message: {notes:?}"
    );
    assert!(notes.iter().any(|n| n.starts_with("context reset for step Build")));
    assert_eq!(server.counters().sessions_prompted_with("Implement").len(), 1);
}

async fn reset_failing_server() -> TestServer {
    TestServer::start_tuned(Default::default(), tempfile::tempdir().unwrap(), |c| {
        c.reset_timeout = std::time::Duration::from_millis(300);
    })
    .await
}

#[tokio::test]
async fn l24_prompts_during_a_reset_are_queued_or_refused() {
    let server = TestServer::start().await;
    let slow = server
        .profile(
            json!({"name": "slow reset", "kind": "mock", "args": ["--reset-delay-ms", "1500"]}),
        )
        .await;
    let (_, session) = server.session(Some(&slow)).await;
    server.turn(&session, "first").await;
    server.call("session.reset_context", json!({"id": session})).await;
    let (status, body) = server
        .post("message.add", json!({"session_id": session, "content": "now", "queue": false}))
        .await;
    assert_eq!((status, body["code"].as_str()), (409, Some("RESET_IN_PROGRESS")));
    let queued = server
        .call("message.add", json!({"session_id": session, "content": "after the reset"}))
        .await;
    assert_eq!(queued["status"], "queued");
    server.wait_turns(&session, 2).await;
    let users: Vec<&str> = vec!["first", "after the reset"];
    let messages = server.messages(&session).await;
    let got: Vec<&str> =
        of_kind(&messages, "user").iter().map(|m| m["content"].as_str().unwrap()).collect();
    assert_eq!(got, users);
}

#[tokio::test]
async fn l25_l26_a_failed_reset_sends_nothing_reports_the_step_and_leaves_the_session_deletable() {
    let server = reset_failing_server().await;
    let plan_build = board(&server, "plan-build").await;
    let profile = server
        .profile(
            json!({"name": "slow reset", "kind": "mock", "args": ["--reset-delay-ms", "5000"]}),
        )
        .await;
    let todo = step_id(&plan_build, "Todo");
    let created = server.call("task.create", json!({"workflow_id": plan_build["id"], "title": "t", "step_id": todo, "agent_profile_id": profile})).await;
    let task = created["task"]["id"].as_str().unwrap().to_owned();
    let launched = server.call("session.launch", json!({"task_id": task, "prompt": "hello"})).await;
    let session = launched["session"]["id"].as_str().unwrap().to_owned();
    server.wait_turns(&session, 1).await;
    let token = session_state(&server, &session).await["acp_session_id"].clone();
    let prompts = server.counters().prompt();
    server.call("task.move", json!({"id": task, "step_id": step_id(&plan_build, "Build")})).await;
    let now = server.wait_last_error(&session).await;
    assert_eq!(now["last_error"]["code"], "workflow_context_reset_failed", "{now}");
    assert!(now["last_error"]["message"].as_str().unwrap().contains("Build"), "names the step");
    assert_eq!(now["state"], "WAITING_FOR_INPUT");
    assert_eq!(now["acp_session_id"], token, "the previous token is kept");
    assert_eq!(server.counters().prompt(), prompts, "no step prompt was sent");
    let notes: Vec<String> = of_kind(&server.messages(&session).await, "status")
        .iter()
        .map(|m| m["content"].as_str().unwrap().to_owned())
        .collect();
    assert!(!notes.iter().any(|n| n.starts_with("context reset")), "no divider: {notes:?}");
    server.call("session.delete", json!({"id": session})).await;
}

#[tokio::test]
async fn l26_a_delete_during_a_reset_succeeds() {
    let server = TestServer::start().await;
    let slow = server
        .profile(
            json!({"name": "slow reset", "kind": "mock", "args": ["--reset-delay-ms", "3000"]}),
        )
        .await;
    let (_, session) = server.session(Some(&slow)).await;
    server.turn(&session, "first").await;
    server.call("session.reset_context", json!({"id": session})).await;
    let started = Instant::now();
    server.call("session.delete", json!({"id": session})).await;
    assert!(started.elapsed() < std::time::Duration::from_secs(15));
    assert_eq!(server.post("session.get", json!({"id": session})).await.0, 404);
}

#[tokio::test]
async fn l27_mode_and_model_are_reapplied_after_a_reset() {
    let server = TestServer::start().await;
    let (_, session) = server.session(None).await;
    server.call("session.set_mode", json!({"id": session, "mode_id": "plan"})).await;
    let model = kandev_mock_agent::MODELS[1].0;
    server
        .call(
            "session.set_config_option",
            json!({"id": session, "config_id": "model", "value": model}),
        )
        .await;
    let before = server.counters();
    server.call("session.reset_context", json!({"id": session})).await;
    let deadline = Instant::now() + WAIT;
    loop {
        let notes: Vec<String> = of_kind(&server.messages(&session).await, "status")
            .iter()
            .map(|m| m["content"].as_str().unwrap().to_owned())
            .collect();
        if notes.iter().any(|n| n.starts_with("context reset")) {
            break;
        }
        assert!(Instant::now() < deadline, "the reset finished");
        tokio::task::yield_now().await;
    }
    let after = server.counters();
    assert_eq!(after.count(CallKind::SetMode), before.count(CallKind::SetMode) + 1);
    assert!(after.count(CallKind::SetConfigOption) > before.count(CallKind::SetConfigOption));
    let now = session_state(&server, &session).await;
    assert_eq!((now["session_mode"].as_str(), now["model"].as_str()), (Some("plan"), Some(model)));
}

#[tokio::test]
async fn i5_move_to_next_on_every_step_moves_at_most_one_step_per_turn() {
    let server = TestServer::start().await;
    let workspaces = server.call("workspace.list", json!({})).await;
    let yaml = "version: 1\nkind: kandev-workflow\nworkflows:\n  - name: Chain\n    steps:\n".to_owned()
        + &["One", "Two", "Three", "Four"]
            .iter()
            .map(|n| format!("      - name: {n}\n        events:\n          on_enter: [{{type: auto_start_agent}}]\n          on_turn_complete: [{{type: move_to_next}}]\n"))
            .collect::<String>();
    let imported = server
        .call(
            "workflow.import",
            json!({"workspace_id": workspaces["workspaces"][0]["id"], "yaml": yaml}),
        )
        .await;
    let chain = imported["workflows"][0].clone();
    let (task, session) = task_in(&server, &chain, "One", "go").await;
    wait_step(&server, &chain, &task, "Four").await;
    server.wait_turns(&session, 4).await;
    let counters = server.counters();
    assert_eq!(counters.prompt(), 4, "one turn per step");
    assert_eq!(step_of(&server, &task).await, step_id(&chain, "Four"), "stops at the last step");
    assert_eq!(server.counters().prompt(), 4, "no loop after the last step");
}

/// An ACP agent in `sh` whose old conversation keeps talking around a context reset: the
/// second `session/new` is preceded and followed by updates of the first conversation, and
/// every prompt in the new conversation is interleaved with a stale update of the old one.
const STALE_TALKER: &str = r#"
id() { echo "$1" | sed 's/.*"id":\([0-9]*\).*/\1/'; }
say() { echo "{\"jsonrpc\":\"2.0\",\"method\":\"session/update\",\"params\":{\"sessionId\":\"$1\",\"update\":{\"sessionUpdate\":\"agent_message_chunk\",\"content\":{\"type\":\"text\",\"text\":\"$2\"}}}}"; }
news=0
while read -r l; do
  case "$l" in
    *'"initialize"'*) echo "{\"jsonrpc\":\"2.0\",\"id\":$(id "$l"),\"result\":{\"protocolVersion\":1,\"agentCapabilities\":{}}}";;
    *session/new*)
      news=$((news+1))
      if [ $news = 1 ]; then
        echo "{\"jsonrpc\":\"2.0\",\"id\":$(id "$l"),\"result\":{\"sessionId\":\"conv-1\"}}"
      else
        say conv-1 "old-before-token"
        echo "{\"jsonrpc\":\"2.0\",\"id\":$(id "$l"),\"result\":{\"sessionId\":\"conv-2\"}}"
        say conv-1 "old-after-token"
      fi;;
    *session/prompt*)
      case "$l" in
        *conv-2*) say conv-1 "old-late-same-execution"; say conv-2 "fresh";;
        *) say conv-1 "first";;
      esac
      echo "{\"jsonrpc\":\"2.0\",\"id\":$(id "$l"),\"result\":{\"stopReason\":\"end_turn\"}}";;
  esac
done
"#;

#[tokio::test]
async fn l22_old_conversation_events_in_any_order_never_replace_the_new_token() {
    let server = TestServer::start().await;
    let talker = server.profile(json!({"name": "talker", "kind": "custom", "command": "sh", "args": ["-c", STALE_TALKER]})).await;
    let (_, session) = server.session(Some(&talker)).await;
    server.turn(&session, "hello").await;
    assert_eq!(session_state(&server, &session).await["acp_session_id"], "conv-1");
    server.call("session.reset_context", json!({"id": session})).await;
    let deadline = Instant::now() + WAIT;
    while session_state(&server, &session).await["acp_session_id"] != "conv-2" {
        assert!(Instant::now() < deadline, "the reset adopted the new conversation");
        tokio::task::yield_now().await;
    }
    let messages = server.turn(&session, "again").await;
    let said: Vec<&str> =
        of_kind(&messages, "agent").iter().map(|m| m["content"].as_str().unwrap()).collect();
    // Before the new id is stored, after it, and late in the new conversation's turn (same
    // execution): the old conversation is fenced off every time.
    assert!(!said.iter().any(|t| t.contains("old-before-token")), "{said:?}");
    assert!(!said.iter().any(|t| t.contains("old-after-token")), "{said:?}");
    assert!(!said.iter().any(|t| t.contains("old-late-same-execution")), "{said:?}");
    assert!(said.iter().any(|t| t.contains("fresh")), "{said:?}");
    let now = session_state(&server, &session).await;
    assert_eq!(now["acp_session_id"], "conv-2", "all three orders keep the new token");
    server.call("session.stop", json!({"id": session})).await;
    let stopped = session_state(&server, &session).await;
    assert_eq!(stopped["resume_token"], "conv-2", "the stop keeps the token");
    assert!(stopped["acp_session_id"].is_null(), "no live conversation after the stop");
}

#[tokio::test]
async fn l11_a_workflow_prompt_while_busy_is_queued_by_the_workflow() {
    let server = TestServer::start().await;
    let kanban = board(&server, "kanban").await;
    let (task, _) = task_in(&server, &kanban, "Backlog", "Tidy up").await;
    let launched = server
        .call("session.launch", json!({"task_id": task, "prompt": "#!mock\nsleep 800\nsay busy"}))
        .await;
    let session = launched["session"]["id"].as_str().unwrap().to_owned();
    server.wait_state(&session, "RUNNING").await;
    server.call("task.move", json!({"id": task, "step_id": step_id(&kanban, "In Progress")})).await;
    let queue = server.call("message.queue.list", json!({"session_id": session})).await;
    let entries = queue["queue"].as_array().unwrap();
    assert_eq!(entries.len(), 1, "{queue}");
    assert_eq!(
        (entries[0]["queued_by"].as_str(), entries[0]["content"].as_str()),
        (Some("workflow"), Some("Tidy up"))
    );
    server.wait_turns(&session, 2).await;
    assert_eq!(
        of_kind(&server.messages(&session).await, "agent").last().unwrap()["content"],
        "echo: Tidy up"
    );
}

#[tokio::test]
async fn i5_a_step_with_its_own_agent_profile_works_in_a_session_of_that_profile() {
    let server = TestServer::start().await;
    let kanban = board(&server, "kanban").await;
    let reviewer = server.profile(json!({"name": "Reviewer", "kind": "mock"})).await;
    let review = step_id(&kanban, "Review");
    server
        .call("workflow.step.update", json!({"id": review, "agent_profile_id": reviewer, "events": {"on_enter": [{"type": "auto_start_agent"}]}}))
        .await;
    let (task, first) = task_in(&server, &kanban, "In Progress", "Ship it").await;
    wait_step(&server, &kanban, &task, "Review").await;
    let deadline = Instant::now() + WAIT;
    let primary = loop {
        let task_now = server.call("task.get", json!({"id": task})).await;
        let primary = task_now["task"]["primary_session_id"].as_str().unwrap().to_owned();
        if primary != first {
            break primary;
        }
        assert!(Instant::now() < deadline, "a session of the step's profile became primary");
        tokio::task::yield_now().await;
    };
    assert_eq!(session_state(&server, &primary).await["agent_profile_id"], reviewer.as_str());
    server.wait_turns(&primary, 1).await;
    let sessions = server.call("task.session.list", json!({"task_id": task})).await;
    assert_eq!(sessions["sessions"].as_array().unwrap().len(), 2);
}

#[tokio::test]
async fn i5_a_cancel_counts_as_turn_complete_only_when_the_step_says_so() {
    let server = TestServer::start().await;
    let kanban = board(&server, "kanban").await;
    let in_progress = step_id(&kanban, "In Progress");
    for (counts, expected_step) in [(false, "In Progress"), (true, "Review")] {
        server
            .call(
                "workflow.step.update",
                json!({"id": in_progress, "cancel_triggers_turn_complete": counts}),
            )
            .await;
        let (task, _) = task_in(&server, &kanban, "Backlog", "t").await;
        let launched = server.call("session.launch", json!({"task_id": task})).await;
        let session = launched["session"]["id"].as_str().unwrap().to_owned();
        server.wait_state(&session, "WAITING_FOR_INPUT").await;
        // Move it in by hand while the Backlog session idles, then interrupt the step's turn.
        server
            .call("message.add", json!({"session_id": session, "content": "#!mock\nsleep 60000"}))
            .await;
        server.wait_state(&session, "RUNNING").await;
        server.call("workflow.step.update", json!({"id": in_progress, "events": {"on_turn_complete": [{"type": "move_to_step", "step_id": step_id(&kanban, "Review")}]}})).await;
        server.call("task.move", json!({"id": task, "step_id": in_progress})).await;
        server.call("agent.cancel", json!({"session_id": session})).await;
        server.wait_turns(&session, 1).await;
        server.wait_state(&session, "WAITING_FOR_INPUT").await;
        if expected_step == "Review" {
            wait_step(&server, &kanban, &task, "Review").await;
        }
        assert_eq!(
            step_of(&server, &task).await,
            step_id(&kanban, expected_step),
            "cancel_triggers_turn_complete = {counts}"
        );
    }
}

/// Rule 44: while a context reset runs, no admission path sends a prompt — not
/// `message.add`, `message.queue.add`, `message.queue.drain`, `message.queue.auto_run.set`,
/// a queued entry taken at the end of the turn the reset cancelled, nor a workflow
/// auto-start. Each waits in the queue and runs, once, in the new conversation.
#[tokio::test]
async fn l44_every_admission_path_waits_during_a_reset() {
    let server = TestServer::start().await;
    let slow = server
        .profile(
            json!({"name": "slow reset", "kind": "mock", "args": ["--reset-delay-ms", "1500"]}),
        )
        .await;
    let kanban = board(&server, "kanban").await;
    let (task, _) = task_in(&server, &kanban, "Backlog", "p-workflow").await;
    let launched =
        server.call("session.launch", json!({"task_id": task, "agent_profile_id": slow})).await;
    let session = launched["session"]["id"].as_str().unwrap().to_owned();
    server.wait_state(&session, "WAITING_FOR_INPUT").await;
    server.turn(&session, "first").await;
    let add = |content: &str| json!({"session_id": session, "content": content});

    // A queued entry waiting behind a turn that the reset cancels (turn end).
    server.call("message.add", add("#!mock\nsleep 60000\nsay never")).await;
    server.wait_state(&session, "RUNNING").await;
    assert_eq!(server.call("message.add", add("p-turn-end")).await["status"], "queued");
    server.call("session.reset_context", json!({"id": session})).await;
    server.wait_turns(&session, 3).await; // the reset's own turn-end ran p-turn-end after it
    let second =
        session_state(&server, &session).await["acp_session_id"].as_str().unwrap().to_owned();

    // Every other path, inside one slow reset.
    server.call("session.reset_context", json!({"id": session})).await;
    assert_eq!(server.call("message.add", add("p-message-add")).await["status"], "queued");
    server.call("message.queue.add", add("p-queue-add")).await;
    let off = json!({"session_id": session, "enabled": false});
    server.call("message.queue.auto_run.set", off).await;
    server.call("message.queue.add", add("p-drain")).await;
    server.call("message.queue.drain", json!({"session_id": session})).await;
    server.call("message.queue.add", add("p-auto-run")).await;
    let on = json!({"session_id": session, "enabled": true});
    server.call("message.queue.auto_run.set", on).await;
    server.call("task.move", json!({"id": task, "step_id": step_id(&kanban, "In Progress")})).await;
    let queue = server.call("message.queue.list", json!({"session_id": session})).await;
    let waiting: Vec<&str> =
        queue["queue"].as_array().unwrap().iter().map(|q| q["content"].as_str().unwrap()).collect();
    assert_eq!(
        waiting,
        ["p-message-add", "p-queue-add", "p-drain", "p-auto-run", "p-workflow"],
        "every path waited in the queue"
    );
    server.wait_turns(&session, 8).await;

    let third =
        session_state(&server, &session).await["acp_session_id"].as_str().unwrap().to_owned();
    let counters = server.counters();
    assert_eq!(counters.sessions_prompted_with("p-turn-end"), [second.as_str()]);
    for prompt in ["p-message-add", "p-queue-add", "p-drain", "p-auto-run", "p-workflow"] {
        assert_eq!(
            counters.sessions_prompted_with(prompt),
            [third.as_str()],
            "{prompt}: sent once, into the conversation after the reset"
        );
    }
}

/// Rule 44, one admission path per test: a session whose agent takes 1.5 s for `session/new`
/// (so a reset stays in progress that long), on a task in Kanban's Backlog, after one turn.
/// Returns (board, task id, session id, the conversation before any reset).
async fn slow_reset_session(server: &TestServer, title: &str) -> (Value, String, String, String) {
    let slow = server
        .profile(
            json!({"name": "slow reset", "kind": "mock", "args": ["--reset-delay-ms", "1500"]}),
        )
        .await;
    let kanban = board(server, "kanban").await;
    let (task, _) = task_in(server, &kanban, "Backlog", title).await;
    let launched =
        server.call("session.launch", json!({"task_id": task, "agent_profile_id": slow})).await;
    let session = launched["session"]["id"].as_str().unwrap().to_owned();
    server.wait_state(&session, "WAITING_FOR_INPUT").await;
    server.turn(&session, "first").await;
    let before = conversation(server, &session).await;
    (kanban, task, session, before)
}

async fn conversation(server: &TestServer, session: &str) -> String {
    session_state(server, session).await["acp_session_id"].as_str().unwrap().to_owned()
}

/// The contents of the session's queue.
async fn queued(server: &TestServer, session: &str) -> Vec<String> {
    let queue = server.call("message.queue.list", json!({"session_id": session})).await;
    queue["queue"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| q["content"].as_str().unwrap().to_owned())
        .collect()
}

/// Waits (bounded) until the session's reset has settled: its divider is in the transcript.
async fn wait_reset_done(server: &TestServer, session: &str) {
    let mut ws = server.ws().await;
    let topic = format!("session:{session}");
    let id = ws.request("subscribe", json!({"topics": [topic], "since": {topic.clone(): 0}})).await;
    let (replayed, _) = ws.reply(&id).await;
    let is_divider = |frame: &Value| {
        frame["action"] == "session.message.added"
            && frame["payload"]["message"]["content"]
                .as_str()
                .is_some_and(|c| c.starts_with("context reset"))
    };
    if replayed.iter().any(is_divider) {
        return;
    }
    while !is_divider(&ws.next().await) {}
}

/// After the reset: `prompt` was sent exactly once, into the conversation the reset made.
async fn assert_sent_once_after_the_reset(
    server: &TestServer,
    session: &str,
    before: &str,
    prompt: &str,
) {
    let after = conversation(server, session).await;
    assert_ne!(after, before, "the reset made a new conversation");
    assert_eq!(
        server.counters().sessions_prompted_with(prompt),
        [after.as_str()],
        "{prompt}: sent once, into the conversation after the reset"
    );
}

#[tokio::test]
async fn l44_message_add_waits_in_the_queue_during_a_reset() {
    let server = TestServer::start().await;
    let (_, _, session, before) = slow_reset_session(&server, "task").await;
    server.call("session.reset_context", json!({"id": session})).await;
    let added =
        server.call("message.add", json!({"session_id": session, "content": "p-add"})).await;
    assert_eq!(added["status"], "queued", "{added}");
    assert_eq!(queued(&server, &session).await, ["p-add"]);
    server.wait_turns(&session, 2).await;
    assert_sent_once_after_the_reset(&server, &session, &before, "p-add").await;
}

#[tokio::test]
async fn l44_message_queue_add_waits_during_a_reset() {
    let server = TestServer::start().await;
    let (_, _, session, before) = slow_reset_session(&server, "task").await;
    server.call("session.reset_context", json!({"id": session})).await;
    let queue = server
        .call("message.queue.add", json!({"session_id": session, "content": "p-queue-add"}))
        .await;
    assert_eq!(queue["queue"][0]["content"], "p-queue-add", "not taken while resetting: {queue}");
    server.wait_turns(&session, 2).await;
    assert_sent_once_after_the_reset(&server, &session, &before, "p-queue-add").await;
}

#[tokio::test]
async fn l44_message_queue_drain_waits_during_a_reset() {
    let server = TestServer::start().await;
    let (_, _, session, before) = slow_reset_session(&server, "task").await;
    let off = json!({"session_id": session, "enabled": false});
    server.call("message.queue.auto_run.set", off).await;
    server.call("session.reset_context", json!({"id": session})).await;
    server.call("message.queue.add", json!({"session_id": session, "content": "p-drain"})).await;
    let drained = server.call("message.queue.drain", json!({"session_id": session})).await;
    assert_eq!(drained["queue"][0]["content"], "p-drain", "not taken while resetting: {drained}");
    wait_reset_done(&server, &session).await;
    assert_eq!(queued(&server, &session).await, ["p-drain"], "auto_run off: it waits for a drain");
    server.call("message.queue.drain", json!({"session_id": session})).await;
    server.wait_turns(&session, 2).await;
    assert_sent_once_after_the_reset(&server, &session, &before, "p-drain").await;
}

#[tokio::test]
async fn l44_message_queue_auto_run_set_waits_during_a_reset() {
    let server = TestServer::start().await;
    let (_, _, session, before) = slow_reset_session(&server, "task").await;
    let off = json!({"session_id": session, "enabled": false});
    server.call("message.queue.auto_run.set", off).await;
    server.call("session.reset_context", json!({"id": session})).await;
    server.call("message.queue.add", json!({"session_id": session, "content": "p-auto-run"})).await;
    let on = json!({"session_id": session, "enabled": true});
    let turned_on = server.call("message.queue.auto_run.set", on).await;
    assert_eq!(
        turned_on["queue"][0]["content"], "p-auto-run",
        "not taken while resetting: {turned_on}"
    );
    server.wait_turns(&session, 2).await;
    assert_sent_once_after_the_reset(&server, &session, &before, "p-auto-run").await;
}

#[tokio::test]
async fn l44_a_queued_entry_waits_at_the_end_of_the_turn_the_reset_cancels() {
    let server = TestServer::start().await;
    let (_, _, session, before) = slow_reset_session(&server, "task").await;
    let add = |content: &str| json!({"session_id": session, "content": content});
    server.call("message.add", add("#!mock\nsleep 60000\nsay never")).await;
    server.wait_state(&session, "RUNNING").await;
    assert_eq!(server.call("message.add", add("p-turn-end")).await["status"], "queued");
    server.call("session.reset_context", json!({"id": session})).await;
    // The cancelled turn ends; the entry waits for the reset, then runs in its conversation.
    server.wait_turns(&session, 3).await;
    assert_sent_once_after_the_reset(&server, &session, &before, "p-turn-end").await;
}

#[tokio::test]
async fn l44_a_workflow_auto_start_waits_during_a_reset() {
    let server = TestServer::start().await;
    let (kanban, task, session, before) = slow_reset_session(&server, "p-workflow").await;
    server.call("session.reset_context", json!({"id": session})).await;
    // In Progress auto-starts the agent with the step prompt (the task's title here).
    server.call("task.move", json!({"id": task, "step_id": step_id(&kanban, "In Progress")})).await;
    assert_eq!(
        queued(&server, &session).await,
        ["p-workflow"],
        "the step prompt waits in the queue"
    );
    server.wait_turns(&session, 2).await;
    assert_sent_once_after_the_reset(&server, &session, &before, "p-workflow").await;
}

/// Rule 10 also when the user's cancel joins the engine's own cancel of a context reset:
/// what was queued does not start behind the user's back once the reset is done.
#[tokio::test]
async fn l10_a_user_cancel_joining_a_resets_cancel_turns_auto_run_off() {
    let server = TestServer::start().await; // cancel bound 500 ms in tests
    let stubborn = server
        .profile(json!({"name": "stubborn", "kind": "mock", "args": ["--hang-on-cancel"]}))
        .await;
    let (_, session) = server.session(Some(&stubborn)).await;
    let add = |content: &str| json!({"session_id": session, "content": content});
    server.call("message.add", add("#!mock\nsleep 60000\nsay never")).await;
    server.wait_state(&session, "RUNNING").await;
    assert_eq!(server.call("message.add", add("queued")).await["status"], "queued");
    server.call("session.reset_context", json!({"id": session})).await;
    let cancelled = server.call("agent.cancel", json!({"session_id": session})).await;
    assert_eq!(cancelled["session"]["auto_run"], false, "{cancelled}");
    // The hung agent is stopped and the reset finishes without it; nothing else runs.
    let deadline = Instant::now() + WAIT;
    loop {
        let notes: Vec<String> = of_kind(&server.messages(&session).await, "status")
            .iter()
            .map(|m| m["content"].as_str().unwrap().to_owned())
            .collect();
        if notes.iter().any(|n| n.starts_with("context reset")) {
            break;
        }
        assert!(Instant::now() < deadline, "the reset finished: {notes:?}");
        tokio::task::yield_now().await;
    }
    let queue = server.call("message.queue.list", json!({"session_id": session})).await;
    assert_eq!(queue["queue"].as_array().unwrap().len(), 1, "the entry still waits: {queue}");
    assert_eq!(server.counters().prompt(), 1, "only the first prompt was sent");
}
