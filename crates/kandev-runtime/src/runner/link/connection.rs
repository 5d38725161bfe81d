//! Opening a connection to a runner: the byte stream a [`Transport`] opens (again after each
//! drop), the handshake on it, and what keeps the transport alive while the link uses it.

use std::time::Duration;

use futures::future::BoxFuture;
use futures::{SinkExt, StreamExt};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_util::codec::Framed;

use super::LOST;
use crate::runner::proto::{
    ExecutionInfo, FromRunner, PROTOCOL_VERSION, ProtocolError, ServerCodec, ToRunner, kind_of,
};

/// A byte stream to a runner.
pub trait RunnerStream: AsyncRead + AsyncWrite + Send + Unpin + 'static {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin + 'static> RunnerStream for T {}

/// A connection after the handshake: its frames and the executions the runner holds.
pub struct Handshaken {
    pub(super) framed: Framed<Box<dyn RunnerStream>, ServerCodec>,
    pub executions: Vec<ExecutionInfo>,
}

/// Sends `hello` on `stream` and reads the runner's `welcome`.
pub async fn handshake<S: RunnerStream>(stream: S) -> Result<Handshaken, ProtocolError> {
    let stream: Box<dyn RunnerStream> = Box::new(stream);
    let mut framed = Framed::new(stream, ServerCodec::default());
    framed.send(ToRunner::Hello { version: PROTOCOL_VERSION }).await?;
    match framed.next().await {
        Some(Ok(FromRunner::Welcome { version, executions })) => {
            if version != PROTOCOL_VERSION {
                return Err(ProtocolError::VersionMismatch {
                    ours: PROTOCOL_VERSION,
                    theirs: version,
                });
            }
            Ok(Handshaken { framed, executions })
        }
        Some(Ok(FromRunner::Refused { message })) => Err(ProtocolError::Refused(message)),
        Some(Ok(other)) => {
            Err(ProtocolError::Unexpected { expected: "welcome", got: kind_of(&other) })
        }
        Some(Err(err)) => Err(err),
        None => Err(ProtocolError::Closed),
    }
}

/// Why a connection could not be opened.
#[derive(Debug, Clone)]
pub struct OpenError {
    pub message: String,
    /// Whether trying again later may help (a refused host key or another version does not).
    pub transient: bool,
}

/// What keeps a connection's transport (an `ssh` client): ended when the connection is.
pub trait TransportGuard: Send {
    /// Ends the transport as if the network went away (tests).
    fn kill(&mut self) -> BoxFuture<'_, ()>;
    /// Ends it cleanly once what was written reached the runner, within `bound`.
    fn close(self: Box<Self>, bound: Duration) -> BoxFuture<'static, ()>;
}

/// An opened connection.
pub struct Opened {
    pub connection: Handshaken,
    pub guard: Option<Box<dyn TransportGuard>>,
}

/// How a connection to a runner is opened, again after each drop.
pub trait Transport: Send + 'static {
    fn open(&mut self) -> BoxFuture<'_, Result<Opened, OpenError>>;
}

/// The transport of a connection given by the caller (`RunnerClient::connect`): it is not
/// opened again, so a drop is the end of the link.
pub(crate) struct NotReopened;

impl Transport for NotReopened {
    fn open(&mut self) -> BoxFuture<'_, Result<Opened, OpenError>> {
        Box::pin(async { Err(OpenError { message: LOST.into(), transient: false }) })
    }
}
