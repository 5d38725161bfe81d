//! Store integration tests on a real SQLite file and on PostgreSQL: pragmas, persistence,
//! board order, events.

use std::collections::HashMap;

use kandev_domain::StepId;
use kandev_domain::workflow::{StepSpec, WorkflowSpec};
use kandev_store::{NewTask, SearchKinds, TaskFilter};

mod common;
use common::TestDb;

fn spec(steps: &[&str]) -> WorkflowSpec {
    WorkflowSpec {
        name: "Board".into(),
        description: String::new(),
        steps: steps.iter().map(|s| StepSpec::named(*s)).collect(),
    }
}

fn titles(tasks: &[kandev_domain::task::Task], step: &StepId) -> Vec<String> {
    tasks.iter().filter(|t| &t.step_id == step).map(|t| t.title.clone()).collect()
}

on_both_engines! {
async fn file_database_uses_wal_and_foreign_keys(db: TestDb) {
    let store = db.open().await;
    let mut tx = store.begin_write().await.unwrap();
    let err = tx
        .insert_task(
            &NewTask {
                workflow_id: kandev_domain::WorkflowId::new("missing"),
                step_id: StepId::new("missing"),
                title: "t".into(),
                description: String::new(),
                repository_ids: vec![],
                agent_profile_id: None,
            },
            "user",
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("workflow missing was not found"), "{err}");
    drop(tx);
    if !db.is_postgres() {
        assert!(db.dir.path().join("kandev.db-wal").exists(), "WAL file exists");
    }
}
}

on_both_engines! {
async fn data_survives_reopen(db: TestDb) {
    let workflow_id = {
        let store = db.open().await;
        let mut tx = store.begin_write().await.unwrap();
        let ws = tx.insert_workspace("Home").await.unwrap();
        let wf = tx.insert_workflow(&ws.id, &spec(&["A", "B"]), None).await.unwrap();
        tx.commit().await.unwrap();
        store.close().await;
        wf.id
    };
    let store = db.open().await;
    let wf = store.get_workflow(&workflow_id).await.unwrap();
    assert_eq!(wf.steps.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(), vec!["A", "B"]);
}
}

on_both_engines! {
async fn moves_and_reorders_keep_positions_dense(db: TestDb) {
    let store = db.open().await;
    let mut tx = store.begin_write().await.unwrap();
    let ws = tx.insert_workspace("Home").await.unwrap();
    let wf = tx.insert_workflow(&ws.id, &spec(&["A", "B"]), None).await.unwrap();
    let (a, b) = (wf.steps[0].id.clone(), wf.steps[1].id.clone());
    let mut ids = vec![];
    for title in ["one", "two", "three"] {
        let new = NewTask {
            workflow_id: wf.id.clone(),
            step_id: a.clone(),
            title: title.into(),
            description: String::new(),
            repository_ids: vec![],
            agent_profile_id: None,
        };
        ids.push(tx.insert_task(&new, "user").await.unwrap().id);
    }
    tx.move_task(&ids[0], &b, None, "manual", "user").await.unwrap();
    tx.move_task(&ids[2], &a, Some(0), "manual", "user").await.unwrap();
    tx.commit().await.unwrap();

    let filter = TaskFilter { workflow_id: Some(wf.id.clone()), limit: 100, ..Default::default() };
    let tasks = store.list_tasks(&filter).await.unwrap();
    assert_eq!(titles(&tasks, &a), vec!["three", "two"]);
    assert_eq!(titles(&tasks, &b), vec!["one"]);
    let positions: Vec<u32> = tasks.iter().filter(|t| t.step_id == a).map(|t| t.position).collect();
    assert_eq!(positions, vec![0, 1]);
    let history = store.step_history(&ids[0]).await.unwrap();
    assert_eq!(history.len(), 2, "created + moved");
    assert_eq!(history[1].from_step_id.as_ref(), Some(&a));
    assert_eq!(history[1].to_step_id, b);
}
}

