//! Time and id generation as injected capabilities, so tests can make them deterministic.

/// Milliseconds since the Unix epoch, UTC.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(pub i64);

impl Timestamp {
    pub fn millis(self) -> i64 {
        self.0
    }
}

/// Where "now" comes from. The server uses the system clock; tests use a fixed or stepped one.
pub trait Clock: Send + Sync + 'static {
    fn now(&self) -> Timestamp;
}

/// Where new ids come from. The server uses random UUIDs; tests use a counter.
pub trait IdGenerator: Send + Sync + 'static {
    fn next_id(&self) -> String;
}
