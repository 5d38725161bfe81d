//! The real `kandev` binary: `serve` as the README runs it, and the task and workflow commands
//! against it over HTTP.

#![allow(clippy::disallowed_methods, reason = "tests spawn tasks and start processes freely")]

use std::os::unix::process::CommandExt;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

mod support;

use support::{KANDEV, Server, alive, call, eventually_within};

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn kandev(server: &Server, args: &[&str]) -> Output {
    Command::new(KANDEV).args(args).env("KANDEV_URL", &server.url).output().unwrap()
}

fn stdout(output: &Output) -> String {
    assert!(output.status.success(), "failed: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout.clone()).unwrap()
}

#[test]
fn help_explains_each_command() {
    let help = Command::new(KANDEV).arg("--help").output().unwrap();
    let text = String::from_utf8(help.stdout).unwrap();
    for word in ["serve", "task", "workflow", "Run the server"] {
        assert!(text.contains(word), "--help lacks {word:?}:\n{text}");
    }
    let task_help =
        String::from_utf8(Command::new(KANDEV).args(["task", "--help"]).output().unwrap().stdout)
            .unwrap();
    for word in ["create", "list", "move"] {
        assert!(task_help.contains(word), "task --help lacks {word}");
    }
}

#[test]
fn serve_refuses_a_public_address_without_a_token() {
    let home = tempfile::tempdir().unwrap();
    let output = Command::new(KANDEV)
        .args(["serve", "--addr", &format!("0.0.0.0:{}", free_port())])
        .env("KANDEV_HOME", home.path())
        .env_remove("KANDEV_TOKEN")
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--token"), "{stderr}");
}

#[tokio::test]
async fn task_and_workflow_commands_work_against_a_running_server() {
    let home = tempfile::tempdir().unwrap();
    let server = KANDEV.start(home.path());
    let workspaces = call(&server, "workspace.list", json!({})).await;
    let workspace_id = workspaces["workspaces"][0]["id"].as_str().unwrap().to_owned();
    let workflows = call(&server, "workflow.list", json!({"workspace_id": workspace_id})).await;
    let board = &workflows["workflows"][0];
    assert_eq!(board["name"], "Kanban", "first run seeds a Kanban board");
    let board_id = board["id"].as_str().unwrap();
    let review = board["steps"][2]["id"].as_str().unwrap();

    let id = stdout(&kandev(
        &server,
        &["task", "create", "--workflow", board_id, "--title", "Write docs"],
    ));
    let id = id.trim();
    assert!(!id.is_empty());
    stdout(&kandev(&server, &["task", "move", id, "--step", review]));
    let listed = stdout(&kandev(&server, &["task", "list", "--workflow", board_id]));
    assert!(listed.contains("Review (1)") && listed.contains("Write docs"), "{listed}");

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("board.yaml");
    stdout(&kandev(&server, &["workflow", "export", board_id, "-o", file.to_str().unwrap()]));
    let imported = stdout(&kandev(
        &server,
        &["workflow", "import", "--workspace", &workspace_id, file.to_str().unwrap()],
    ));
    assert!(imported.contains("Kanban"), "{imported}");

    std::fs::write(&file, "version: 2\nkind: other\nworkflows: []\n").unwrap();
    let bad = kandev(
        &server,
        &["workflow", "import", "--workspace", &workspace_id, file.to_str().unwrap()],
    );
    assert!(!bad.status.success());
    let stderr = String::from_utf8_lossy(&bad.stderr);
    assert!(
        stderr.contains("version") && stderr.contains("kind"),
        "every problem is printed: {stderr}"
    );
}

#[test]
fn commands_say_when_no_server_is_running() {
    let output = Command::new(KANDEV)
        .args([
            "task",
            "list",
            "--workflow",
            "x",
            "--server",
            &format!("http://127.0.0.1:{}", free_port()),
        ])
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("is `kandev serve` running?"));
}

