//! Issue 20 acceptance 1 (R6, small) and lifecycle rule 42's re-adopt branch with the real
//! binary: `kill -9` of a `serve --runner local` during streaming turns, then a restart. The
//! runner kept the agents; the new server takes them over, every turn completes without
//! `session/load` or an "interrupted" note, every chunk an agent wrote is in the transcript
//! exactly once, and the agents of tasks deleted while the server was down or after the
//! restart are killed. Also: output streamed while a permission request waits, MCP tokens
//! across the restart, and an abort between a commit and the runner's acknowledgement
//! (the `KANDEV_FAULT` failpoint).

use kandev_mock_agent::script::stream_chunk_text;
use kandev_mock_agent::{CallKind, Counters};
use serde_json::{Value, json};
use support::{
    KANDEV, Server, Watch, agent_text, agents_of, call, eventually, launched_session,
    launched_with, messages, runners_of, state, try_call,
};

mod support;

/// Streaming turns that must survive the restart (R6 asks for 20: `kandev-bench r6`).
const TURNS: usize = 5;
const CHUNKS: u64 = 150;
const BYTES: usize = 24;
const LOCAL: [&str; 4] = ["--runner", "local", "--runner-grace", "60s"];

/// The text of `count` streamed chunks.
fn streamed(count: u64) -> String {
    (0..count).map(|i| stream_chunk_text(i, BYTES)).collect()
}

fn interrupted(stored: &[Value]) -> bool {
    stored
        .iter()
        .any(|m| m["kind"] == "status" && m["content"].as_str().unwrap().starts_with("interrupted"))
}

/// Waits until the agent said at least `bytes` bytes in the session.
async fn until_said(watch: &mut Watch, server: &Server, session: &str, bytes: usize) {
    let what = format!("the turn of {session} streams");
    watch.messages(server, session, &what, |m| agent_text(m).len() >= bytes).await;
}

fn no_load(home: &std::path::Path) {
    let counters = Counters::read(&home.join("mock-agent")).unwrap();
    assert_eq!(counters.count(CallKind::Load), 0, "no session/load");
}

/// A graceful stop ends the agents, and the runner with nothing left: no orphan.
async fn stop_leaving_nothing(server: Server, home: &std::path::Path) {
    server.terminate();
    eventually("no agent is left", async || agents_of(home).is_empty()).await;
    eventually("the runner ends", async || runners_of(home).is_empty()).await;
}

