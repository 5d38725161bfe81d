//! Issue 50 acceptance, through the real `kandev serve` with its local runner (agents are
//! real processes: their environment is read from `/proc`):
//! 1. a secret a profile references reaches the agent's environment, locally and on an SSH
//!    executor (a real OpenSSH server), and no API answer, log line, transcript,
//!    notification, file of the home or backup holds it in clear text;
//! 2. rotating the key keeps every secret usable and leaves no old ciphertext that the new
//!    key reads;
//! 3. an SSH executor not allowed a secret does not receive it.
//!
//! And scope 4-5: a database from before the store has its profile values and forge token
//! variable moved in; a restored backup needs the key file, and says so.

#![allow(clippy::disallowed_methods, reason = "tests spawn tasks and start processes freely")]

use std::path::{Path, PathBuf};
use std::time::Duration;

use kandev_domain::secret::Sealed;
use kandev_engine::secrets::{KEY_FILE, SecretKey};
use kandev_store::{Location, Store};
use serde_json::{Value, json};

mod support;

use kandev_testkit::sshd::Sshd;
use support::{
    KANDEV, Server, agents_of, call, eventually, launched_with, messages, process_argvs, try_call,
    turn_done,
};

/// The environment of process `pid`, as `NAME=value` lines.
fn environ(pid: u32) -> Vec<String> {
    let bytes = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
    bytes.split(|b| *b == 0).map(|v| String::from_utf8_lossy(v).into_owned()).collect()
}

/// Every process of this machine whose environment holds `needle`.
fn processes_holding(needle: &str) -> Vec<u32> {
    let mut found = vec![];
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        if environ(pid).iter().any(|v| v.contains(needle)) {
            found.push(pid);
        }
    }
    found
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle.as_bytes())
}

/// Every file under `root` (symbolic links not followed) whose bytes hold `needle`.
fn files_holding(root: &Path, needle: &str) -> Vec<PathBuf> {
    let mut found = vec![];
    let mut folders = vec![root.to_path_buf()];
    while let Some(folder) = folders.pop() {
        let Ok(entries) = std::fs::read_dir(&folder) else { continue };
        for entry in entries.flatten() {
            let path = entry.path();
            let Ok(kind) = entry.file_type() else { continue };
            if kind.is_dir() {
                folders.push(path);
            } else if kind.is_file()
                && std::fs::read(&path).is_ok_and(|bytes| contains(&bytes, needle))
            {
                found.push(path);
            }
        }
    }
    found
}

async fn workspace_id(server: &Server) -> String {
    let workspaces = call(server, "workspace.list", json!({})).await;
    workspaces["workspaces"][0]["id"].as_str().unwrap().to_owned()
}

/// A mock profile whose agent gets `MY_API_KEY` from the secret `secret`.
async fn profile_using(server: &Server, secret: &str) -> String {
    let created = call(
        server,
        "agent.profile.create",
        json!({"name": format!("uses {secret}"), "kind": "mock",
            "env": [{"name": "MY_API_KEY", "secret": secret}]}),
    )
    .await;
    assert_eq!(
        created["profile"]["env"],
        json!([{"name": "MY_API_KEY", "value": "", "secret": secret}])
    );
    created["profile"]["id"].as_str().unwrap().to_owned()
}

/// The one mock agent of `home` that runs now.
async fn the_agent(home: &Path) -> u32 {
    eventually("the agent to run", async || {
        let agents = agents_of(home);
        (agents.len() == 1).then(|| agents[0])
    })
    .await
}

/// The sealed secrets in the home's database (read beside the running server).
async fn sealed(home: &Path) -> Vec<(String, Sealed)> {
    let store = Store::open(Location::File(home.join("kandev.db"))).await.unwrap();
    let rows = store.all_sealed_secrets().await.unwrap();
    store.close().await;
    rows.into_iter().map(|(secret, sealed)| (secret.id, sealed)).collect()
}

fn key_of(home: &Path) -> SecretKey {
    SecretKey::parse(&std::fs::read_to_string(home.join(KEY_FILE)).unwrap()).unwrap()
}

