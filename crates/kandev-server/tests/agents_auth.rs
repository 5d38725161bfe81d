//! Issue 8: an agent that needs credentials ends its start with a readable "log in to
//! <agent>" error listing its auth methods; `session.authenticate` retries with a method;
//! a resume after logging in works. Profile secrets never reach the logs.

use crate::common;

use common::logs::captured_logs;
use common::{TestServer, of_kind, step_id};
use serde_json::{Value, json};

/// A task on a fresh board and a session launched on it with `profile`; does not wait.
async fn launch(server: &TestServer, profile: &str) -> String {
    let (_, workflow) = server.kanban().await;
    let backlog = step_id(&workflow, "Backlog");
    let task = server
        .call(
            "task.create",
            json!({"workflow_id": workflow["id"], "title": "Task", "step_id": backlog}),
        )
        .await;
    let launched = server
        .call("session.launch", json!({"task_id": task["task"]["id"], "agent_profile_id": profile}))
        .await;
    launched["session"]["id"].as_str().unwrap().to_owned()
}

fn assert_login_hint(session: &Value) {
    let error = &session["last_error"];
    assert_eq!(error["code"], "agent_auth_required", "{session}");
    let message = error["message"].as_str().unwrap();
    assert!(message.starts_with("log in to Kandev mock agent: "), "{message}");
    assert!(message.contains("authentication required"), "the agent's own words: {message}");
    assert_eq!(
        error["details"]["auth_methods"],
        json!([{
            "id": "mock-login",
            "name": "Mock login",
            "description": "Always succeeds",
            "type": "agent",
        }]),
        "{error}"
    );
    assert_eq!(error["details"]["agent"], "Kandev mock agent");
    assert!(error["details"]["epoch"].is_number(), "still correlated to its attempt: {error}");
}

#[tokio::test]
async fn i8_auth_required_at_session_new_ends_the_start_with_a_login_hint_and_the_methods() {
    let server = TestServer::start().await;
    let profile = server
        .profile(json!({"name": "Needs login", "kind": "mock", "args": ["--fail-new", "auth"]}))
        .await;
    let session = launch(&server, &profile).await;
    let failed = server.wait_state(&session, "FAILED").await;
    assert_login_hint(&failed);
    let messages = server.messages(&session).await;
    let errors = of_kind(&messages, "error");
    assert_eq!(errors.len(), 1, "shown once: {messages:?}");
    assert!(errors[0]["content"].as_str().unwrap().starts_with("log in to Kandev mock agent"));

    // Authenticating with a method the agent does not offer is refused readably.
    server
        .call("session.authenticate", json!({"id": session, "method_id": "no-such-method"}))
        .await;
    let refused = server.wait_state(&session, "FAILED").await;
    assert_eq!(refused["last_error"]["code"], "agent_auth_required");
    assert!(
        refused["last_error"]["message"].as_str().unwrap().contains("\"no-such-method\""),
        "{refused}"
    );
    assert_eq!(server.counters().authenticate(), 0, "an unknown method is not sent");

    // `session.authenticate` restarts the agent and calls `authenticate` before session/new;
    // this mock still refuses session/new, so the hint comes back.
    let (status, body) =
        server.post("session.authenticate", json!({"id": session, "method_id": " "})).await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["code"], "VALIDATION_ERROR");
    server.call("session.authenticate", json!({"id": session, "method_id": "mock-login"})).await;
    let again = server.wait_state(&session, "FAILED").await;
    assert_login_hint(&again);
    assert_eq!(server.counters().authenticate(), 1, "authenticate reached the agent once");

    // The user logs in (here: the profile stops failing); a fresh resume works.
    server.call("agent.profile.update", json!({"id": profile, "args": []})).await;
    server.call("session.resume", json!({"id": session, "mode": "fresh"})).await;
    let live = server.wait_state(&session, "WAITING_FOR_INPUT").await;
    assert!(live["last_error"].is_null(), "the login hint is cleared: {live}");
    let messages = server.turn(&session, "hello after login").await;
    assert!(!of_kind(&messages, "agent").is_empty(), "a turn runs after logging in");
}