/// Runs `kandev user …` on the database in `home`, with `stdin` as standard input.
fn user_command(home: &std::path::Path, args: &[&str], stdin: &str) -> Output {
    use std::io::Write;
    let mut child = Command::new(KANDEV)
        .arg("user")
        .args(args)
        .env("KANDEV_HOME", home)
        .env_remove("KANDEV_DATABASE_URL")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
    child.wait_with_output().unwrap()
}

/// Defect 2 of the issue 21 review: `kandev user remove` keeps the last user unless --force
/// (removing it opens a loopback server and shuts a public one).
#[test]
fn i21_d2_user_remove_refuses_the_last_user_without_force() {
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    for name in ["alice", "bob"] {
        stdout(&user_command(home, &["add", name], "correct horse battery\n"));
    }
    stdout(&user_command(home, &["remove", "bob"], ""));
    let refused = user_command(home, &["remove", "alice"], "");
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("last user") && stderr.contains("--force"), "{stderr}");
    assert!(stdout(&user_command(home, &["list"], "")).contains("alice"), "alice is kept");
    let forced = stdout(&user_command(home, &["remove", "alice", "--force"], ""));
    assert!(forced.contains("no user is left"), "{forced}");
    assert!(!stdout(&user_command(home, &["list"], "")).contains("alice"));
}

/// Issue 49: the first user added owns the server; `kandev user owner` hands it on, and
/// `kandev user list` marks the owner.
#[test]
fn i49_the_first_user_owns_the_server_and_user_owner_hands_it_on() {
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    let first = stdout(&user_command(home, &["add", "alice"], "correct horse battery\n"));
    assert!(first.contains("owner"), "{first}");
    let second = stdout(&user_command(home, &["add", "bob"], "correct horse battery\n"));
    assert!(!second.contains("owner") && second.contains("Members"), "{second}");
    let owners = |listed: String| -> Vec<String> {
        listed
            .lines()
            .filter(|l| l.ends_with("\towner"))
            .map(|l| l.split('\t').next().unwrap().to_owned())
            .collect()
    };
    assert_eq!(owners(stdout(&user_command(home, &["list"], ""))), ["alice"]);
    stdout(&user_command(home, &["owner", "bob"], ""));
    assert_eq!(owners(stdout(&user_command(home, &["list"], ""))), ["bob"]);
    let unknown = user_command(home, &["owner", "carol"], "");
    assert!(!unknown.status.success(), "an unknown user cannot own the server");
    let refused = user_command(home, &["remove", "bob"], "");
    assert!(!refused.status.success(), "the owner is not removed while others remain");
    assert!(String::from_utf8_lossy(&refused.stderr).contains("user owner"));
    // A user who signs in only through the proxy has no password.
    let added = stdout(&user_command(home, &["add", "pat@example.com", "--no-password"], ""));
    assert!(added.contains("pat@example.com"), "{added}");
}

/// Defect 7 of the issue 21 review: `kandev user token create|list|revoke` on the database;
/// the secret is printed once and works as a bearer token until revoked.
#[tokio::test]
async fn i21_d7_user_token_commands_create_list_and_revoke_personal_tokens() {
    let home = tempfile::tempdir().unwrap();
    let path = home.path().to_path_buf();
    stdout(&user_command(&path, &["add", "alice"], "correct horse battery\n"));
    let secret = stdout(&user_command(&path, &["token", "create", "alice", "ci"], ""));
    let secret = secret.trim().to_owned();
    assert!(secret.starts_with("kdv_") && secret.len() == 68, "{secret}");
    let listed = stdout(&user_command(&path, &["token", "list", "alice"], ""));
    let (id, rest) = listed.trim().split_once('\t').unwrap();
    assert!(rest.starts_with("ci\t") && !listed.contains(&secret), "{listed}");
    let unknown = user_command(&path, &["token", "list", "mallory"], "");
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("no user is named mallory"));

    let server = KANDEV.start(home.path());
    let me = |secret: String| {
        let url = format!("{}/api/v1/user.me", server.url);
        async move { reqwest::Client::new().post(url).bearer_auth(secret).json(&json!({})).send().await }
    };
    let answer = me(secret.clone()).await.unwrap();
    assert_eq!(answer.status().as_u16(), 200);
    let body: Value = answer.json().await.unwrap();
    assert_eq!(
        (body["user"]["name"].as_str(), body["via"].as_str()),
        (Some("alice"), Some("token"))
    );
    let revoked = stdout(&user_command(&path, &["token", "revoke", "alice", id], ""));
    assert!(revoked.contains("revoked"), "{revoked}");
    assert_eq!(me(secret).await.unwrap().status().as_u16(), 401, "refused once revoked");
    assert!(!user_command(&path, &["token", "revoke", "alice", id], "").status.success());
}

