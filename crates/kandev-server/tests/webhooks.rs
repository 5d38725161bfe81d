//! Issue 18 acceptance 4: durable notification records for permission requests and finished
//! turns, delivered to webhooks with an HMAC signature, retried with back-off (shrunk to
//! milliseconds here), every attempt in the delivery log, and the URL never in a log.

use crate::common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use common::logs::captured_logs;
use common::{TestServer, WAIT};
use serde_json::{Value, json};
use tokio::sync::mpsc;

/// What a receiver got: its headers (lowercase names) and body.
#[derive(Debug, Clone)]
struct Received {
    headers: Vec<(String, String)>,
    body: String,
}

impl Received {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap()
    }
}

#[derive(Clone)]
struct Receiver {
    /// How many requests still get a 500.
    failures_left: Arc<Mutex<u32>>,
    got: mpsc::UnboundedSender<Received>,
}

async fn receive(State(r): State<Receiver>, headers: HeaderMap, body: String) -> StatusCode {
    let headers = headers
        .iter()
        .map(|(n, v)| (n.as_str().to_owned(), v.to_str().unwrap_or("").to_owned()))
        .collect();
    let _ = r.got.send(Received { headers, body });
    let mut left = r.failures_left.lock().unwrap();
    if *left > 0 {
        *left -= 1;
        StatusCode::INTERNAL_SERVER_ERROR
    } else {
        StatusCode::NO_CONTENT
    }
}

/// A local webhook receiver that fails its first `failures` requests; returns its URL (with
/// a secret-looking path) and what it receives.
async fn receiver(failures: u32) -> (String, mpsc::UnboundedReceiver<Received>) {
    let (got, rx) = mpsc::unbounded_channel();
    let state = Receiver { failures_left: Arc::new(Mutex::new(failures)), got };
    let app =
        axum::Router::new().route("/hook/{token}", axum::routing::post(receive)).with_state(state);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}/hook/tok-{}", uuid_like()), rx)
}

fn uuid_like() -> String {
    format!(
        "{:x}",
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos()
    )
}

async fn next(rx: &mut mpsc::UnboundedReceiver<Received>) -> Received {
    tokio::time::timeout(WAIT, rx.recv()).await.expect("a delivery arrives").unwrap()
}

/// A server with a short back-off that may notify its receivers on 127.0.0.1
/// (`--allow-private-notification-targets`).
async fn fast_server() -> TestServer {
    let dir = tempfile::tempdir().unwrap();
    TestServer::start_tuned(Default::default(), dir, |c| {
        c.notification_backoff = Duration::from_millis(10);
        c.allow_private_notification_targets = true;
    })
    .await
}

#[tokio::test]
async fn i18_a4_signed_deliveries_for_permission_requested_and_turn_completed() {
    let server = fast_server().await;
    let (url, mut rx) = receiver(0).await;
    let created = server
        .call(
            "notification.channel.create",
            json!({"kind": "webhook", "url": url, "events": ["permission_requested", "turn_completed"], "secret": "s3cret"}),
        )
        .await;
    let channel = &created["channel"];
    assert_eq!(channel["has_secret"], true);
    assert!(!created.to_string().contains("/hook/"), "the URL is never answered: {created}");
    assert!(!created.to_string().contains("s3cret"), "nor the secret");

    let profile =
        server.profile(json!({"name": "Mock auto", "kind": "mock", "auto_approve": true})).await;
    let (task_id, session) = server.session(Some(&profile)).await;
    server.turn(&session, "#!mock\nask_permission Edit main.rs\nsay done").await;

    let mut kinds = vec![];
    for _ in 0..2 {
        let got = next(&mut rx).await;
        let expected = kandev_engine::signature("s3cret", got.body.as_bytes());
        assert_eq!(got.header(kandev_engine::SIGNATURE_HEADER), Some(expected.as_str()));
        assert_eq!(got.header("content-type"), Some("application/json"));
        let body = got.json();
        let notification = &body["notification"];
        assert_eq!(notification["task_id"], task_id.as_str());
        assert_eq!(notification["session_id"], session.as_str());
        assert_eq!(got.header("x-kandev-event"), notification["kind"].as_str());
        assert_eq!(body["attempt"], 1);
        kinds.push(notification["kind"].as_str().unwrap().to_owned());
    }
    assert_eq!(kinds, ["permission_requested", "turn_completed"]);

    // The records are durable and carry the seq of the event that announced them.
    let dir = server.stop().await;
    let server = TestServer::start_with(Default::default(), dir).await;
    let list = server.call("notification.list", json!({})).await;
    let records = list["notifications"].as_array().unwrap();
    assert_eq!(records.len(), 2, "{list}");
    assert!(records[0]["title"].as_str().unwrap().contains("permission requested: Edit main.rs"));
    assert_eq!(records[1]["data"]["stop_reason"], "end_turn");
    let messages = server.messages(&session).await;
    let request = messages.iter().find(|m| m["kind"] == "permission_request").unwrap();
    assert_eq!(records[0]["seq"], request["seq"], "the seq of session.permission.requested");
    let after = records[0]["seq"].as_i64().unwrap();
    let later = server.call("notification.list", json!({"after_seq": after})).await;
    assert_eq!(later["notifications"].as_array().unwrap().len(), 1, "paged by seq");
}

