//! Issue 2 acceptance 6: the security points of api.md.

use crate::common;

use common::TestServer;
use kandev_server::ServerConfig;
use serde_json::json;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;

fn with_token(token: &str) -> ServerConfig {
    ServerConfig { token: Some(token.into()), ..ServerConfig::default() }
}

#[tokio::test]
async fn a_non_loopback_bind_without_token_is_refused() {
    let public = "0.0.0.0:38429".parse().unwrap();
    let err = kandev_server::check_bind(&public, false).unwrap_err();
    assert!(err.contains("--token"), "{err}");
    assert!(kandev_server::check_bind(&public, true).is_ok());
    assert!(kandev_server::check_bind(&"127.0.0.1:1".parse().unwrap(), false).is_ok());
}

#[tokio::test]
async fn the_token_is_required_on_every_request_when_set() {
    let server =
        TestServer::start_with(with_token("s3cret-token"), tempfile::tempdir().unwrap()).await;
    let http = reqwest::Client::new();
    for (path, post) in [("/api/v1/workspace.list", true), ("/api/v1/health", false)] {
        let request = if post { http.post(server.url(path)) } else { http.get(server.url(path)) };
        let response = request.send().await.unwrap();
        assert_eq!(response.status().as_u16(), 401, "{path} without token");
        let body: serde_json::Value = response.json().await.unwrap();
        assert_eq!(body["code"], "UNAUTHORIZED");
    }
    let wrong =
        http.post(server.url("/api/v1/workspace.list")).bearer_auth("nope").send().await.unwrap();
    assert_eq!(wrong.status().as_u16(), 401);
    let cookie = http
        .post(server.url("/api/v1/workspace.list"))
        .header("Cookie", "theme=dark; kandev_token=s3cret-token")
        .send()
        .await
        .unwrap();
    assert_eq!(cookie.status().as_u16(), 200, "the token cookie works");
    assert_eq!(server.post("workspace.list", json!({})).await.0, 200, "bearer token works");

    let err =
        tokio_tungstenite::connect_async(format!("ws://{}/ws", server.addr)).await.unwrap_err();
    assert!(err.to_string().contains("401"), "ws without token: {err}");
    let mut request = format!("ws://{}/ws", server.addr).into_client_request().unwrap();
    request.headers_mut().insert("Authorization", HeaderValue::from_static("Bearer s3cret-token"));
    assert!(tokio_tungstenite::connect_async(request).await.is_ok(), "ws with token");
}

async fn ws_with_origin(server: &TestServer, origin: &str) -> Result<(), String> {
    let mut request = format!("ws://{}/ws", server.addr).into_client_request().unwrap();
    request.headers_mut().insert("Origin", HeaderValue::from_str(origin).unwrap());
    tokio_tungstenite::connect_async(request).await.map(|_| ()).map_err(|e| e.to_string())
}

#[tokio::test]
async fn websocket_upgrades_from_a_foreign_origin_are_refused() {
    let server = TestServer::start().await;
    let err = ws_with_origin(&server, "http://evil.example").await.unwrap_err();
    assert!(err.contains("403"), "{err}");
    let err = ws_with_origin(&server, "http://localhost:1").await.unwrap_err();
    assert!(err.contains("403"), "another port is another origin: {err}");
    ws_with_origin(&server, &format!("http://{}", server.addr))
        .await
        .expect("own origin is allowed");
}

