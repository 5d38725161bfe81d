//! A WebSocket connection's outgoing frames, bounded in bytes: a client that does not read
//! holds at most the budget, and what is queued for it can be dropped (issue 12 finding 3).

use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::extract::ws::Message;
use tokio::sync::Notify;
use tokio::time::Instant;

/// Why a frame was not queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// No room appeared within the wait: the client is not reading.
    Full,
    /// The connection is closing.
    Closed,
}

/// The queue between a connection's producers (subscriptions, request tasks) and its one
/// writer task.
pub struct Outbox {
    state: Mutex<State>,
    /// A frame was queued, or the outbox closed.
    queued: Notify,
    /// The writer took a frame, or the outbox closed: there may be room.
    room: Notify,
    budget: usize,
    wait: Duration,
}

#[derive(Default)]
struct State {
    frames: VecDeque<Queued>,
    bytes: usize,
    closed: bool,
}

struct Queued {
    message: Message,
    bytes: usize,
    /// The topic of a notification; `None` for answers and control frames.
    topic: Option<Arc<str>>,
}

fn size(message: &Message) -> usize {
    match message {
        Message::Text(text) => text.len(),
        Message::Binary(bytes) | Message::Ping(bytes) | Message::Pong(bytes) => bytes.len(),
        Message::Close(_) => 0,
    }
}

impl Outbox {
    /// An outbox holding at most `budget` bytes (one frame of any size when empty); a
    /// producer waits at most `wait` for room.
    pub fn new(budget: usize, wait: Duration) -> Arc<Outbox> {
        Arc::new(Outbox {
            state: Mutex::new(State::default()),
            queued: Notify::new(),
            room: Notify::new(),
            budget,
            wait,
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding this lock cannot leave the queue inconsistent.
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Queues a frame, waiting up to the outbox's wait for room. `topic` marks a
    /// notification, which [`Outbox::drop_notifications`] may later discard.
    pub async fn push(&self, message: Message, topic: Option<Arc<str>>) -> Result<(), Refused> {
        let bytes = size(&message);
        let deadline = Instant::now() + self.wait;
        let mut queued = Some((message, topic));
        loop {
            let room = self.room.notified();
            tokio::pin!(room);
            room.as_mut().enable();
            {
                let mut state = self.lock();
                if state.closed {
                    return Err(Refused::Closed);
                }
                if state.frames.is_empty() || state.bytes + bytes <= self.budget {
                    if let Some((message, topic)) = queued.take() {
                        state.bytes += bytes;
                        state.frames.push_back(Queued { message, bytes, topic });
                    }
                    drop(state);
                    self.queued.notify_one();
                    return Ok(());
                }
            }
            if tokio::time::timeout_at(deadline, room).await.is_err() {
                return Err(Refused::Full);
            }
        }
    }

    /// Queues a small control frame at once, over the budget if need be (`resync_required`,
    /// close): there is at most one per topic, and topics are bounded.
    pub fn push_now(&self, message: Message) -> Result<(), Refused> {
        let bytes = size(&message);
        let mut state = self.lock();
        if state.closed {
            return Err(Refused::Closed);
        }
        state.bytes += bytes;
        state.frames.push_back(Queued { message, bytes, topic: None });
        drop(state);
        self.queued.notify_one();
        Ok(())
    }

    /// Drops every queued notification and returns their topics; answers stay queued.
    pub fn drop_notifications(&self) -> HashSet<Arc<str>> {
        let mut state = self.lock();
        let mut topics = HashSet::new();
        let mut kept = VecDeque::new();
        let mut bytes = 0;
        for frame in std::mem::take(&mut state.frames) {
            match frame.topic {
                Some(topic) => {
                    topics.insert(topic);
                }
                None => {
                    bytes += frame.bytes;
                    kept.push_back(frame);
                }
            }
        }
        state.frames = kept;
        state.bytes = bytes;
        drop(state);
        self.room.notify_waiters();
        topics
    }

    /// The next frame to write; `None` once the outbox is closed and empty.
    #[cfg(test)]
    pub async fn next(&self) -> Option<Message> {
        self.next_batch(1).await.and_then(|mut batch| batch.pop())
    }

    /// Waits for a frame, then takes it with the frames queued behind it (at most `max`):
    /// the writer sends them with one flush (issue 15).
    pub async fn next_batch(&self, max: usize) -> Option<Vec<Message>> {
        loop {
            let queued = self.queued.notified();
            tokio::pin!(queued);
            queued.as_mut().enable();
            {
                let mut state = self.lock();
                if !state.frames.is_empty() {
                    let take = state.frames.len().min(max.max(1));
                    let mut batch = Vec::with_capacity(take);
                    while let Some(frame) =
                        (batch.len() < take).then(|| state.frames.pop_front()).flatten()
                    {
                        state.bytes -= frame.bytes;
                        batch.push(frame.message);
                    }
                    drop(state);
                    self.room.notify_waiters();
                    return Some(batch);
                }
                if state.closed {
                    return None;
                }
            }
            queued.await;
        }
    }

    /// Refuses new frames; what is queued is still written (a close frame, last answers).
    pub fn close(&self) {
        self.lock().closed = true;
        self.queued.notify_one();
        self.room.notify_waiters();
    }

    /// Refuses new frames and drops what is queued, returning its memory.
    pub fn shut(&self) {
        let mut state = self.lock();
        state.closed = true;
        state.frames = VecDeque::new();
        state.bytes = 0;
        drop(state);
        self.queued.notify_one();
        self.room.notify_waiters();
    }

    /// Bytes queued now.
    #[cfg(test)]
    fn queued_bytes(&self) -> usize {
        self.lock().bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(s: &str) -> Message {
        Message::Text(s.into())
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_outbox_refuses_after_the_wait_and_drops_notifications() {
        let outbox = Outbox::new(10, Duration::from_millis(100));
        outbox.push(text("0123456789ab"), Some("a".into())).await.unwrap(); // one always fits
        assert_eq!(outbox.push(text("x"), Some("b".into())).await, Err(Refused::Full));
        outbox.push_now(text("answer")).unwrap();
        assert_eq!(outbox.drop_notifications(), HashSet::from([Arc::from("a")]));
        assert_eq!(outbox.queued_bytes(), 6, "only the answer is left");
        assert_eq!(outbox.next().await, Some(text("answer")));
    }

    #[tokio::test(start_paused = true)]
    async fn a_waiting_producer_gets_room_when_the_writer_takes_a_frame() {
        let outbox = Outbox::new(10, Duration::from_secs(5));
        outbox.push(text("0123456789"), None).await.unwrap();
        let producer = {
            let outbox = outbox.clone();
            tokio::spawn(async move { outbox.push(text("next"), None).await })
        };
        tokio::task::yield_now().await;
        assert_eq!(outbox.next().await, Some(text("0123456789")));
        assert_eq!(producer.await.unwrap(), Ok(()));
        assert_eq!(outbox.next().await, Some(text("next")));
    }

    #[tokio::test]
    async fn shut_frees_the_queue_and_ends_the_writer() {
        let outbox = Outbox::new(100, Duration::from_secs(1));
        outbox.push(text("queued"), Some("a".into())).await.unwrap();
        outbox.shut();
        assert_eq!(outbox.queued_bytes(), 0);
        assert_eq!(outbox.next().await, None);
        assert_eq!(outbox.push(text("late"), None).await, Err(Refused::Closed));
    }
}