/// Issue 18 scope 5: a session that fails is a notification record, delivered only to the
/// channels that take `session_failed`.
#[tokio::test]
async fn i18_a_failed_session_is_a_record_delivered_to_a_channel_that_takes_it() {
    let server = fast_server().await;
    let (url, mut rx) = receiver(0).await;
    server
        .call(
            "notification.channel.create",
            json!({"kind": "webhook", "url": url, "events": ["session_failed"]}),
        )
        .await;
    let profile = server
        .profile(json!({"name": "Broken", "kind": "mock", "args": ["--fail-new", "internal"]}))
        .await;
    let (_, workflow) = server.kanban().await;
    // In Backlog: nothing starts by itself (only the failing launch below runs).
    let backlog = common::step_id(&workflow, "Backlog");
    let task = server
        .call(
            "task.create",
            json!({"workflow_id": workflow["id"], "title": "Task", "step_id": backlog}),
        )
        .await;
    let task_id = task["task"]["id"].as_str().unwrap().to_owned();
    let launched = server
        .call("session.launch", json!({"task_id": task_id, "agent_profile_id": profile}))
        .await;
    let session = launched["session"]["id"].as_str().unwrap().to_owned();
    let failed = server.wait_state(&session, "FAILED").await;
    let got = next(&mut rx).await;
    assert_eq!(got.header("x-kandev-event"), Some("session_failed"));
    let record = &got.json()["notification"];
    assert_eq!(record["task_id"], task_id.as_str());
    let title = record["title"].as_str().unwrap();
    assert!(title.starts_with("Task: the session failed: "), "{title}");
    assert_eq!(record["data"]["code"], failed["last_error"]["code"], "{record}");
    let list = server.call("notification.list", json!({})).await;
    let kinds: Vec<&str> = list["notifications"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["session_failed"], "{list}");
}

