//! Group commit of streamed text (issue 15): each session actor coalesces its agent's chunks
//! (`session/events.rs`) and hands the result here without waiting for it to be stored; one
//! writer task writes what is queued, a group at a time, in one transaction behind the
//! store's single writer, and answers each submission once its group committed.
//!
//! - **Order.** The queue is FIFO and groups are written one after another, so a session's
//!   writes are stored (and announced) in the order it submitted them. A session awaits its
//!   answers before it writes anything else (`SessionActor::settle_text`), so its other
//!   writes come after its streamed text. Writes the agent asks for on another channel go
//!   through the actor for the same reason: an MCP `ask_user` question (`Command::AskUser`)
//!   and note are stored after the text the agent streamed before the call.
//! - **Adaptive window.** Text a session submits while its previous submission is still
//!   queued (the writer is busy with an earlier group) joins that submission: the slower the
//!   writer, the larger each write and notification, instead of a longer queue.
//! - **Few round trips per group.** A group is written with a fixed number of statements
//!   whatever its size (one read of the appended messages' heads, one of the next seq, one
//!   insert each of messages, chunks and events, one fold), sent as two round trips on
//!   SQLite and three on PostgreSQL (`kandev_store::StreamGroup`). Each round trip is a hand-off to the connection's
//!   thread, and under CPU contention
//!   each round trip is where a chunk waits, so there is no savepoint around them: when the
//!   batch fails (a session or message deleted meanwhile, say), its transaction is rolled
//!   back and the members are written one by one in a new one, each under its own
//!   savepoint, so only the failing member is lost. A failed commit fails them all.
//! - Notifications go out when the group commits (`WriteTx::commit`), never before
//!   (lifecycle rule 43).

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use kandev_api_types::{MessageDto, MessageUpdate, Notification, NotificationParts, SessionEvent};
use kandev_domain::message_meta::MessageMeta;
use kandev_domain::transcript::MessageKind;
use kandev_domain::{MessageId, SessionId, TurnId};
use kandev_store::{Appended, NewChunk, NewMessage, Store, StreamGroup, WriteTx};
use tokio::sync::oneshot;
use tokio_util::task::TaskTracker;

use crate::error::{EngineError, Result};
use crate::publish;
use crate::write::add_message_as;

/// At most this many member writes share one transaction.
const GROUP_LIMIT: usize = 512;
/// Most text a queued write takes in by joining (adaptive window): each write is one
/// notification, which every subscriber's socket writer copies whole (issue 38 item 3).
const JOIN_LIMIT: usize = 64 * 1024;

/// Where streamed text goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Target {
    /// Appended to the message being streamed, of this kind in this turn. When that message
    /// was never stored (its group's commit failed), the text starts it, with that id, kind
    /// and turn, instead of being lost.
    Append { id: MessageId, kind: MessageKind, turn_id: Option<TurnId> },
    /// A new message with this id (chosen by the session: later text is appended to it before
    /// it is stored) and kind, in the open turn, if any.
    Start { id: MessageId, kind: MessageKind, turn_id: Option<TurnId> },
}

impl Target {
    /// The message the text goes to.
    pub fn message(&self) -> &MessageId {
        match self {
            Target::Append { id, .. } | Target::Start { id, .. } => id,
        }
    }
}

/// The answer to a submission: the message written to, once committed.
pub(crate) type Answer = oneshot::Receiver<std::result::Result<MessageId, String>>;

struct Member {
    /// Only the session's id, not a clone of its whole `Session` row: a queued write
    /// carries nothing it does not need.
    session: SessionId,
    target: Target,
    text: String,
    replies: Vec<oneshot::Sender<std::result::Result<MessageId, String>>>,
    /// The runner position of the text (issue 20): recorded in the group's transaction and
    /// acknowledged after its commit.
    mark: Option<crate::position::Mark>,
}

#[derive(Default)]
struct Shared {
    queue: Mutex<Vec<Member>>,
    /// Whether a writer task is running (it runs while the queue is not empty).
    writing: AtomicBool,
}

