//! Capturing every tracing event and span field of a test process as text, for tests that
//! check what is (never) logged: secrets, tokens.

use std::fmt::Write as _;
use std::sync::{Arc, Mutex, OnceLock};

/// Every tracing event and span field of this test process, as text.
pub fn captured_logs() -> Arc<Mutex<String>> {
    static LOGS: OnceLock<Arc<Mutex<String>>> = OnceLock::new();
    LOGS.get_or_init(|| {
        let logs = Arc::new(Mutex::new(String::new()));
        let _ = tracing::subscriber::set_global_default(Capture(logs.clone()));
        logs
    })
    .clone()
}

struct Capture(Arc<Mutex<String>>);

struct Fields<'a>(&'a mut String);

impl tracing::field::Visit for Fields<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        let _ = write!(self.0, " {}={:?}", field.name(), value);
    }
}

impl Capture {
    fn append(&self, metadata: &tracing::Metadata<'_>, record: impl FnOnce(&mut Fields<'_>)) {
        let mut line = format!("{} {}:", metadata.level(), metadata.target());
        record(&mut Fields(&mut line));
        let mut logs = self.0.lock().unwrap_or_else(|p| p.into_inner());
        logs.push_str(&line);
        logs.push('\n');
    }
}

impl tracing::Subscriber for Capture {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }

    fn new_span(&self, span: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        self.append(span.metadata(), |fields| span.record(fields));
        tracing::span::Id::from_u64(1)
    }

    fn record(&self, _: &tracing::span::Id, values: &tracing::span::Record<'_>) {
        let mut line = String::from("span record:");
        values.record(&mut Fields(&mut line));
        self.0.lock().unwrap_or_else(|p| p.into_inner()).push_str(&line);
    }

    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}

    fn event(&self, event: &tracing::Event<'_>) {
        self.append(event.metadata(), |fields| event.record(fields));
    }

    fn enter(&self, _: &tracing::span::Id) {}

    fn exit(&self, _: &tracing::span::Id) {}
}
