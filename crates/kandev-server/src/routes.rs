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
//! - A connection's queue is bounded in bytes as well as in frames (issue 38 item 3): a
//!   frame that does not fit is dropped, its topic is no longer routed to that connection,
//!   and the connection learns the topic overflowed ([`Behind::overflowed`]): the client
//!   reads more slowly than the topic is written, and is told `resync_required` (`ws.rs`),
//!   as a client that stopped reading is. (Re-reading the event log for it instead would
//!   hold a replay page per slow connection for as long as it stayed behind.)
//! - Nothing is lost when the fan-out itself falls behind the store
//!   ([`Routes::all_behind`]): every connection re-reads what it follows from the event log.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::{Notify, mpsc};

/// Frames one connection may have queued; past it (or past its bytes) a frame overflows.
pub const FOLLOWER_QUEUE: usize = 4096;

/// What a queued frame weighs against its connection's byte bound.
pub trait Weight {
    fn weight(&self) -> usize;
}

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
    lane: Arc<Lane>,
    topics: HashSet<Arc<str>>,
}

/// What the fan-out and one connection's delivery loop share.
struct Lane {
    /// Bytes of frames queued for the connection and not yet taken.
    queued: AtomicUsize,
    /// Most bytes `queued` may reach.
    budget: usize,
    /// Topics whose frames did not fit (and are no longer routed here).
    overflowed: Mutex<HashSet<Arc<str>>>,
    /// The fan-out fell behind the store.
    gap: AtomicBool,
    /// Either of the two above happened.
    signal: Notify,
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

    /// A new connection, following nothing yet, with at most `budget` bytes of frames queued
    /// for it, and the queue its frames arrive on.
    pub fn connect(self: &Arc<Self>, budget: usize) -> (Follower<F>, Frames<F>) {
        let (queue, frames) = mpsc::channel(FOLLOWER_QUEUE);
        let lane = Arc::new(Lane {
            queued: AtomicUsize::new(0),
            budget,
            overflowed: Mutex::new(HashSet::new()),
            gap: AtomicBool::new(false),
            signal: Notify::new(),
        });
        let mut table = self.table();
        let id = table.next_id;
        table.next_id += 1;
        let connection = Connection { queue, lane: lane.clone(), topics: HashSet::new() };
        table.connections.insert(id, connection);
        (Follower { id, routes: self.clone(), lane: lane.clone() }, Frames { frames, lane })
    }

    /// Whether any connection follows `topic`.
    #[cfg(test)]
    fn followed(&self, topic: &str) -> bool {
        self.table().followers.contains_key(topic)
    }

    /// Queues the frame `make` makes for every connection following `topic` (nothing is
    /// made when nobody does). A connection it does not fit (its frames or its bytes) stops
    /// having `topic` routed to it and is told the topic overflowed. Never waits, and the
    /// frame is made outside the table's lock. (A connection that starts following `topic`
    /// meanwhile misses this frame, which is older than the start it reads.)
    pub fn publish_with(&self, topic: &str, make: impl FnOnce() -> F)
    where
        F: Weight,
    {
        let targets: Vec<(u64, mpsc::Sender<Arc<F>>, Arc<Lane>)> = {
            let table = self.table();
            let Some(ids) = table.followers.get(topic) else { return };
            ids.iter()
                .filter_map(|id| Some((*id, table.connections.get(id)?)))
                .map(|(id, c)| (id, c.queue.clone(), c.lane.clone()))
                .collect()
        };
        let frame = Arc::new(make());
        let weight = frame.weight();
        let mut overflowed = vec![];
        for (id, queue, lane) in targets {
            let queued = lane.queued.fetch_add(weight, Ordering::AcqRel);
            // One frame of any size fits an empty queue, as in the outbox.
            let fits = queued == 0 || queued + weight <= lane.budget;
            let sent = fits && queue.try_send(frame.clone()).is_ok();
            if !sent {
                lane.queued.fetch_sub(weight, Ordering::AcqRel);
            }
            if !sent && !queue.is_closed() {
                overflowed.push((id, lane));
            }
        }
        if overflowed.is_empty() {
            return;
        }
        let topic: Arc<str> = topic.into();
        let mut table = self.table();
        for (id, lane) in overflowed {
            if let Some(connection) = table.connections.get_mut(&id) {
                connection.topics.remove(&topic);
            }
            table.unfollow(id, &topic);
            lock(&lane.overflowed).insert(topic.clone());
            lane.signal.notify_one();
        }
    }