/// The queue of streamed writes. Cheap to clone.
#[derive(Clone)]
pub(crate) struct StreamWriter {
    shared: Arc<Shared>,
    /// The owner of the writer task: the engine's, so shutdown waits for queued text to be
    /// stored.
    tracker: TaskTracker,
}

impl StreamWriter {
    pub fn new(tracker: TaskTracker) -> StreamWriter {
        StreamWriter { shared: Arc::default(), tracker }
    }

    /// The queue; a panic elsewhere does not make it unusable.
    fn queue(&self) -> std::sync::MutexGuard<'_, Vec<Member>> {
        self.shared.queue.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Queues `text` for `target` and returns at once; the answer comes once it is stored and
    /// announced, in a transaction shared with whatever else is queued by then.
    pub fn submit(
        &self,
        store: &Store,
        session: &SessionId,
        target: Target,
        text: String,
        mark: Option<crate::position::Mark>,
    ) -> Answer {
        let (reply, answer) = oneshot::channel();
        {
            let mut queue = self.queue();
            // The session's latest queued write, if the writer has not taken it yet: text for
            // the same message joins it (nothing of this session is queued after it).
            let latest = queue.iter_mut().rev().find(|m| m.session == *session);
            match latest {
                Some(m)
                    if matches!(&target, Target::Append { id, .. } if id == m.target.message())
                        && m.text.len() + text.len() <= JOIN_LIMIT =>
                {
                    m.text.push_str(&text);
                    m.replies.push(reply);
                    if mark.is_some() {
                        m.mark = mark;
                    }
                }
                _ => queue.push(Member {
                    session: session.clone(),
                    target,
                    text,
                    replies: vec![reply],
                    mark,
                }),
            }
        }
        if !self.shared.writing.swap(true, Ordering::AcqRel) {
            let (writer, store) = (self.clone(), store.clone());
            self.tracker.spawn(async move { writer.drain(store).await });
        }
        answer
    }

    /// Writes groups until the queue is empty.
    async fn drain(self, store: Store) {
        loop {
            let group: Vec<Member> = {
                let mut queue = self.queue();
                let take = queue.len().min(GROUP_LIMIT);
                queue.drain(..take).collect()
            };
            if group.is_empty() {
                self.shared.writing.store(false, Ordering::Release);
                // A submission between the drain and the flag's reset saw `writing` set and
                // left its member to this task: take it unless another task already did.
                if self.queue().is_empty() || self.shared.writing.swap(true, Ordering::AcqRel) {
                    return;
                }
                continue;
            }
            write_group(&store, group).await;
        }
    }
}

/// What a member's write came to.
type Outcome = std::result::Result<MessageId, String>;

/// Writes `group` in one transaction and answers every member.
async fn write_group(store: &Store, group: Vec<Member>) {
    let mut tx = match store.begin_stream_write().await {
        Ok(tx) => tx,
        Err(err) => {
            answer(group, |_| Err(err.to_string()));
            return;
        }
    };
    let (mut tx, outcomes) = match batch_statements(&mut tx, &group).await {
        Ok(outcomes) => (tx, outcomes),
        Err(err) => {
            // No savepoint around the batch (two fewer round trips to the connection's
            // thread per group): its transaction is rolled back instead, and the members are
            // written one by one in a new one.
            tracing::info!(error = %err, "a streamed group failed; writing its members one by one");
            drop(tx);
            let mut tx = match store.begin_stream_write().await {
                Ok(tx) => tx,
                Err(err) => {
                    answer(group, |_| Err(err.to_string()));
                    return;
                }
            };
            let mut outcomes = Vec::with_capacity(group.len());
            for member in &group {
                outcomes.push(write_member(&mut tx, member).await);
            }
            (tx, outcomes)
        }
    };
    // Only a recorded position is acknowledged: the runner keeps the rest for a restart.
    let mut recorded = vec![];
    for mark in group.iter().filter_map(|m| m.mark.as_ref()) {
        match mark.record(&mut tx).await {
            Ok(()) => recorded.push(mark),
            Err(err) => tracing::warn!(error = %err, "cannot record a runner position"),
        }
    }
    // Only whether it committed: cloning the committed events themselves (the whole group's)
    // for every member would be O(n²) in the group's size (88 % of the server's CPU while
    // P3 ingested messages, when it was done).
    let committed = tx.commit().await.map(|_| ()).map_err(|e| e.to_string());
    if committed.is_ok() {
        for mark in recorded {
            mark.ack();
        }
    }
    let mut outcomes = outcomes.into_iter();
    answer(group, |_| {
        let outcome = outcomes.next().unwrap_or_else(|| Err("not written".to_owned()));
        committed.clone().and(outcome)
    });
}