on_both_engines! {
async fn events_are_published_after_commit_in_seq_order_and_replayable(db: TestDb) {
    let store = db.open().await;
    let mut live = store.subscribe();
    let mut tx = store.begin_write().await.unwrap();
    let s1 = tx.emit("workspace:a", "x.one", serde_json::json!({"n": 1})).await.unwrap();
    let s2 = tx.emit("workspace:b", "x.two", serde_json::json!({"n": 2})).await.unwrap();
    assert!(live.try_recv().is_err(), "nothing is published before commit");
    tx.commit().await.unwrap();
    assert!(s2 > s1);
    assert_eq!(live.recv().await.unwrap().seq, s1);
    assert_eq!(live.recv().await.unwrap().seq, s2);

    let rolled_back = store.begin_write().await.unwrap();
    drop(rolled_back);
    let topics = vec!["workspace:a".to_string(), "workspace:b".to_string()];
    let all = store.events_since(&topics, &HashMap::new(), 100).await.unwrap();
    assert_eq!(all.iter().map(|e| e.seq).collect::<Vec<_>>(), vec![s1, s2]);
    let since = HashMap::from([("workspace:a".to_string(), s1)]);
    let missed = store.events_since(&topics, &since, 100).await.unwrap();
    assert_eq!(missed.iter().map(|e| e.action.as_str()).collect::<Vec<_>>(), vec!["x.two"]);
}
}

on_both_engines! {
/// A payload is JSON text from the start; the row stores it and subscribers
/// get it byte for byte (the WebSocket frame copies it as it is), on both emit paths.
async fn i15_a3_a_payload_is_stored_and_published_as_the_same_text(db: TestDb) {
    let store = db.open().await;
    let mut live = store.subscribe();
    let text = r#"{"z":1,"delta":"h\u00e9 \"q\"","a":[true,null]}"#;
    let raw = || kandev_store::Payload::from(serde_json::value::RawValue::from_string(text.to_owned()).unwrap());
    let mut tx = store.begin_write().await.unwrap();
    tx.emit("workspace:a", "x.one", raw()).await.unwrap();
    tx.emit_batch(vec![("workspace:a".into(), "x.two".into(), raw())]).await.unwrap();
    tx.commit().await.unwrap();
    for _ in 0..2 {
        assert_eq!(live.recv().await.unwrap().payload.get(), text);
    }
    let stored = store
        .events_since(&["workspace:a".to_string()], &HashMap::new(), 10)
        .await
        .unwrap();
    let texts: Vec<&str> = stored.iter().map(|e| e.payload.get()).collect();
    assert_eq!(texts, [text, text]);
    assert_eq!(stored[0].payload.value()["delta"], "hé \"q\"");
}
}

on_both_engines! {
async fn search_matches_title_and_description_literally(db: TestDb) {
    let store = db.open().await;
    let mut tx = store.begin_write().await.unwrap();
    let ws = tx.insert_workspace("Home").await.unwrap();
    let wf = tx.insert_workflow(&ws.id, &spec(&["A"]), None).await.unwrap();
    for (title, description) in
        [("Fix login", ""), ("Docs", "explain the LOGIN flow"), ("100% done", "")]
    {
        let new = NewTask {
            workflow_id: wf.id.clone(),
            step_id: wf.steps[0].id.clone(),
            title: title.into(),
            description: description.into(),
            repository_ids: vec![],
            agent_profile_id: None,
        };
        tx.insert_task(&new, "user").await.unwrap();
    }
    tx.commit().await.unwrap();
    let search = |q: &str| TaskFilter {
        workflow_id: Some(wf.id.clone()),
        query: Some(q.into()),
        limit: 100,
        ..Default::default()
    };
    assert_eq!(store.list_tasks(&search("login")).await.unwrap().len(), 2);
    assert_eq!(store.list_tasks(&search("%")).await.unwrap().len(), 1, "% is literal");
}
}

on_both_engines! {
async fn i53_the_search_action_s_query_syntax_finds_the_same_tasks_on_both_engines(db: TestDb) {
    let store = db.open().await;
    let mut tx = store.begin_write().await.unwrap();
    let ws = tx.insert_workspace("Home").await.unwrap();
    let wf = tx.insert_workflow(&ws.id, &spec(&["A"]), None).await.unwrap();
    let titles = [
        "alpha beta gamma",
        "beta gamma delta",
        "gamma alpha",
        "alphabet soup",
        "it's a beta-test",
        "reload the config",
    ];
    for title in titles {
        let new = NewTask {
            workflow_id: wf.id.clone(),
            step_id: wf.steps[0].id.clone(),
            title: title.into(),
            description: String::new(),
            repository_ids: vec![],
            agent_profile_id: None,
        };
        tx.insert_task(&new, "user").await.unwrap();
    }
    tx.commit().await.unwrap();
    let kinds = SearchKinds { tasks: true, messages: false };
    let cases: [(&str, &[&str]); 10] = [
        ("alpha", &["alpha beta gamma", "gamma alpha"]),
        ("alpha*", &["alpha beta gamma", "alphabet soup", "gamma alpha"]),
        ("\"beta gamma\"", &["alpha beta gamma", "beta gamma delta"]),
        ("\"gamma beta\"", &[]),
        ("alpha AND beta", &["alpha beta gamma"]),
        ("gamma NOT beta", &["gamma alpha"]),
        ("delta OR soup", &["alphabet soup", "beta gamma delta"]),
        ("(delta OR soup) NOT alphabet", &["beta gamma delta"]),
        ("alpha OR delta gamma", &["alpha beta gamma", "beta gamma delta", "gamma alpha"]),
        ("RELOAD", &["reload the config"]),
    ];
    for (query, want) in cases {
        let page = store.search(&ws.id, query, kinds, 50, 0).await.unwrap();
        let mut got: Vec<&str> = page.hits.iter().map(|h| h.task_title.as_str()).collect();
        got.sort();
        assert_eq!(got, want, "{query:?}");
    }
    for refused in ["NOT alpha", "alpha OR", "(alpha", "nosuch:alpha", "\"alpha"] {
        let err = store.search(&ws.id, refused, kinds, 50, 0).await.unwrap_err();
        assert!(err.to_string().contains("double quotes"), "{refused:?}: {err}");
    }
}
}