#[tokio::test]
async fn i20_a1_l42_kill_9_during_streaming_turns_then_restart_every_turn_completes_once() {
    let home = tempfile::tempdir().unwrap();
    let mut server = KANDEV.start_with(home.path(), &LOCAL);
    // Two more sessions than the turns checked: the task of one is deleted while the server
    // is down, the other's after the restart, while its re-adopted turn runs.
    let mut tasks = vec![];
    let mut sessions = vec![];
    for i in 0..TURNS + 2 {
        let (task, session) = launched_session(&server, &format!("r6-{i}")).await;
        tasks.push(task);
        sessions.push(session);
    }
    let mut watch = Watch::sessions(&server, &sessions).await;
    let script = format!("#!mock\nstream {CHUNKS} {BYTES} every 20");
    for session in &sessions {
        call(&server, "message.add", json!({"session_id": session, "content": script})).await;
    }
    // Every turn is streaming (some text stored), none is done.
    for session in &sessions {
        until_said(&mut watch, &server, session, BYTES * 10).await;
    }
    server.kill_9();
    assert_eq!(agents_of(home.path()).len(), TURNS + 2, "the runner keeps the agents");

    // The last task is deleted while no server runs, and the first session gets a note from
    // outside its turn (as "X moved the task" is): it does not end the turn's stream.
    {
        let location = kandev_store::Location::File(home.path().join("kandev.db"));
        let store = kandev_store::Store::open(location).await.unwrap();
        let mut tx = store.begin_write().await.unwrap();
        tx.delete_task(&kandev_domain::TaskId::new(tasks[TURNS].clone())).await.unwrap();
        tx.insert_message(&kandev_store::NewMessage {
            session_id: kandev_domain::SessionId::new(sessions[0].clone()),
            turn_id: None,
            content: "someone moved the task".into(),
            meta: kandev_domain::message_meta::MessageMeta::empty(
                kandev_domain::transcript::MessageKind::Status,
            ),
            client_message_id: None,
        })
        .await
        .unwrap();
        tx.commit().await.unwrap();
        store.close().await;
    }

    let restarted = KANDEV.start_with(home.path(), &LOCAL);
    assert_eq!(state(&restarted, &sessions[TURNS + 1]).await, "RUNNING", "re-adopted mid-turn");
    call(&restarted, "task.delete", json!({"id": tasks[TURNS + 1], "force": true})).await;
    let mut watch = Watch::sessions(&restarted, &sessions[..TURNS]).await;
    let expected = streamed(CHUNKS);
    for session in &sessions[..TURNS] {
        let what = format!("the turn of {session} completes");
        watch
            .until(&what, || async {
                let now = state(&restarted, session).await;
                assert!(now == "RUNNING" || now == "WAITING_FOR_INPUT", "{session}: {now}");
                (now == "WAITING_FOR_INPUT").then_some(())
            })
            .await;
        let stored = messages(&restarted, session).await;
        assert_eq!(agent_text(&stored), expected, "every chunk once, in order, in {session}");
        // As if nothing happened: the stream goes on in the message it was in, not in a
        // second one begun by the new server.
        let said = stored.iter().filter(|m| m["kind"] == "agent").count();
        assert_eq!(said, 1, "one agent message in {session}");
        assert!(!interrupted(&stored), "no interrupted note in {session}");
        let turns = call(&restarted, "session.turn.list", json!({"session_id": session})).await;
        let turns = turns["turns"].as_array().unwrap();
        assert_eq!(turns.len(), 1, "one turn in {session}");
        assert_eq!(turns[0]["stop_reason"], "end_turn");
    }
    no_load(home.path());
    let counters = Counters::read(&home.path().join("mock-agent")).unwrap();
    assert_eq!(counters.count(CallKind::Prompt), TURNS + 2, "each prompt sent once");
    // The deleted tasks' agents are gone; the others stay, ready for the next prompt.
    eventually("the deleted sessions' agents are killed", async || {
        agents_of(home.path()).len() == TURNS
    })
    .await;
    let session = &sessions[0];
    call(&restarted, "message.add", json!({"session_id": session, "content": "are you back"}))
        .await;
    let answered = |m: &[Value]| m.iter().any(|m| m["content"] == "echo: are you back");
    watch.messages(&restarted, session, "the re-adopted agent answers", answered).await;
    no_load(home.path());
    stop_leaving_nothing(restarted, home.path()).await;
}

/// The session's permission requests: `(request id, status)`, oldest first.
fn permissions(messages: &[Value]) -> Vec<(String, String)> {
    messages
        .iter()
        .filter(|m| m["kind"] == "permission_request")
        .map(|m| {
            let id = m["metadata"]["request_id"].as_str().unwrap().to_owned();
            (id, m["metadata"]["status"].as_str().unwrap().to_owned())
        })
        .collect()
}

/// After a restart: the request the user saw expired (its responder died with the server),
/// the agent's request, still waiting, came again with the replay and is asked anew; it is
/// answered and the turn completes. Returns what the agent said.
/// Issue 45 item 12: the request asked again is the same card (one message, still pending),
/// taken over with a new request id; the old id answers nothing.
async fn answer_the_request_asked_again(server: &Server, session: &str, before: &str) -> String {
    let mut watch = Watch::sessions(server, &[session.to_owned()]).await;
    let again = |m: &[Value]| permissions(m).iter().any(|(id, _)| id != before);
    let stored = watch.messages(server, session, "the request is asked again", again).await;
    let asked = permissions(&stored);
    assert_eq!(asked.len(), 1, "one card: {asked:?}");
    assert_eq!(asked[0].1, "pending");
    assert_eq!(state(server, session).await, "RUNNING", "the turn goes on");
    let stale = json!({"session_id": session, "request_id": before, "option_id": "allow_once"});
    assert!(try_call(server, "permission.respond", stale).await.is_err(), "the old id is gone");
    let answer =
        json!({"session_id": session, "request_id": asked[0].0, "option_id": "allow_once"});
    call(server, "permission.respond", answer).await;
    watch.state(server, session, "WAITING_FOR_INPUT").await;
    agent_text(&messages(server, session).await)
}