/// Issue 18 scope 5: `notification.channel.test` sends one test notification now and says
/// what the receiver answered; it is not retried and not in the delivery log.
#[tokio::test]
async fn i18_a_channel_test_reaches_the_receiver_once_and_says_what_it_answered() {
    let server = fast_server().await;
    let (url, mut rx) = receiver(1).await;
    let created = server
        .call(
            "notification.channel.create",
            json!({"kind": "webhook", "url": url, "events": ["question_asked"], "secret": "k"}),
        )
        .await;
    let id = created["channel"]["id"].as_str().unwrap();
    let refused = server.call("notification.channel.test", json!({"id": id})).await;
    assert_eq!(refused["delivered"], false, "{refused}");
    assert_eq!(refused["http_status"], 500);
    assert!(!refused.to_string().contains("/hook/"), "the URL is never answered: {refused}");
    next(&mut rx).await;
    let taken = server.call("notification.channel.test", json!({"id": id})).await;
    assert_eq!(taken["delivered"], true, "{taken}");
    let got = next(&mut rx).await;
    let expected = kandev_engine::signature("k", got.body.as_bytes());
    assert_eq!(got.header(kandev_engine::SIGNATURE_HEADER), Some(expected.as_str()));
    assert_eq!(got.header("x-kandev-event"), Some("question_asked"));
    assert_eq!(got.json()["notification"]["title"], "Kandev: test notification");
    assert_eq!(got.json()["delivery_id"], 0);
    let log = server.call("notification.delivery.list", json!({})).await;
    assert_eq!(log["deliveries"], json!([]), "a test is not a delivery: {log}");
    assert!(rx.try_recv().is_err(), "not retried");
    let (status, body) =
        server.post("notification.channel.test", json!({"id": "no-such-channel"})).await;
    assert_eq!(status, 404, "{body}");
}