#[tokio::test]
async fn i18_authenticate_on_a_live_agent_goes_over_the_open_connection_without_a_restart() {
    let server = TestServer::start().await;
    let profile = server.profile(json!({"name": "Mock", "kind": "mock"})).await;
    let (_, session) = server.session(Some(&profile)).await;
    server.turn(&session, "first").await;
    let started = server.counters().initialize();
    server.call("session.authenticate", json!({"id": session, "method_id": "mock-login"})).await;
    let live = server.call("session.get", json!({"id": session})).await["session"].clone();
    assert_eq!(live["state"], "WAITING_FOR_INPUT", "{live}");
    assert!(live["last_error"].is_null(), "{live}");
    assert_eq!(server.counters().authenticate(), 1);
    assert_eq!(server.counters().initialize(), started, "the agent was not restarted");
    let statuses = of_kind(&server.messages(&session).await, "status")
        .iter()
        .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
        .collect::<Vec<_>>();
    assert!(statuses.iter().any(|s| s == "authenticated with Mock login"), "{statuses:?}");
    assert!(
        !statuses.iter().any(|s| s == "resumed the previous conversation"),
        "no reload: {statuses:?}"
    );
}

#[tokio::test]
async fn i18_an_agent_that_needs_a_login_at_prompt_is_authenticated_live_with_a_chosen_method() {
    let server = TestServer::start().await;
    let profile = server
        .profile(json!({"name": "Needs login", "kind": "mock", "args": ["--require-auth"]}))
        .await;
    let (_, session) = server.session(Some(&profile)).await;
    server.turn(&session, "hello").await;
    let now = server.call("session.get", json!({"id": session})).await["session"].clone();
    assert_eq!(now["last_error"]["code"], "agent_auth_required", "{now}");
    let ids: Vec<&str> = now["last_error"]["details"]["auth_methods"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["mock-login", "mock-token"], "every method the agent offers: {now}");
    let started = server.counters().initialize();

    // A method the agent does not offer is refused before it reaches the agent.
    let (status, body) =
        server.post("session.authenticate", json!({"id": session, "method_id": "nope"})).await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["code"], "VALIDATION_ERROR");
    assert!(body["message"].as_str().unwrap().contains("mock-login, mock-token"), "{body}");
    assert_eq!(server.counters().authenticate(), 0);

    let answer = server
        .call("session.authenticate", json!({"id": session, "method_id": "mock-token"}))
        .await;
    assert!(answer["session"]["last_error"].is_null(), "the hint is cleared: {answer}");
    assert_eq!(server.counters().authenticate(), 1);
    assert_eq!(server.counters().initialize(), started, "the same agent process goes on");
    let messages = server.turn(&session, "hello again").await;
    let replies = of_kind(&messages, "agent");
    assert_eq!(
        replies.last().unwrap()["content"],
        "echo: hello again",
        "the prompt passes now: {messages:?}"
    );
}

#[tokio::test]
async fn i8_profile_env_secrets_are_never_logged_nor_returned() {
    let logs = captured_logs();
    let secret = "sk-kandev-test-7f3a9c1e5b2d4f60";
    let server = TestServer::start().await;
    // A real process (not the in-process mock) that fails its start: the launch, the spawn,
    // the failure and the error paths all run with the secret in the environment.
    let profile = server
        .profile(json!({
            "name": "Secret holder",
            "kind": "custom",
            "command": "/bin/sh",
            "args": ["-c", "read -r line; echo starting >&2; exit 3"],
            "env": [{"name": "OPENAI_API_KEY", "value": secret}],
        }))
        .await;
    let session = launch(&server, &profile).await;
    let failed = server.wait_state(&session, "FAILED").await;
    assert_eq!(failed["last_error"]["code"], "agent_exited", "{failed}");
    assert!(
        failed["last_error"]["details"]["stderr"].as_str().unwrap_or_default().contains("starting"),
        "the agent's stderr is shown: {failed}"
    );
    let profiles = server.call("agent.profile.list", json!({})).await;
    let messages = server.messages(&session).await;
    for (what, text) in [
        ("session", failed.to_string()),
        ("profiles", profiles.to_string()),
        ("messages", Value::Array(messages).to_string()),
    ] {
        assert!(!text.contains(secret), "the secret leaked into the {what} response: {text}");
    }
    drop(server.stop().await);
    let logs = logs.lock().unwrap().clone();
    assert!(logs.contains("spawned agent process"), "the capture sees engine logs: {logs}");
    assert!(!logs.contains(secret), "the secret leaked into the logs:\n{logs}");
    assert!(!logs.contains(&secret[..12]), "a prefix of the secret leaked into the logs");
}