/// Sends each member its outcome (cheap to clone: never the group's events, which made a
/// group cost O(n²) in its size).
fn answer(group: Vec<Member>, mut outcome: impl FnMut(&Member) -> Outcome) {
    for member in group {
        let result = outcome(&member);
        for reply in member.replies {
            let _ = reply.send(result.clone());
        }
    }
}

/// Writes every member with a fixed number of statements (an error leaves the transaction
/// to be rolled back, for [`write_member`] to try one by one). An append to a message that
/// does not exist fails that member only, before anything is written.
async fn batch_statements(tx: &mut WriteTx, group: &[Member]) -> Result<Vec<Outcome>> {
    let started: HashSet<&MessageId> = group
        .iter()
        .filter(|m| matches!(m.target, Target::Start { .. }))
        .map(|m| m.target.message())
        .collect();
    let appended: Vec<&MessageId> = group
        .iter()
        .filter_map(|m| match &m.target {
            Target::Append { id, .. } if !started.contains(id) => Some(id),
            _ => None,
        })
        .collect::<HashSet<_>>()
        .into_iter()
        .collect();
    // Both reads in one round trip (SQLite), and the writes below in one more.
    let (mut heads, first) = tx.stream_heads_and_next_seq(&appended).await?;
    let mut seq = first;
    let mut outcomes = Vec::with_capacity(group.len());
    let mut messages = vec![];
    let mut chunks: Vec<(MessageId, SessionId, u64, usize)> = vec![];
    let mut events = vec![];
    // Per session that started a message: the newest one, which keeps streaming unfolded.
    let mut newest: HashMap<&SessionId, &MessageId> = HashMap::new();
    for (index, member) in group.iter().enumerate() {
        let (Target::Start { id, kind, turn_id } | Target::Append { id, kind, turn_id }) =
            &member.target;
        // An append to a message never stored (nor started in this group) starts it.
        let starts = matches!(member.target, Target::Start { .. }) || !heads.contains_key(id);
        if starts {
            let new = NewMessage {
                session_id: member.session.clone(),
                turn_id: turn_id.clone(),
                content: member.text.clone(),
                meta: MessageMeta::empty(*kind),
                client_message_id: None,
            };
            messages.push((id.clone(), seq, new));
            heads.insert(
                id.clone(),
                Appended {
                    id: id.clone(),
                    session_id: member.session.clone(),
                    seq,
                    kind: *kind,
                    length: member.text.len() as u64,
                },
            );
            newest.insert(&member.session, id);
            events.push(None); // the message.added event, once the message is built
        } else {
            let Some(head) = heads.get_mut(id) else {
                outcomes.push(Err(format!("message {id} was not found")));
                continue;
            };
            head.length += member.text.len() as u64;
            chunks.push((id.clone(), head.session_id.clone(), head.length, index));
            let update = MessageUpdate::Chunk {
                message_id: id.to_string(),
                seq: head.seq,
                kind: head.kind.into(),
                delta: member.text.clone(),
                length: head.length,
            };
            events.push(Some(Notification::session(
                &member.session,
                SessionEvent::MessageUpdated(update),
            )));
        }
        outcomes.push(Ok(member.target.message().clone()));
        seq += 1;
    }
    let stored = tx.messages_as_stored(&messages);
    let mut stored = stored.iter();
    let chunk_rows: Vec<NewChunk<'_>> = chunks
        .iter()
        .map(|(message_id, session_id, end_len, index)| NewChunk {
            message_id,
            session_id,
            delta: &group[*index].text,
            end_len: *end_len,
        })
        .collect();
    let mut parts = Vec::with_capacity(events.len());
    for event in events {
        let notification = match event {
            Some(notification) => notification,
            None => {
                let Some(message) = stored.next() else {
                    return Err(EngineError::Unavailable(
                        "a started message was not stored".into(),
                    ));
                };
                let event = SessionEvent::MessageAdded { message: MessageDto::from(message) };
                Notification::session(&message.session_id, event)
            }
        };
        let NotificationParts { topic, action, payload } = notification.into_parts();
        parts.push((topic, action, payload.into()));
    }
    let sessions: Vec<&SessionId> = newest.keys().copied().collect();
    let keep: Vec<&MessageId> = newest.values().copied().collect();
    // Events numbered from `first` (read above: writes are serialized), without reading it
    // again.
    tx.write_stream_group(StreamGroup {
        messages: &messages,
        chunks: &chunk_rows,
        first_seq: first,
        events: parts,
        fold_sessions: &sessions,
        keep: &keep,
    })
    .await?;
    Ok(outcomes)
}