#[tokio::test]
async fn l42_a_permission_request_pending_at_a_kill_9_is_asked_again_after_the_restart() {
    let home = tempfile::tempdir().unwrap();
    let mut server = KANDEV.start_with(home.path(), &LOCAL);
    let (_, session) = launched_session(&server, "ask").await;
    let mut watch = Watch::sessions(&server, std::slice::from_ref(&session)).await;
    let script = "#!mock\nsay before\nask_permission deploy\nsay after";
    call(&server, "message.add", json!({"session_id": session, "content": script})).await;
    let asked = |m: &[Value]| !permissions(m).is_empty();
    let stored = watch.messages(&server, &session, "the agent asks", asked).await;
    let before = permissions(&stored)[0].0.clone();
    server.kill_9(); // the request unanswered

    let restarted = KANDEV.start_with(home.path(), &LOCAL);
    let text = answer_the_request_asked_again(&restarted, &session, &before).await;
    assert_eq!(text, "beforepermission: allow_once\nafter", "the agent got the answer");
    no_load(home.path());
}

/// A request holds the recorded position before it until it is answered; what the agent
/// streamed meanwhile is stored and must not be stored again when the restart replays the
/// request and everything after it (`runner_ahead`).
#[tokio::test]
async fn i20_a1_output_streamed_while_a_permission_request_waits_is_stored_once() {
    let home = tempfile::tempdir().unwrap();
    let mut server = KANDEV.start_with(home.path(), &LOCAL);
    let (_, session) = launched_session(&server, "ask and stream").await;
    let mut watch = Watch::sessions(&server, std::slice::from_ref(&session)).await;
    let script = format!(
        "#!mock\nsay before\nask_permission_later deploy\nstream 40 {BYTES}\nawait_permission\nsay after"
    );
    call(&server, "message.add", json!({"session_id": session, "content": script})).await;
    let streamed_all = format!("before{}", streamed(40));
    let ready = |m: &[Value]| !permissions(m).is_empty() && agent_text(m) == streamed_all;
    let stored = watch.messages(&server, &session, "the agent asks, then streams", ready).await;
    let before = permissions(&stored)[0].0.clone();
    server.kill_9(); // the request unanswered, the text after it stored

    let restarted = KANDEV.start_with(home.path(), &LOCAL);
    let text = answer_the_request_asked_again(&restarted, &session, &before).await;
    assert_eq!(text, format!("{streamed_all}permission: allow_once\nafter"), "every chunk once");
    no_load(home.path());
    stop_leaving_nothing(restarted, home.path()).await;
}

/// A session with one finished turn (its agent is live and idle).
async fn live_session(server: &Server, watch_too: bool) -> (String, Option<Watch>) {
    let (_, session) = launched_session(server, "t").await;
    let mut watch = Watch::sessions(server, std::slice::from_ref(&session)).await;
    call(server, "message.add", json!({"session_id": session, "content": "hello"})).await;
    let answered = |m: &[Value]| agent_text(m) == "echo: hello";
    watch.messages(server, &session, "the agent answers", answered).await;
    watch.state(server, &session, "WAITING_FOR_INPUT").await;
    (session, watch_too.then_some(watch))
}

#[tokio::test]
async fn i20_d1_a_session_after_a_live_context_reset_is_re_adopted() {
    let home = tempfile::tempdir().unwrap();
    let mut server = KANDEV.start_with(home.path(), &LOCAL);
    let (session, watch) = live_session(&server, true).await;
    let mut watch = watch.unwrap();
    call(&server, "session.reset_context", json!({"id": session})).await;
    let reset = |m: &[Value]| m.iter().any(|m| m["metadata"]["reason"] == "context_reset");
    watch.messages(&server, &session, "the live reset completes", reset).await;
    let script = format!("#!mock\nstream 60 {BYTES} every 20");
    call(&server, "message.add", json!({"session_id": session, "content": script})).await;
    until_said(&mut watch, &server, &session, "echo: hello".len() + BYTES * 5).await;
    server.kill_9();

    let restarted = KANDEV.start_with(home.path(), &LOCAL);
    assert_eq!(state(&restarted, &session).await, "RUNNING", "re-adopted mid-turn");
    let mut watch = Watch::sessions(&restarted, std::slice::from_ref(&session)).await;
    watch.state(&restarted, &session, "WAITING_FOR_INPUT").await;
    let stored = messages(&restarted, &session).await;
    assert!(!interrupted(&stored), "no interrupted note");
    assert_eq!(agent_text(&stored), format!("echo: hello{}", streamed(60)), "every chunk once");
    no_load(home.path());
    stop_leaving_nothing(restarted, home.path()).await;
}