#[tokio::test]
async fn i50_1_2_a_profile_secret_reaches_the_local_agent_survives_rotation_and_nothing_written_holds_it()
 {
    const VALUE: &str = "sk-i50-local-3f9a71c2e8";
    let home = tempfile::tempdir().unwrap();
    // Debug logging: whatever the server says about starts and secrets is in the grep.
    let server = KANDEV.launch(home.path(), "127.0.0.1:0", &[], &[("RUST_LOG", "debug")]);
    let key_file = home.path().join(KEY_FILE);
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(&key_file).unwrap().permissions(),
    );
    assert_eq!(mode & 0o777, 0o600, "the key file is the owner's only");

    let workspace = workspace_id(&server).await;
    let mut answers: Vec<Value> = vec![];
    let set = call(
        &server,
        "secret.set",
        json!({"workspace_id": workspace, "name": "I50_KEY", "value": VALUE}),
    )
    .await;
    assert_eq!(set["secret"]["name"], "I50_KEY", "{set}");
    assert_eq!(set["secret"]["scope"], "workspace", "{set}");
    answers.push(set);
    let profile = profile_using(&server, "I50_KEY").await;
    let (task, session) = launched_with(
        &server,
        "uses the key",
        json!({"agent_profile_id": profile, "prompt": "#!mock\nsay used the key"}),
    )
    .await;
    turn_done(&server, &session, 1).await;
    let agent = the_agent(home.path()).await;
    assert!(environ(agent).contains(&format!("MY_API_KEY={VALUE}")), "the agent has the value");

    // What anyone can read back: none of it holds the value.
    for (action, payload) in [
        ("secret.list", json!({"workspace_id": workspace})),
        ("agent.profile.list", json!({})),
        ("session.get", json!({"id": session})),
        ("task.get", json!({"id": task})),
        ("task.session.list", json!({"task_id": task})),
        ("notification.list", json!({})),
        (
            "task.list",
            json!({"workflow_id": call(&server, "task.get", json!({"id": task})).await["task"]["workflow_id"]}),
        ),
    ] {
        answers.push(call(&server, action, payload).await);
    }
    answers.extend(messages(&server, &session).await);
    let listed = &answers[1]["secrets"];
    assert_eq!(listed.as_array().map(Vec::len), Some(1), "{listed}");
    for answer in &answers {
        assert!(!answer.to_string().contains(VALUE), "an answer holds the value: {answer}");
    }

    // Rotation: every value re-sealed under the new key, none of the old ciphertext left or
    // readable with it, and the secret still reaches an agent.
    let old_key = key_of(home.path());
    let before = sealed(home.path()).await;
    assert_eq!(before.len(), 1);
    let rotated = call(&server, "secret.key.rotate", json!({})).await;
    let new_key = key_of(home.path());
    assert_eq!(rotated["key_id"], new_key.id().as_str(), "{rotated}");
    assert_eq!(rotated["resealed"], 1, "{rotated}");
    assert_ne!(new_key.id(), old_key.id());
    let after = sealed(home.path()).await;
    for ((id, old), (same_id, new)) in before.iter().zip(&after) {
        assert_eq!(id, same_id);
        assert_eq!(new.key_id, new_key.id(), "re-sealed with the new key");
        assert_ne!(new.sealed, old.sealed);
        assert_eq!(new_key.open(id, new).unwrap(), VALUE, "usable with the new key");
        assert!(old_key.open(id, new).is_err(), "the old key reads nothing new");
        let relabelled = Sealed { key_id: new_key.id(), sealed: old.sealed.clone() };
        assert!(new_key.open(id, &relabelled).is_err(), "the old ciphertext does not open");
        for file in ["kandev.db", "kandev.db-wal"] {
            let bytes = std::fs::read(home.path().join(file)).unwrap_or_default();
            assert!(!contains(&bytes, &old.sealed), "{file} still holds the old ciphertext");
        }
    }
    let relisted = call(&server, "secret.list", json!({"workspace_id": workspace})).await;
    assert_eq!(
        relisted["secrets"][0]["updated_at"], listed[0]["updated_at"],
        "a rotation keeps when the value was set: {relisted}"
    );
    call(&server, "session.stop", json!({"id": session})).await;
    eventually("the first agent to stop", async || agents_of(home.path()).is_empty()).await;
    let (_, second) = launched_with(
        &server,
        "after the rotation",
        json!({"agent_profile_id": profile, "prompt": "#!mock\nsay still works"}),
    )
    .await;
    turn_done(&server, &second, 1).await;
    let agent = the_agent(home.path()).await;
    assert!(environ(agent).contains(&format!("MY_API_KEY={VALUE}")), "usable after rotation");
    call(&server, "session.stop", json!({"id": second})).await;
    eventually("the agent to stop", async || agents_of(home.path()).is_empty()).await;
    drop(server);

    // Nothing the server wrote holds the value: the database, its log, the runner's files.
    let holding = files_holding(home.path(), VALUE);
    assert!(holding.is_empty(), "files hold the value: {holding:?}");
    let log = std::fs::read_to_string(home.path().join("server.log")).unwrap();
    assert!(log.contains("rotated the secret key"), "the log is the debug one: {log:.2000}");

    // A backup holds the secret sealed, and not the key; a restore without the key refuses
    // to start and says what to do; with it, the secret is there.
    let archive = home.path().join("backup.tar.gz");
    let out = KANDEV
        .command()
        .args(["backup", "--home"])
        .arg(home.path())
        .arg("--to")
        .arg(&archive)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("does not hold the secret key"));
    let mut tar = vec![];
    std::io::Read::read_to_end(
        &mut flate2::read::GzDecoder::new(std::fs::File::open(&archive).unwrap()),
        &mut tar,
    )
    .unwrap();
    assert!(!contains(&tar, VALUE), "the backup holds the value in clear text");
    assert!(!contains(&tar, &new_key.encode()), "the backup holds the key");
    assert!(!contains(&tar, KEY_FILE), "the backup names no key file");
    assert!(contains(&tar, &after[0].1.sealed), "the backup holds the sealed value");

    let restored = tempfile::tempdir().unwrap();
    let target = restored.path().join("home");
    let out =
        KANDEV.command().arg("restore").arg(&archive).arg("--home").arg(&target).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mut refused = KANDEV
        .command()
        .args(["serve", "--addr", "127.0.0.1:0", "--home"])
        .arg(&target)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let status = kandev_testkit::server::exited_within(&mut refused, Duration::from_secs(60));
    assert!(status.is_some_and(|s| !s.success()), "a start without the key is refused");
    let mut stderr = String::new();
    std::io::Read::read_to_string(refused.stderr.as_mut().unwrap(), &mut stderr).unwrap();
    assert!(stderr.contains("secret.key") && stderr.contains("backups do not hold it"), "{stderr}");
    let doctor = |home: &Path| {
        KANDEV
            .command()
            .args(["doctor", "--min-free-mib", "1", "--home"])
            .arg(home)
            .output()
            .unwrap()
    };
    let out = doctor(&target);
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(!out.status.success() && said.contains("secret.key is missing"), "doctor: {said}");
    std::fs::copy(&key_file, target.join(KEY_FILE)).unwrap();
    let out = doctor(&target);
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(said.contains(&format!("key {} (1 secrets)", new_key.id())), "doctor: {said}");
    let server = KANDEV.start(&target);
    let listed = call(&server, "secret.list", json!({"workspace_id": workspace})).await;
    assert_eq!(listed["secrets"][0]["name"], "I50_KEY", "{listed}");
    assert_eq!(listed["key_id"], new_key.id().as_str(), "{listed}");
}

