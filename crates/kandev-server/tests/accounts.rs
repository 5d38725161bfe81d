//! Issue 21, acceptance 5: accounts. Once a user exists every request and the WebSocket need
//! a login session, a personal token or the server's --token; a personal token works until
//! revoked; 20 wrong passwords in a row slow logins down; the permission answer in the
//! transcript names the user.

use crate::common;

use common::{TestServer, WAIT, Ws, of_kind, step_id};
use futures::StreamExt;
use kandev_server::ServerConfig;
use reqwest::header::{COOKIE, LOCATION, RETRY_AFTER, SET_COOKIE};
use reqwest::redirect::Policy;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;

const PASSWORD: &str = "correct horse battery";

/// Adds a user straight to the database, as `kandev user add` does.
async fn add_user(server: &TestServer, name: &str) {
    let hash = kandev_server::hash_password(PASSWORD).unwrap();
    let mut tx = server.store.begin_write().await.unwrap();
    tx.insert_user(name, &hash).await.unwrap();
    tx.commit().await.unwrap();
}

fn browser() -> reqwest::Client {
    reqwest::Client::builder().redirect(Policy::none()).build().unwrap()
}

async fn login_as(server: &TestServer, name: &str, password: &str) -> reqwest::Response {
    browser()
        .post(server.url("/login"))
        .form(&[("name", name), ("password", password)])
        .send()
        .await
        .unwrap()
}

/// Logs in and returns the session cookie (`kandev_session=<secret>`).
async fn login(server: &TestServer, name: &str) -> String {
    let response = login_as(server, name, PASSWORD).await;
    assert_eq!(response.status().as_u16(), 303, "login of {name}");
    let set = response.headers()[SET_COOKIE].to_str().unwrap().to_owned();
    assert!(set.contains("HttpOnly") && set.contains("SameSite=Strict"), "{set}");
    set.split(';').next().unwrap().to_owned()
}