#[tokio::test]
async fn i18_a4_a_receiver_that_fails_three_times_gets_the_fourth_try_and_the_log_shows_each() {
    let logs = captured_logs();
    let server = fast_server().await;
    let (url, mut rx) = receiver(3).await;
    let token = url.rsplit('/').next().unwrap().to_owned();
    let channel = server
        .call(
            "notification.channel.create",
            json!({"kind": "webhook", "url": url, "events": ["turn_completed"]}),
        )
        .await["channel"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    // A second channel nobody listens on: its failures are logged too, without its URL.
    let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let dead = format!("http://{}/hook/tok-dead-{}", closed.local_addr().unwrap(), uuid_like());
    drop(closed);
    server
        .call(
            "notification.channel.create",
            json!({"kind": "webhook", "url": dead, "events": ["turn_completed"]}),
        )
        .await;

    let mut ws = server.ws().await;
    ws.call("subscribe", json!({"topics": ["notifications"]})).await;
    let (_, session) = server.session(None).await;
    server.turn(&session, "hello").await;
    for _ in 0..4 {
        let got = next(&mut rx).await;
        assert_eq!(got.header(kandev_engine::SIGNATURE_HEADER), None, "no secret, no signature");
    }
    // The fourth attempt is logged as delivered (announced on the notifications topic).
    let delivered = loop {
        let frame = ws.notification("notification.delivery.updated").await;
        let delivery = frame["payload"]["delivery"].clone();
        if delivery["channel_id"] == channel.as_str() && delivery["status"] == "delivered" {
            break delivery;
        }
    };
    let attempts = delivered["attempts"].as_array().unwrap();
    let statuses: Vec<&Value> = attempts.iter().map(|a| &a["http_status"]).collect();
    assert_eq!(statuses, [&json!(500), &json!(500), &json!(500), &json!(204)]);
    assert!(
        attempts[..3]
            .iter()
            .all(|a| a["error"] == "the receiver answered 500 Internal Server Error")
    );
    assert_eq!(attempts[3]["error"], Value::Null);
    let log = server.call("notification.delivery.list", json!({"channel_id": channel})).await;
    assert_eq!(log["deliveries"][0], delivered, "the delivery log shows each attempt");

    // The dead channel keeps failing (connection refused), with back-off.
    let failing = loop {
        let frame = ws.notification("notification.delivery.updated").await;
        let delivery = frame["payload"]["delivery"].clone();
        if delivery["channel_id"] != channel.as_str()
            && delivery["attempts"].as_array().unwrap().len() >= 2
        {
            break delivery;
        }
    };
    assert_eq!(failing["status"], "pending");
    assert_eq!(failing["attempts"][0]["error"], "could not connect to the receiver");
    assert!(!failing["next_at"].is_null());

    let all = server.call("notification.delivery.list", json!({})).await.to_string();
    assert!(!all.contains(&token) && !all.contains("tok-dead"), "no URL in the log: {all}");
    let logged = logs.lock().unwrap().clone();
    assert!(logged.contains("a notification delivery failed"), "failures are logged");
    assert!(!logged.contains(&token), "the URL is never logged");
    assert!(!logged.contains("tok-dead"), "not even in a connection error");
    assert!(!logged.contains("/hook/"), "nor its path");
}

#[tokio::test]
async fn i18_a4_channels_are_checked_listed_and_deleted() {
    let server = fast_server().await;
    for (body, says) in [
        (
            json!({"kind": "webhook", "url": "https://", "events": ["turn_completed"]}),
            "with a host",
        ),
        (
            json!({"kind": "webhook", "url": "ftp://x", "events": ["turn_completed"]}),
            "https:// URL",
        ),
        (json!({"kind": "webhook", "url": "http://127.0.0.1:1/x", "events": []}), "at least one"),
        (
            json!({"kind": "ntfy", "url": "http://127.0.0.1:1/x", "events": ["turn_completed"], "secret": "s"}),
            "webhooks only",
        ),
    ] {
        let (status, answer) = server.post("notification.channel.create", body).await;
        assert_eq!(status, 422, "{answer}");
        assert!(answer["message"].as_str().unwrap().contains(says), "{answer}");
    }
    let (status, answer) = server
        .post(
            "notification.channel.create",
            json!({"kind": "email", "url": "http://x/", "events": ["turn_completed"]}),
        )
        .await;
    assert_eq!((status, answer["code"].as_str()), (422, Some("VALIDATION_ERROR")));
    let created = server
        .call(
            "notification.channel.create",
            json!({"kind": "ntfy", "url": "http://127.0.0.1:1/kandev-topic", "events": ["permission_requested", "permission_requested"]}),
        )
        .await;
    assert_eq!(created["channel"]["url_origin"], "http://127.0.0.1:1");
    assert_eq!(created["channel"]["events"], json!(["permission_requested"]));
    let id = created["channel"]["id"].as_str().unwrap();
    let list = server.call("notification.channel.list", json!({})).await;
    assert_eq!(list["channels"].as_array().unwrap().len(), 1);
    server.call("notification.channel.delete", json!({"id": id})).await;
    let (status, _) = server.post("notification.channel.delete", json!({"id": id})).await;
    assert_eq!(status, 404);
}

/// Issue 38 item 7: without `--allow-private-notification-targets`, a channel whose URL names
/// a loopback, private, link-local (a cloud's metadata service), shared or unspecified address
/// is refused when it is created, however the address is written; the refusal says how to
/// allow it and never repeats the URL.
#[tokio::test]
async fn i38_7_channel_urls_to_private_addresses_are_refused() {
    let server = TestServer::start().await;
    let urls = [
        "http://169.254.169.254/latest/meta-data/hook",
        "http://127.0.0.1:9/hook",
        "http://127.8.9.10:9/hook",
        "http://10.1.2.3/hook",
        "http://172.16.0.1/hook",
        "http://192.168.0.1/hook",
        "http://100.100.100.200/hook",
        "http://0.0.0.0:9/hook",
        "http://[::1]:9/hook",
        "http://[::]:9/hook",
        "http://[::ffff:127.0.0.1]:9/hook",
        "http://[::ffff:169.254.169.254]/hook",
        "http://[fd00::1]/hook",
        "http://[fe80::1]/hook",
        "http://2130706433/hook",
        "http://0x7f.1/hook",
        "https://127.0.0.1/hook",
    ];
    for url in urls {
        for kind in ["webhook", "ntfy"] {
            let body = json!({"kind": kind, "url": url, "events": ["turn_completed"]});
            let (status, answer) = server.post("notification.channel.create", body).await;
            assert_eq!(status, 422, "{kind} {url}: {answer}");
            let message = answer["message"].as_str().unwrap();
            assert!(message.contains("--allow-private-notification-targets"), "{url}: {message}");
            assert!(!message.contains("/hook"), "the URL is never repeated: {message}");
        }
    }
    let list = server.call("notification.channel.list", json!({})).await;
    assert_eq!(list["channels"], json!([]), "nothing was stored: {list}");
}

/// Issue 38 item 7: a host *name* is checked on the addresses it resolves to when a
/// notification is sent (the connection goes to a checked address): `localhost` reaches
/// nothing, neither through `notification.channel.test` (a clear refusal instead of a status,
/// so no port can be probed) nor through a real delivery.
#[tokio::test]
async fn i38_7_a_name_resolving_to_loopback_is_refused_when_sent() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start_tuned(Default::default(), dir, |c| {
        c.notification_backoff = Duration::from_millis(10);
    })
    .await;
    let (url, mut rx) = receiver(0).await;
    let url = url.replacen("127.0.0.1", "localhost", 1);
    let created = server
        .call(
            "notification.channel.create",
            json!({"kind": "webhook", "url": url, "events": ["turn_completed"]}),
        )
        .await;
    let id = created["channel"]["id"].as_str().unwrap().to_owned();
    let (status, answer) = server.post("notification.channel.test", json!({"id": id})).await;
    assert_eq!((status, answer["code"].as_str()), (403, Some("FORBIDDEN")), "{answer}");
    let message = answer["message"].as_str().unwrap();
    assert!(message.contains("loopback"), "says why: {message}");
    assert!(message.contains("--allow-private-notification-targets"), "says how: {message}");
    assert!(!answer.to_string().contains("/hook/"), "the URL is never answered: {answer}");

    let mut ws = server.ws().await;
    ws.call("subscribe", json!({"topics": ["notifications"]})).await;
    let (_, session) = server.session(None).await;
    server.turn(&session, "hello").await;
    let frame = ws.notification("notification.delivery.updated").await;
    let attempt = &frame["payload"]["delivery"]["attempts"][0];
    assert_eq!(attempt["http_status"], Value::Null, "{frame}");
    let error = attempt["error"].as_str().unwrap();
    assert!(error.contains("--allow-private-notification-targets"), "{error}");
    assert!(rx.try_recv().is_err(), "nothing reached the receiver");
}