/// Issue 20 (review): `kandev remote-op` killed with its process group while a cleanup
/// script runs (what the runner does to an operation it stops) takes the script with it;
/// the script, in a process group of its own, used to run on with no owner and no timeout.
#[tokio::test]
async fn i20_d21_a_cleanup_script_dies_with_its_remote_op() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("script.pid");
    let script = format!("echo $$ > '{}'; sleep 60", pid_file.display());
    let request = json!({
        "op": "run_script",
        "args": {"path": dir.path(), "script": script, "timeout": {"secs": 300, "nanos": 0}},
    });
    let mut op = Command::new(KANDEV)
        .args(["remote-op", &request.to_string()])
        .process_group(0)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    // The script is the operation's child, which tells this test nothing: its pid file is
    // looked at until it is written, and its process until it is gone.
    let script_pid: u32 = kandev_testkit::wait::file_value(&pid_file).await;
    assert!(alive(script_pid));
    let group = nix::unistd::Pid::from_raw(i32::try_from(op.id()).unwrap());
    nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL).unwrap();
    op.wait().unwrap();
    let within = Duration::from_secs(10);
    eventually_within(within, "the script to end with its remote-op", async || !alive(script_pid))
        .await;
}

const PASSWORD: &str = "correct horse battery";

/// Logs `name` in through the form; returns the session cookie (`kandev_session=<secret>`).
async fn login(server: &Server, name: &str) -> String {
    let browser =
        reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let response = browser
        .post(format!("{}/login", server.url))
        .form(&[("name", name), ("password", PASSWORD)])
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 303, "login of {name}");
    let set = response.headers()["set-cookie"].to_str().unwrap();
    set.split(';').next().unwrap().to_owned()
}

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// A WebSocket on `/ws` opened with a `Cookie` or `Authorization` header.
async fn socket(server: &Server, auth: (&'static str, &str)) -> Socket {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let url = format!("{}/ws", server.url.replacen("http://", "ws://", 1));
    let mut request = url.into_client_request().unwrap();
    request.headers_mut().insert(auth.0, auth.1.parse().unwrap());
    tokio_tungstenite::connect_async(request).await.unwrap().0
}

/// Asks `user.me` on the socket; the user's name in the answer.
async fn socket_user(socket: &mut Socket) -> Value {
    use futures::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;
    let request = json!({"id": "me", "type": "request", "action": "user.me", "payload": {}});
    socket.send(Message::text(request.to_string())).await.unwrap();
    loop {
        let next = tokio::time::timeout(Duration::from_secs(10), socket.next()).await;
        let message = next.expect("an answer in time").expect("open").expect("a frame");
        if let Message::Text(text) = message {
            let frame: Value = serde_json::from_str(&text).unwrap();
            if frame["id"] == "me" {
                return frame["payload"]["user"]["name"].clone();
            }
        }
    }
}

/// Waits (bounded, generously) until the server closes `socket`.
async fn wait_closed(socket: &mut Socket, what: &str) {
    use futures::StreamExt;
    use tokio_tungstenite::tungstenite::Message;
    let closed = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match socket.next().await {
                Some(Ok(Message::Close(frame))) => {
                    return frame.map(|f| (u16::from(f.code), f.reason.to_string()));
                }
                None | Some(Err(_)) => return None,
                Some(Ok(_)) => {}
            }
        }
    })
    .await;
    let Ok(close) = closed else { panic!("{what}: still open after 10 s") };
    let expected = Some((4401, "access ended; log in again".to_owned()));
    assert_eq!(close, expected, "{what}: closed saying access ended");
}

