//! The fixture the streaming tests share (streaming.rs, streaming_cost.rs): a workspace,
//! a task and its session, and messages in it.

#![allow(dead_code)]

use kandev_domain::transcript::MessageKind;
use kandev_domain::{MessageId, SessionId, TurnId, WorkspaceId};
use kandev_store::{NewMessage, NewTask, Store};

use crate::common::TestDb;

pub struct Fixture {
    pub db: TestDb,
    pub store: Store,
    pub workspace: WorkspaceId,
    pub session: SessionId,
}

pub async fn fixture(title: &str) -> Fixture {
    fixture_on(TestDb::sqlite(), title).await
}

pub async fn fixture_on(db: TestDb, title: &str) -> Fixture {
    let store = db.open().await;
    let mut tx = store.begin_write().await.unwrap();
    let (workspace, wf) = crate::common::insert_board(&mut tx, &["Todo"]).await;
    let task = tx
        .insert_task(
            &NewTask {
                workflow_id: wf.id.clone(),
                step_id: wf.steps[0].id.clone(),
                title: title.into(),
                description: "the description".into(),
                repository_ids: vec![],
                agent_profile_id: None,
            },
            "user",
        )
        .await
        .unwrap();
    let session = tx.insert_session(&task.id, None, "/tmp", None, None).await.unwrap();
    tx.commit().await.unwrap();
    Fixture { db, store, workspace, session: session.id }
}

/// A streamed message of `kind` in no turn, as a group commit writes it.
pub fn streamed(session: &SessionId, content: &str, kind: MessageKind) -> NewMessage {
    NewMessage {
        session_id: session.clone(),
        turn_id: None::<TurnId>,
        content: content.into(),
        meta: kandev_domain::message_meta::MessageMeta::empty(kind),
        client_message_id: None,
    }
}

pub async fn new_message(store: &Store, session: &SessionId, first: &str) -> MessageId {
    let mut tx = store.begin_write().await.unwrap();
    let message = tx
        .insert_message(&NewMessage {
            session_id: session.clone(),
            turn_id: None::<TurnId>,
            content: first.into(),
            meta: kandev_domain::message_meta::MessageMeta::empty(MessageKind::Agent),
            client_message_id: None,
        })
        .await
        .unwrap();
    // A message's seq is the seq of the event announcing it.
    let seq = tx
        .emit(format!("session:{session}"), "session.message.added", serde_json::json!({}))
        .await
        .unwrap();
    assert_eq!(seq, message.seq);
    tx.commit().await.unwrap();
    message.id
}