#[tokio::test]
async fn i50_1_3_an_ssh_executor_gets_a_secret_only_when_allowed() {
    const VALUE: &str = "sk-i50-remote-5be01d7a94";
    let sshd = Sshd::start();
    let home = tempfile::tempdir().unwrap();
    let remote = tempfile::tempdir().unwrap();
    let repo = kandev_testkit::remote_task::project_repo();
    let server = KANDEV.start(home.path());
    let workspace = workspace_id(&server).await;
    call(&server, "secret.set", json!({"name": "I50_REMOTE", "value": VALUE})).await;
    let profile = profile_using(&server, "I50_REMOTE").await;

    let repository = call(
        &server,
        "repository.create",
        json!({"workspace_id": workspace, "local_path": repo.path(), "name": "project"}),
    )
    .await;
    let repository = repository["repository"]["id"].clone();
    let s = sshd.settings(remote.path());
    let ssh = json!({"host": s.host, "port": s.port, "user": s.user,
        "identity_file": s.identity_file, "known_hosts": s.known_hosts,
        "remote_home": s.remote_home});
    let executor =
        call(&server, "executor.create", json!({"name": "build1", "kind": "ssh", "ssh": ssh}))
            .await;
    assert_eq!(executor["executor"]["allowed_secrets"], json!([]), "{executor}");
    let executor = executor["executor"]["id"].clone();
    call(
        &server,
        "repository.executor.set",
        json!({"repository_id": repository, "executor_id": executor}),
    )
    .await;
    let workflows = call(&server, "workflow.list", json!({"workspace_id": workspace})).await;
    let board = &workflows["workflows"][0];
    let task = call(
        &server,
        "task.create",
        json!({"workflow_id": board["id"], "title": "remote work", "step_id": board["steps"][0]["id"],
            "repository_ids": [repository]}),
    )
    .await;
    let task = task["task"]["id"].as_str().unwrap().to_owned();

    // Not allowed: the start fails saying why, and no process anywhere got the value.
    let launched =
        call(&server, "session.launch", json!({"task_id": task, "agent_profile_id": profile}))
            .await;
    let session = launched["session"]["id"].as_str().unwrap().to_owned();
    let failed = eventually("the start to fail", async || {
        let got = call(&server, "session.get", json!({"id": session})).await;
        (got["session"]["state"] == "FAILED").then_some(got)
    })
    .await;
    let error = failed["session"]["last_error"]["message"].as_str().unwrap_or_default().to_owned();
    assert!(
        error.contains("build1") && error.contains("not allowed the secret I50_REMOTE"),
        "{failed}"
    );
    let remote_kandev = remote.path().join("bin/kandev");
    let remote_agents = format!("{} mock-agent", remote_kandev.display());
    assert!(process_argvs(&remote_agents).is_empty(), "no agent started on the build host");
    assert!(processes_holding(VALUE).is_empty(), "no process holds the value");
    assert!(files_holding(remote.path(), VALUE).is_empty(), "the build host holds nothing");

    // Allowed: the agent on the build host has it.
    let updated = call(
        &server,
        "executor.update",
        json!({"id": executor, "allowed_secrets": ["I50_REMOTE"]}),
    )
    .await;
    assert_eq!(updated["executor"]["allowed_secrets"], json!(["I50_REMOTE"]), "{updated}");
    call(&server, "session.resume", json!({"id": session, "mode": "fresh"})).await;
    let agent = eventually("the agent to run on the build host", async || {
        let agents = process_argvs(&remote_agents);
        (agents.len() == 1).then(|| agents[0].0)
    })
    .await;
    assert!(environ(agent).contains(&format!("MY_API_KEY={VALUE}")), "the remote agent has it");
    call(&server, "message.add", json!({"session_id": session, "content": "#!mock\nsay remote"}))
        .await;
    turn_done(&server, &session, 1).await;
    let transcript = messages(&server, &session).await;
    assert!(!serde_json::to_string(&transcript).unwrap().contains(VALUE));
    call(&server, "task.archive", json!({"id": task})).await;
    eventually("the remote agent to stop", async || process_argvs(&remote_agents).is_empty()).await;
    drop(server);
    assert!(files_holding(home.path(), VALUE).is_empty(), "the home holds nothing in clear");
    drop(sshd);
}

