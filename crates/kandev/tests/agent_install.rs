//! Issue 51 acceptance 2, through the real `kandev serve` and the machine's real `npm`: a
//! pinned agent is installed into an empty prefix, a profile runs it, then an update to
//! another pinned version, all through the API, against a local npm registry on 127.0.0.1
//! (kandev-testkit's fake registry) serving two versions of a small package made by the
//! test. Nothing leaves loopback: npm's registry, cache and user config are the test's own.

#![allow(clippy::disallowed_methods, reason = "tests spawn tasks and start processes freely")]

use std::path::Path;

use kandev_testkit::fake_registry::{FakeRegistry, TestPackage};
use serde_json::{Value, json};

mod support;

use support::{
    KANDEV, Server, call, launched_with, messages, refused, task_on_first_step, try_call, turn_done,
};

const PACKAGE: &str = "@qwen-code/qwen-code";

/// The test's stand-in for Qwen Code: notes its version in `$KANDEV_TEST_MARK`, then is the
/// mock agent (ignoring the kind's `--acp`).
fn stand_in(version: &str) -> TestPackage {
    let script = format!(
        "#!/bin/sh\necho {version} >> \"$KANDEV_TEST_MARK\"\nexec \"$KANDEV_TEST_AGENT\" mock-agent\n"
    );
    TestPackage::with_command(PACKAGE, version, "qwen", &script)
}

/// A launch of `profile` with a prompt, to the end of its first turn.
async fn one_turn(server: &Server, profile: &Value, title: &str) -> String {
    let launch = json!({"agent_profile_id": profile, "prompt": "hello"});
    let (_, session) = launched_with(server, title, launch).await;
    turn_done(server, &session, 1).await;
    session
}

/// A server whose npm asks only `registry`, with a cache and an empty user config of the
/// test's own (so the developer's `~/.npmrc` plays no part), in `dir`.
struct Installing {
    registry: FakeRegistry,
    dir: kandev_testkit::TempDir,
    server: Server,
}

impl Installing {
    async fn start(label: &str, versions: &[&str]) -> Installing {
        let packages: Vec<TestPackage> = versions.iter().map(|v| stand_in(v)).collect();
        let registry = FakeRegistry::start(&packages).await.unwrap();
        let dir = kandev_testkit::temp_dir(label);
        let (cache, npmrc) = (dir.path().join("npm-cache"), dir.path().join("npmrc"));
        std::fs::write(&npmrc, "").unwrap();
        for folder in ["home", "remote"] {
            std::fs::create_dir_all(dir.path().join(folder)).unwrap();
        }
        let url = registry.url();
        let env = [
            ("npm_config_registry", url.as_str()),
            ("npm_config_cache", cache.to_str().unwrap()),
            ("npm_config_userconfig", npmrc.to_str().unwrap()),
        ];
        let server = KANDEV.launch(&dir.path().join("home"), "127.0.0.1:0", &[], &env);
        Installing { registry, dir, server }
    }

    /// Kandev's home.
    fn home(&self) -> std::path::PathBuf {
        self.dir.path().join("home")
    }

    /// Where the stand-in notes the versions that ran.
    fn mark(&self) -> std::path::PathBuf {
        self.dir.path().join("ran")
    }
}