#[tokio::test]
async fn cross_site_posts_and_rebound_host_names_are_refused() {
    let server = TestServer::start().await;
    let http = reqwest::Client::new();
    let cross_site = http
        .post(server.url("/api/v1/workspace.create"))
        .header("Origin", "http://evil.example")
        .body(r#"{"name":"pwned"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(cross_site.status().as_u16(), 403);
    // DNS rebinding: the browser sends the attacker's host name for our address.
    let rebound = http
        .post(server.url("/api/v1/workspace.create"))
        .header("Host", format!("evil.example:{}", server.addr.port()))
        .header("Origin", format!("http://evil.example:{}", server.addr.port()))
        .body(r#"{"name":"pwned"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(rebound.status().as_u16(), 403);
    let list = server.call("workspace.list", json!({})).await;
    assert!(list["workspaces"].as_array().unwrap().iter().all(|w| w["name"] != "pwned"));
}

#[tokio::test]
async fn i12_f9_api_posts_must_say_they_are_json() {
    let server = TestServer::start().await;
    let http = reqwest::Client::new();
    let url = server.url("/api/v1/workspace.create");
    let body = r#"{"name":"simple request"}"#;
    // What a web page may send anywhere without asking first: refused, nothing created.
    for content_type in [
        Some("text/plain"),
        Some("text/plain;charset=UTF-8"),
        Some("application/x-www-form-urlencoded"),
        Some("multipart/form-data; boundary=x"),
        None,
    ] {
        let mut request = http.post(&url).body(body);
        if let Some(value) = content_type {
            request = request.header("Content-Type", value);
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.status().as_u16(), 400, "{content_type:?}");
        let answer: serde_json::Value = response.json().await.unwrap();
        assert_eq!(answer["code"], "BAD_REQUEST");
        assert!(answer["message"].as_str().unwrap().contains("application/json"), "{answer}");
    }
    let list = server.call("workspace.list", json!({})).await;
    assert!(list["workspaces"].as_array().unwrap().iter().all(|w| w["name"] != "simple request"));

    // JSON (with a charset) works; so does an empty body without a content type (no payload).
    let json = http
        .post(&url)
        .header("Content-Type", "application/json; charset=utf-8")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(json.status().as_u16(), 200);
    let empty = http.post(server.url("/api/v1/workspace.list")).send().await.unwrap();
    assert_eq!(empty.status().as_u16(), 200, "no body, no content type: no payload");
    let empty_text = http
        .post(server.url("/api/v1/workspace.list"))
        .header("Content-Type", "text/plain")
        .send()
        .await
        .unwrap();
    assert_eq!(empty_text.status().as_u16(), 400, "another content type is refused even empty");
}

#[tokio::test]
async fn i12_f9_requests_a_browser_marks_cross_site_are_refused() {
    let server = TestServer::start().await;
    let http = reqwest::Client::new();
    // No Origin header at all (as in the probe), but the browser says cross-site.
    let post = http
        .post(server.url("/api/v1/workspace.create"))
        .header("Content-Type", "application/json")
        .header("Sec-Fetch-Site", "cross-site")
        .body(r#"{"name":"pwned"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(post.status().as_u16(), 403);
    let mut request = format!("ws://{}/ws", server.addr).into_client_request().unwrap();
    request.headers_mut().insert("Sec-Fetch-Site", HeaderValue::from_static("cross-site"));
    let err = tokio_tungstenite::connect_async(request).await.unwrap_err();
    assert!(err.to_string().contains("403"), "{err}");
    // A link from another site still opens the UI.
    let page = http
        .get(server.url("/"))
        .header("Sec-Fetch-Site", "cross-site")
        .header("Sec-Fetch-Mode", "navigate")
        .send()
        .await
        .unwrap();
    assert_ne!(page.status().as_u16(), 403);
    let same = http
        .post(server.url("/api/v1/workspace.list"))
        .header("Content-Type", "application/json")
        .header("Sec-Fetch-Site", "same-origin")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(same.status().as_u16(), 200);
    let list = server.call("workspace.list", json!({})).await;
    assert!(list["workspaces"].as_array().unwrap().iter().all(|w| w["name"] != "pwned"));
}

#[tokio::test]
async fn i12_f9_token_guesses_are_rate_limited() {
    let server = TestServer::start_with(with_token("s3cret"), tempfile::tempdir().unwrap()).await;
    let http = reqwest::Client::new();
    let login = |token: &'static str| {
        http.post(server.url("/login"))
            .header("Content-Type", "application/x-www-form-urlencoded")
            .body(format!("token={token}"))
            .send()
    };
    let (mut wrong, mut limited) = (0, 0);
    for _ in 0..300 {
        let response = login("guess").await.unwrap();
        match response.status().as_u16() {
            401 => wrong += 1,
            429 => {
                let retry: u64 =
                    response.headers()["retry-after"].to_str().unwrap().parse().unwrap();
                assert!((1..=60).contains(&retry), "retry-after {retry}");
                limited += 1;
            }
            other => panic!("unexpected status {other}"),
        }
    }
    assert!(wrong <= 12, "at most a short burst of guesses is checked: {wrong}");
    assert_eq!(wrong + limited, 300);
    // While limited, even the right token is not checked (a guesser learns nothing).
    assert_eq!(login("s3cret").await.unwrap().status().as_u16(), 429);
    // Wrong bearer tokens on the API are guesses too, answered in JSON.
    let api = http
        .post(server.url("/api/v1/workspace.list"))
        .bearer_auth("guess")
        .header("Content-Type", "application/json")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(api.status().as_u16(), 429);
    assert!(api.headers().contains_key("retry-after"));
    let body: serde_json::Value = api.json().await.unwrap();
    assert_eq!(body["code"], "RATE_LIMITED");
}

/// Issue 38, item 5: `attachment.upload` took a CORS-simple request (`text/plain`, no
/// `Origin`), which any web page may send to 127.0.0.1 without asking. It now needs the
/// `x-kandev-upload` header, which a page cannot send to another site without a preflight
/// (never granted); text files still upload with it, as curl and the UI send them.
#[tokio::test]
async fn i38_5_a_browser_cannot_upload_cross_site_without_a_preflight() {
    let server = TestServer::start().await;
    let http = reqwest::Client::new();
    let url = server.url("/api/v1/attachment.upload?name=notes.txt");
    for content_type in ["text/plain", "text/plain;charset=UTF-8", "application/octet-stream"] {
        let simple = http
            .post(&url)
            .header("Content-Type", content_type)
            .body("what a page posts")
            .send()
            .await
            .unwrap();
        assert_eq!(simple.status().as_u16(), 400, "{content_type}");
        let answer: serde_json::Value = simple.json().await.unwrap();
        assert_eq!(answer["code"], "BAD_REQUEST");
        let message = answer["message"].as_str().unwrap();
        assert!(message.contains("x-kandev-upload: 1"), "{message}");
    }
    let dir = server.dir.path().join("attachments");
    let stored = std::fs::read_dir(&dir).map(|d| d.count()).unwrap_or(0);
    assert_eq!(stored, 0, "nothing was stored");

    let text = http
        .post(&url)
        .header("Content-Type", "text/plain")
        .header("X-Kandev-Upload", "1")
        .body("a text file")
        .send()
        .await
        .unwrap();
    assert_eq!(text.status().as_u16(), 200);
    let answer: serde_json::Value = text.json().await.unwrap();
    assert_eq!(answer["attachment"]["mime"], "text/plain");
}