on_both_engines! {
async fn i20_a1_l42_the_committed_runner_number_is_kept_per_execution_and_never_moves_back(db: TestDb) {
    use kandev_store::{RunnerPosition, RuntimeRecord};
    let store = db.open().await;
    let mut tx = store.begin_write().await.unwrap();
    let ws = tx.insert_workspace("Home").await.unwrap();
    let wf = tx.insert_workflow(&ws.id, &spec(&["Todo"]), None).await.unwrap();
    let task = NewTask {
        workflow_id: wf.id.clone(),
        step_id: wf.steps[0].id.clone(),
        title: "t".into(),
        description: String::new(),
        repository_ids: vec![],
        agent_profile_id: None,
    };
    let task = tx.insert_task(&task, "user").await.unwrap();
    let session = tx.insert_session(&task.id, None, "/tmp", None, None).await.unwrap();
    let record = RuntimeRecord {
        session_id: session.id.clone(),
        execution_id: "e1".into(),
        epoch: 1,
        pid: Some(42),
        pgid: Some(42),
        status: "running".into(),
        cwd: "/tmp".into(),
    };
    tx.set_runtime(&record).await.unwrap();
    // An agent that is the server's own child has no runner position to record.
    tx.commit_runner_seq(&session.id, 1, 5).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(store.runner_position(&session.id).await.unwrap(), None);

    let mut tx = store.begin_write().await.unwrap();
    tx.set_runner_exec(&session.id, 1, "x1").await.unwrap();
    tx.commit_runner_seq(&session.id, 1, 7).await.unwrap();
    tx.commit_runner_seq(&session.id, 1, 3).await.unwrap(); // never back
    tx.commit_runner_seq(&session.id, 2, 99).await.unwrap(); // another epoch: fenced
    tx.commit().await.unwrap();
    // A rolled-back transaction records nothing: the number goes with the effects.
    let mut tx = store.begin_write().await.unwrap();
    tx.commit_runner_seq(&session.id, 1, 9).await.unwrap();
    drop(tx);
    store.close().await;
    let store = db.open().await;
    let position = store.runner_position(&session.id).await.unwrap();
    let at = |committed, skip, ahead, run| RunnerPosition {
        exec: "x1".into(),
        epoch: 1,
        committed,
        skip,
        ahead,
        run,
    };
    assert_eq!(position, Some(at(7, 0, 0, 0)));

    // A position is an item and the bytes of the next one handled: it moves on as a pair.
    let mut tx = store.begin_write().await.unwrap();
    tx.commit_runner_position(&session.id, 1, 7, 30, 0).await.unwrap();
    tx.commit_runner_position(&session.id, 1, 7, 12, 90).await.unwrap(); // never back
    tx.commit_runner_position(&session.id, 1, 6, 99, 0).await.unwrap(); // never back
    tx.commit_runner_position(&session.id, 2, 50, 0, 0).await.unwrap(); // another epoch
    tx.commit().await.unwrap();
    assert_eq!(store.runner_position(&session.id).await.unwrap(), Some(at(7, 30, 0, 0)));
    // At the same position (held before a permission request), what is committed past it
    // only grows; a later position sets it anew.
    let mut tx = store.begin_write().await.unwrap();
    tx.commit_runner_position(&session.id, 1, 7, 30, 40).await.unwrap();
    tx.commit_runner_position(&session.id, 1, 7, 30, 25).await.unwrap(); // never back
    tx.commit().await.unwrap();
    assert_eq!(store.runner_position(&session.id).await.unwrap(), Some(at(7, 30, 40, 0)));
    let mut tx = store.begin_write().await.unwrap();
    tx.commit_runner_position(&session.id, 1, 8, 0, 0).await.unwrap();
    // Each server that joins the conversation gets the next run (its request id range).
    assert_eq!(tx.join_runner(&session.id, 1).await.unwrap(), 1);
    assert_eq!(tx.join_runner(&session.id, 1).await.unwrap(), 2);
    assert!(tx.join_runner(&session.id, 2).await.is_err(), "another epoch");
    tx.commit().await.unwrap();
    assert_eq!(store.runner_position(&session.id).await.unwrap(), Some(at(8, 0, 0, 2)));
}
}

