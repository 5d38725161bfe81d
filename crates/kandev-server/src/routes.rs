//! Who follows which topic: the fan-out hands each committed frame only to the WebSocket
//! connections that follow its topic (issue 15, scope 3).
//!
//! Before, every connection's delivery loop received every frame of every topic (one
//! broadcast channel) and dropped those it did not follow, so a streamed delta woke every
//! connection: with P1's 100 subscribers of 50 sessions, each of ~10,000 deltas a second
//! woke 100 tasks to be read by 2. Now a delta costs one look-up and one queue push per
//! follower.
//!
//! Invariants:
//! - A connection follows a topic here *before* it reads where to start it from the store
//!   (`ws::subscribe`): a frame committed after that read is routed to it, one committed
//!   before is older than the start it read. Duplicates (a frame also replayed) are dropped
//!   by the connection's per-topic `seq`.
//! - Each connection's frames keep commit order: one fan-out task pushes them into one queue
//!   per connection.
//! - Nothing is lost when a connection falls behind: a frame that does not fit its queue is
//!   dropped and the connection is told it is [`Follower::behind`], after which it re-reads
//!   what it follows from the event log. The same happens to every connection when the
//!   fan-out itself fell behind the store ([`Routes::all_behind`]).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::{Notify, mpsc};

/// Frames one connection may have queued before it counts as behind (its delivery loop
/// then replays from the event log instead).
pub const FOLLOWER_QUEUE: usize = 4096;

/// The routing table; one per server, shared by the fan-out and every connection.
pub struct Routes<F> {
    inner: Mutex<Table<F>>,
}

struct Table<F> {
    next_id: u64,
    /// Topic -> the connections following it.
    followers: HashMap<Arc<str>, Vec<u64>>,
    connections: HashMap<u64, Connection<F>>,
}

struct Connection<F> {
    queue: mpsc::Sender<Arc<F>>,
    behind: Arc<Notify>,
    topics: HashSet<Arc<str>>,
}

impl<F> Default for Routes<F> {
    fn default() -> Self {
        let table = Table { next_id: 0, followers: HashMap::new(), connections: HashMap::new() };
        Routes { inner: Mutex::new(table) }
    }
}

impl<F> Routes<F> {
    fn table(&self) -> MutexGuard<'_, Table<F>> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A new connection, following nothing yet, and the queue its frames arrive on.
    pub fn connect(self: &Arc<Self>) -> (Follower<F>, mpsc::Receiver<Arc<F>>) {
        let (queue, frames) = mpsc::channel(FOLLOWER_QUEUE);
        let behind = Arc::new(Notify::new());
        let mut table = self.table();
        let id = table.next_id;
        table.next_id += 1;
        let connection = Connection { queue, behind: behind.clone(), topics: HashSet::new() };
        table.connections.insert(id, connection);
        (Follower { id, routes: self.clone(), behind }, frames)
    }

    /// Whether any connection follows `topic`.
    #[cfg(test)]
    fn followed(&self, topic: &str) -> bool {
        self.table().followers.contains_key(topic)
    }

    /// Queues the frame `make` makes for every connection following `topic` (nothing is
    /// made when nobody does); one whose queue is full is marked behind instead. Never waits,
    /// and the frame is made outside the table's lock. (A connection that starts following
    /// `topic` meanwhile misses this frame, which is older than the start it reads.)
    pub fn publish_with(&self, topic: &str, make: impl FnOnce() -> F) {
        let targets: Vec<(mpsc::Sender<Arc<F>>, Arc<Notify>)> = {
            let table = self.table();
            let Some(ids) = table.followers.get(topic) else { return };
            ids.iter()
                .filter_map(|id| table.connections.get(id))
                .map(|c| (c.queue.clone(), c.behind.clone()))
                .collect()
        };
        let frame = Arc::new(make());
        for (queue, behind) in targets {
            match queue.try_send(frame.clone()) {
                Ok(()) | Err(mpsc::error::TrySendError::Closed(_)) => {}
                Err(mpsc::error::TrySendError::Full(_)) => behind.notify_one(),
            }
        }
    }

    /// The fan-out missed events: every connection re-reads what it follows.
    pub fn all_behind(&self) {
        for connection in self.table().connections.values() {
            connection.behind.notify_one();
        }
    }

    /// How many connections follow `topic`.
    #[cfg(test)]
    fn follower_count(&self, topic: &str) -> usize {
        self.table().followers.get(topic).map_or(0, Vec::len)
    }
}