/// Writes one member under its own savepoint (after its group failed as a whole).
async fn write_member(tx: &mut WriteTx, member: &Member) -> Outcome {
    let savepoint = tx.savepoint().await.map_err(|e| e.to_string())?;
    let written = match &member.target {
        Target::Append { id, kind, turn_id } => match tx.stream_heads(&[id]).await {
            // Never stored (its group's commit failed): the text starts it.
            Ok(heads) if heads.is_empty() => start(tx, member, id, *kind, turn_id.as_ref()).await,
            Ok(_) => append(tx, member, id).await,
            Err(err) => Err(err.into()),
        },
        Target::Start { id, kind, turn_id } => start(tx, member, id, *kind, turn_id.as_ref()).await,
    };
    match written {
        Ok(id) => {
            tx.release(savepoint).await.map_err(|e| e.to_string())?;
            Ok(id)
        }
        Err(err) => {
            tracing::warn!(session = %member.session, error = %err, "a streamed write failed");
            tx.rollback_to(savepoint).await.map_err(|e| e.to_string())?;
            Err(err.to_string())
        }
    }
}

/// Starts the streamed message `id` with the member's text.
async fn start(
    tx: &mut WriteTx,
    member: &Member,
    id: &MessageId,
    kind: MessageKind,
    turn_id: Option<&TurnId>,
) -> Result<MessageId> {
    let meta = MessageMeta::empty(kind);
    let message = add_message_as(tx, id, &member.session, turn_id, &member.text, meta).await?;
    Ok(message.id)
}

async fn append(tx: &mut WriteTx, member: &Member, id: &MessageId) -> Result<MessageId> {
    let appended = tx.append_message(id, &member.text).await?;
    publish::message_appended(tx, &member.session, &appended, &member.text).await?;
    Ok(appended.id)
}

/// Waits for `answer`, as the error type of the engine.
pub(crate) async fn answered(answer: Answer) -> Result<MessageId> {
    match answer.await {
        Ok(done) => done.map_err(EngineError::Unavailable),
        Err(_) => Err(EngineError::Unavailable("the streamed text was not written".into())),
    }
}

#[cfg(test)]
mod tests {
    use kandev_domain::transcript::{MessageKind, Session};
    use kandev_domain::{SessionId, WorkspaceId};
    use kandev_store::{Event, Location, SearchKinds, SearchPage, Store};
    use std::time::{Duration, Instant};

    use tokio::sync::{broadcast, oneshot};

    use super::{Member, Outcome, StreamWriter, Target, answered, write_group};