on_both_engines! {
async fn i20_a1_mcp_token_hashes_are_kept_per_session_and_epoch(db: TestDb) {
    let store = db.open().await;
    let mut tx = store.begin_write().await.unwrap();
    let ws = tx.insert_workspace("Home").await.unwrap();
    let wf = tx.insert_workflow(&ws.id, &spec(&["Todo"]), None).await.unwrap();
    let task = NewTask {
        workflow_id: wf.id.clone(),
        step_id: wf.steps[0].id.clone(),
        title: "t".into(),
        description: String::new(),
        repository_ids: vec![],
        agent_profile_id: None,
    };
    let task = tx.insert_task(&task, "user").await.unwrap();
    let session = tx.insert_session(&task.id, None, "/tmp", None, None).await.unwrap();
    let other = tx.insert_session(&task.id, None, "/tmp", None, None).await.unwrap();
    tx.add_mcp_grant("h1", &session.id, 1).await.unwrap();
    tx.add_mcp_grant("h2", &session.id, 2).await.unwrap();
    tx.add_mcp_grant("o1", &other.id, 1).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(store.mcp_grant("h1").await.unwrap(), Some((session.id.clone(), 1)));
    assert_eq!(store.mcp_grant("h2").await.unwrap(), Some((session.id.clone(), 2)));
    assert_eq!(store.mcp_grant("nope").await.unwrap(), None);
    // A new epoch keeps the one before (a live reset hands it over while the old one works).
    let mut tx = store.begin_write().await.unwrap();
    tx.add_mcp_grant("h3", &session.id, 3).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(store.mcp_grant("h1").await.unwrap(), None, "older epochs are dropped");
    assert!(store.mcp_grant("h2").await.unwrap().is_some());
    let mut tx = store.begin_write().await.unwrap();
    tx.forget_mcp_grants(&session.id).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(store.mcp_grant("h3").await.unwrap(), None, "forgotten");
    assert!(store.mcp_grant("o1").await.unwrap().is_some(), "another session's stays");
    let mut tx = store.begin_write().await.unwrap();
    tx.delete_session(&other.id).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(store.mcp_grant("o1").await.unwrap(), None, "gone with its session");
}
}

on_both_engines! {
async fn i20_a1_l42_the_open_turn_keeps_the_id_its_prompt_went_out_with(db: TestDb) {
    let store = db.open().await;
    let mut tx = store.begin_write().await.unwrap();
    let ws = tx.insert_workspace("Home").await.unwrap();
    let wf = tx.insert_workflow(&ws.id, &spec(&["Todo"]), None).await.unwrap();
    let task = NewTask {
        workflow_id: wf.id.clone(),
        step_id: wf.steps[0].id.clone(),
        title: "t".into(),
        description: String::new(),
        repository_ids: vec![],
        agent_profile_id: None,
    };
    let task = tx.insert_task(&task, "user").await.unwrap();
    let session = tx.insert_session(&task.id, None, "/tmp", None, None).await.unwrap();
    let first = tx.open_turn(&session.id, 1).await.unwrap();
    tx.close_turn(&first, "end_turn").await.unwrap();
    let open = tx.open_turn(&session.id, 1).await.unwrap();
    let message = kandev_domain::MessageId::new("m1");
    tx.set_turn_prompt(&open, (3 << 32) + 5, &message).await.unwrap();
    tx.commit().await.unwrap();
    let found = store.open_turn(&session.id).await.unwrap().unwrap();
    assert_eq!(found.id, open);
    assert_eq!(found.prompt_id, Some((3 << 32) + 5));
    assert_eq!(found.prompt_message_id, Some(message));
    assert!(!found.cancel_requested);
    // Issue 38 item 12: a cancel is recorded with the turn.
    let mut tx = store.begin_write().await.unwrap();
    tx.request_turn_cancel(&open).await.unwrap();
    tx.commit().await.unwrap();
    assert!(store.open_turn(&session.id).await.unwrap().unwrap().cancel_requested);
    let mut tx = store.begin_write().await.unwrap();
    tx.close_turn(&open, "end_turn").await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(store.open_turn(&session.id).await.unwrap(), None);
}
}