#[tokio::test]
async fn i20_d2_a_re_adopted_quiet_turn_is_not_ended_as_silent() {
    // Rule 40 after 1 s: a turn with no output by then is ended, a quiet one gets a notice.
    let args = [LOCAL.as_slice(), &["--agent-stall-after", "1s"]].concat();
    let home = tempfile::tempdir().unwrap();
    let mut server = KANDEV.start_with(home.path(), &args);
    let (session, watch) = live_session(&server, true).await;
    let mut watch = watch.unwrap();
    let script = "#!mock\nsay before\nsleep 8000\nsay after";
    call(&server, "message.add", json!({"session_id": session, "content": script})).await;
    let spoke = |m: &[Value]| agent_text(m).ends_with("before");
    watch.messages(&server, &session, "the agent speaks", spoke).await;
    server.kill_9(); // the agent quiet

    let restarted = KANDEV.start_with(home.path(), &args);
    assert_eq!(state(&restarted, &session).await, "RUNNING", "re-adopted mid-turn");
    let mut watch = Watch::sessions(&restarted, std::slice::from_ref(&session)).await;
    watch.state(&restarted, &session, "WAITING_FOR_INPUT").await;
    let got = call(&restarted, "session.get", json!({"id": session})).await;
    assert!(got["session"]["last_error"].is_null(), "not stalled: {got}");
    assert_eq!(agent_text(&messages(&restarted, &session).await), "echo: hellobeforeafter");
    let turns = call(&restarted, "session.turn.list", json!({"session_id": session})).await;
    assert_eq!(turns["turns"][1]["stop_reason"], "end_turn", "{turns}");
    stop_leaving_nothing(restarted, home.path()).await;
}

#[tokio::test]
async fn i20_d4_an_execution_acknowledged_past_the_recorded_position_is_not_re_adopted() {
    let home = tempfile::tempdir().unwrap();
    let mut server = KANDEV.start_with(home.path(), &LOCAL);
    let (session, watch) = live_session(&server, true).await;
    let mut watch = watch.unwrap();
    let script = format!("#!mock\nstream 100 {BYTES} every 20");
    call(&server, "message.add", json!({"session_id": session, "content": script})).await;
    until_said(&mut watch, &server, &session, "echo: hello".len() + BYTES * 5).await;
    server.kill_9();
    // The recorded position falls behind what the runner was told (a record that failed
    // while its transaction committed): output after it would be stored twice.
    {
        let location = kandev_store::Location::File(home.path().join("kandev.db"));
        let store = kandev_store::Store::open(location).await.unwrap();
        let id = kandev_domain::SessionId::new(session.clone());
        let position = store.runner_position(&id).await.unwrap().unwrap();
        assert!(position.committed > 0, "some output was committed");
        let mut tx = store.begin_write().await.unwrap();
        tx.set_runner_exec(&id, position.epoch, &position.exec).await.unwrap();
        tx.commit().await.unwrap();
        store.close().await;
    }

    let restarted = KANDEV.start_with(home.path(), &LOCAL);
    assert_eq!(state(&restarted, &session).await, "WAITING_FOR_INPUT", "reconciled");
    assert!(interrupted(&messages(&restarted, &session).await), "an interrupted note");
    eventually("its agent is killed", async || agents_of(home.path()).is_empty()).await;
}