    /// A store (a real file) with two sessions of one task.
    async fn fixture() -> (tempfile::TempDir, Store, Session, Session) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(Location::File(dir.path().join("kandev.db"))).await.unwrap();
        let mut tx = store.begin_write().await.unwrap();
        let task = crate::test_support::insert_task(&mut tx).await;
        let one = tx.insert_session(&task.id, None, "/tmp", None, None).await.unwrap();
        let two = tx.insert_session(&task.id, None, "/tmp", None, None).await.unwrap();
        tx.commit().await.unwrap();
        (dir, store, one, two)
    }

    fn start(store: &Store, kind: MessageKind) -> Target {
        Target::Start { id: store.new_message_id(), kind, turn_id: None }
    }

    /// An append to the message `started` starts.
    fn append(started: &Target) -> Target {
        let Target::Start { id, kind, turn_id } = started.clone() else {
            panic!("not a start: {started:?}")
        };
        Target::Append { id, kind, turn_id }
    }

    fn member(
        session: &Session,
        target: &Target,
        text: &str,
    ) -> (Member, oneshot::Receiver<Outcome>) {
        let (reply, answer) = oneshot::channel();
        let member = Member {
            session: session.id.clone(),
            target: target.clone(),
            text: text.to_owned(),
            replies: vec![reply],
            mark: None,
        };
        (member, answer)
    }

    /// Every event published so far: `(seq, action, message id, delta or content)`.
    fn published(
        events: &mut broadcast::Receiver<std::sync::Arc<Event>>,
    ) -> Vec<(i64, String, String, String)> {
        let mut out = vec![];
        while let Ok(event) = events.try_recv() {
            let p = &event.payload.value();
            let (id, text) = match event.action.as_str() {
                "session.message.added" => (&p["message"]["id"], &p["message"]["content"]),
                _ => (&p["message_id"], &p["delta"]),
            };
            let (id, text) = (id.as_str().unwrap_or_default(), text.as_str().unwrap_or_default());
            out.push((event.seq, event.action.clone(), id.to_owned(), text.to_owned()));
        }
        out
    }

    async fn task_workspace(store: &Store, session: &Session) -> WorkspaceId {
        store.get_task(&session.task_id).await.unwrap().workspace_id
    }

    async fn content(store: &Store, target: &Target) -> String {
        store.get_message(target.message()).await.unwrap().content
    }

    /// Issue 38 item 3: text joining a queued write stops at [`JOIN_LIMIT`]. Each write is
    /// one notification, which every subscriber's socket writer copies whole; unbounded
    /// joins made notifications of a whole 1 MiB message under a busy writer, and R8's 200
    /// slow readers then held a private copy of one each (~350 MB).
    #[tokio::test]
    async fn i38_3_text_joining_a_queued_write_stops_at_the_join_limit() {
        let (_dir, store, one, _) = fixture().await;
        let mut events = store.subscribe();
        let writer = StreamWriter::new(tokio_util::task::TaskTracker::new());
        let started = start(&store, MessageKind::Agent);
        let chunk = |i: usize| format!("{i:04}{}", "x".repeat(4092));
        // Submitted without waiting: the writer task has not run, so each may join.
        let mut answers = vec![writer.submit(&store, &one.id, started.clone(), chunk(0), None)];
        for i in 1..200 {
            answers.push(writer.submit(&store, &one.id, append(&started), chunk(i), None));
        }
        for answer in answers {
            answered(answer).await.unwrap();
        }
        let told = published(&mut events);
        let whole: String = (0..200).map(chunk).collect();
        assert_eq!(told.iter().map(|t| t.3.as_str()).collect::<String>(), whole);
        let largest = told.iter().map(|t| t.3.len()).max().unwrap();
        assert!(largest <= super::JOIN_LIMIT, "a notification carried {largest} bytes of text");
        assert_eq!(content(&store, &started).await, whole);
    }

    #[tokio::test]
    async fn i15_a1_a_group_of_starts_and_appends_is_stored_and_told_in_order() {
        let (_dir, store, one, two) = fixture().await;
        let mut events = store.subscribe();
        let (a, b) = (start(&store, MessageKind::Agent), start(&store, MessageKind::Thought));
        let appended = append(&a);
        let (members, answers): (Vec<_>, Vec<_>) = [
            member(&one, &a, "hello"),
            member(&two, &b, "thinking"),
            member(&one, &appended, " world"),
        ]
        .into_iter()
        .unzip();
        write_group(&store, members).await;
        let mut outcomes = vec![];
        for answer in answers {
            outcomes.push(answer.await.unwrap());
        }
        assert!(outcomes.iter().all(|o| o.is_ok()), "{outcomes:?}");
        assert_eq!(content(&store, &a).await, "hello world");
        assert_eq!(content(&store, &b).await, "thinking");
        let told = published(&mut events);
        let actions: Vec<&str> = told.iter().map(|t| t.1.as_str()).collect();
        assert_eq!(
            actions,
            ["session.message.added", "session.message.added", "session.message.updated"]
        );
        assert!(told.windows(2).all(|w| w[1].0 == w[0].0 + 1), "consecutive seqs: {told:?}");
        assert_eq!(told[2].3, " world");
        // A message's seq is its announcement's, and the next write numbers on from the batch.
        let stored = store.get_message(a.message()).await.unwrap();
        assert_eq!(stored.seq, told[0].0);
        assert_eq!(store.last_seq().await.unwrap(), told[2].0);

        // The appended text is searchable once the session's next message ends its stream.
        let kinds = SearchKinds { tasks: false, messages: true };
        let hits = |page: SearchPage| page.hits.len();
        let workspace = task_workspace(&store, &one).await;
        let search = || store.search(&workspace, "world", kinds, 10, 0);
        assert_eq!(hits(search().await.unwrap()), 0, "still streaming: not indexed yet");
        let next = start(&store, MessageKind::Agent);
        let (member, answer) = member(&one, &next, "next");
        write_group(&store, vec![member]).await;
        answer.await.unwrap().unwrap();
        assert_eq!(hits(search().await.unwrap()), 1, "folded with the next message");
        assert_eq!(content(&store, &a).await, "hello world");
    }

    #[tokio::test]
    async fn i15_a1_a_member_failing_in_the_database_costs_only_itself() {
        let (_dir, store, one, two) = fixture().await;
        let mut events = store.subscribe();
        // A session deleted meanwhile: its new message breaks the foreign key, so the batch
        // fails and its members are written one by one.
        let mut gone = two.clone();
        gone.id = SessionId::new("deleted-session");
        let (a, b) = (start(&store, MessageKind::Agent), start(&store, MessageKind::Agent));
        let appended = append(&a);
        let (members, answers): (Vec<_>, Vec<_>) =
            [member(&one, &a, "one"), member(&gone, &b, "never"), member(&one, &appended, " two")]
                .into_iter()
                .unzip();
        write_group(&store, members).await;
        let mut outcomes = vec![];
        for answer in answers {
            outcomes.push(answer.await.unwrap());
        }
        assert!(outcomes[0].is_ok() && outcomes[2].is_ok(), "{outcomes:?}");
        assert!(outcomes[1].is_err(), "{outcomes:?}");
        assert_eq!(content(&store, &a).await, "one two");
        assert!(store.get_message(b.message()).await.is_err(), "the failed member left nothing");
        let told = published(&mut events);
        let texts: Vec<&str> = told.iter().map(|t| t.3.as_str()).collect();
        assert_eq!(texts, ["one", " two"], "only what was stored is told: {told:?}");
    }

    #[tokio::test]
    async fn i15_d1_an_append_to_a_message_never_stored_starts_it_instead_of_dropping_its_text() {
        let (_dir, store, one, two) = fixture().await;
        // Started in a group whose commit failed: never stored, later text appends to it.
        let (lost, also_lost) =
            (start(&store, MessageKind::Agent), start(&store, MessageKind::Thought));
        let ok = start(&store, MessageKind::Agent);
        let (members, answers): (Vec<_>, Vec<_>) = [
            member(&one, &append(&lost), "kept"),
            member(&one, &append(&lost), " and more"),
            member(&two, &ok, "fine"),
        ]
        .into_iter()
        .unzip();
        write_group(&store, members).await;
        for answer in answers {
            answer.await.unwrap().unwrap();
        }
        let stored = store.get_message(lost.message()).await.unwrap();
        assert_eq!((stored.content.as_str(), stored.kind()), ("kept and more", MessageKind::Agent));
        assert_eq!(content(&store, &ok).await, "fine");

        // The same when the group is written member by member (a member broke the batch).
        let mut gone = two.clone();
        gone.id = SessionId::new("deleted-session");
        let never = start(&store, MessageKind::Agent);
        let (members, answers): (Vec<_>, Vec<_>) =
            [member(&gone, &never, "never"), member(&one, &append(&also_lost), "thought")]
                .into_iter()
                .unzip();
        write_group(&store, members).await;
        let outcomes: Vec<Outcome> =
            futures::future::join_all(answers).await.into_iter().map(Result::unwrap).collect();
        assert!(outcomes[0].is_err() && outcomes[1].is_ok(), "{outcomes:?}");
        let stored = store.get_message(also_lost.message()).await.unwrap();
        assert_eq!((stored.content.as_str(), stored.kind()), ("thought", MessageKind::Thought));
    }

    /// Writes one group of `n` new messages, alternating two sessions; returns its time.
    async fn timed_group(store: &Store, one: &Session, two: &Session, n: usize) -> Duration {
        let mut members = vec![];
        let mut answers = vec![];
        for i in 0..n {
            let session = if i % 2 == 0 { one } else { two };
            let (member, answer) = member(session, &start(store, MessageKind::Agent), "text");
            members.push(member);
            answers.push(answer);
        }
        let started = Instant::now();
        write_group(store, members).await;
        for answer in answers {
            answer.await.unwrap().unwrap();
        }
        started.elapsed()
    }

    /// A group's cost is linear in its size: answering it with all its committed events for
    /// every member would be O(n²), and a writer that fell behind (larger groups) would fall
    /// further behind (88 % of the server's CPU in P3's ingest when it was done).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn i15_d3_a_group_ten_times_larger_costs_less_than_thirty_times_the_time() {
        let (_dir, store, one, two) = fixture().await;
        timed_group(&store, &one, &two, 50).await; // warm: statements prepared
        let small = timed_group(&store, &one, &two, 200).await;
        let large = timed_group(&store, &one, &two, 2_000).await;
        let ratio = large.as_secs_f64() / small.as_secs_f64();
        eprintln!("200 members: {small:?}; 2,000 members: {large:?}; ratio {ratio:.2}");
        assert!(
            ratio < 30.0,
            "2,000 members took {ratio:.1}× the time of 200 ({large:?} vs {small:?})"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn i15_a1_pipelined_writes_are_stored_and_told_in_submission_order() {
        let (_dir, store, one, two) = fixture().await;
        let mut events = store.subscribe();
        let writer = StreamWriter::new(tokio_util::task::TaskTracker::new());
        // Two sessions submit without waiting: per session, messages of alternating kinds
        // with appends, as an agent interleaving text and thoughts streams them.
        let mut expected: Vec<(Session, Vec<(Target, String)>)> = vec![];
        let mut answers = vec![];
        for session in [&one, &two] {
            expected.push((session.clone(), vec![]));
        }
        for round in 0..200 {
            for (session, messages) in expected.iter_mut() {
                let kind = if round % 20 < 10 { MessageKind::Agent } else { MessageKind::Thought };
                let text = format!("<{round}>");
                let same_kind = |(t, _): &&mut (Target, String)| matches!(t, Target::Start { kind: k, .. } if *k == kind);
                let target = match messages.last_mut().filter(same_kind) {
                    Some((started, stored)) => {
                        stored.push_str(&text);
                        append(started)
                    }
                    _ => {
                        let target = start(&store, kind);
                        messages.push((target.clone(), text.clone()));
                        target
                    }
                };
                answers.push(writer.submit(&store, &session.id, target, text, None));
            }
            if round % 50 == 0 {
                tokio::task::yield_now().await;
            }
        }
        for answer in answers {
            answered(answer).await.unwrap();
        }
        let told = published(&mut events);
        assert!(told.windows(2).all(|w| w[0].0 < w[1].0), "published in seq order");
        assert!(told.len() < 400, "later text joined queued writes: {} events", told.len());
        for (session, messages) in &expected {
            let listed = store.list_messages(&session.id, None, None, 1000).await.unwrap();
            let stored: Vec<(String, String)> =
                listed.iter().map(|m| (m.id.to_string(), m.content.clone())).collect();
            let want: Vec<(String, String)> =
                messages.iter().map(|(t, text)| (t.message().to_string(), text.clone())).collect();
            assert_eq!(stored, want, "in order, each message whole");
            // What was told of each message, in order, is what was stored.
            for (target, text) in messages {
                let id = target.message().as_str();
                let of_it: String =
                    told.iter().filter(|t| t.2 == id).map(|t| t.3.as_str()).collect();
                assert_eq!(&of_it, text);
            }
        }
    }
}
