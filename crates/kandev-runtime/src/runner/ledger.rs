//! The acknowledgement ledgers of one execution, both ways: [`Acks`] for the runner's output
//! items (which stdout byte came from which item, what is committed), [`Inputs`] for the
//! items of its stdin (numbered, kept until the runner acknowledges them, sent again after a
//! drop from the first one the runner did not take). A runner connection
//! ([`super::RunnerClient`]) holds one of each per execution across every reconnect.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};

use bytes::Bytes;
use tokio::io::{AsyncReadExt, DuplexStream};
use tokio::sync::{Semaphore, mpsc};
use tokio_util::task::AbortOnDropHandle;

use super::proto::{Data, ToRunner};

/// Size of the in-process pipes between a connection and an execution's reader/writer.
pub(crate) const PIPE: usize = 1 << 20;

/// When the runner's items are acknowledged (and so forgotten by the runner).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AckPolicy {
    /// Once written into the stdout pipe: a server that dies before it handled them loses
    /// them.
    OnDelivery,
    /// Only through [`Acks::commit`], once the caller committed their effects: a server that
    /// dies first gets them again from the runner, from the first uncommitted one.
    OnCommit,
}

/// Which runner item each byte of an execution's stdout pipe came from, and the
/// acknowledgements of an [`AckPolicy::OnCommit`] follower.
#[derive(Clone)]
pub struct Acks {
    exec: String,
    out: mpsc::UnboundedSender<ToRunner>,
    ledger: Arc<Mutex<Ledger>>,
}

struct Ledger {
    /// Bytes written into the stdout pipe so far.
    written: u64,
    /// `(end offset, seq)` of the items written and not yet acknowledged, in order.
    items: VecDeque<(u64, u64)>,
    /// The highest acknowledged number (the runner's own count when attached).
    acked: u64,
    /// The number of the exit item, once it arrived.
    exit: Option<u64>,
    /// The highest number written into the stdout pipe or acknowledged: a replay after a
    /// reconnect starts at the runner's own acknowledgement and skips up to it.
    last: u64,
    /// Where the acknowledged item `acked` ends in the stdout pipe (0 before any was
    /// written: the pipe starts with item `acked + 1`).
    acked_end: u64,
}

