//! Reaching a session's actor: its inbox (the actor is started on first use) and asking it
//! something, waiting for the answer. It starts actors through `Inner::start_actor`, so it
//! (and what reaches actors through it: workflow moves) sits below the actor.

use std::sync::Arc;

use kandev_domain::SessionId;
use tokio::sync::{mpsc, oneshot};

use crate::command::Command;
use crate::error::{EngineError, Result, not_found};
use crate::inner::{Inner, lock};

/// The inbox of a session's actor, starting the actor if it is not running.
pub(crate) async fn inbox(inner: &Arc<Inner>, id: &SessionId) -> Result<mpsc::Sender<Command>> {
    if let Some(tx) = lock(&inner.sessions).get(id).filter(|tx| !tx.is_closed()) {
        return Ok(tx.clone());
    }
    let session = inner.store.get_session(id).await.map_err(not_found)?;
    let task = inner.store.get_task(&session.task_id).await?;
    let mut sessions = lock(&inner.sessions);
    if let Some(tx) = sessions.get(id).filter(|tx| !tx.is_closed()) {
        return Ok(tx.clone());
    }
    if inner.stopping.load(std::sync::atomic::Ordering::Acquire) {
        return Err(EngineError::gone());
    }
    let (tx, rx) = mpsc::channel(256);
    (inner.start_actor)(inner.clone(), session, task, tx.clone(), rx);
    sessions.insert(id.clone(), tx.clone());
    Ok(tx)
}

/// Sends a command built around a reply channel and waits for the answer.
pub(crate) async fn ask<T>(
    inner: &Arc<Inner>,
    id: &SessionId,
    make: impl FnOnce(oneshot::Sender<Result<T>>) -> Command,
) -> Result<T> {
    let inbox = inbox(inner, id).await?;
    let (reply, answer) = oneshot::channel();
    inbox.send(make(reply)).await.map_err(|_| EngineError::gone())?;
    answer.await.map_err(|_| EngineError::gone())?
}

/// Whether the session's actor is running (it may have a live agent).
pub(crate) fn is_running(inner: &Inner, id: &SessionId) -> bool {
    lock(&inner.sessions).get(id).is_some_and(|tx| !tx.is_closed())
}