impl<F> Table<F> {
    fn unfollow(&mut self, id: u64, topic: &str) {
        if let Some(ids) = self.followers.get_mut(topic) {
            ids.retain(|i| *i != id);
            if ids.is_empty() {
                self.followers.remove(topic);
            }
        }
    }
}

/// One connection's end of the table; dropping it forgets the connection.
pub struct Follower<F> {
    id: u64,
    routes: Arc<Routes<F>>,
    behind: Arc<Notify>,
}

impl<F> Follower<F> {
    /// Routes `topic`'s frames to this connection from now on.
    pub fn follow(&self, topic: &str) {
        let mut table = self.routes.table();
        let Some(connection) = table.connections.get_mut(&self.id) else { return };
        let topic: Arc<str> = topic.into();
        if connection.topics.insert(topic.clone()) {
            table.followers.entry(topic).or_default().push(self.id);
        }
    }

    /// Stops routing `topic`'s frames here.
    pub fn unfollow(&self, topic: &str) {
        let mut table = self.routes.table();
        let Some(connection) = table.connections.get_mut(&self.id) else { return };
        if connection.topics.remove(topic) {
            table.unfollow(self.id, topic);
        }
    }

    /// Resolves once a frame for this connection was dropped (its queue was full) or the
    /// fan-out fell behind: the connection must re-read what it follows from the event log.
    pub async fn behind(&self) {
        self.behind.notified().await;
    }
}

impl<F> Drop for Follower<F> {
    fn drop(&mut self) {
        let mut table = self.routes.table();
        if let Some(connection) = table.connections.remove(&self.id) {
            for topic in &connection.topics {
                table.unfollow(self.id, topic);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use futures::FutureExt;

    use super::{FOLLOWER_QUEUE, Routes};

    /// P1's shape: 50 topics, two followers each. Before, every frame went to every
    /// connection (100 deliveries for each, 98 of them dropped by the connection).
    #[tokio::test]
    async fn i15_a3_a_frame_reaches_only_the_followers_of_its_topic() {
        let routes = Arc::new(Routes::<String>::default());
        let mut connections = vec![];
        for session in 0..50 {
            for _ in 0..2 {
                let (follower, frames) = routes.connect();
                follower.follow(&format!("session:{session}"));
                connections.push((session, follower, frames));
            }
        }
        for round in 0..10 {
            for session in 0..50 {
                let topic = format!("session:{session}");
                routes.publish_with(&topic, || format!("{topic} {round}"));
            }
        }
        for (session, _follower, frames) in &mut connections {
            let mut got = vec![];
            while let Ok(frame) = frames.try_recv() {
                got.push(frame.to_string());
            }
            let expected: Vec<String> =
                (0..10).map(|round| format!("session:{session} {round}")).collect();
            assert_eq!(got, expected, "only its own topic's frames, in order");
        }
    }

    #[tokio::test]
    async fn i15_a3_unfollowing_and_dropping_stop_the_frames() {
        let routes = Arc::new(Routes::<u32>::default());
        let (one, mut one_frames) = routes.connect();
        let (two, mut two_frames) = routes.connect();
        one.follow("t");
        two.follow("t");
        two.follow("t"); // twice is once
        assert_eq!(routes.follower_count("t"), 2);
        one.unfollow("t");
        routes.publish_with("t", || 1);
        assert!(one_frames.try_recv().is_err());
        assert_eq!(*two_frames.try_recv().unwrap(), 1);
        drop(two);
        assert!(!routes.followed("t"), "a dropped connection follows nothing");
        routes.publish_with("t", || 2);
        assert!(two_frames.try_recv().is_err());
    }

    /// A frame that does not fit is not lost silently: the connection is told to catch up
    /// from the event log.
    #[tokio::test]
    async fn i15_a3_a_full_queue_marks_its_connection_behind() {
        let routes = Arc::new(Routes::<usize>::default());
        let (slow, _frames) = routes.connect();
        slow.follow("t");
        for n in 0..FOLLOWER_QUEUE {
            routes.publish_with("t", || n);
        }
        assert!(slow.behind().now_or_never().is_none(), "not behind while everything fits");
        routes.publish_with("t", || FOLLOWER_QUEUE);
        assert!(slow.behind().now_or_never().is_some(), "behind once a frame was dropped");
    }

    #[tokio::test]
    async fn i15_a3_a_fan_out_gap_marks_every_connection_behind() {
        let routes = Arc::new(Routes::<u8>::default());
        let (one, _a) = routes.connect();
        let (two, _b) = routes.connect();
        routes.all_behind();
        assert!(one.behind().now_or_never().is_some());
        assert!(two.behind().now_or_never().is_some());
    }
}