#[tokio::test]
async fn i8_agent_kinds_report_the_version_an_agent_gave_in_initialize() {
    let server = TestServer::start().await;
    let kinds = server.call("agent.kinds", json!({})).await;
    let kinds = kinds["kinds"].as_array().unwrap().clone();
    assert_eq!(kinds.len(), 10, "{kinds:?}");
    for kind in &kinds {
        assert!(kind["version"].is_null(), "no agent has run yet: {kind}");
        assert!(kind["install"].is_string(), "{kind}");
    }
    let (_, session) = server.session(None).await;
    let info =
        server.call("session.get", json!({"id": session})).await["session"]["agent_info"].clone();
    let reported = info["version"].as_str().expect("the mock reports its version").to_owned();
    let kinds = server.call("agent.kinds", json!({})).await;
    let by_kind = |name: &str| {
        kinds["kinds"].as_array().unwrap().iter().find(|k| k["kind"] == name).unwrap().clone()
    };
    assert_eq!(by_kind("mock")["version"], reported.as_str());
    assert!(by_kind("gemini")["version"].is_null(), "kinds that never ran stay unknown");
}

#[tokio::test]
async fn i8_auth_required_at_session_prompt_is_a_login_hint_and_authenticate_recovers() {
    let server = TestServer::start().await;
    let (_, session) = server.session(None).await;
    let messages =
        server.turn(&session, "#!mock\nerror -32000 authentication required: token expired").await;
    let now = server.call("session.get", json!({"id": session})).await["session"].clone();
    assert_eq!(now["state"], "WAITING_FOR_INPUT", "{now}");
    assert_eq!(now["last_error"]["code"], "agent_auth_required", "{now}");
    let message = now["last_error"]["message"].as_str().unwrap();
    assert!(message.starts_with("log in to Kandev mock agent: "), "{message}");
    assert!(message.contains("token expired"), "{message}");
    let methods = &now["last_error"]["details"]["auth_methods"];
    assert_eq!(methods[0]["id"], "mock-login", "the methods the agent offered: {now}");
    assert_eq!(now["agent_info"]["auth_methods"], *methods, "stored on the session too");
    assert_eq!(of_kind(&messages, "error").len(), 1, "shown in the transcript");
    server.call("session.authenticate", json!({"id": session, "method_id": "mock-login"})).await;
    let live = server.wait_state(&session, "WAITING_FOR_INPUT").await;
    assert!(live["last_error"].is_null(), "{live}");
    assert_eq!(server.counters().authenticate(), 1);
    let messages = server.turn(&session, "hello again").await;
    assert_eq!(of_kind(&messages, "agent").len(), 1, "the conversation goes on: {messages:?}");
}

#[tokio::test]
async fn i8_codex_model_metadata_warning_is_a_note_not_part_of_the_reply() {
    let server = TestServer::start().await;
    let (_, session) = server.session(None).await;
    let warning = "Model metadata for `fake-model` not found. Defaulting to fallback metadata; \
                   this can degrade performance and cause issues.";
    let messages = server.turn(&session, &format!("#!mock\nsay {warning}\nsay Hello")).await;
    let agent: Vec<&str> =
        of_kind(&messages, "agent").iter().map(|m| m["content"].as_str().unwrap()).collect();
    assert_eq!(agent, ["Hello"], "the reply holds only the answer: {messages:?}");
    let notes = of_kind(&messages, "status");
    assert!(notes.iter().any(|m| m["content"] == warning), "kept as a note: {messages:?}");
}