/// Posts an action with a `Cookie` or `Authorization` header; returns status and body.
async fn act(
    server: &TestServer,
    auth: (&str, &str),
    action: &str,
    payload: Value,
) -> (u16, Value) {
    let response = browser()
        .post(server.url(&format!("/api/v1/{action}")))
        .header(auth.0, auth.1)
        .json(&payload)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

async fn ws_status(server: &TestServer, auth: Option<(&'static str, &str)>) -> Result<(), String> {
    let mut request = format!("ws://{}/ws", server.addr).into_client_request().unwrap();
    if let Some((name, value)) = auth {
        request.headers_mut().insert(name, HeaderValue::from_str(value).unwrap());
    }
    tokio_tungstenite::connect_async(request).await.map(|_| ()).map_err(|e| e.to_string())
}

#[tokio::test]
async fn i21_a5_once_a_user_exists_every_request_and_the_websocket_need_a_login() {
    let server = TestServer::start().await;
    assert_eq!(server.post("workspace.list", json!({})).await.0, 200, "no user: open as before");
    assert!(ws_status(&server, None).await.is_ok());
    let me = server.call("user.me", json!({})).await;
    assert_eq!((me["via"].as_str(), me["accounts"].as_bool()), (Some("open"), Some(false)));

    add_user(&server, "alice").await;
    let http = browser();
    for path in ["/api/v1/workspace.list", "/api/v1/user.me", "/api/v1/task.list"] {
        let response = http.post(server.url(path)).json(&json!({})).send().await.unwrap();
        assert_eq!(response.status().as_u16(), 401, "{path} without a login");
    }
    let health = http.get(server.url("/api/v1/health")).send().await.unwrap();
    assert_eq!(health.status().as_u16(), 401, "health without a login");
    let err = ws_status(&server, None).await.unwrap_err();
    assert!(err.contains("401"), "ws without a login: {err}");
    let page = http.get(server.url("/")).header("Accept", "text/html").send().await.unwrap();
    assert_eq!(page.status().as_u16(), 303);
    assert_eq!(page.headers()[LOCATION], "/login");
    let form = http.get(server.url("/login")).send().await.unwrap().text().await.unwrap();
    assert!(form.contains("name=\"password\""), "the login page asks for a password");

    // No user enumeration: an unknown name and a wrong password read the same.
    let wrong = login_as(&server, "alice", "not the password").await;
    let unknown = login_as(&server, "mallory", "not the password").await;
    assert_eq!((wrong.status().as_u16(), unknown.status().as_u16()), (401, 401));
    assert!(wrong.headers().get(SET_COOKIE).is_none());
    // The name typed is kept in the form (it is the user's own input, nothing found).
    let wrong = wrong.text().await.unwrap().replace("value=\"alice\"", "value=\"\"");
    let unknown = unknown.text().await.unwrap().replace("value=\"mallory\"", "value=\"\"");
    assert_eq!(wrong, unknown);

    let cookie = login(&server, "alice").await;
    let (status, me) = act(&server, ("Cookie", &cookie), "user.me", json!({})).await;
    assert_eq!(status, 200, "{me}");
    assert_eq!((me["user"]["name"].as_str(), me["via"].as_str()), (Some("alice"), Some("session")));
    assert_eq!(act(&server, ("Cookie", &cookie), "workspace.list", json!({})).await.0, 200);
    assert!(ws_status(&server, Some(("Cookie", &cookie))).await.is_ok(), "ws with the cookie");

    // Logout ends the session: the same cookie is refused afterwards.
    let out =
        http.post(server.url("/logout")).header(COOKIE, cookie.as_str()).send().await.unwrap();
    assert_eq!(out.status().as_u16(), 303);
    let cleared: Vec<&str> =
        out.headers().get_all(SET_COOKIE).iter().map(|v| v.to_str().unwrap()).collect();
    assert!(cleared.iter().any(|c| c.starts_with("kandev_session=;") && c.contains("Max-Age=0")));
    assert_eq!(act(&server, ("Cookie", &cookie), "workspace.list", json!({})).await.0, 401);
    assert!(ws_status(&server, Some(("Cookie", &cookie))).await.is_err());
}

#[tokio::test]
async fn i21_a5_a_personal_token_works_until_revoked_and_the_server_token_keeps_working() {
    let config = ServerConfig { token: Some("automation".into()), ..ServerConfig::default() };
    let server = TestServer::start_with(config, tempfile::tempdir().unwrap()).await;
    add_user(&server, "alice").await;
    add_user(&server, "bob").await;
    // The server's --token keeps working for automation (the helpers send it).
    let me = server.call("user.me", json!({})).await;
    assert_eq!((me["via"].as_str(), me["user"].clone()), (Some("server_token"), Value::Null));
    let (status, body) = server.post("user.token.create", json!({"name": "ci"})).await;
    assert_eq!(status, 400, "the server token has no personal tokens: {body}");

    let cookie = login(&server, "alice").await;
    let session = ("Cookie", cookie.as_str());
    let (status, created) = act(&server, session, "user.token.create", json!({"name": "ci"})).await;
    assert_eq!(status, 200, "{created}");
    let secret = created["secret"].as_str().unwrap().to_owned();
    assert!(secret.starts_with("kdv_"), "{secret}");
    let token_id = created["token"]["id"].as_str().unwrap().to_owned();
    let (_, listed) = act(&server, session, "user.token.list", json!({})).await;
    assert_eq!(listed["tokens"][0]["name"], "ci");
    assert!(!listed.to_string().contains(&secret), "the list never shows the secret");
    let stored = std::fs::read(common::db_path(&server.dir)).unwrap();
    assert!(
        !stored.windows(secret.len()).any(|w| w == secret.as_bytes()),
        "the database keeps only a hash of the token"
    );

    let bearer = format!("Bearer {secret}");
    let auth = ("Authorization", bearer.as_str());
    let (status, me) = act(&server, auth, "user.me", json!({})).await;
    assert_eq!(status, 200, "{me}");
    assert_eq!((me["user"]["name"].as_str(), me["via"].as_str()), (Some("alice"), Some("token")));
    assert!(ws_status(&server, Some(("Authorization", &bearer))).await.is_ok());

    // Another user cannot revoke it; its owner can, and then it is refused everywhere.
    let bob = login(&server, "bob").await;
    let (status, _) =
        act(&server, ("Cookie", &bob), "user.token.revoke", json!({"id": token_id})).await;
    assert_eq!(status, 404, "bob cannot revoke alice's token");
    assert_eq!(act(&server, auth, "workspace.list", json!({})).await.0, 200);
    let (status, body) = act(&server, auth, "user.token.revoke", json!({"id": token_id})).await;
    assert_eq!((status, body["deleted"].as_bool()), (200, Some(true)));
    assert_eq!(act(&server, auth, "workspace.list", json!({})).await.0, 401, "revoked");
    assert!(
        ws_status(&server, Some(("Authorization", &bearer))).await.unwrap_err().contains("401")
    );
    let (_, listed) = act(&server, session, "user.token.list", json!({})).await;
    assert_eq!(listed["tokens"], json!([]));
}

#[tokio::test]
async fn i21_a5_twenty_wrong_passwords_in_a_row_are_slowed_down() {
    let server = TestServer::start().await;
    add_user(&server, "alice").await;
    for _ in 0..19 {
        assert_eq!(login_as(&server, "alice", "guess").await.status().as_u16(), 401);
    }
    // A success starts the count again.
    login(&server, "alice").await;
    for i in 0..20 {
        let status = login_as(&server, "alice", "guess").await.status().as_u16();
        assert_eq!(status, 401, "wrong password {}", i + 1);
    }
    // Now even the right password waits (the guesser cannot tell when they hit it).
    let limited = login_as(&server, "alice", PASSWORD).await;
    assert_eq!(limited.status().as_u16(), 429);
    assert!(limited.headers().get(SET_COOKIE).is_none());
    let wait: u64 = limited.headers()[RETRY_AFTER].to_str().unwrap().parse().unwrap();
    assert!((1..=2).contains(&wait), "first wait is about a second: {wait}");
    // Another name from the same address is counted on its own.
    assert_eq!(login_as(&server, "bob", "guess").await.status().as_u16(), 401);
}

#[tokio::test]
async fn i21_a5_the_permission_answer_and_a_move_in_the_transcript_name_the_user() {
    let config = ServerConfig { token: Some("automation".into()), ..ServerConfig::default() };
    let server = TestServer::start_with(config, tempfile::tempdir().unwrap()).await;
    let (task, session) = server.session(None).await;
    add_user(&server, "alice").await;
    let cookie = login(&server, "alice").await;
    let alice = ("Cookie", cookie.as_str());

    let mut ws = server.ws().await;
    ws.call("subscribe", json!({"topics": [format!("session:{session}")]})).await;
    let content = "#!mock\nask_permission Delete the build folder\nsay after";
    server.call("message.add", json!({"session_id": session, "content": content})).await;
    let requested = ws.notification("session.permission.requested").await["payload"].clone();
    let request_id = requested["request_id"].as_str().unwrap().to_owned();
    let option = requested["message"]["metadata"]["options"][0]["option_id"].clone();
    let answer = json!({"session_id": session, "request_id": request_id, "option_id": option});
    let (status, answered) = act(&server, alice, "permission.respond", answer).await;
    assert_eq!(status, 200, "{answered}");
    assert_eq!(answered["message"]["metadata"]["answered_by"], "alice");
    tokio::time::timeout(WAIT, ws.notification("session.turn.completed")).await.unwrap();
    let messages = server.messages(&session).await;
    let request = of_kind(&messages, "permission_request")[0];
    assert_eq!(request["metadata"]["answered_by"], "alice", "the transcript names the user");

    // A move by alice is recorded in the task's transcript too.
    let workflow_id =
        server.call("task.get", json!({"id": task})).await["task"]["workflow_id"].clone();
    let workflow =
        server.call("workflow.get", json!({"id": workflow_id})).await["workflow"].clone();
    let to = step_id(&workflow, "In Progress");
    let (status, moved) =
        act(&server, alice, "task.move", json!({"id": task, "step_id": to})).await;
    assert_eq!(status, 200, "{moved}");
    let messages = server.messages(&session).await;
    let noted = of_kind(&messages, "status")
        .into_iter()
        .find(|m| m["metadata"]["reason"] == "task_moved")
        .unwrap_or_else(|| panic!("no move note: {messages:?}"));
    assert_eq!(noted["metadata"]["by"], "alice");
    assert!(noted["content"].as_str().unwrap().starts_with("alice moved the task"), "{noted}");
}

/// Defect 1 of the issue 21 review: wrong bearer tokens from the same address (a proxy, or
/// loopback) empty the guess limiter; the team's login sessions and personal tokens still get
/// in, while further wrong tokens get 429.
#[tokio::test]
async fn i21_d1_wrong_tokens_never_lock_out_sessions_or_personal_tokens() {
    let server = TestServer::start().await;
    add_user(&server, "alice").await;
    let cookie = login(&server, "alice").await;
    let session = ("Cookie", cookie.as_str());
    let (_, created) = act(&server, session, "user.token.create", json!({"name": "ci"})).await;
    let bearer = format!("Bearer {}", created["secret"].as_str().unwrap());
    let mut statuses = vec![];
    for _ in 0..12 {
        let guess = ("Authorization", "Bearer kdv_guess");
        statuses.push(act(&server, guess, "workspace.list", json!({})).await.0);
    }
    assert_eq!(statuses.last(), Some(&429), "the guesser is limited: {statuses:?}");
    assert_eq!(act(&server, session, "workspace.list", json!({})).await.0, 200, "session");
    let token = ("Authorization", bearer.as_str());
    assert_eq!(act(&server, token, "workspace.list", json!({})).await.0, 200, "personal token");
    assert!(ws_status(&server, Some(("Cookie", &cookie))).await.is_ok(), "ws with the cookie");
}

/// Defect 2 of the issue 21 review: a server listening beyond loopback without a token, whose
/// last user was removed while it ran, refuses every request with 503 saying to add a user
/// (it used to let everyone in as the local person).
#[tokio::test]
async fn i21_d2_a_public_server_without_users_or_token_refuses_requests() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start_at("0.0.0.0:0", ServerConfig::default(), dir, |_| {}).await;
    add_user(&server, "alice").await;
    let cookie = login(&server, "alice").await;
    assert_eq!(act(&server, ("Cookie", &cookie), "workspace.list", json!({})).await.0, 200);
    let mut tx = server.store.begin_write().await.unwrap();
    tx.delete_user("alice").await.unwrap();
    tx.commit().await.unwrap();
    let (status, body) = server.post("workspace.list", json!({})).await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["code"], "UNAVAILABLE");
    assert!(body["message"].as_str().unwrap().contains("kandev user add"), "{body}");
    let page = browser().get(server.url("/")).header("Accept", "text/html").send().await.unwrap();
    assert_eq!(page.status().as_u16(), 503, "pages too");
    assert!(ws_status(&server, None).await.unwrap_err().contains("503"));
}

