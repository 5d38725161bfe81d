//! Links to in-process runners whose network can be taken away (tests of this crate).

use std::sync::{Arc, Mutex};

use super::*;
use crate::runner::{Runner, RunnerClient};

/// Opens in-process connections to a runner; `kill` of the guard closes the stream.
pub(crate) struct InProcess {
    runner: Arc<Mutex<Runner>>,
    /// While set, opening fails (transiently): the network is away.
    down: Arc<Mutex<bool>>,
}

struct Cut(Option<tokio::task::AbortHandle>);

impl TransportGuard for Cut {
    fn kill(&mut self) -> BoxFuture<'_, ()> {
        if let Some(serving) = self.0.take() {
            serving.abort();
        }
        Box::pin(async {})
    }

    fn close(self: Box<Self>, _bound: Duration) -> BoxFuture<'static, ()> {
        Box::pin(async {})
    }
}

impl Transport for InProcess {
    fn open(&mut self) -> BoxFuture<'_, Result<Opened, OpenError>> {
        Box::pin(async move {
            if *self.down.lock().unwrap() {
                return Err(OpenError { message: "the network is away".into(), transient: true });
            }
            let (near, far) = tokio::io::duplex(1 << 16);
            let host = self.runner.lock().unwrap().clone();
            let serving = tokio::spawn(async move {
                let _ = host.serve_connection(far).await;
            });
            let connection = handshake(near)
                .await
                .map_err(|err| OpenError { message: err.to_string(), transient: true })?;
            Ok(Opened { connection, guard: Some(Box::new(Cut(Some(serving.abort_handle())))) })
        })
    }
}

pub(crate) fn quick() -> Backoff {
    Backoff { first: Duration::from_millis(10), max: Duration::from_millis(50), attempts: 1000 }
}

/// A link to `runner`: the client, what its first connection listed, where to take the
/// network away, and where to put another runner in its place.
pub(crate) async fn open(
    runner: &Runner,
) -> (RunnerClient, Vec<ExecutionInfo>, Arc<Mutex<bool>>, Arc<Mutex<Runner>>) {
    let down = Arc::new(Mutex::new(false));
    let host = Arc::new(Mutex::new(runner.clone()));
    let transport = InProcess { runner: host.clone(), down: down.clone() };
    let (client, held) = RunnerClient::open(transport, quick()).await.unwrap();
    (client, held, down, host)
}

pub(crate) async fn link(runner: &Runner) -> (RunnerClient, Arc<Mutex<bool>>) {
    let (client, down, _) = link_to(runner).await;
    (client, down)
}

/// A link to `runner`, and where to put another runner in its place.
pub(crate) async fn link_to(
    runner: &Runner,
) -> (RunnerClient, Arc<Mutex<bool>>, Arc<Mutex<Runner>>) {
    let (client, held, down, host) = open(runner).await;
    assert!(held.is_empty());
    (client, down, host)
}
