//! Issue 43, the server's container image (`Containerfile`, `scripts/image`), built with
//! Podman from this build's `kandev` on the container tests' local base image (busybox and
//! the libraries the binary needs, `kandev_testkit::container`: no registry, no network) and
//! run with a host folder as its `/data` volume.

#![allow(clippy::disallowed_methods, reason = "tests start processes freely")]

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use kandev_testkit::container::Podman;
use serde_json::Value;

mod support;

use support::{KANDEV, eventually, serve};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn podman() -> Podman {
    Podman::new(&workspace(), &workspace().join("target/containers"))
}

/// A container removed when this is dropped (a failed test leaves none behind).
struct Removed(String);

impl Drop for Removed {
    fn drop(&mut self) {
        let _ = podman().command().args(["rm", "--force", "--time", "0", &self.0]).output();
    }
}

/// An image tag removed when this is dropped, with the layers only it used.
struct Untagged(String);

impl Drop for Untagged {
    fn drop(&mut self) {
        let _ = podman().command().args(["rmi", "--force", &self.0]).output();
    }
}

#[tokio::test]
async fn i43_a2_the_server_image_builds_with_podman_and_serves_health_and_the_ui_with_its_database_on_a_volume()
 {
    let podman = podman();
    let base = podman.test_image(KANDEV.path());
    let pid = std::process::id();
    let tag = format!("localhost/kandev-image-test:{pid}");
    let _untagged = Untagged(tag.clone());

    // Built by the script a user runs, with the tests' Podman configuration and store; the
    // base has no apt and there is no network, so no packages.
    let built = Command::new(workspace().join("scripts/image"))
        .arg(KANDEV.path())
        .args(["--engine", "podman", "--tag", &tag, "--base", &base, "--no-packages"])
        .envs(podman.env())
        .output()
        .unwrap();
    assert!(
        built.status.success(),
        "scripts/image failed: {}{}",
        String::from_utf8_lossy(&built.stdout),
        String::from_utf8_lossy(&built.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&built.stdout).trim(), tag, "it prints the tag alone");

    // What `podman run <tag>` does with no arguments: the server on all addresses (so it
    // needs a token), its home a volume, as a user that is not root.
    let config = podman.run(&["image", "inspect", "--format", "{{json .Config}}", &tag]).stdout;
    let config: Value = serde_json::from_slice(&config).unwrap();
    assert_eq!(config["Entrypoint"], serde_json::json!(["/usr/local/bin/kandev"]), "{config}");
    assert_eq!(config["Cmd"], serde_json::json!(["serve", "--addr", "0.0.0.0:38429"]), "{config}");
    assert!(config["Volumes"].get("/data").is_some(), "/data is a volume: {config}");
    assert!(config["ExposedPorts"].get("38429/tcp").is_some(), "{config}");
    let env = config["Env"].as_array().unwrap();
    assert!(env.contains(&Value::from("KANDEV_HOME=/data")), "{config}");
    let user = config["User"].as_str().unwrap_or_default();
    assert!(!["", "0", "root"].contains(&user.split(':').next().unwrap()), "user {user:?}");

    // Run on the host's network (the sandbox's safest), listening on a loopback port the
    // server picks and announces, with a token from the environment as `podman run -e` gives
    // it; the host folder becomes the volume, owned by the image's user (`:U`).
    let data = tempfile::tempdir().unwrap();
    let logs = tempfile::tempdir().unwrap();
    let name = format!("kandev-image-test-{pid}");
    let _removed = Removed(name.clone());
    let token = "image-test-token";
    let mut command = podman.command();
    command
        .args(["run", "--rm", "--init", "--name", &name, "--network", "host"])
        .arg("-v")
        .arg(format!("{}:/data:U", data.path().display()))
        .args(["-e", &format!("KANDEV_TOKEN={token}"), &tag]);
    let server = serve(command, logs.path(), "127.0.0.1:0", &[]);

    let client = reqwest::Client::new();
    let get = async |path: &str, token: Option<&str>| {
        let mut request = client.get(format!("{}{path}", server.url));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        request.send().await.ok()
    };
    eventually("GET /api/v1/health answers 200 from the container", async || {
        get("/api/v1/health", Some(token)).await.is_some_and(|r| r.status() == 200)
    })
    .await;
    let refused = get("/api/v1/health", None).await.unwrap();
    assert_eq!(refused.status(), 401, "the token given with -e is required");

    // The UI: its page, and the script it loads.
    let page = get("/", Some(token)).await.unwrap();
    assert_eq!(page.status(), 200);
    let page = page.text().await.unwrap();
    assert!(page.contains("<title>Kandev</title>"), "{page}");
    let script = page
        .split('"')
        .find(|part| part.starts_with("/assets/") && part.ends_with(".js"))
        .unwrap_or_else(|| panic!("no /assets/*.js in the page: {page}"));
    let asset = get(script, Some(token)).await.unwrap();
    assert_eq!(asset.status(), 200, "GET {script}");

    // The database is on the volume: in the host's folder, written by the image's user.
    let db = data.path().join("kandev.db");
    let meta = std::fs::metadata(&db).unwrap_or_else(|err| {
        let listed: Vec<_> =
            std::fs::read_dir(data.path()).unwrap().flatten().map(|e| e.file_name()).collect();
        panic!("no database at {} ({err}); the folder holds {listed:?}", db.display())
    });
    assert!(meta.is_file() && meta.len() > 0, "{}", db.display());
    assert_ne!(meta.uid(), 0, "the server in the container runs as root");
    drop(server);
}