    /// The fan-out missed events: every connection re-reads what it follows.
    pub fn all_behind(&self) {
        for connection in self.table().connections.values() {
            connection.lane.gap.store(true, Ordering::Release);
            connection.lane.signal.notify_one();
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

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One connection's queue of frames; a frame taken no longer counts against its bytes.
pub struct Frames<F> {
    frames: mpsc::Receiver<Arc<F>>,
    lane: Arc<Lane>,
}

impl<F: Weight> Frames<F> {
    pub async fn recv(&mut self) -> Option<Arc<F>> {
        let frame = self.frames.recv().await?;
        self.lane.queued.fetch_sub(frame.weight(), Ordering::AcqRel);
        Some(frame)
    }

    /// A frame queued now, if any.
    #[cfg(test)]
    fn try_recv(&mut self) -> Option<Arc<F>> {
        let frame = self.frames.try_recv().ok()?;
        self.lane.queued.fetch_sub(frame.weight(), Ordering::AcqRel);
        Some(frame)
    }
}

/// Why a connection must look at what it follows again.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Behind {
    /// Topics whose frames did not fit its queue: the client reads too slowly for them.
    pub overflowed: Vec<Arc<str>>,
    /// The fan-out fell behind the store: re-read everything followed from the event log.
    pub gap: bool,
}

/// One connection's end of the table; dropping it forgets the connection.
pub struct Follower<F> {
    id: u64,
    routes: Arc<Routes<F>>,
    lane: Arc<Lane>,
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

    /// Resolves once a frame for this connection did not fit its queue or the fan-out fell
    /// behind, with which of the two (both when both happened).
    pub async fn behind(&self) -> Behind {
        loop {
            self.lane.signal.notified().await;
            let mut overflowed: Vec<Arc<str>> = lock(&self.lane.overflowed).drain().collect();
            overflowed.sort();
            let gap = self.lane.gap.swap(false, Ordering::AcqRel);
            if gap || !overflowed.is_empty() {
                return Behind { overflowed, gap };
            }
        }
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

    use super::{Behind, FOLLOWER_QUEUE, Routes, Weight};

    impl Weight for String {
        fn weight(&self) -> usize {
            self.len()
        }
    }

    impl Weight for usize {
        fn weight(&self) -> usize {
            8
        }
    }

    impl Weight for u32 {
        fn weight(&self) -> usize {
            4
        }
    }

    impl Weight for u8 {
        fn weight(&self) -> usize {
            1
        }
    }

    /// P1's shape: 50 topics, two followers each. Before, every frame went to every
    /// connection (100 deliveries for each, 98 of them dropped by the connection).
    #[tokio::test]
    async fn i15_a3_a_frame_reaches_only_the_followers_of_its_topic() {
        let routes = Arc::new(Routes::<String>::default());
        let mut connections = vec![];
        for session in 0..50 {
            for _ in 0..2 {
                let (follower, frames) = routes.connect(usize::MAX);
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
            while let Some(frame) = frames.try_recv() {
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
        let (one, mut one_frames) = routes.connect(usize::MAX);
        let (two, mut two_frames) = routes.connect(usize::MAX);
        one.follow("t");
        two.follow("t");
        two.follow("t"); // twice is once
        assert_eq!(routes.follower_count("t"), 2);
        one.unfollow("t");
        routes.publish_with("t", || 1);
        assert!(one_frames.try_recv().is_none());
        assert_eq!(*two_frames.try_recv().unwrap(), 1);
        drop(two);
        assert!(!routes.followed("t"), "a dropped connection follows nothing");
        routes.publish_with("t", || 2);
        assert!(two_frames.try_recv().is_none());
    }

    /// A frame that does not fit is not lost silently: the connection is told which topic
    /// overflowed, and that topic is no longer routed to it.
    #[tokio::test]
    async fn i15_a3_a_full_queue_marks_its_connection_behind() {
        let routes = Arc::new(Routes::<usize>::default());
        let (slow, _frames) = routes.connect(usize::MAX);
        slow.follow("t");
        for n in 0..FOLLOWER_QUEUE {
            routes.publish_with("t", || n);
        }
        assert!(slow.behind().now_or_never().is_none(), "not behind while everything fits");
        routes.publish_with("t", || FOLLOWER_QUEUE);
        let behind = slow.behind().now_or_never().expect("behind once a frame was dropped");
        assert_eq!(behind, Behind { overflowed: vec![Arc::from("t")], gap: false });
        assert!(!routes.followed("t"), "the topic is no longer routed to it");
    }

    /// Issue 38 item 3: the queue is bounded in bytes. A frame past the bound overflows its
    /// topic (a slow reader); taking frames makes room again, and a connection whose queue is
    /// empty takes one frame of any size.
    #[tokio::test]
    async fn i38_3_a_queue_past_its_bytes_overflows_its_topic_only() {
        let routes = Arc::new(Routes::<String>::default());
        let (slow, mut frames) = routes.connect(10);
        slow.follow("t");
        slow.follow("u");
        routes.publish_with("t", || "0123456789abcdef".into()); // empty: fits whole
        routes.publish_with("u", || "x".into()); // 17 > 10
        let behind = slow.behind().now_or_never().expect("the second frame overflowed");
        assert_eq!(behind, Behind { overflowed: vec![Arc::from("u")], gap: false });
        assert_eq!(frames.try_recv().as_deref().map(String::as_str), Some("0123456789abcdef"));
        assert!(frames.try_recv().is_none(), "the frame that did not fit was dropped");
        assert_eq!(frames.lane.queued.load(std::sync::atomic::Ordering::Acquire), 0);
        routes.publish_with("t", || "0123456789".into());
        assert_eq!(frames.try_recv().as_deref().map(String::as_str), Some("0123456789"));
        assert_eq!(routes.follower_count("u"), 0, "the overflowed topic is no longer routed");
        assert_eq!(routes.follower_count("t"), 1, "the other topic still is");
    }

    #[tokio::test]
    async fn i15_a3_a_fan_out_gap_marks_every_connection_behind() {
        let routes = Arc::new(Routes::<u8>::default());
        let (one, _a) = routes.connect(usize::MAX);
        let (two, _b) = routes.connect(usize::MAX);
        routes.all_behind();
        let gap = Behind { overflowed: vec![], gap: true };
        assert_eq!(one.behind().now_or_never(), Some(gap));
        assert_eq!(two.behind().now_or_never(), Some(Behind { overflowed: vec![], gap: true }));
    }
}
