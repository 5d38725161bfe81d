//! Questions agents ask the user (MCP `ask_user`): stored first (durable), announced on the
//! session's topic, and resolved exactly once — answered, cancelled (turn cancel, stop,
//! delete), timed out, or expired at startup. Whoever waits for the answer (the MCP tool
//! call) holds a receiver woken by the resolution.

use std::collections::HashMap;
use std::sync::Mutex;

use kandev_api_types::{Notification, QuestionDto, SessionEvent};
use kandev_domain::message_meta::StatusNote;
use kandev_domain::notify::NotificationKind;
use kandev_domain::question::{Question, QuestionStatus};
use kandev_domain::transcript::Session;
use kandev_domain::{SessionId, TaskId};
use kandev_store::{Store, WriteTx};
use tokio::sync::oneshot;

use crate::error::{EngineError, Result, not_found};
use crate::publish;
use crate::write::add_message;

/// The callers waiting for their questions' answers.
#[derive(Default)]
pub(crate) struct Waiters(Mutex<HashMap<String, oneshot::Sender<Question>>>);

impl Waiters {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, oneshot::Sender<Question>>> {
        self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn wake(&self, question: &Question) {
        if let Some(waiter) = self.lock().remove(&question.id) {
            let _ = waiter.send(question.clone());
        }
    }
}

/// Announces a question (asked or resolved); returns the announcement's seq. A resolved
/// question also leaves a card in its session's transcript (issue 45 item 8): the question,
/// how it ended and, answered, the answer and `by` (who gave it).
async fn announce(
    tx: &mut WriteTx,
    question: &Question,
    asked: bool,
    by: Option<&str>,
) -> Result<i64> {
    let dto = QuestionDto::from(question);
    let event = if asked {
        SessionEvent::QuestionAsked { question: dto }
    } else {
        SessionEvent::QuestionResolved { question: dto }
    };
    let seq = publish::notify(tx, Notification::session(&question.session_id, event)).await?;
    // A pending question makes its task need the developer (`needs_you`); a resolved one may
    // end that. The session is gone when its deletion resolves the question.
    match tx.get_session(&question.session_id).await {
        Ok(session) => {
            if !asked {
                note_resolved(tx, &session, question, by).await?;
            }
            publish::sync_task(tx, &session).await?
        }
        Err(kandev_store::StoreError::NotFound { .. }) => {}
        Err(err) => return Err(err.into()),
    }
    Ok(seq)
}

async fn note_resolved(
    tx: &mut WriteTx,
    session: &Session,
    question: &Question,
    by: Option<&str>,
) -> Result<()> {
    let note = StatusNote::QuestionResolved {
        question_id: question.id.clone(),
        status: question.status.as_str().to_owned(),
        answer: question.answer.clone(),
        by: by.map(str::to_owned),
    };
    add_message(tx, session, None, &question.question, note).await?;
    Ok(())
}

/// Most questions of one session waiting for an answer at once (issue 38 item 8: an agent
/// asked 300 in 3 s, each a card and a notification to people).
pub const MAX_PENDING_QUESTIONS: usize = 3;

/// Stores and announces a question; the receiver gets it once it is resolved. Refused
/// (`QueueFull`, nothing stored) while the session has [`MAX_PENDING_QUESTIONS`] waiting.
pub(crate) async fn ask(
    store: &Store,
    waiters: &Waiters,
    session_id: &SessionId,
    task_id: &TaskId,
    text: &str,
    options: &[String],
    timeout_ms: i64,
) -> Result<(Question, oneshot::Receiver<Question>)> {
    let mut tx = store.begin_write().await?;
    // Counted in the write transaction: two questions asked at once cannot both take the
    // last place.
    if tx.pending_questions(Some(session_id)).await?.len() >= MAX_PENDING_QUESTIONS {
        return Err(EngineError::QueueFull(format!(
            "this session has {MAX_PENDING_QUESTIONS} questions waiting for an answer, the \
             most it may have: wait for an answer before asking another"
        )));
    }
    let question = tx.insert_question(session_id, task_id, text, options, timeout_ms).await?;
    let seq = announce(&mut tx, &question, true, None).await?;
    // A question needs its developer: a notification record (browser, webhooks, ntfy).
    let session = tx.get_session(session_id).await?;
    let task = tx.get_task(task_id).await?;
    let title = format!("{}: the agent asks: {}", task.title, publish::first_line(text, 120));
    let data = serde_json::json!({ "question_id": question.id, "text": text, "options": options });
    let kind = NotificationKind::QuestionAsked;
    publish::attention(&mut tx, kind, &session, seq, title, data).await?;
    let (sender, receiver) = oneshot::channel();
    waiters.lock().insert(question.id.clone(), sender);
    if let Err(err) = tx.commit().await {
        waiters.lock().remove(&question.id);
        return Err(err.into());
    }
    Ok((question, receiver))
}

/// Resolves a pending question (once: a second resolution is `AlreadyResolved`), announces
/// it and wakes its waiter.
pub(crate) async fn resolve(
    store: &Store,
    waiters: &Waiters,
    id: &str,
    status: QuestionStatus,
    answer: Option<&str>,
    by: Option<&str>,
) -> Result<Question> {
    let mut tx = store.begin_write().await?;
    let resolved = tx.resolve_question(id, status, answer).await.map_err(not_found)?;
    let Some(question) = resolved else {
        let current = store.get_question(id).await.map_err(not_found)?;
        return Err(EngineError::AlreadyResolved(format!(
            "the question was {} already; it is resolved only once",
            current.status.as_str().replace('_', " ")
        )));
    };
    announce(&mut tx, &question, false, by).await?;
    tx.commit().await?;
    waiters.wake(&question);
    Ok(question)
}

/// Resolves every pending question of a session (or, with `None`, of every session) with
/// `status`; returns how many.
pub(crate) async fn resolve_pending(
    store: &Store,
    waiters: &Waiters,
    session_id: Option<&SessionId>,
    status: QuestionStatus,
) -> Result<usize> {
    let mut tx = store.begin_write().await?;
    let mut resolved = vec![];
    for question in tx.pending_questions(session_id).await? {
        if let Some(question) = tx.resolve_question(&question.id, status, None).await? {
            announce(&mut tx, &question, false, None).await?;
            resolved.push(question);
        }
    }
    tx.commit().await?;
    for question in &resolved {
        waiters.wake(question);
    }
    Ok(resolved.len())
}
