//! Issue 48: checkpoints of a session's worktree around each turn, `turn.revert`, `turn.diff`
//! and `turn.checkpoint.list`, over the API with the mock agent in a real git worktree.

use crate::common;

use std::collections::BTreeMap;
use std::path::Path;

use common::TestServer;
use common::worktrees::{Board, paths, repository};
use kandev_testkit::git::git;
use serde_json::{Value, json};

/// Every file of the worktree but `.git`, with its bytes: the state a revert must bring back.
fn files_of(root: &Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.file_name().is_some_and(|n| n == ".git") {
                continue;
            }
            if path.is_dir() {
                walk(root, &path, out);
            } else {
                let name = path.strip_prefix(root).unwrap().display().to_string();
                out.insert(name, std::fs::read(&path).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(root, root, &mut out);
    out
}

fn numbers(turns: &Value) -> Vec<u64> {
    turns.as_array().unwrap().iter().map(|t| t["number"].as_u64().unwrap()).collect()
}

async fn checkpoints(server: &TestServer, session: &str) -> Vec<Value> {
    let list = server.call("turn.checkpoint.list", json!({"session_id": session})).await;
    list["turns"].as_array().unwrap().clone()
}

async fn revert(server: &TestServer, session: &str, turn: &str, extra: Value) -> (u16, Value) {
    let mut body = json!({"session_id": session, "turn_id": turn});
    body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    server.post("turn.revert", body).await
}

/// The refs of a session's checkpoints: `(name after the session, commit)`.
fn checkpoint_refs(repo: &Path, session: &str) -> Vec<(String, String)> {
    let prefix = format!("refs/kandev/checkpoints/{session}/");
    let listing = git(repo, &["for-each-ref", "--format=%(refname) %(objectname)", &prefix]);
    listing
        .lines()
        .filter_map(|line| line.split_once(' '))
        .map(|(name, commit)| (name.trim_start_matches(&prefix).to_owned(), commit.to_owned()))
        .collect()
}

#[tokio::test]
async fn i48_1_a_revert_restores_the_worktree_byte_for_byte_and_keeps_the_users_staged_changes() {
    let server = TestServer::start().await;
    let board = Board::new(&server).await;
    let (_tmp, repo) = repository(false);
    kandev_testkit::git::commit(
        &repo,
        &[("README.md", "hello\n"), ("gone.txt", "to be deleted\n"), ("staged.txt", "v1\n")],
        "initial",
    );
    let repo_id = board.repository(&repo, json!({})).await;
    let task = board.task("Undo a turn", &[&repo_id]).await;
    let (session, cwd) = board.started(&task).await;
    // The user's own work before the turn: a staged change and an untracked scratch file.
    std::fs::write(cwd.join("staged.txt"), "v2 staged\n").unwrap();
    git(&cwd, &["add", "staged.txt"]);
    std::fs::write(cwd.join("scratch.txt"), "mine\n").unwrap();
    let staged_before = git(&cwd, &["diff", "--cached"]);
    let before = files_of(&cwd);

    let script = "#!mock\nwrite README.md changed\\n\nwrite new/deep/file.txt brand new\n\
                  write scratch.txt overwritten\nterminal rm gone.txt";
    server.turn(&session, script).await;
    assert!(!cwd.join("gone.txt").exists() && cwd.join("new/deep/file.txt").exists());
    assert_ne!(files_of(&cwd), before);

    let turns = checkpoints(&server, &session).await;
    assert_eq!(turns.len(), 1, "{turns:?}");
    assert_eq!((turns[0]["number"].as_u64(), &turns[0]["undone"]), (Some(1), &json!(false)));
    assert_eq!(turns[0]["diff"], true);
    let turn = turns[0]["turn_id"].as_str().unwrap().to_owned();
    assert!(turns[0]["message_id"].is_string());

    // What the turn changed, checkpoint to checkpoint: not the user's staged change.
    let diff = server.call("turn.diff", json!({"session_id": session, "turn_id": turn})).await;
    assert_eq!(
        paths(&diff["files"]),
        ["README.md", "gone.txt", "new/deep/file.txt", "scratch.txt"]
    );
    let statuses: Vec<&str> =
        diff["files"].as_array().unwrap().iter().map(|f| f["status"].as_str().unwrap()).collect();
    assert_eq!(statuses, ["modified", "deleted", "added", "modified"]);

    // A dry run says what would happen and changes nothing.
    let (status, dry) = revert(&server, &session, &turn, json!({"dry_run": true})).await;
    assert_eq!(status, 200, "{dry}");
    assert_eq!(dry["reverted"], false);
    assert_eq!(numbers(&dry["turns"]), [1]);
    assert_eq!(dry["turns"][0]["prompt"], "#!mock");
    assert_eq!(paths(&dry["files"]), ["README.md", "gone.txt", "new/deep/file.txt", "scratch.txt"]);
    assert_eq!(paths(&dry["outside_edits"]), Vec::<String>::new());
    assert!(cwd.join("new/deep/file.txt").exists(), "a dry run changes nothing");

    let (status, done) = revert(&server, &session, &turn, json!({})).await;
    assert_eq!((status, &done["reverted"]), (200, &json!(true)), "{done}");
    assert_eq!(files_of(&cwd), before, "the worktree equals the checkpoint byte for byte");
    assert!(!cwd.join("new").exists(), "directories the turn made are gone");
    assert_eq!(git(&cwd, &["diff", "--cached"]), staged_before, "the staged change is untouched");
    assert_eq!(git(&cwd, &["diff", "--cached", "--name-only"]), "staged.txt");

    // A durable divider in the transcript, and the turn marked undone.
    let messages = server.messages(&session).await;
    let divider = messages
        .iter()
        .find(|m| m["metadata"]["reason"] == "reverted")
        .unwrap_or_else(|| panic!("no divider in {messages:?}"));
    assert!(divider["content"].as_str().unwrap().contains("before turn 1"), "{divider}");
    assert_eq!(divider["metadata"]["undone"], json!([turn]));
    assert_eq!(checkpoints(&server, &session).await[0]["undone"], true);
    let (status, again) = revert(&server, &session, &turn, json!({})).await;
    assert_eq!((status, again["code"].as_str()), (409, Some("CONFLICT")), "{again}");
    assert!(again["message"].as_str().unwrap().contains("already undone"), "{again}");

    // The agent is told on its next prompt (the mock echoes the prompt's first line), once.
    let told = server.turn(&session, "what next?").await;
    let reply = told.last().unwrap()["content"].as_str().unwrap().to_owned();
    assert!(reply.starts_with("echo: [Kandev] The user reverted"), "{reply}");
    let next = server.turn(&session, "and now?").await;
    assert_eq!(next.last().unwrap()["content"], "echo: and now?");
}

#[tokio::test]
async fn i48_2_reverting_the_second_of_three_turns_undoes_the_third_and_outside_edits_need_force() {
    let server = TestServer::start().await;
    let board = Board::new(&server).await;
    let (_tmp, repo) = repository(true);
    let repo_id = board.repository(&repo, json!({})).await;
    let task = board.task("Three turns", &[&repo_id]).await;
    let (session, cwd) = board.started(&task).await;

    server.turn(&session, "#!mock\nwrite a.txt one").await;
    let after_first = files_of(&cwd);
    server.turn(&session, "#!mock\nwrite b.txt two").await;
    server.turn(&session, "#!mock\nwrite c.txt three\nwrite a.txt one, changed").await;
    let turns = checkpoints(&server, &session).await;
    assert_eq!(numbers(&json!(turns)), [1, 2, 3]);
    let second = turns[1]["turn_id"].as_str().unwrap().to_owned();

    let (_, dry) = revert(&server, &session, &second, json!({"dry_run": true})).await;
    assert_eq!(numbers(&dry["turns"]), [2, 3], "the third turn is undone too: {dry}");
    assert_eq!(paths(&dry["files"]), ["a.txt", "b.txt", "c.txt"]);

    // The user changes a file in a terminal after the last turn: the revert names it.
    std::fs::write(cwd.join("b.txt"), "the user's edit").unwrap();
    let (_, dry) = revert(&server, &session, &second, json!({"dry_run": true})).await;
    assert_eq!(paths(&dry["outside_edits"]), ["b.txt"]);
    let (status, refused) = revert(&server, &session, &second, json!({})).await;
    assert_eq!((status, refused["code"].as_str()), (409, Some("CONFLICT")), "{refused}");
    let message = refused["message"].as_str().unwrap();
    assert!(message.contains("b.txt") && message.contains("confirm discarding"), "{message}");
    assert_eq!(std::fs::read_to_string(cwd.join("b.txt")).unwrap(), "the user's edit");
    // A file made after the person confirmed the list is not discarded with it.
    std::fs::write(cwd.join("notes.md"), "made after the dialog opened").unwrap();
    let confirmed = json!({"discard": ["b.txt"]});
    let (status, refused) = revert(&server, &session, &second, confirmed).await;
    assert_eq!(status, 409, "{refused}");
    let message = refused["message"].as_str().unwrap();
    assert!(message.contains("notes.md") && !message.contains("b.txt"), "{message}");
    assert!(cwd.join("notes.md").exists() && cwd.join("c.txt").exists(), "nothing reverted");
    std::fs::remove_file(cwd.join("notes.md")).unwrap();

    let (status, forced) = revert(&server, &session, &second, confirmed_b()).await;
    assert_eq!((status, &forced["reverted"]), (200, &json!(true)), "{forced}");
    assert_eq!(numbers(&forced["turns"]), [2, 3]);
    assert_eq!(files_of(&cwd), after_first);
    let undone: Vec<bool> = checkpoints(&server, &session)
        .await
        .iter()
        .map(|t| t["undone"].as_bool().unwrap())
        .collect();
    assert_eq!(undone, [false, true, true]);

    // After a revert, the restored state is what the next comparison starts from.
    let first = turns[0]["turn_id"].as_str().unwrap().to_owned();
    let (_, dry) = revert(&server, &session, &first, json!({"dry_run": true})).await;
    assert_eq!(paths(&dry["outside_edits"]), Vec::<String>::new(), "{dry}");
    assert_eq!(numbers(&dry["turns"]), [1]);
}

fn confirmed_b() -> Value {
    json!({"discard": ["b.txt"]})
}

#[tokio::test]
async fn i48_2_a_revert_is_refused_while_a_turn_runs() {
    let server = TestServer::start().await;
    let board = Board::new(&server).await;
    let (_tmp, repo) = repository(true);
    let repo_id = board.repository(&repo, json!({})).await;
    let task = board.task("Busy", &[&repo_id]).await;
    let (session, cwd) = board.started(&task).await;
    server.turn(&session, "#!mock\nwrite a.txt one").await;
    let turn = checkpoints(&server, &session).await[0]["turn_id"].as_str().unwrap().to_owned();

    let mut ws = server.ws().await;
    ws.call("subscribe", json!({"topics": [format!("session:{session}")]})).await;
    let long = "#!mock\nsay working\nsleep 60000";
    server.call("message.add", json!({"session_id": session, "content": long})).await;
    ws.notification("session.turn.started").await;
    let (status, busy) = revert(&server, &session, &turn, json!({})).await;
    assert_eq!((status, busy["code"].as_str()), (409, Some("BUSY")), "{busy}");
    assert!(busy["message"].as_str().unwrap().contains("wait for its turn"), "{busy}");
    server.call("agent.cancel", json!({"session_id": session})).await;
    ws.notification("session.turn.completed").await;
    // `force` discards whatever changed outside the agent's turns.
    std::fs::write(cwd.join("a.txt"), "by hand").unwrap();
    let (status, done) = revert(&server, &session, &turn, json!({"force": true})).await;
    assert_eq!(status, 200, "{done}");
    assert!(!cwd.join("a.txt").exists());
}

#[tokio::test]
async fn i48_4_checkpoints_stay_within_the_retention_setting_and_an_unchanged_turn_adds_no_commit()
{
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start_tuned(Default::default(), dir, |c| c.checkpoint_turns = 3).await;
    let board = Board::new(&server).await;
    let (_tmp, repo) = repository(true);
    let repo_id = board.repository(&repo, json!({})).await;
    let task = board.task("Long session", &[&repo_id]).await;
    let (session, _cwd) = board.started(&task).await;

    server.turn(&session, "#!mock\nwrite a.txt one").await;
    let refs = checkpoint_refs(&repo, &session);
    let first = checkpoints(&server, &session).await[0]["turn_id"].as_str().unwrap().to_owned();
    let after_first = refs.iter().find(|(n, _)| *n == format!("{first}-after")).unwrap().1.clone();

    // A turn that changes nothing: its checkpoints name the commit the last turn left.
    server.turn(&session, "nothing to change").await;
    let second = checkpoints(&server, &session).await[1]["turn_id"].as_str().unwrap().to_owned();
    let refs = checkpoint_refs(&repo, &session);
    let commit_of = |name: String| refs.iter().find(|(n, _)| *n == name).unwrap().1.clone();
    assert_eq!(commit_of(second.clone()), after_first);
    assert_eq!(commit_of(format!("{second}-after")), after_first);
    let distinct: std::collections::BTreeSet<&String> = refs.iter().map(|(_, c)| c).collect();
    assert_eq!(distinct.len(), 2, "the first turn's two states only: {refs:?}");

    // Many turns later only the newest three keep their checkpoints (refs and rows).
    for i in 0..12 {
        server.turn(&session, &format!("#!mock\nwrite n.txt {i}")).await;
    }
    let kept = checkpoints(&server, &session).await;
    assert_eq!(numbers(&json!(kept)), [12, 13, 14]);
    let mut names: Vec<String> =
        checkpoint_refs(&repo, &session).into_iter().map(|(n, _)| n).collect();
    names.sort();
    let mut expected: Vec<String> = kept
        .iter()
        .flat_map(|t| {
            let id = t["turn_id"].as_str().unwrap();
            [id.to_owned(), format!("{id}-after")]
        })
        .collect();
    expected.sort();
    assert_eq!(names, expected);
    let (status, gone) = revert(&server, &session, &first, json!({"dry_run": true})).await;
    assert_eq!((status, gone["code"].as_str()), (404, Some("NOT_FOUND")), "{gone}");
    assert!(gone["message"].as_str().unwrap().contains("newest 3 turns"), "{gone}");

    // A deleted session takes its checkpoints with it.
    server.call("session.delete", json!({"id": session})).await;
    assert!(checkpoint_refs(&repo, &session).is_empty());
}

/// The mock script of an attempt: writes `file`, commits it when `commit`, then says `done`.
fn attempt_script(file: &str, commit: bool) -> String {
    let commit = if commit {
        format!("\nterminal git add -A && git commit -qm {file}")
    } else {
        String::new()
    };
    format!("#!mock\nwrite {file} from {file}{commit}\nsay done")
}

async fn attempts(server: &TestServer, task: &str) -> Vec<Value> {
    let list = server.call("task.attempt.list", json!({"task_id": task})).await;
    list["attempts"].as_array().unwrap().clone()
}

#[tokio::test]
async fn i48_3_three_attempts_work_in_their_own_worktrees_and_a_pick_makes_one_the_tasks() {
    let server = TestServer::start().await;
    let board = Board::new(&server).await;
    let (_tmp, repo) = repository(true);
    let repo_id = board.repository(&repo, json!({})).await;
    let task = board.task("Race", &[&repo_id]).await;

    let scripts = [
        attempt_script("one.txt", true),
        attempt_script("two.txt", true),
        attempt_script("three.txt", false),
    ];
    let made = server
        .call(
            "task.attempt.create",
            json!({"task_id": task, "attempts": scripts.iter().map(|p| json!({"prompt": p})).collect::<Vec<_>>()}),
        )
        .await;
    let sessions: Vec<String> = made["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(sessions.len(), 3, "{made}");
    let numbers: Vec<u64> = made["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["attempt"].as_u64().unwrap())
        .collect();
    assert_eq!(numbers, [1, 2, 3]);
    for session in &sessions {
        server.wait_turns(session, 1).await;
    }

    let list = attempts(&server, &task).await;
    assert_eq!(list.len(), 3);
    let worktrees: Vec<String> =
        list.iter().map(|a| a["worktree"].as_str().unwrap().to_owned()).collect();
    let branches: Vec<String> =
        list.iter().map(|a| a["branch"].as_str().unwrap().to_owned()).collect();
    assert_eq!(
        worktrees.iter().collect::<std::collections::BTreeSet<_>>().len(),
        3,
        "each attempt has its own worktree: {worktrees:?}"
    );
    assert_eq!(branches.iter().collect::<std::collections::BTreeSet<_>>().len(), 3, "{branches:?}");
    let base = git(&repo, &["rev-parse", "main"]);
    for (attempt, (worktree, own)) in
        list.iter().zip(worktrees.iter().zip(["one.txt", "two.txt", "three.txt"]))
    {
        let path = Path::new(worktree);
        let names: Vec<String> = files_of(path).into_keys().collect();
        assert_eq!(names, ["README.md", own], "{worktree} holds its own work only");
        assert_eq!((attempt["files"].as_u64(), attempt["additions"].as_u64()), (Some(1), Some(1)));
        assert_eq!(git(path, &["merge-base", "HEAD", &base]), base, "made from the task's base");
    }
    // Before a pick the task has no worktree of its own, and says where the work is.
    let (status, none) = server.post("task.changes", json!({"task_id": task})).await;
    assert_eq!(status, 409, "{none}");
    assert!(none["message"].as_str().unwrap().contains("Attempts tab"), "{none}");
    let diff =
        server.call("task.attempt.diff", json!({"task_id": task, "session_id": sessions[1]})).await;
    assert_eq!(paths(&diff["files"]), ["two.txt"]);

    // Pick the second: its branch is the task's; the first's worktree goes, the third's
    // (uncommitted work) is kept and listed; every branch stays.
    let picked =
        server.call("task.attempt.pick", json!({"task_id": task, "session_id": sessions[1]})).await;
    assert_eq!(picked["branch"], branches[1].as_str());
    assert_eq!(picked["task"]["primary_session_id"], sessions[1].as_str());
    assert_eq!(picked["worktrees_removed"], json!([worktrees[0]]));
    assert_eq!(picked["worktrees_kept"][0]["path"], worktrees[2].as_str(), "{picked}");
    assert!(!Path::new(&worktrees[0]).exists());
    // The removed worktree's checkpoints go with it; the others' stay.
    assert!(checkpoint_refs(&repo, &sessions[0]).is_empty());
    assert!(!checkpoint_refs(&repo, &sessions[1]).is_empty());
    assert!(!checkpoint_refs(&repo, &sessions[2]).is_empty(), "a kept worktree keeps them");
    for branch in &branches {
        git(&repo, &["rev-parse", "--verify", branch]);
    }
    let changes = server.call("task.changes", json!({"task_id": task})).await;
    assert_eq!(paths(&changes["files"]), ["two.txt"]);
    assert_eq!(changes["worktrees"][0]["branch"], branches[1].as_str());
    assert!(attempts(&server, &task).await.is_empty(), "the race is over");
    let session = server.call("session.get", json!({"id": sessions[1]})).await;
    assert_eq!(session["session"]["attempt"], Value::Null);

    // The picked session goes on in the same worktree, now the task's.
    server.turn(&sessions[1], "#!mock\nwrite after.txt picked").await;
    assert!(Path::new(&worktrees[1]).join("after.txt").exists());
    let changes = server.call("task.changes", json!({"task_id": task})).await;
    assert_eq!(paths(&changes["files"]), ["after.txt", "two.txt"]);
    // A losing attempt cannot lead the task: its directory is no longer the task's.
    let (status, refused) = server.post("session.set_primary", json!({"id": sessions[0]})).await;
    assert_eq!(status, 409, "{refused}");
    assert!(refused["message"].as_str().unwrap().contains("start a new session"), "{refused}");
    // Each keeps its number as its name.
    for (i, session) in sessions.iter().enumerate() {
        let got = server.call("session.get", json!({"id": session})).await;
        assert_eq!(got["session"]["name"], format!("Attempt {}", i + 1));
    }
    // The others' worktrees are gone or no longer theirs: a new message says to start anew.
    let (status, refused) =
        server.post("message.add", json!({"session_id": sessions[0], "content": "again"})).await;
    assert_eq!(status, 200, "{refused}");
    let failed = server.wait_last_error(&sessions[0]).await;
    let message = failed["last_error"]["message"].as_str().unwrap();
    assert!(message.contains("start a new session"), "{failed}");
}

#[tokio::test]
async fn i48_3_attempts_are_refused_for_a_task_without_one_repository() {
    let server = TestServer::start().await;
    let board = Board::new(&server).await;
    let task = board.task("No repository", &[]).await;
    let body = json!({"task_id": task, "attempts": [{}]});
    let (status, refused) = server.post("task.attempt.create", body).await;
    assert_eq!((status, refused["code"].as_str()), (422, Some("VALIDATION_ERROR")), "{refused}");
    assert!(refused["message"].as_str().unwrap().contains("exactly one repository"));
    let (status, refused) =
        server.post("task.attempt.create", json!({"task_id": task, "attempts": []})).await;
    assert_eq!(status, 422, "{refused}");
}

/// A board whose Race step starts two attempts on entry, with its prompt.
const RACE_FLOW: &str = "version: 1
kind: kandev-workflow
workflows:
  - name: Race flow
    steps:
      - name: Backlog
      - name: Race
        prompt: \"#!mock\\nwrite raced.txt hello\\nsay raced\"
        events:
          on_enter: [{type: start_attempts, count: 2}]
";

#[tokio::test]
async fn i48_3_a_step_starts_attempts_on_entry() {
    let server = TestServer::start().await;
    let workspaces = server.call("workspace.list", json!({})).await;
    let workspace_id = workspaces["workspaces"][0]["id"].as_str().unwrap().to_owned();
    let imported = server
        .call("workflow.import", json!({"workspace_id": workspace_id, "yaml": RACE_FLOW}))
        .await;
    let workflow = imported["workflows"][0].clone();
    let step = |name: &str| common::step_id(&workflow, name);
    let (_tmp, repo) = repository(true);
    let created = server
        .call("repository.create", json!({"workspace_id": workspace_id, "local_path": repo}))
        .await;
    let repo_id = created["repository"]["id"].as_str().unwrap().to_owned();
    let task = server
        .call(
            "task.create",
            json!({"workflow_id": workflow["id"], "title": "Race me", "step_id": step("Backlog"),
                   "repository_ids": [repo_id]}),
        )
        .await["task"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    // The export keeps the action as written.
    let exported = server.call("workflow.export", json!({"ids": [workflow["id"]]})).await;
    assert!(exported["yaml"].as_str().unwrap().contains("{type: start_attempts, count: 2}"));

    server.call("task.move", json!({"id": task, "step_id": step("Race")})).await;
    let attempts = kandev_testkit::wait::eventually("two attempts with worktrees", || async {
        let list = attempts(&server, &task).await;
        let ready = list.len() == 2 && list.iter().all(|a| a["files"] == 1);
        ready.then_some(list)
    })
    .await;
    for attempt in &attempts {
        let worktree = Path::new(attempt["worktree"].as_str().unwrap());
        assert_eq!(std::fs::read_to_string(worktree.join("raced.txt")).unwrap(), "hello");
    }
    let primary = server.call("task.get", json!({"id": task})).await["task"]["primary_session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let note = kandev_testkit::wait::eventually("the step's note", || async {
        let messages = server.messages(&primary).await;
        messages.into_iter().find(|m| m["metadata"]["reason"] == "attempts")
    })
    .await;
    assert_eq!(note["metadata"]["outcome"], "started", "{note}");
    assert_eq!(note["metadata"]["sessions"].as_array().unwrap().len(), 2);

    // A count out of bounds is refused, over the API and in a document.
    let bad = RACE_FLOW.replace("count: 2", "count: 9");
    let (status, refused) =
        server.post("workflow.import", json!({"workspace_id": workspace_id, "yaml": bad})).await;
    assert_eq!(status, 422, "{refused}");
    assert!(refused.to_string().contains("from 1 to 6"), "{refused}");
}

#[tokio::test]
async fn i48_4_a_thousand_turn_session_keeps_only_the_checkpoints_the_setting_allows() {
    let dir = tempfile::tempdir().unwrap();
    let server =
        TestServer::start_tuned(Default::default(), dir, |c| c.checkpoint_turns = 10).await;
    let board = Board::new(&server).await;
    let (_tmp, repo) = repository(true);
    let repo_id = board.repository(&repo, json!({})).await;
    let task = board.task("A thousand turns", &[&repo_id]).await;
    let (session, cwd) = board.started(&task).await;
    let mut ws = server.ws().await;
    ws.call("subscribe", json!({"topics": [format!("session:{session}")]})).await;
    for i in 0..1000 {
        // Every turn changes a file, so every turn has checkpoints of its own.
        let content = format!("#!mock\nwrite n.txt {i}");
        server.call("message.add", json!({"session_id": session, "content": content})).await;
        ws.notification("session.turn.completed").await;
    }
    assert_eq!(std::fs::read_to_string(cwd.join("n.txt")).unwrap(), "999");
    let kept = checkpoints(&server, &session).await;
    assert_eq!(numbers(&json!(kept)), (991..=1000).collect::<Vec<u64>>());
    let refs = checkpoint_refs(&repo, &session);
    assert_eq!(refs.len(), 20, "a before and an after ref for each of the newest 10 turns");
    // The newest turn reverts, the collected ones do not.
    let newest = kept[9]["turn_id"].as_str().unwrap();
    let (status, _) = revert(&server, &session, newest, json!({"dry_run": true})).await;
    assert_eq!(status, 200);
}
