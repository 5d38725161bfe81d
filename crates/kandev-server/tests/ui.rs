//! Issue 7: the web UI is served at `/` (client routes fall back to the app, the API keeps its
//! JSON 404), and with a token a browser signs in through `/login`, which sets the cookie.

use crate::common;

use common::TestServer;
use kandev_server::ServerConfig;

fn client() -> reqwest::Client {
    reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap()
}

fn header<'a>(response: &'a reqwest::Response, name: &str) -> &'a str {
    response.headers().get(name).and_then(|v| v.to_str().ok()).unwrap_or("")
}

#[tokio::test]
async fn the_ui_is_served_at_the_root_and_for_client_routes() {
    let server = TestServer::start().await;
    let http = client();
    for path in ["/", "/tasks/some-id", "/settings/profiles"] {
        let response = http.get(server.url(path)).send().await.unwrap();
        assert_eq!(response.status().as_u16(), 200, "{path}");
        assert!(header(&response, "content-type").starts_with("text/html"), "{path}");
        let body = response.text().await.unwrap();
        assert!(body.contains("Kandev"), "{path}: {body}");
    }
    let missing = http.get(server.url("/assets/missing-0123.js")).send().await.unwrap();
    assert_eq!(missing.status().as_u16(), 404, "a missing asset is not answered with the app");
}

#[tokio::test]
async fn api_paths_and_other_methods_keep_the_json_404() {
    let server = TestServer::start().await;
    let http = client();
    for request in [
        http.get(server.url("/api/v2/anything")),
        http.get(server.url("/api")),
        http.post(server.url("/tasks/x")),
        http.delete(server.url("/")),
    ] {
        let response = request.send().await.unwrap();
        assert!(matches!(response.status().as_u16(), 400 | 404), "{response:?}");
        let body: serde_json::Value = response.json().await.unwrap();
        assert!(body["code"].is_string(), "{body}");
    }
}

#[tokio::test]
async fn without_a_token_the_login_page_sends_you_to_the_board() {
    let server = TestServer::start().await;
    let response = client().get(server.url("/login")).send().await.unwrap();
    assert_eq!(response.status().as_u16(), 303);
    assert_eq!(header(&response, "location"), "/");
}

#[tokio::test]
async fn with_a_token_the_browser_signs_in_through_the_login_form() {
    let config = ServerConfig { token: Some("s3cret".into()), ..ServerConfig::default() };
    let server = TestServer::start_with(config, tempfile::tempdir().unwrap()).await;
    let http = client();

    // A page load without the cookie goes to the form; API calls still get a JSON 401.
    let page = http.get(server.url("/")).header("Accept", "text/html").send().await.unwrap();
    assert_eq!(page.status().as_u16(), 303);
    assert_eq!(header(&page, "location"), "/login");
    let api = http.post(server.url("/api/v1/workspace.list")).send().await.unwrap();
    assert_eq!(api.status().as_u16(), 401);
    let api_html = http
        .post(server.url("/api/v1/workspace.list"))
        .header("Accept", "text/html")
        .send()
        .await
        .unwrap();
    assert_eq!(api_html.status().as_u16(), 401, "the API never redirects");

    let form = http.get(server.url("/login")).send().await.unwrap();
    assert_eq!(form.status().as_u16(), 200);
    assert!(form.text().await.unwrap().contains("name=\"token\""));

    let post = |token: &str| {
        http.post(server.url("/login"))
            .header("Content-Type", "application/x-www-form-urlencoded")
            .body(format!("token={token}"))
            .send()
    };
    let wrong = post("nope").await.unwrap();
    assert_eq!(wrong.status().as_u16(), 401);
    assert!(header(&wrong, "set-cookie").is_empty());

    let right = post("s3cret").await.unwrap();
    assert_eq!(right.status().as_u16(), 303);
    assert_eq!(header(&right, "location"), "/");
    let cookie = header(&right, "set-cookie").to_owned();
    assert!(cookie.starts_with("kandev_token=s3cret;"), "{cookie}");
    assert!(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"), "{cookie}");

    let with_cookie = http
        .get(server.url("/"))
        .header("Accept", "text/html")
        .header("Cookie", "kandev_token=s3cret")
        .send()
        .await
        .unwrap();
    assert_eq!(with_cookie.status().as_u16(), 200);

    // A cross-site form post to /login is refused like any other cross-site request.
    let cross = http
        .post(server.url("/login"))
        .header("Origin", "http://evil.example")
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body("token=s3cret")
        .send()
        .await
        .unwrap();
    assert_eq!(cross.status().as_u16(), 403);
}