/// The MCP servers each `session/new` of the mock agents got (`--mcp-log`), oldest first:
/// `(url, token)` of Kandev's.
fn mcp_tokens(log: &std::path::Path) -> Vec<(String, String)> {
    std::fs::read_to_string(log)
        .unwrap()
        .lines()
        .map(|line| {
            let servers: Value = serde_json::from_str(line).unwrap();
            let kandev = &servers[0];
            let bearer = kandev["headers"][0]["value"].as_str().unwrap();
            let token = bearer.strip_prefix("Bearer ").unwrap().to_owned();
            (kandev["url"].as_str().unwrap().to_owned(), token)
        })
        .collect()
}

/// A direct MCP request with `token`: its HTTP status.
async fn mcp_status(url: &str, token: &str) -> u16 {
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}});
    let response = reqwest::Client::new()
        .post(url)
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream")
        .json(&list)
        .send()
        .await
        .unwrap();
    response.status().as_u16()
}

/// The token a re-adopted agent holds keeps working after a restart (its hash is stored with
/// the session's epoch); tokens of a deleted session and of an older epoch are refused.
#[tokio::test]
async fn i20_a1_a_re_adopted_agent_keeps_its_mcp_token_across_a_restart() {
    let home = tempfile::tempdir().unwrap();
    let log = home.path().join("mcp.log");
    let mut server = KANDEV.start_with(home.path(), &LOCAL);
    let profile = call(
        &server,
        "agent.profile.create",
        json!({"name": "logged", "kind": "mock", "args": ["--mcp-log", log.display().to_string()]}),
    )
    .await;
    let profile = profile["profile"]["id"].clone();
    let mut sessions = vec![];
    for title in ["kept", "deleted"] {
        let launch = json!({"agent_profile_id": profile});
        let (task, session) = launched_with(&server, title, launch).await;
        let mut watch = Watch::sessions(&server, std::slice::from_ref(&session)).await;
        call(&server, "message.add", json!({"session_id": session, "content": "hello"})).await;
        let answered = |m: &[Value]| agent_text(m) == "echo: hello";
        watch.messages(&server, &session, "the agent answers", answered).await;
        watch.state(&server, &session, "WAITING_FOR_INPUT").await;
        sessions.push((task, session, watch));
    }
    // A live reset hands the kept session's agent the next epoch's token.
    let (_, kept, watch) = &mut sessions[0];
    call(&server, "session.reset_context", json!({"id": kept})).await;
    let reset = |m: &[Value]| m.iter().any(|m| m["metadata"]["reason"] == "context_reset");
    watch.messages(&server, kept, "the live reset completes", reset).await;
    let tokens = mcp_tokens(&log);
    assert_eq!(tokens.len(), 3, "{tokens:?}");
    let (url, older) = tokens[0].clone();
    let deleted = tokens[1].1.clone();
    let addr = server.addr();
    server.kill_9();

    // The agent's MCP endpoint is the old address: the server comes back on it.
    let restarted = KANDEV.launch(home.path(), &addr, &LOCAL, &[]);
    let (deleted_task, kept) = (sessions[1].0.clone(), sessions[0].1.clone());
    call(&restarted, "task.delete", json!({"id": deleted_task, "force": true})).await;
    let mut watch = Watch::sessions(&restarted, std::slice::from_ref(&kept)).await;
    let script = "#!mock\nmcp kandev get_task {}";
    call(&restarted, "message.add", json!({"session_id": kept, "content": script})).await;
    let called = |m: &[Value]| agent_text(m).contains("mcp get_task");
    let stored = watch.messages(&restarted, &kept, "the agent calls MCP", called).await;
    let said = agent_text(&stored);
    assert!(said.contains("mcp get_task ok:"), "the token still works: {said}");
    assert_eq!(mcp_status(&url, &deleted).await, 401, "a deleted session's token");
    assert_eq!(mcp_status(&url, &older).await, 401, "an older epoch's token");
    no_load(home.path());
    stop_leaving_nothing(restarted, home.path()).await;
}