/// Defect 5 of the issue 21 review: on loopback the `Host` check (DNS rebinding) stays on
/// once users exist (or with a token), so a rebound page cannot use a session it somehow holds;
/// the host of an `--allowed-origin` (a TLS proxy that keeps the name) is answered.
#[tokio::test]
async fn i21_d5_on_loopback_foreign_host_names_are_refused_with_users_too() {
    let config = ServerConfig {
        allowed_origins: vec!["https://kandev.example.com".into()],
        ..ServerConfig::default()
    };
    let server = TestServer::start_with(config, tempfile::tempdir().unwrap()).await;
    add_user(&server, "alice").await;
    let cookie = login(&server, "alice").await;
    let with_host = |host: String| {
        browser()
            .post(server.url("/api/v1/workspace.list"))
            .header(COOKIE, cookie.as_str())
            .header("Host", host)
            .json(&json!({}))
            .send()
    };
    let port = server.addr.port();
    let rebound = with_host(format!("evil.example:{port}")).await.unwrap();
    assert_eq!(rebound.status().as_u16(), 403, "a rebound host name");
    let proxied = with_host("kandev.example.com".into()).await.unwrap();
    assert_eq!(proxied.status().as_u16(), 200, "the allowed origin's host");
    assert_eq!(with_host(format!("localhost:{port}")).await.unwrap().status().as_u16(), 200);
}