#[tokio::test]
async fn i50_4_profile_values_and_the_forge_token_variable_move_into_the_store() {
    const PROFILE_VALUE: &str = "sk-i50-from-before-0c4e";
    const HEADER_VALUE: &str = "Bearer i50-header-77d2";
    const TOKEN: &str = "ghp_i50forgetoken91b3";
    let home = tempfile::tempdir().unwrap();
    let db = Location::File(home.path().join("kandev.db"));
    let seed = format!(
        "INSERT INTO agent_profiles (id, name, kind, env, mcp_servers, created_at, updated_at) \
         VALUES ('old-profile', 'Old', 'mock', \
         '[{{\"name\":\"OPENAI_API_KEY\",\"value\":\"{PROFILE_VALUE}\"}},{{\"name\":\"EMPTY\",\"value\":\"\"}}]', \
         '[{{\"name\":\"docs\",\"url\":\"http://127.0.0.1:9/mcp\",\"headers\":[{{\"name\":\"Authorization\",\"value\":\"{HEADER_VALUE}\"}}]}}]', \
         1700000000000, 1700000000000);
         INSERT INTO repositories (id, workspace_id, name, local_path, default_branch, \
         branch_template, forge_token_env, created_at, updated_at) \
         VALUES ('old-repo', 'fixture-ws', 'old', '/nonexistent/old', 'main', 'kandev/{{short-id}}', \
         'I50_FORGE_TOKEN', 1700000000000, 1700000000000);"
    );
    kandev_store::fixture::create_seeded(&db, 42, &seed).await.unwrap();

    let server = KANDEV.launch(home.path(), "127.0.0.1:0", &[], &[("I50_FORGE_TOKEN", TOKEN)]);
    let listed = call(&server, "secret.list", json!({"workspace_id": "fixture-ws"})).await;
    let mut names: Vec<&str> =
        listed["secrets"].as_array().unwrap().iter().map(|s| s["name"].as_str().unwrap()).collect();
    names.sort();
    assert_eq!(names, ["AUTHORIZATION", "I50_FORGE_TOKEN", "OPENAI_API_KEY"], "{listed}");
    assert!(listed["secrets"].as_array().unwrap().iter().all(|s| s["scope"] == "server"));
    let profiles = call(&server, "agent.profile.list", json!({})).await;
    let old = profiles["profiles"].as_array().unwrap().iter().find(|p| p["id"] == "old-profile");
    let old = old.unwrap();
    assert_eq!(
        old["env"],
        json!([{"name": "OPENAI_API_KEY", "value": "", "secret": "OPENAI_API_KEY"},
            {"name": "EMPTY", "value": "********"}]),
        "{old}"
    );
    assert_eq!(
        old["mcp_servers"][0]["headers"],
        json!([{"name": "Authorization", "value": "", "secret": "AUTHORIZATION"}]),
        "{old}"
    );
    // The values went in as they were: an agent of the profile gets them.
    let (_, session) = launched_with(
        &server,
        "old profile",
        json!({"agent_profile_id": "old-profile", "prompt": "#!mock\nsay migrated"}),
    )
    .await;
    turn_done(&server, &session, 1).await;
    let agent = the_agent(home.path()).await;
    assert!(environ(agent).contains(&format!("OPENAI_API_KEY={PROFILE_VALUE}")));
    call(&server, "session.stop", json!({"id": session})).await;
    eventually("the agent to stop", async || agents_of(home.path()).is_empty()).await;
    drop(server);
    for value in [PROFILE_VALUE, HEADER_VALUE, TOKEN] {
        for file in ["kandev.db", "kandev.db-wal"] {
            let bytes = std::fs::read(home.path().join(file)).unwrap_or_default();
            assert!(!contains(&bytes, value), "{file} still holds {value} in clear text");
        }
    }
    // Once: a second start moves nothing again (the import is done).
    let server = KANDEV.start(home.path());
    let again = call(&server, "secret.list", json!({})).await;
    assert_eq!(again["secrets"].as_array().map(Vec::len), Some(3), "{again}");
    let refused = try_call(&server, "secret.set", json!({"name": "1BAD", "value": "x"})).await;
    assert!(refused.is_err(), "a bad name is refused: {refused:?}");
}