#[tokio::test]
async fn i8_a_profile_for_an_agent_that_is_not_installed_is_allowed_but_marked() {
    let server = TestServer::start().await;
    let missing = server
        .call(
            "agent.profile.create",
            json!({"name": "Codex", "kind": "codex", "command": "/nonexistent/bin/codex-acp"}),
        )
        .await;
    assert_eq!(missing["installed"], false, "{missing}");
    assert_eq!(
        missing["install"],
        "install it in Settings → Agent profiles, or run `npm install -g @zed-industries/codex-acp`"
    );
    let id = missing["profile"]["id"].clone();
    let fixed = server.call("agent.profile.update", json!({"id": id, "command": "/bin/sh"})).await;
    assert_eq!(fixed["installed"], true, "{fixed}");
    assert!(fixed.get("install").is_none(), "{fixed}");
    let mock = server.call("agent.profile.create", json!({"name": "M", "kind": "mock"})).await;
    assert_eq!(mock["installed"], true, "{mock}");
}

/// Issue 12, finding 5: an agent that prints its environment to stderr (at a failed start)
/// does not get the profile's secrets into `last_error.details.stderr` or the transcript.
#[tokio::test]
async fn i12_f5_an_agent_printing_its_environment_does_not_leak_profile_secrets() {
    let secret = "sk-kandev-test-7f3a9c1e5b2d4f60";
    let server = TestServer::start().await;
    let profile = server
        .profile(json!({
            "name": "Chatty",
            "kind": "custom",
            "command": "/bin/sh",
            "args": ["-c", "read -r line; env >&2; echo \"key: $OPENAI_API_KEY\" >&2; exit 3"],
            "env": [{"name": "OPENAI_API_KEY", "value": secret}],
        }))
        .await;
    let session = launch(&server, &profile).await;
    let failed = server.wait_state(&session, "FAILED").await;
    let stderr = failed["last_error"]["details"]["stderr"].as_str().unwrap_or_default();
    assert!(stderr.contains("key: [redacted]"), "the stderr is shown, scrubbed: {failed}");
    let messages = server.messages(&session).await;
    let got = server.call("session.get", json!({"id": session})).await;
    for (what, text) in [
        ("session", failed.to_string()),
        ("session.get", got.to_string()),
        ("messages", Value::Array(messages).to_string()),
    ] {
        assert!(!text.contains(secret), "the secret leaked into {what}: {text}");
        assert!(!text.contains(&secret[secret.len() - 8..]), "a part leaked into {what}");
    }
}