/// The worst moment of a crash (`KANDEV_FAULT=abort_before_ack:<n>`): a transaction that
/// recorded a runner position committed, the runner was not told; the restart replays what
/// it stored, and nothing is stored twice.
#[tokio::test]
async fn i20_a1_an_abort_between_a_commit_and_the_runner_ack_duplicates_nothing() {
    let home = tempfile::tempdir().unwrap();
    let fault = [("KANDEV_FAULT", "abort_before_ack:40")];
    let mut server = KANDEV.launch(home.path(), "127.0.0.1:0", &LOCAL, &fault);
    let mut sessions = vec![];
    for i in 0..3 {
        sessions.push(launched_session(&server, &format!("fault-{i}")).await.1);
    }
    let mut watch = Watch::sessions(&server, &sessions).await;
    let script = format!("#!mock\nstream {CHUNKS} {BYTES} every 20");
    for session in &sessions {
        call(&server, "message.add", json!({"session_id": session, "content": script})).await;
    }
    watch.closed("the server aborts at the failpoint").await;
    let status = server.child.wait().unwrap();
    assert_eq!(std::os::unix::process::ExitStatusExt::signal(&status), Some(6), "{status:?}");
    let log = std::fs::read_to_string(home.path().join("server.log")).unwrap();
    assert!(log.contains("failpoint KANDEV_FAULT"), "aborted by the failpoint");

    let restarted = KANDEV.start_with(home.path(), &LOCAL);
    let mut watch = Watch::sessions(&restarted, &sessions).await;
    for session in &sessions {
        watch.state(&restarted, session, "WAITING_FOR_INPUT").await;
        let stored = messages(&restarted, session).await;
        assert_eq!(agent_text(&stored), streamed(CHUNKS), "every chunk once in {session}");
        assert!(!interrupted(&stored), "re-adopted, not interrupted: {session}");
    }
    no_load(home.path());
    stop_leaving_nothing(restarted, home.path()).await;
}

/// Starts a server with the failpoint `abort_after_commit:<input>` (issue 38 item 12) and a
/// session whose agent is ready in the local runner.
async fn armed_session(home: &std::path::Path, input: &str) -> (Server, String) {
    let fault = format!("abort_after_commit:{input}");
    let server = KANDEV.launch(home, "127.0.0.1:0", &LOCAL, &[("KANDEV_FAULT", fault.as_str())]);
    let (_, session) = launched_session(&server, &format!("fault-{input}")).await;
    let mut watch = Watch::sessions(&server, std::slice::from_ref(&session)).await;
    watch.state(&server, &session, "WAITING_FOR_INPUT").await;
    (server, session)
}

/// Posts an action to a server that is about to abort: the answer may never come.
async fn post_ignoring_the_answer(server: &Server, action: &str, payload: Value) {
    let url = format!("{}/api/v1/{action}", server.url);
    let _ = reqwest::Client::new().post(url).json(&payload).send().await;
}

/// Waits for the abort at the failpoint and checks it was the failpoint.
async fn aborted_at_the_failpoint(mut watch: Watch, server: &mut Server, home: &std::path::Path) {
    watch.closed("the server aborts at the failpoint").await;
    let status = server.child.wait().unwrap();
    assert_eq!(std::os::unix::process::ExitStatusExt::signal(&status), Some(6), "{status:?}");
    let log = std::fs::read_to_string(home.join("server.log")).unwrap();
    assert!(log.contains("before it is written"), "aborted by the failpoint");
}

fn counters(home: &std::path::Path) -> Counters {
    Counters::read(&home.join("mock-agent")).unwrap()
}

/// Issue 38 item 12: a prompt recorded (its turn open, `RUNNING`) whose line the server never
/// wrote to the runner is sent by the restarted server, once, and its turn completes.
#[tokio::test]
async fn i38_12_a_prompt_committed_but_never_written_is_sent_after_a_restart_once() {
    let home = tempfile::tempdir().unwrap();
    let (mut server, session) = armed_session(home.path(), "prompt").await;
    let watch = Watch::sessions(&server, std::slice::from_ref(&session)).await;
    let script = "#!mock\nsay answered after the restart";
    post_ignoring_the_answer(
        &server,
        "message.add",
        json!({"session_id": session, "content": script}),
    )
    .await;
    aborted_at_the_failpoint(watch, &mut server, home.path()).await;
    assert_eq!(counters(home.path()).count(CallKind::Prompt), 0, "the agent never got it");

    let restarted = KANDEV.start_with(home.path(), &LOCAL);
    let mut watch = Watch::sessions(&restarted, std::slice::from_ref(&session)).await;
    watch.state(&restarted, &session, "WAITING_FOR_INPUT").await;
    let stored = messages(&restarted, &session).await;
    assert_eq!(agent_text(&stored), "answered after the restart", "the turn ran once");
    assert!(!interrupted(&stored), "re-adopted, not interrupted");
    assert_eq!(counters(home.path()).count(CallKind::Prompt), 1, "one prompt reached the agent");
    no_load(home.path());
    stop_leaving_nothing(restarted, home.path()).await;
}