impl Acks {
    pub(crate) fn new(exec: &str, out: mpsc::UnboundedSender<ToRunner>, acked: u64) -> Self {
        let ledger = Ledger {
            written: 0,
            items: VecDeque::new(),
            acked,
            exit: None,
            last: acked,
            acked_end: 0,
        };
        Self { exec: exec.to_owned(), out, ledger: Arc::new(Mutex::new(ledger)) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Ledger> {
        self.ledger.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether item `seq` is new: not yet in the pipe and not acknowledged (a replay after a
    /// reconnect repeats what the runner was not acknowledged for).
    pub(crate) fn is_new(&self, seq: u64) -> bool {
        seq > self.lock().last
    }

    /// Records that item `seq` (`len` bytes) was written into the stdout pipe.
    pub(crate) fn written(&self, seq: u64, len: usize) {
        let mut ledger = self.lock();
        ledger.last = ledger.last.max(seq);
        ledger.written += len as u64;
        let end = ledger.written;
        ledger.items.push_back((end, seq));
    }

    /// The item a reader that consumed the first `offset` bytes of stdout has seen whole: its
    /// number and the offset where it ends (the tag of an ACP message that ends at `offset`).
    /// `None` when no unacknowledged item lies wholly within them.
    pub fn seq_through(&self, offset: u64) -> Option<(u64, u64)> {
        let ledger = self.lock();
        let whole = ledger.items.partition_point(|(end, _)| *end <= offset);
        whole.checked_sub(1).and_then(|i| ledger.items.get(i)).map(|(end, seq)| (*seq, *end))
    }

    /// The runner position of `offset` bytes of stdout: the last item wholly within them and
    /// how many bytes of the next one they cover too (items are chunks of the agent's output,
    /// not lines, so a line can end inside one). A new server that attaches at that item
    /// drops that many bytes of the replay. `None` for an offset before the last
    /// acknowledged item's end (a later position is committed already).
    pub fn position(&self, offset: u64) -> Option<(u64, u64)> {
        let ledger = self.lock();
        let whole = ledger.items.partition_point(|(end, _)| *end <= offset);
        match whole.checked_sub(1).and_then(|i| ledger.items.get(i)) {
            Some((end, seq)) => Some((*seq, offset - end)),
            None => offset.checked_sub(ledger.acked_end).map(|skip| (ledger.acked, skip)),
        }
    }

    /// Acknowledges every item up to `seq` (the last one whose effects are committed): the
    /// runner forgets them and replays only later ones after a reconnect. Lower numbers than
    /// an earlier commit change nothing.
    pub fn commit(&self, seq: u64) {
        let mut ledger = self.lock();
        if seq <= ledger.acked {
            return;
        }
        ledger.acked = seq;
        ledger.last = ledger.last.max(seq);
        while ledger.items.front().is_some_and(|(_, s)| *s <= seq) {
            if let Some((end, _)) = ledger.items.pop_front() {
                ledger.acked_end = end;
            }
        }
        let _ = self.out.send(ToRunner::Ack { exec: self.exec.clone(), seq });
    }

    /// The highest acknowledged number.
    pub fn committed(&self) -> u64 {
        self.lock().acked
    }

    /// The number of the execution's exit item, once it arrived (commit it after the exit's
    /// effects; the runner then forgets the execution).
    pub fn exit_seq(&self) -> Option<u64> {
        self.lock().exit
    }

    /// Records the number of the exit item.
    pub(crate) fn exited(&self, seq: u64) {
        let mut ledger = self.lock();
        ledger.exit = Some(seq);
        ledger.last = ledger.last.max(seq);
    }
}

/// The input items of one execution not yet acknowledged by the runner, in order, and the
/// connection they go to. Bytes written to the execution's stdin pipe become items (a chunk
/// each, then the close) numbered from the runner's last taken one plus 1; each is sent when
/// made and kept until an `input_ack` covers it; [`super::RunnerClient::resume`] points the queue at
/// a new connection and resends what the runner did not take. At most `limit`
/// unacknowledged bytes are held (a single larger chunk alone): the stdin task waits for
/// acknowledgements past it, so the pipe fills and its writer waits.
#[derive(Clone)]
pub struct Inputs {
    shared: Arc<InputShared>,
}

struct InputShared {
    exec: String,
    /// Permits for unacknowledged bytes (`limit` in all; an item holds `min(len, limit)`).
    room: Arc<Semaphore>,
    state: Mutex<InputState>,
    /// The task that turns the stdin pipe into items; it ends with the last handle.
    task: OnceLock<AbortOnDropHandle<()>>,
}

/// Names a line written into an execution's stdin pipe, so the runner can say whether it took
/// it (protocol version 3): `(offset, key)`, where `offset` is the byte offset in the pipe
/// just past the line's last byte. Sent *before* the line is written into the pipe, in the
/// order the lines are written; the pipe's reader gives the key to the item holding that
/// byte. A writer that names nothing never sends.
pub type InputKeys = mpsc::UnboundedSender<(u64, String)>;

/// One unacknowledged input item.
struct InputItem {
    seq: u64,
    /// `None`: the close.
    data: Option<Bytes>,
    /// The keys of the lines that end in it.
    keys: Vec<String>,
    /// The permits of room it holds.
    permits: u32,
}

struct InputState {
    /// The number the next item gets.
    next: u64,
    /// Unacknowledged items, in order.
    items: VecDeque<InputItem>,
    /// Unacknowledged bytes.
    bytes: usize,
    /// The connection items go to (a gone one: they wait for [`super::RunnerClient::resume`]).
    out: mpsc::UnboundedSender<ToRunner>,
}

impl Inputs {
    /// A queue whose first item is `taken + 1`, sending to `out`, bounded by `limit` bytes.
    pub(crate) fn new(
        exec: &str,
        out: mpsc::UnboundedSender<ToRunner>,
        taken: u64,
        limit: usize,
    ) -> Self {
        let limit = u32::try_from(limit).unwrap_or(u32::MAX).max(1);
        let state = InputState { next: taken + 1, items: VecDeque::new(), bytes: 0, out };
        let shared = InputShared {
            exec: exec.to_owned(),
            room: Arc::new(Semaphore::new(limit as usize)),
            state: Mutex::new(state),
            task: OnceLock::new(),
        };
        Self { shared: Arc::new(shared) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, InputState> {
        self.shared.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The stdin pipe whose bytes become this queue's items (once per queue), and where its
    /// writer names the lines it writes ([`InputKeys`]).
    pub(crate) fn start_stdin(&self, limit: usize) -> (DuplexStream, InputKeys) {
        let (stdin, stdin_rx) = tokio::io::duplex(PIPE);
        let (keys, keys_rx) = mpsc::unbounded_channel();
        let limit = u32::try_from(limit).unwrap_or(u32::MAX).max(1);
        #[expect(
            clippy::disallowed_methods,
            reason = "owned by the queue (`shared.task`, an `AbortOnDropHandle`)"
        )]
        let task = tokio::spawn(read_stdin(
            Arc::downgrade(&self.shared),
            self.shared.room.clone(),
            limit,
            stdin_rx,
            keys_rx,
        ));
        let _ = self.shared.task.set(AbortOnDropHandle::new(task));
        (stdin, keys)
    }

    /// Numbers an item, keeps it and sends it.
    pub(crate) fn push(&self, data: Option<Bytes>, keys: Vec<String>, permits: u32) {
        let mut state = self.lock();
        let seq = state.next;
        state.next += 1;
        state.bytes += data.as_ref().map_or(0, Bytes::len);
        let item = InputItem { seq, data, keys, permits };
        let _ = state.out.send(frame(&self.shared.exec, &item));
        state.items.push_back(item);
    }

    /// The runner took every item up to `seq`: they are forgotten and their room freed.
    pub(crate) fn acked(&self, seq: u64) {
        let mut state = self.lock();
        let mut freed = 0usize;
        while state.items.front().is_some_and(|item| item.seq <= seq) {
            if let Some(item) = state.items.pop_front() {
                state.bytes -= item.data.as_ref().map_or(0, Bytes::len);
                freed += item.permits as usize;
            }
        }
        drop(state);
        self.shared.room.add_permits(freed);
    }

    /// Points the queue at a connection: items up to `acked` are forgotten, items after
    /// `taken` are sent again, in order, before any new one (both under one lock).
    pub(crate) fn resume(&self, out: mpsc::UnboundedSender<ToRunner>, taken: u64, acked: u64) {
        self.acked(acked);
        let mut state = self.lock();
        state.next = state.next.max(taken + 1);
        for item in &state.items {
            if item.seq > taken {
                let _ = out.send(frame(&self.shared.exec, item));
            }
        }
        state.out = out;
    }

    /// Unacknowledged input bytes (tests and diagnostics).
    pub fn unacknowledged(&self) -> usize {
        self.lock().bytes
    }

    /// The number of the last item made (0 before any).
    pub fn last(&self) -> u64 {
        self.lock().next - 1
    }
}

fn frame(exec: &str, item: &InputItem) -> ToRunner {
    let (exec, seq) = (exec.to_owned(), item.seq);
    match &item.data {
        Some(bytes) => {
            ToRunner::Input { exec, seq, data: Data(bytes.clone()), keys: item.keys.clone() }
        }
        None => ToRunner::CloseInput { exec, seq },
    }
}

/// Turns the stdin pipe into input items, waiting for room past the bound; its end becomes
/// the close item. Each item carries the keys of the lines that end in it (`keys`, named
/// before the lines were written, so a key is always there by the time its bytes are).
/// Holds the queue only weakly: the last [`Inputs`] handle ends it.
async fn read_stdin(
    inputs: Weak<InputShared>,
    room: Arc<Semaphore>,
    limit: u32,
    mut stdin: DuplexStream,
    mut keys: mpsc::UnboundedReceiver<(u64, String)>,
) {
    let mut chunk = vec![0u8; 64 * 1024];
    let mut named: VecDeque<(u64, String)> = VecDeque::new();
    let mut read = 0u64;
    loop {
        let data = match stdin.read(&mut chunk).await {
            Ok(0) | Err(_) => None,
            Ok(n) => Some(Bytes::copy_from_slice(&chunk[..n])),
        };
        let len = data.as_ref().map_or(0, Bytes::len);
        read += len as u64;
        while let Ok(key) = keys.try_recv() {
            named.push_back(key);
        }
        let mut item_keys = vec![];
        while named.front().is_some_and(|(end, _)| *end <= read) {
            if let Some((_, key)) = named.pop_front() {
                item_keys.push(key);
            }
        }
        let permits = u32::try_from(len).unwrap_or(u32::MAX).min(limit);
        if permits > 0 {
            match room.acquire_many(permits).await {
                Ok(permit) => permit.forget(),
                Err(_) => return,
            }
        }
        let Some(shared) = inputs.upgrade() else { return };
        let closing = data.is_none();
        Inputs { shared }.push(data, item_keys, permits);
        if closing {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sent(rx: &mut mpsc::UnboundedReceiver<ToRunner>) -> Vec<(u64, Option<Vec<u8>>)> {
        let mut frames = Vec::new();
        while let Ok(frame) = rx.try_recv() {
            frames.push(match frame {
                ToRunner::Input { seq, data, .. } => (seq, Some(data.0.to_vec())),
                ToRunner::CloseInput { seq, .. } => (seq, None),
                other => panic!("not an input frame: {other:?}"),
            });
        }
        frames
    }

    #[test]
    fn i20_d5_a_resumed_queue_resends_what_was_not_taken_in_order_before_new_items() {
        let (old, mut old_rx) = mpsc::unbounded_channel();
        // Attached after the runner took item 2 (of an earlier server): numbering goes on.
        let inputs = Inputs::new("x", old, 2, 1 << 20);
        for text in ["a", "b", "c", "d"] {
            // As the stdin task does: room first, then the item.
            inputs.shared.room.try_acquire_many(1).unwrap().forget();
            inputs.push(Some(Bytes::from_static(text.as_bytes())), vec![], 1);
        }
        assert_eq!(sent(&mut old_rx).iter().map(|(seq, _)| *seq).collect::<Vec<_>>(), [3, 4, 5, 6]);
        inputs.acked(3);
        assert_eq!(inputs.unacknowledged(), 3);
        // The connection dropped; the new one's welcome: taken through 5, acknowledged 4.
        let (new, mut new_rx) = mpsc::unbounded_channel();
        inputs.resume(new, 5, 4);
        inputs.push(None, vec![], 0);
        assert_eq!(
            sent(&mut new_rx),
            [(6, Some(b"d".to_vec())), (7, None)],
            "only what was not taken is sent again, then the new item"
        );
        assert_eq!(inputs.unacknowledged(), 2, "item 5 stays until acknowledged");
        assert!(sent(&mut old_rx).is_empty());
        inputs.acked(7);
        assert_eq!((inputs.unacknowledged(), inputs.last()), (0, 7));
        assert_eq!(inputs.shared.room.available_permits(), 1 << 20, "the room is back");
    }

    #[test]
    fn i20_a1_a_position_is_the_last_whole_item_and_the_bytes_of_the_next() {
        let (out, mut sent) = mpsc::unbounded_channel();
        // Attached after item 4 was committed: the pipe starts with item 5.
        let acks = Acks::new("x", out, 4);
        acks.written(5, 10); // bytes 0..10
        acks.written(6, 10); // bytes 10..20
        assert_eq!(acks.position(0), Some((4, 0)));
        assert_eq!(acks.position(7), Some((4, 7)), "a line that ends inside item 5");
        assert_eq!(acks.position(10), Some((5, 0)));
        assert_eq!(acks.position(15), Some((5, 5)));
        acks.commit(5);
        assert!(matches!(sent.try_recv(), Ok(ToRunner::Ack { seq: 5, .. })));
        assert_eq!(acks.position(15), Some((5, 5)), "after the commit too");
        assert_eq!(acks.position(20), Some((6, 0)));
        acks.commit(6);
        assert_eq!(acks.position(25), Some((6, 5)));
        assert_eq!(acks.position(9), None, "before what is committed");
    }
}