/// Issue 12, finding 5: the API shows every env value as one fixed mask that reveals
/// nothing; an update that sends the listed env back (the mask) keeps the secrets, a new
/// value replaces one, and the mask is refused where there is no value to keep.
#[tokio::test]
async fn i12_f5_profile_updates_with_the_masked_env_keep_the_secrets() {
    let secret = "sk-kandev-test-7f3a9c1e5b2d4f7d";
    let server = TestServer::start().await;
    let created = server
        .call(
            "agent.profile.create",
            json!({"name": "Keeper", "kind": "custom", "command": "/bin/true",
                   "env": [{"name": "API_KEY", "value": secret},
                           {"name": "REGION", "value": "eu"}]}),
        )
        .await;
    let id = created["profile"]["id"].as_str().unwrap().to_owned();
    let listed = server.call("agent.profile.list", json!({})).await;
    let profile = listed["profiles"].as_array().unwrap().iter().find(|p| p["id"] == id).unwrap();
    let env = profile["env"].clone();
    assert_eq!(
        env,
        json!([{"name": "API_KEY", "value": "********"}, {"name": "REGION", "value": "********"}]),
        "one fixed mask, whatever the value"
    );

    // The listed env sent back, with an unrelated change: the secrets stay.
    let updated =
        server.call("agent.profile.update", json!({"id": id, "name": "Renamed", "env": env})).await;
    // No part of the secret (its last 8 characters: "7d" alone also matched the random ids
    // and timestamps of the answer, a flaky check).
    let answer = updated.to_string();
    assert!(!answer.contains(&secret[secret.len() - 8..]), "{updated}");
    assert_eq!(stored_env(&server, &id).await, [format!("API_KEY={secret}"), "REGION=eu".into()]);

    // A new value replaces one; a variable left out is removed.
    server
        .call(
            "agent.profile.update",
            json!({"id": id, "env": [{"name": "API_KEY", "value": "********"},
                                     {"name": "REGION", "value": "us"}]}),
        )
        .await;
    assert_eq!(stored_env(&server, &id).await, [format!("API_KEY={secret}"), "REGION=us".into()]);

    // The mask keeps nothing where there is nothing to keep.
    let (status, body) = server
        .post(
            "agent.profile.update",
            json!({"id": id, "env": [{"name": "OTHER", "value": "********"}]}),
        )
        .await;
    assert_eq!((status, body["code"].as_str()), (422, Some("VALIDATION_ERROR")), "{body}");
    assert!(
        body["message"].as_str().unwrap().contains("environment variable 1 is the mask"),
        "{body}"
    );
    let (status, body) = server
        .post(
            "agent.profile.create",
            json!({"name": "Copy", "kind": "mock", "env": [{"name": "API_KEY", "value": "********"}]}),
        )
        .await;
    assert_eq!((status, body["code"].as_str()), (422, Some("VALIDATION_ERROR")), "{body}");
    assert_eq!(stored_env(&server, &id).await, [format!("API_KEY={secret}"), "REGION=us".into()]);
}

/// A profile's env as stored (read from the database file, beside the server).
async fn stored_env(server: &TestServer, id: &str) -> Vec<String> {
    let store =
        kandev_store::Store::open(kandev_store::Location::File(common::db_path(&server.dir)))
            .await
            .unwrap();
    let profile = store.get_profile(&kandev_domain::AgentProfileId::new(id)).await.unwrap();
    store.close().await;
    profile.env.into_iter().map(|e| format!("{}={}", e.name, e.value)).collect()
}

/// Issue 13: `agent.kinds` shows the default command the engine runs for a profile without a
/// command of its own (one table, `AgentKind::default_command`); they used to disagree.
#[tokio::test]
async fn i13_agent_kinds_show_the_default_command_the_engine_runs() {
    let server = TestServer::start().await;
    let kinds = server.call("agent.kinds", json!({})).await;
    let command = |name: &str| {
        let kind = kinds["kinds"].as_array().unwrap().iter().find(|k| k["kind"] == name).unwrap();
        kind["command"].as_str().unwrap().to_owned()
    };
    assert_eq!(command("gemini"), "gemini --acp", "{kinds}");
    assert_eq!(command("opencode"), "opencode acp", "{kinds}");
    assert_eq!(command("claude"), "claude-agent-acp");
    assert_eq!(command("codex"), "codex-acp");
    assert_eq!(command("mock"), "kandev mock-agent");
}

/// Issue 13: only the built-in Mock profile runs the mock in-process in tests; a profile
/// whose own command line merely contains `mock-agent` is started as the process it names.
#[tokio::test]
async fn i13_a_custom_command_with_a_mock_agent_argument_is_a_real_process() {
    let server = TestServer::start().await;
    let profile = server
        .profile(json!({"name": "Lookalike", "kind": "custom", "command": "/no/such/kandev",
                        "args": ["mock-agent"]}))
        .await;
    let session = launch(&server, &profile).await;
    let failed = server.wait_state(&session, "FAILED").await;
    let message = failed["last_error"]["message"].as_str().unwrap();
    assert!(message.contains("/no/such/kandev") && message.contains("not found"), "{message}");
    assert_eq!(server.counters().count(kandev_mock_agent::CallKind::Initialize), 0);
}