fn marks(file: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(file).unwrap_or_default();
    text.lines().map(str::to_owned).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn i51_2_an_agent_installs_pinned_into_an_empty_prefix_then_updates() {
    let setup = Installing::start("agent-install", &["1.0.0", "1.1.0"]).await;
    let (server, home, mark) = (&setup.server, setup.home(), setup.mark());

    // An empty prefix: nothing installed; the registry's two versions, newest first.
    let versions = call(server, "agent.versions", json!({"kind": "qwen"})).await;
    assert_eq!(versions["package"], PACKAGE);
    assert_eq!(versions["installed"], json!([]), "{versions}");
    assert_eq!(versions["available"], json!(["1.1.0", "1.0.0"]), "{versions}");
    assert_eq!(versions["latest"], "1.1.0");
    assert_eq!(versions["registry_error"], Value::Null);

    // A profile may name a version not installed yet (an SSH host may have it), marked so;
    // a tag is not a version.
    let agent = json!({"name": "KANDEV_TEST_AGENT", "value": KANDEV.path().display().to_string()});
    let noted = json!({"name": "KANDEV_TEST_MARK", "value": mark.display().to_string()});
    let new_profile = json!({"name": "Qwen pinned", "kind": "qwen", "agent_version": "1.0.0", "env": [agent, noted]});
    let early = json!({"name": "Early", "kind": "qwen", "agent_version": "1.0.0"});
    let early = call(server, "agent.profile.create", early).await;
    assert_eq!(early["installed"], false, "{early}");
    assert!(early["install"].as_str().unwrap().contains("install Qwen Code 1.0.0"), "{early}");
    call(server, "agent.profile.delete", json!({"id": early["profile"]["id"]})).await;
    let tagged = json!({"name": "Tagged", "kind": "qwen", "agent_version": "latest"});
    let (status, body) = refused(try_call(server, "agent.profile.create", tagged).await);
    assert_eq!(status, 422, "{body}");
    let (status, body) = refused(
        try_call(server, "agent.install", json!({"kind": "qwen", "version": "latest"})).await,
    );
    assert_eq!(status, 422, "{body}");

    // Install 1.0.0: into <home>/agents/qwen/1.0.0; a second install has nothing to do.
    let installed =
        call(server, "agent.install", json!({"kind": "qwen", "version": "1.0.0"})).await;
    let program = home.join("agents/qwen/1.0.0/node_modules/.bin/qwen");
    assert_eq!(installed["path"], program.display().to_string(), "{installed}");
    assert_eq!(installed["already"], false);
    assert!(program.is_file());
    let missing = json!({"kind": "qwen", "version": "9.9.9"});
    let (status, body) = refused(try_call(server, "agent.install", missing).await);
    assert_eq!(status, 404, "{body}");
    assert!(body["message"].as_str().unwrap().contains("has no version 9.9.9"), "{body}");
    let again = call(server, "agent.install", json!({"kind": "qwen", "version": "1.0.0"})).await;
    assert_eq!(again["already"], true);
    let kinds = call(server, "agent.kinds", json!({})).await;
    let qwen = kinds["kinds"].as_array().unwrap().iter().find(|k| k["kind"] == "qwen").unwrap();
    assert_eq!(qwen["installed_versions"], json!(["1.0.0"]), "{qwen}");

    // A profile pinned to 1.0.0 runs it.
    let saved = call(server, "agent.profile.create", new_profile).await;
    assert_eq!(saved["profile"]["agent_version"], "1.0.0");
    assert_eq!(saved["installed"], true, "{saved}");
    let profile = saved["profile"]["id"].clone();
    let first = one_turn(server, &profile, "Runs 1.0.0").await;
    assert!(support::agent_text(&messages(server, &first).await).contains("hello"));
    assert_eq!(marks(&mark), ["1.0.0"]);

    // The update: install 1.1.0, point the profile at it; the next session runs 1.1.0.
    call(server, "agent.install", json!({"kind": "qwen", "version": "1.1.0"})).await;
    let updated =
        call(server, "agent.profile.update", json!({"id": profile, "agent_version": "1.1.0"}))
            .await;
    assert_eq!(updated["profile"]["agent_version"], "1.1.0");
    one_turn(server, &profile, "Runs 1.1.0").await;
    assert_eq!(marks(&mark), ["1.0.0", "1.1.0"]);
    let versions = call(server, "agent.versions", json!({"kind": "qwen"})).await;
    let installed: Vec<(&str, &Value)> = versions["installed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| (v["version"].as_str().unwrap(), &v["profiles"]))
        .collect();
    assert_eq!(installed, [("1.1.0", &json!(["Qwen pinned"])), ("1.0.0", &json!([]))]);

    // The version a profile runs stays; the old one goes.
    let (status, body) = refused(
        try_call(server, "agent.uninstall", json!({"kind": "qwen", "version": "1.1.0"})).await,
    );
    assert_eq!(status, 409, "{body}");
    call(server, "agent.uninstall", json!({"kind": "qwen", "version": "1.0.0"})).await;
    assert!(!program.exists());
    let kinds = call(server, "agent.kinds", json!({})).await;
    let qwen = kinds["kinds"].as_array().unwrap().iter().find(|k| k["kind"] == "qwen").unwrap();
    assert_eq!(qwen["installed_versions"], json!(["1.1.0"]), "{qwen}");

    // Every package came from the test's registry, and only what was asked for.
    let asked = setup.registry.requests();
    assert!(asked.iter().all(|r| r.ends_with(" 200")), "{asked:#?}");
    assert!(asked.iter().any(|r| r.contains("qwen-code-1.1.0.tgz")), "{asked:#?}");
}

/// A version named by a profile but removed from disk behind Kandev's back: the launch is
/// refused before a session exists, saying what to do (never another version instead).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn i51_2_a_profile_s_missing_version_refuses_the_launch() {
    let setup = Installing::start("agent-missing", &["2.0.0"]).await;
    let (server, home) = (&setup.server, setup.home());
    call(server, "agent.install", json!({"kind": "qwen", "version": "2.0.0"})).await;
    let saved = call(
        server,
        "agent.profile.create",
        json!({"name": "Qwen 2", "kind": "qwen", "agent_version": "2.0.0"}),
    )
    .await;
    std::fs::remove_dir_all(home.join("agents/qwen/2.0.0")).unwrap();
    let task = task_on_first_step(server, json!({"title": "Missing"})).await;
    let board = json!({"id": task["task"]["workflow_id"]});
    let launch = json!({"task_id": task["task"]["id"], "agent_profile_id": saved["profile"]["id"]});
    let (status, body) = refused(try_call(server, "session.launch", launch).await);
    assert_eq!(status, 422, "{body}");
    let message = body["message"].as_str().unwrap();
    assert!(
        message.contains("Qwen Code 2.0.0") && message.contains("Settings → Agent profiles"),
        "{message}"
    );
    let sessions = call(server, "task.session.list", json!({"task_id": task["task"]["id"]})).await;
    assert_eq!(sessions["sessions"], json!([]), "no session was made");

    // A task that would start on it is refused before it exists: a retry makes no second one.
    let started = json!({"workflow_id": board["id"], "title": "Would start",
        "agent_profile_id": saved["profile"]["id"], "start_agent": true});
    let (status, body) = refused(try_call(server, "task.create", started).await);
    assert_eq!(status, 422, "{body}");
    let tasks = call(server, "task.list", json!({"workflow_id": board["id"]})).await;
    let titles: Vec<&str> =
        tasks["tasks"].as_array().unwrap().iter().map(|t| t["title"].as_str().unwrap()).collect();
    assert_eq!(titles, ["Missing"], "no task was made");
}

/// Scope 3 on an SSH executor (a real OpenSSH server on loopback): `agent.install` with the
/// executor installs into the build host's own prefix (`<remote home>/agents`, npm there
/// given the server's `npm_config_*`), nothing on this machine; a pinned profile's session
/// on a task of that executor runs the build host's copy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn i51_2_an_agent_installs_on_an_ssh_executor_s_build_host_and_runs_there() {
    let setup = Installing::start("agent-ssh", &["3.0.0"]).await;
    let sshd = kandev_testkit::sshd::Sshd::start();
    let (server, home, mark) = (&setup.server, setup.home(), setup.mark());
    let remote = setup.dir.path().join("remote");
    let repo = kandev_testkit::remote_task::project_repo();
    let task = kandev_testkit::remote_task::launch(server, &sshd, &remote, repo.path()).await;
    let executors = call(server, "executor.list", json!({})).await;
    let build1 =
        executors["executors"].as_array().unwrap().iter().find(|e| e["name"] == "build1").unwrap()
            ["id"]
            .clone();

    let on_build1 = json!({"kind": "qwen", "version": "3.0.0", "executor_id": build1});
    let installed = call(server, "agent.install", on_build1).await;
    let there = remote.join("agents/qwen/3.0.0/node_modules/.bin/qwen");
    assert_eq!(installed["path"], there.display().to_string(), "{installed}");
    assert!(there.is_file());
    assert!(!home.join("agents/qwen/3.0.0").exists(), "nothing installed on this machine");
    let listed =
        call(server, "agent.versions", json!({"kind": "qwen", "executor_id": build1})).await;
    assert_eq!(listed["installed"][0]["version"], "3.0.0", "{listed}");
    let here = call(server, "agent.versions", json!({"kind": "qwen"})).await;
    assert_eq!(here["installed"], json!([]), "{here}");

    let agent = json!({"name": "KANDEV_TEST_AGENT", "value": KANDEV.path().display().to_string()});
    let noted = json!({"name": "KANDEV_TEST_MARK", "value": mark.display().to_string()});
    let profile = json!({"name": "Qwen on build1", "kind": "qwen", "agent_version": "3.0.0",
        "env": [agent, noted]});
    let saved = call(server, "agent.profile.create", profile).await;
    let launch = json!({"task_id": task.task, "agent_profile_id": saved["profile"]["id"],
        "prompt": "hello from afar"});
    let launched = call(server, "session.launch", launch).await;
    let session = launched["session"]["id"].as_str().unwrap().to_owned();
    turn_done(server, &session, 1).await;
    assert!(support::agent_text(&messages(server, &session).await).contains("hello from afar"));
    assert_eq!(marks(&mark), ["3.0.0"]);

    // A version the build host does not have: the start fails saying where to install it
    // (never the host's PATH instead).
    let missing = json!({"id": saved["profile"]["id"], "agent_version": "3.1.0"});
    call(server, "agent.profile.update", missing).await;
    let launch = json!({"task_id": task.task, "agent_profile_id": saved["profile"]["id"]});
    let launched = call(server, "session.launch", launch).await;
    let session = launched["session"]["id"].as_str().unwrap().to_owned();
    let mut watch = support::Watch::sessions(server, std::slice::from_ref(&session)).await;
    watch.state(server, &session, "FAILED").await;
    let failed = call(server, "session.get", json!({"id": session})).await;
    let failed = &failed["session"]["last_error"];
    let message = failed["message"].as_str().unwrap();
    assert!(message.contains("not installed on the executor build1"), "{failed}");
    assert_eq!(marks(&mark), ["3.0.0"], "nothing else ran");
}
