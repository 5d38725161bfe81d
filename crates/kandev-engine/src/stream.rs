//! Group commit of streamed text (issue 15): each session actor coalesces its agent's chunks
//! (`session/actor.rs`), then hands the result here; the writes that are waiting when a
//! transaction starts go into that one transaction, behind the store's single writer.
//!
//! There is no writer task: the first caller to take the `leader` lock writes everything
//! queued so far (its own write and the others'), answers each, and leaves; a caller that
//! gets the lock after its write was done by another leader just takes its answer. Each
//! member write runs under a savepoint, so one failed write (its message deleted meanwhile)
//! costs only that member; a failed commit fails them all. Notifications go out when the
//! group commits (`WriteTx::commit`), never before.

use std::sync::Mutex;

use kandev_domain::transcript::{MessageKind, Session};
use kandev_domain::{MessageId, TurnId};
use kandev_store::{Store, WriteTx};
use serde_json::json;
use tokio::sync::oneshot;

use crate::error::{EngineError, Result};
use crate::publish;
use crate::write::add_message;

/// At most this many member writes share one transaction.
const GROUP_LIMIT: usize = 512;

/// Where streamed text goes.
#[derive(Debug, Clone)]
pub(crate) enum Target {
    /// Appended to the message being streamed.
    Append(MessageId),
    /// A new message of this kind (in the open turn, if any).
    Start { kind: MessageKind, turn_id: Option<TurnId> },
}

struct Member {
    session: Session,
    target: Target,
    text: String,
    reply: oneshot::Sender<std::result::Result<MessageId, String>>,
}

/// The queue of streamed writes and the lock its leader holds.
#[derive(Default)]
pub(crate) struct StreamWriter {
    queue: Mutex<Vec<Member>>,
    leader: tokio::sync::Mutex<()>,
}

impl StreamWriter {
    /// The queue; a panic elsewhere does not make it unusable.
    fn queue(&self) -> std::sync::MutexGuard<'_, Vec<Member>> {
        self.queue.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Stores `text` at `target` and announces it, in a transaction shared with whatever
    /// other sessions are writing now. Returns the message written to once committed.
    pub async fn write(
        &self,
        store: &Store,
        session: &Session,
        target: Target,
        text: String,
    ) -> Result<MessageId> {
        let (reply, mut answer) = oneshot::channel();
        self.queue().push(Member { session: session.clone(), target, text, reply });
        let _leader = self.leader.lock().await;
        loop {
            match answer.try_recv() {
                Ok(done) => return done.map_err(EngineError::Unavailable),
                Err(oneshot::error::TryRecvError::Closed) => {
                    return Err(EngineError::Unavailable(
                        "the streamed text was not written".into(),
                    ));
                }
                Err(oneshot::error::TryRecvError::Empty) => {}
            }
            // Ours is queued (FIFO): it is in this group or, past the limit, in a later one.
            let group: Vec<Member> = {
                let mut queue = self.queue();
                let take = queue.len().min(GROUP_LIMIT);
                queue.drain(..take).collect()
            };
            write_group(store, group).await;
        }
    }
}

/// Writes `group` in one transaction and answers every member.
async fn write_group(store: &Store, group: Vec<Member>) {
    let mut tx = match store.begin_write().await {
        Ok(tx) => tx,
        Err(err) => {
            let text = err.to_string();
            for member in group {
                let _ = member.reply.send(Err(text.clone()));
            }
            return;
        }
    };
    let mut outcomes = Vec::with_capacity(group.len());
    for member in &group {
        outcomes.push(write_member(&mut tx, member).await);
    }
    let committed = tx.commit().await;
    for (member, outcome) in group.into_iter().zip(outcomes) {
        let answer = match (&committed, outcome) {
            (Ok(_), Ok(id)) => Ok(id),
            (Ok(_), Err(err)) => Err(err),
            (Err(err), _) => Err(err.to_string()),
        };
        let _ = member.reply.send(answer);
    }
}

async fn write_member(tx: &mut WriteTx, member: &Member) -> std::result::Result<MessageId, String> {
    let savepoint = tx.savepoint().await.map_err(|e| e.to_string())?;
    let written = match &member.target {
        Target::Append(id) => append(tx, member, id).await,
        Target::Start { kind, turn_id } => {
            add_message(tx, &member.session, turn_id.as_ref(), *kind, &member.text, json!({}))
                .await
                .map(|m| m.id)
        }
    };
    match written {
        Ok(id) => {
            tx.release(savepoint).await.map_err(|e| e.to_string())?;
            Ok(id)
        }
        Err(err) => {
            tracing::warn!(session = %member.session.id, error = %err, "a streamed write failed");
            tx.rollback_to(savepoint).await.map_err(|e| e.to_string())?;
            Err(err.to_string())
        }
    }
}

async fn append(tx: &mut WriteTx, member: &Member, id: &MessageId) -> Result<MessageId> {
    let appended = tx.append_message(id, &member.text).await?;
    publish::message_appended(tx, &member.session, &appended, &member.text).await?;
    Ok(appended.id)
}