/// Defect 4 of the issue 21 review: a name no user can have (here almost the 2 MB a form may
/// carry) gets the same 401 page as an unknown name, after the same password check.
#[tokio::test]
async fn i21_d4_an_invalid_name_reads_like_an_unknown_one() {
    let server = TestServer::start().await;
    add_user(&server, "alice").await;
    let huge = "a".repeat(1_900_000);
    let invalid = login_as(&server, &huge, "guess").await;
    let unknown = login_as(&server, "mallory", "guess").await;
    assert_eq!((invalid.status().as_u16(), unknown.status().as_u16()), (401, 401));
    let unknown = unknown.text().await.unwrap().replace("value=\"mallory\"", "value=\"\"");
    assert_eq!(invalid.text().await.unwrap(), unknown, "a name that long is not echoed");
    login(&server, "alice").await;
}

/// Defect 6 of the issue 21 review: with `--cookie-secure` (behind a TLS proxy) the session
/// cookie, the token cookie and the logout's clearing cookies carry `Secure`; without, none.
#[tokio::test]
async fn i21_d6_cookie_secure_marks_every_login_cookie_secure() {
    let config = ServerConfig {
        token: Some("automation".into()),
        cookie_secure: true,
        ..ServerConfig::default()
    };
    let server = TestServer::start_with(config, tempfile::tempdir().unwrap()).await;
    add_user(&server, "alice").await;
    let session = login_as(&server, "alice", PASSWORD).await;
    let set = session.headers()[SET_COOKIE].to_str().unwrap().to_owned();
    assert!(set.starts_with("kandev_session=") && set.contains("; Secure"), "{set}");
    let token =
        browser().post(server.url("/login")).form(&[("token", "automation")]).send().await.unwrap();
    let set = token.headers()[SET_COOKIE].to_str().unwrap().to_owned();
    assert!(set.starts_with("kandev_token=") && set.contains("; Secure"), "{set}");
    let out = browser().post(server.url("/logout")).send().await.unwrap();
    let cleared: Vec<&str> =
        out.headers().get_all(SET_COOKIE).iter().map(|v| v.to_str().unwrap()).collect();
    assert_eq!(cleared.len(), 2);
    assert!(cleared.iter().all(|c| c.contains("; Secure")), "{cleared:?}");

    let plain = TestServer::start().await;
    add_user(&plain, "alice").await;
    let set = login_as(&plain, "alice", PASSWORD).await.headers()[SET_COOKIE]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(!set.contains("Secure"), "plain HTTP by default: {set}");
}

