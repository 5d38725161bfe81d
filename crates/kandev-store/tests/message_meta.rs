//! Issue 40: transcript metadata is typed per kind (`kandev_domain::message_meta`). Rows
//! written before that, in the shapes the engine wrote then, are read as typed values; the
//! store's SQL over metadata (pending permission requests) still finds them; and metadata of
//! another kind cannot be written over a message.

use kandev_domain::message_meta::{
    KnownToolContent, MessageMeta, StatusMeta, StatusNote, ToolContent, UsageMeta,
};
use kandev_store::{Location, NewMessage};
use sqlx::Connection;

mod common;
#[path = "common/streaming.rs"]
mod fixture;
use common::TestDb;
use fixture::fixture_on;

/// Metadata exactly as the engine wrote it before the types (built with `json!`): a tool call
/// with its terminal, a pending permission request (`selected_option_id` and `answered_by`
/// were written as `null` once answered), a pull-request note with no `reason`, a cancelled
/// turn's note, a failed start's error, usage, an attached image, streamed text.
const OLD_ROWS: [(&str, &str); 8] = [
    (
        "tool_call",
        r#"{"tool_call_id":"call_1","title":"Run tests","kind":"execute","status":"completed","content":[{"type":"terminal","terminal_id":"term_1"},{"type":"diff","path":"/w/a.rs","old_text":null,"new_text":"fn a() {}"},{"type":"audio","data":"…"}],"locations":[{"path":"/w/a.rs","line":null}],"raw_input":{"command":"cargo test"},"raw_output":{"ok":true},"terminals":{"term_1":{"output":"ok\n","truncated":false,"exit_code":0,"signal":null,"exited":true}}}"#,
    ),
    (
        "permission_request",
        r#"{"request_id":"req_1","options":[{"option_id":"allow","name":"Allow","kind":"allow_once"}],"status":"pending","tool_call":{"toolCallId":"call_2"}}"#,
    ),
    (
        "status",
        r#"{"repository_id":"repo_1","number":7,"url":"http://forge/pr/7","state":"merged","was":"open"}"#,
    ),
    ("status", r#"{"reason":"cancelled"}"#),
    ("error", r#"{"code":"agent_exited","stderr":"boom"}"#),
    ("usage", r#"{"used":1200,"size":200000,"cost":null}"#),
    ("user", r#"{"attachments":[{"id":"ab12","name":"shot.png","mime":"image/png","size":3}]}"#),
    ("agent", "{}"),
];

/// Inserts `rows` into the session's transcript with plain SQL, as an older Kandev did.
async fn insert_raw(db: &TestDb, session: &str, rows: &[(&str, &str)]) {
    let sql = "INSERT INTO messages (id, session_id, turn_id, seq, kind, content, metadata, \
               client_message_id, created_at, updated_at) VALUES ($1, $2, NULL, $3, $4, 'old', $5, NULL, 1, 1)";
    macro_rules! run {
        ($conn:expr) => {{
            let mut conn = $conn;
            for (i, (kind, metadata)) in rows.iter().enumerate() {
                let seq = 1000 + i as i64;
                sqlx::query(sql)
                    .bind(format!("old_{i}"))
                    .bind(session)
                    .bind(seq)
                    .bind(*kind)
                    .bind(*metadata)
                    .execute(&mut conn)
                    .await
                    .unwrap();
            }
            conn.close().await.unwrap();
        }};
    }
    match &db.location {
        Location::File(path) => {
            let url = format!("sqlite://{}", path.display());
            run!(sqlx::SqliteConnection::connect(&url).await.unwrap())
        }
        Location::Postgres(url) => run!(sqlx::PgConnection::connect(url).await.unwrap()),
        Location::Memory => unreachable!(),
    }
}

on_both_engines! {
    async fn i40_rows_written_before_the_metadata_was_typed_read_as_typed_values(db: TestDb) {
        let f = fixture_on(db, "old rows").await;
        insert_raw(&f.db, f.session.as_str(), &OLD_ROWS).await;
        let store = &f.store;
        let messages = store.list_messages(&f.session, None, None, 100).await.unwrap();
        assert_eq!(messages.len(), OLD_ROWS.len(), "every old row reads");
        let meta = |i: usize| &messages[i].meta;

        let MessageMeta::ToolCall(call) = meta(0) else { panic!("{:?}", meta(0)) };
        assert_eq!((call.tool_call_id.as_str(), call.status.as_str()), ("call_1", "completed"));
        assert_eq!(
            call.content[0],
            ToolContent::Known(KnownToolContent::Terminal { terminal_id: "term_1".into() })
        );
        assert!(matches!(&call.content[2], ToolContent::Other(raw) if raw["type"] == "audio"));
        assert_eq!(call.terminals["term_1"].output, "ok\n");
        assert_eq!(call.raw_output.as_ref().unwrap()["ok"], true);

        let MessageMeta::PermissionRequest(request) = meta(1) else { panic!("{:?}", meta(1)) };
        assert_eq!((request.request_id.as_str(), request.status.as_str()), ("req_1", "pending"));
        // The store's SQL over metadata finds the old row.
        let mut tx = store.begin_write().await.unwrap();
        let pending = tx.pending_permission_messages(&f.session).await.unwrap();
        tx.commit().await.unwrap();
        assert_eq!(pending.len(), 1);
        assert_eq!(pending[0].id, messages[1].id);

        let MessageMeta::Status(StatusMeta::Other(pr)) = meta(2) else { panic!("{:?}", meta(2)) };
        assert_eq!(pr["number"], 7, "a note of no known reason is kept as it was");
        assert_eq!(meta(3), &MessageMeta::from(StatusNote::Cancelled));
        let MessageMeta::Error(error) = meta(4) else { panic!("{:?}", meta(4)) };
        assert_eq!((error.code.as_deref(), error.stderr.as_deref()), (Some("agent_exited"), Some("boom")));
        let usage = UsageMeta { used: Some(1200), size: Some(200_000), cost: None };
        assert_eq!(meta(5), &MessageMeta::Usage(usage));
        assert_eq!(meta(6).attachments()[0].name, "shot.png");
        assert_eq!(meta(7), &MessageMeta::Agent);
    }

    /// A damaged row (a wrong-typed field) does not fail the transcript: it reads, kept as
    /// it was stored, beside the others.
    async fn i40_a_damaged_row_is_kept_as_stored_and_the_rest_reads(db: TestDb) {
        let f = fixture_on(db, "damaged").await;
        let damaged = r#"{"request_id":7,"options":"allow","status":"pending"}"#;
        insert_raw(&f.db, f.session.as_str(), &[("permission_request", damaged), ("agent", "{}")])
            .await;
        let messages = f.store.list_messages(&f.session, None, None, 100).await.unwrap();
        assert_eq!(messages.len(), 2);
        assert_eq!(messages[0].meta.to_json(), damaged);
        assert!(matches!(messages[0].meta, MessageMeta::Unreadable { .. }), "{:?}", messages[0]);
        assert_eq!(messages[1].meta, MessageMeta::Agent);
    }

    async fn i40_a_message_keeps_its_kind_when_its_metadata_changes(db: TestDb) {
        let f = fixture_on(db, "kinds").await;
        let mut tx = f.store.begin_write().await.unwrap();
        let new = NewMessage {
            session_id: f.session.clone(),
            turn_id: None,
            content: "a note".into(),
            meta: StatusNote::Idle.into(),
            client_message_id: None,
        };
        let note = tx.insert_message(&new).await.unwrap();
        let usage = MessageMeta::Usage(UsageMeta::default());
        let refused = tx.set_message(&note.id, None, &usage).await;
        assert!(refused.is_err(), "usage metadata over a status note: {refused:?}");
        let kept = tx.set_message(&note.id, None, &StatusNote::Stall.into()).await.unwrap();
        assert_eq!(kept.meta, MessageMeta::from(StatusNote::Stall));
        tx.commit().await.unwrap();
    }
}
