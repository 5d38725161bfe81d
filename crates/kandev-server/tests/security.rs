//! Issue 2 acceptance 6: the security points of api.md.

mod common;

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
    let err = kandev_server::check_bind(&public, None).unwrap_err();
    assert!(err.contains("--token"), "{err}");
    assert!(kandev_server::check_bind(&public, Some("s3cret")).is_ok());
    assert!(kandev_server::check_bind(&"127.0.0.1:1".parse().unwrap(), None).is_ok());
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