/// A WebSocket opened with a `Cookie` or `Authorization` header.
async fn ws_with(server: &TestServer, auth: (&'static str, &str)) -> Ws {
    let mut request = format!("ws://{}/ws", server.addr).into_client_request().unwrap();
    request.headers_mut().insert(auth.0, HeaderValue::from_str(auth.1).unwrap());
    let (stream, _) = tokio_tungstenite::connect_async(request).await.unwrap();
    Ws::new(stream)
}

/// Waits (bounded, generously) until the server closes `ws`: a close frame, the end of the
/// stream or an error.
async fn wait_closed(ws: &mut Ws, what: &str) {
    let closed = tokio::time::timeout(WAIT, async {
        loop {
            match ws.stream.next().await {
                Some(Ok(Message::Close(frame))) => {
                    return frame.map(|f| (u16::from(f.code), f.reason.to_string()));
                }
                None | Some(Err(_)) => return None,
                Some(Ok(_)) => {}
            }
        }
    })
    .await;
    let Ok(close) = closed else { panic!("{what}: still open after {WAIT:?}") };
    let expected = Some((4401, "access ended; log in again".to_owned()));
    assert_eq!(close, expected, "{what}: closed saying access ended");
}

/// The name `user.me` answers on a WebSocket (the socket still works).
async fn ws_user(ws: &mut Ws) -> Value {
    ws.call("user.me", json!({})).await["payload"]["user"]["name"].clone()
}

/// Issue 38, item 6: a logout closes the WebSockets opened with that login session (and the
/// terminal streams on them); another login session of the same user keeps its own.
#[tokio::test]
async fn i38_6_logout_closes_the_websockets_of_that_login_session() {
    let server = TestServer::start().await;
    add_user(&server, "alice").await;
    let (ended, kept) = (login(&server, "alice").await, login(&server, "alice").await);
    let mut ws = ws_with(&server, ("Cookie", &ended)).await;
    let mut other = ws_with(&server, ("Cookie", &kept)).await;
    assert_eq!(ws_user(&mut ws).await, "alice");
    let out =
        browser().post(server.url("/logout")).header(COOKIE, ended.as_str()).send().await.unwrap();
    assert_eq!(out.status().as_u16(), 303);
    wait_closed(&mut ws, "the socket of the login session that logged out").await;
    assert_eq!(ws_user(&mut other).await, "alice", "the other login session's socket works");
}

/// Issue 38, item 6: `user.token.revoke` closes the WebSockets opened with that token; the
/// user's other token and login session keep theirs. A keep-alive HTTP connection cannot go
/// on with the revoked token either: every request is checked.
#[tokio::test]
async fn i38_6_a_revoked_token_closes_the_websockets_opened_with_it() {
    let server = TestServer::start().await;
    add_user(&server, "alice").await;
    let cookie = login(&server, "alice").await;
    let session = ("Cookie", cookie.as_str());
    let mut bearers = vec![];
    let mut ids = vec![];
    for name in ["ci", "laptop"] {
        let (status, created) =
            act(&server, session, "user.token.create", json!({"name": name})).await;
        assert_eq!(status, 200, "{created}");
        bearers.push(format!("Bearer {}", created["secret"].as_str().unwrap()));
        ids.push(created["token"]["id"].as_str().unwrap().to_owned());
    }
    let mut ws = ws_with(&server, ("Authorization", &bearers[0])).await;
    let mut other = ws_with(&server, ("Authorization", &bearers[1])).await;
    let mut by_cookie = ws_with(&server, session).await;
    assert_eq!(ws_user(&mut ws).await, "alice");
    let keep_alive = browser();
    let list = |client: &reqwest::Client| {
        client
            .post(server.url("/api/v1/workspace.list"))
            .header("Authorization", bearers[0].as_str())
            .json(&json!({}))
            .send()
    };
    assert_eq!(list(&keep_alive).await.unwrap().status().as_u16(), 200);

    let (status, body) = act(&server, session, "user.token.revoke", json!({"id": ids[0]})).await;
    assert_eq!(status, 200, "{body}");
    wait_closed(&mut ws, "the socket opened with the revoked token").await;
    assert_eq!(ws_user(&mut other).await, "alice", "the other token's socket works");
    assert_eq!(ws_user(&mut by_cookie).await, "alice", "the login session's socket works");
    let again = list(&keep_alive).await.unwrap();
    assert_eq!(again.status().as_u16(), 401, "the same keep-alive client, revoked token");
}

/// Issue 45, item 5: `user.password.set` changes the caller's own password. A wrong current
/// password is refused (nothing changes, and not as `401`, which would send the page to the
/// login form); a new one too short is refused; then the new password logs in and the old one
/// does not. The login session that changed it goes on (its WebSocket stays open), while the
/// user's other login session ends and the socket opened with their token closes (the token
/// itself keeps working). The server token has no password to change.
#[tokio::test]
async fn i45_5_a_user_changes_their_own_password() {
    let server = TestServer::start().await;
    add_user(&server, "alice").await;
    let (mine, other) = (login(&server, "alice").await, login(&server, "alice").await);
    let session = ("Cookie", mine.as_str());
    let (_, created) = act(&server, session, "user.token.create", json!({"name": "ci"})).await;
    let bearer = format!("Bearer {}", created["secret"].as_str().unwrap());
    let mut my_ws = ws_with(&server, session).await;
    let mut token_ws = ws_with(&server, ("Authorization", &bearer)).await;
    let mut other_ws = ws_with(&server, ("Cookie", &other)).await;
    assert_eq!(ws_user(&mut token_ws).await, "alice");

    let new = "a new horse battery";
    let (status, body) = act(
        &server,
        session,
        "user.password.set",
        json!({"current_password": "not the password", "new_password": new}),
    )
    .await;
    assert_eq!((status, body["code"].as_str()), (422, Some("VALIDATION_ERROR")), "{body}");
    assert_eq!(body["message"], "the current password is wrong; nothing was changed");
    let (status, body) = act(
        &server,
        session,
        "user.password.set",
        json!({"current_password": PASSWORD, "new_password": "short"}),
    )
    .await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["message"], "the new password must be at least 8 characters long");
    assert_eq!(login_as(&server, "alice", new).await.status().as_u16(), 401, "not changed");

    let (status, body) = act(
        &server,
        session,
        "user.password.set",
        json!({"current_password": PASSWORD, "new_password": new}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        (body["user"]["name"].as_str(), body["session_kept"].as_bool()),
        (Some("alice"), Some(true))
    );

    assert_eq!(login_as(&server, "alice", new).await.status().as_u16(), 303, "the new one works");
    assert_eq!(
        login_as(&server, "alice", PASSWORD).await.status().as_u16(),
        401,
        "the old one not"
    );
    wait_closed(&mut other_ws, "the other login session's socket").await;
    wait_closed(&mut token_ws, "the token's socket").await;
    let (status, _) = act(&server, ("Cookie", &other), "user.me", json!({})).await;
    assert_eq!(status, 401, "the other login session ended");
    let (status, me) = act(&server, session, "user.me", json!({})).await;
    assert_eq!((status, me["user"]["name"].as_str()), (200, Some("alice")), "still signed in");
    assert_eq!(ws_user(&mut my_ws).await, "alice", "the changing page's socket stays open");
    let (status, _) = act(&server, ("Authorization", &bearer), "user.me", json!({})).await;
    assert_eq!(status, 200, "the token stays valid");
}