on_both_engines! {
/// Issue 21: a transaction in which a statement failed answers its commit truthfully. On
/// PostgreSQL the failed statement ended the transaction (COMMIT would silently roll back),
/// so the commit is refused; on SQLite only the statement was undone and the rest commits.
async fn i21_a1_a_commit_after_a_failed_statement_tells_the_truth(db: TestDb) {
    let store = db.open().await;
    let mut tx = store.begin_write().await.unwrap();
    tx.insert_workspace("kept or not").await.unwrap();
    let missing = kandev_domain::TaskId::new("missing");
    let err = tx.insert_session(&missing, None, "/tmp", None, None).await.unwrap_err();
    assert!(matches!(err, kandev_store::StoreError::Conflict(_)), "{err:?}");
    let committed = tx.commit().await.is_ok();
    let names: Vec<String> =
        store.list_workspaces().await.unwrap().into_iter().map(|w| w.name).collect();
    assert_eq!(committed, names.contains(&"kept or not".to_owned()));
    assert_eq!(committed, !db.is_postgres());
}
}

/// Issue 21: one server per PostgreSQL database (its advisory lock); `kandev user` may open
/// the store beside it; once the server has closed, the next one opens.
#[tokio::test]
async fn i21_s1_a_second_server_on_the_same_postgres_database_is_refused() {
    let Some(db) = TestDb::postgres().await else { return };
    let first = db.open().await;
    let err = kandev_store::Store::open(db.location.clone()).await.err().expect("refused");
    assert!(err.to_string().contains("another kandev server is using the database"), "{err}");
    assert!(!err.to_string().contains("password"), "{err}");
    let beside = kandev_store::Store::open_beside_server(db.location.clone()).await.unwrap();
    beside.close().await;
    first.close().await;
    db.open().await.close().await;
}

/// Reviewer finding (issue 21): the lock was taken once, on the first write connection; when
/// that connection broke (a PostgreSQL restart, a network blip) the pool replaced it without
/// the lock, and a second server on the same database was let in.
#[tokio::test]
async fn i21_d3_a_server_whose_connection_was_replaced_still_keeps_a_second_one_out() {
    use sqlx::Connection;
    let Some(db) = TestDb::postgres().await else { return };
    let kandev_store::Location::Postgres(url) = db.location.clone() else { unreachable!() };
    let first = db.open().await;
    let mut admin = sqlx::PgConnection::connect(&url).await.unwrap();
    let ended: Vec<bool> = sqlx::query_scalar(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
         WHERE datname = current_database() AND pid <> pg_backend_pid()",
    )
    .fetch_all(&mut admin)
    .await
    .unwrap();
    assert!(!ended.is_empty(), "the first server's connections were ended");
    // The pool notices the broken connection on the next write (which may fail once) and
    // connects again.
    let mut written = false;
    for _ in 0..3 {
        let Ok(mut tx) = first.begin_write().await else { continue };
        if tx.insert_workspace("after").await.is_ok() && tx.commit().await.is_ok() {
            written = true;
            break;
        }
    }
    assert!(written, "the first server writes again on a new connection");
    let err = kandev_store::Store::open(db.location.clone()).await.err().expect("refused");
    assert!(err.to_string().contains("another kandev server is using the database"), "{err}");
    first.close().await;
}

on_both_engines! {
/// Issue 21: text with a NUL character (which PostgreSQL's text cannot hold) is a missing id
/// or stored text, never a database error.
async fn i21_s1_a_nul_character_is_not_a_database_error(db: TestDb) {
    let store = db.open().await;
    let err = store.get_task(&kandev_domain::TaskId::new("a\0b")).await.unwrap_err();
    assert!(matches!(err, kandev_store::StoreError::NotFound { .. }), "{err:?}");
    let mut tx = store.begin_write().await.unwrap();
    let ws = tx.insert_workspace("nul\0name").await.unwrap();
    tx.commit().await.unwrap();
    let names: Vec<String> =
        store.list_workspaces().await.unwrap().into_iter().map(|w| w.name).collect();
    let expected = if db.is_postgres() { "nul\u{fffd}name" } else { "nul\0name" };
    assert_eq!(names, vec![expected.to_owned()], "{:?}", ws.id);
}
}