/// Issue 50 scope 3: a webhook channel signs with a server secret of the store, named; the
/// value is in no answer, and a channel whose secret is not set sends nothing unsigned.
#[tokio::test]
async fn i50_3_a_channel_signs_with_a_stored_secret_named() {
    let server = fast_server().await;
    let (url, mut rx) = receiver(0).await;
    let created = server
        .call(
            "notification.channel.create",
            json!({"kind": "webhook", "url": url, "events": ["turn_completed"],
                "secret_name": "I50_HOOK_KEY"}),
        )
        .await;
    assert_eq!(created["channel"]["secret_name"], "I50_HOOK_KEY", "{created}");
    assert_eq!(created["channel"]["has_secret"], true, "{created}");
    let channel = created["channel"]["id"].clone();

    // Not set yet: the test says so, and nothing reaches the receiver.
    let tested = server.call("notification.channel.test", json!({"id": channel})).await;
    assert_eq!(tested["delivered"], false, "{tested}");
    let error = tested["error"].as_str().unwrap();
    assert!(error.contains("I50_HOOK_KEY") && error.contains("Settings → Secrets"), "{tested}");

    let set = server.call("secret.set", json!({"name": "I50_HOOK_KEY", "value": "st0red"})).await;
    assert!(!set.to_string().contains("st0red"), "{set}");
    let tested = server.call("notification.channel.test", json!({"id": channel})).await;
    assert_eq!(tested["delivered"], true, "{tested}");
    let got = next(&mut rx).await;
    let expected = kandev_engine::signature("st0red", got.body.as_bytes());
    assert_eq!(got.header(kandev_engine::SIGNATURE_HEADER), Some(expected.as_str()));

    let (status, body) = server
        .post(
            "notification.channel.create",
            json!({"kind": "webhook", "url": url, "events": ["turn_completed"],
                "secret": "x", "secret_name": "I50_HOOK_KEY"}),
        )
        .await;
    assert_eq!(status, 422, "{body}");
}