/// A server on a home with alice and bob, bob's login cookie and a personal token of bob's.
async fn server_with_bob() -> (Server, tempfile::TempDir, String, String) {
    let home = tempfile::tempdir().unwrap();
    for name in ["alice", "bob"] {
        stdout(&user_command(home.path(), &["add", name], &format!("{PASSWORD}\n")));
    }
    let secret = stdout(&user_command(home.path(), &["token", "create", "bob", "ci"], ""));
    let server = KANDEV.start(home.path());
    let cookie = login(&server, "bob").await;
    (server, home, cookie, format!("Bearer {}", secret.trim()))
}

/// Issue 38, item 6: `kandev user remove` (another process, on the database) closes every
/// WebSocket of that user, opened with a login session or a personal token; others' stay.
#[tokio::test]
async fn i38_6_user_remove_closes_every_websocket_of_that_user() {
    let (server, home, cookie, bearer) = server_with_bob().await;
    let mut by_cookie = socket(&server, ("cookie", &cookie)).await;
    let mut by_token = socket(&server, ("authorization", &bearer)).await;
    let alice_cookie = login(&server, "alice").await;
    let mut alice = socket(&server, ("cookie", &alice_cookie)).await;
    assert_eq!(socket_user(&mut by_cookie).await, "bob");
    assert_eq!(socket_user(&mut by_token).await, "bob");

    stdout(&user_command(home.path(), &["remove", "bob"], ""));
    wait_closed(&mut by_cookie, "bob's socket opened with his login").await;
    wait_closed(&mut by_token, "bob's socket opened with his token").await;
    assert_eq!(socket_user(&mut alice).await, "alice", "alice's socket works");
}

/// Issue 38, item 6: `kandev user passwd` closes every WebSocket of that user, those opened
/// with a personal token too (the token itself stays valid, so the client may reconnect);
/// others' stay.
#[tokio::test]
async fn i38_6_a_password_change_closes_every_websocket_of_that_user() {
    let (server, home, cookie, bearer) = server_with_bob().await;
    let mut by_cookie = socket(&server, ("cookie", &cookie)).await;
    let mut by_token = socket(&server, ("authorization", &bearer)).await;
    let alice_cookie = login(&server, "alice").await;
    let mut alice = socket(&server, ("cookie", &alice_cookie)).await;
    assert_eq!(socket_user(&mut by_token).await, "bob");

    stdout(&user_command(home.path(), &["passwd", "bob"], "another horse battery\n"));
    wait_closed(&mut by_cookie, "bob's socket opened with his login").await;
    wait_closed(&mut by_token, "bob's socket opened with his token").await;
    assert_eq!(socket_user(&mut alice).await, "alice", "alice's socket works");
    let mut again = socket(&server, ("authorization", &bearer)).await;
    assert_eq!(socket_user(&mut again).await, "bob", "the token itself still works");
}

/// Issue 38, item 6: a WebSocket opened on an open server (no users, no token) closes once the
/// first user is added (`kandev user add`, another process): from then on every request
/// needs a login, and a socket opened before must not keep working without one.
#[tokio::test]
async fn i38_6_adding_the_first_user_closes_the_websockets_of_an_open_server() {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let home = tempfile::tempdir().unwrap();
    let path = home.path().to_path_buf();
    let server = KANDEV.start(home.path());
    let url = format!("{}/ws", server.url.replacen("http://", "ws://", 1));
    let request = url.into_client_request().unwrap();
    let mut open = tokio_tungstenite::connect_async(request).await.unwrap().0;
    assert_eq!(socket_user(&mut open).await, Value::Null, "an open server has no user");

    stdout(&user_command(&path, &["add", "carol"], &format!("{PASSWORD}\n")));
    wait_closed(&mut open, "the socket opened before the first user").await;
}