/// Issue 38 item 12: the user's cancel recorded but never written: the restarted server goes
/// on cancelling, the agent gets one `session/cancel`, and the turn ends cancelled.
#[tokio::test]
async fn i38_12_a_cancel_committed_but_never_written_is_sent_after_a_restart_once() {
    let home = tempfile::tempdir().unwrap();
    let (mut server, session) = armed_session(home.path(), "cancel").await;
    let mut watch = Watch::sessions(&server, std::slice::from_ref(&session)).await;
    let script = "#!mock\nsay working\nsleep 60000\nsay never";
    call(&server, "message.add", json!({"session_id": session, "content": script})).await;
    let working = |m: &[Value]| agent_text(m).contains("working");
    watch.messages(&server, &session, "the turn is under way", working).await;
    post_ignoring_the_answer(&server, "agent.cancel", json!({"session_id": session})).await;
    aborted_at_the_failpoint(watch, &mut server, home.path()).await;
    assert_eq!(counters(home.path()).cancel(), 0, "the agent never got the cancel");

    let restarted = KANDEV.start_with(home.path(), &LOCAL);
    let mut watch = Watch::sessions(&restarted, std::slice::from_ref(&session)).await;
    watch.state(&restarted, &session, "WAITING_FOR_INPUT").await;
    let turns = call(&restarted, "session.turn.list", json!({"session_id": session})).await;
    assert_eq!(turns["turns"][0]["stop_reason"], "cancelled", "{turns}");
    let stored = messages(&restarted, &session).await;
    assert!(!agent_text(&stored).contains("never"), "the turn did not run on");
    assert_eq!(counters(home.path()).cancel(), 1, "one session/cancel reached the agent");
    stop_leaving_nothing(restarted, home.path()).await;
}

/// Issue 38 item 12: a permission answer recorded but never written: the restarted server
/// sends it (the agent is not asked again), once, and the turn goes on with it.
#[tokio::test]
async fn i38_12_a_permission_answer_committed_but_never_written_is_sent_after_a_restart_once() {
    let home = tempfile::tempdir().unwrap();
    let (mut server, session) = armed_session(home.path(), "answer").await;
    let mut watch = Watch::sessions(&server, std::slice::from_ref(&session)).await;
    let script = "#!mock\nask_permission Write the file\nsay after the answer";
    call(&server, "message.add", json!({"session_id": session, "content": script})).await;
    let asked = |m: &[Value]| m.iter().any(|m| m["kind"] == "permission_request");
    let stored = watch.messages(&server, &session, "the agent asks", asked).await;
    let request = stored.iter().find(|m| m["kind"] == "permission_request").unwrap();
    let option = request["metadata"]["options"][0]["option_id"].clone();
    let answer = json!({"session_id": session, "request_id": request["metadata"]["request_id"],
        "option_id": option});
    post_ignoring_the_answer(&server, "permission.respond", answer).await;
    aborted_at_the_failpoint(watch, &mut server, home.path()).await;

    let restarted = KANDEV.start_with(home.path(), &LOCAL);
    let mut watch = Watch::sessions(&restarted, std::slice::from_ref(&session)).await;
    watch.state(&restarted, &session, "WAITING_FOR_INPUT").await;
    let stored = messages(&restarted, &session).await;
    let said = agent_text(&stored);
    assert_eq!(said.matches("permission: ").count(), 1, "one answer reached the agent: {said}");
    assert!(said.contains(&format!("permission: {}", option.as_str().unwrap())), "{said}");
    assert!(said.contains("after the answer"), "the turn went on: {said}");
    let requests = stored.iter().filter(|m| m["kind"] == "permission_request").count();
    assert_eq!(requests, 1, "the agent was not asked again");
    stop_leaving_nothing(restarted, home.path()).await;
}
