//! The event pump of a live execution: the agent's events (`AgentEvent`s, in the order its
//! lines came) and the results of the actor's child futures (a prompt's answer, a reset's
//! end) go to the actor's inbox as one ordered stream of commands.
//!
//! A result never overtakes an event the agent sent before it. A prompt's answer comes on the
//! same stdout as the turn's updates, after them: the ACP reader queues the updates, then
//! completes the call, whose child future then sends `TurnDone` here. Checking the events
//! first in each round is not enough: they may be empty when looked at and the result there a
//! moment later, in the same round (the reader and the child run on other threads). So after
//! taking a result, the pump forwards every event queued by then first: all those sent
//! before the answer are (lifecycle rule 5, `l05_a_turn_s_end_never_overtakes_its_last_chunk`),
//! and maybe some sent just after it, which could come either side of it before as well.
//! Otherwise a turn's last chunk could reach the actor after the turn had closed, be stored
//! as a message of its own and be told after the `session.turn.completed` a client stops at.

use std::task::{Context, Poll};

use kandev_acp::AgentEvent;
use tokio::sync::mpsc;
use tokio::sync::mpsc::error::TryRecvError;
use tokio_util::sync::CancellationToken;

use crate::command::Command;

/// Where the pump takes the agent's events from: the ACP client's queue (a test puts a
/// hook between the two looks of one round, [`tests`]).
pub(super) trait Events: Send {
    fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Option<(u64, AgentEvent)>>;
    fn try_recv(&mut self) -> Result<(u64, AgentEvent), TryRecvError>;
}

impl Events for mpsc::UnboundedReceiver<(u64, AgentEvent)> {
    fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Option<(u64, AgentEvent)>> {
        mpsc::UnboundedReceiver::poll_recv(self, cx)
    }

    fn try_recv(&mut self) -> Result<(u64, AgentEvent), TryRecvError> {
        mpsc::UnboundedReceiver::try_recv(self)
    }
}

/// Forwards `events` and `results` to `inbox` until cancelled, `results` closes or the actor
/// is gone.
pub(super) async fn run(
    epoch: i64,
    mut events: impl Events,
    mut results: mpsc::UnboundedReceiver<Command>,
    cancel: CancellationToken,
    inbox: mpsc::Sender<Command>,
) {
    let mut events_open = true;
    loop {
        let command = tokio::select! {
            biased;
            _ = cancel.cancelled() => return,
            event = std::future::poll_fn(|cx| events.poll_recv(cx)), if events_open => match event {
                Some((at, event)) => Command::Agent { epoch, at, event },
                None => {
                    events_open = false;
                    continue;
                }
            },
            result = results.recv() => match result {
                Some(result) => {
                    // What the agent sent before the answer behind this result goes first.
                    while events_open {
                        let event = match events.try_recv() {
                            Ok((at, event)) => Command::Agent { epoch, at, event },
                            Err(TryRecvError::Empty) => break,
                            Err(TryRecvError::Disconnected) => {
                                events_open = false;
                                break;
                            }
                        };
                        if inbox.send(event).await.is_err() {
                            return;
                        }
                    }
                    result
                }
                None => return,
            },
        };
        if inbox.send(command).await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::task::{Context, Poll};

    use kandev_acp::AgentEvent;
    use kandev_domain::TurnId;
    use tokio::sync::mpsc;
    use tokio::sync::mpsc::error::TryRecvError;
    use tokio_util::sync::CancellationToken;

    use super::Events;
    use crate::command::Command;

    /// The agent's events, and the moment of the race: the first time the pump finds no
    /// event, the reader queues the turn's last one and the turn's end follows at once, as
    /// when the pump's thread is preempted between its look at the events and its look at
    /// the results while the reader and the prompt's child future run on the other threads.
    struct Racing {
        events: mpsc::UnboundedReceiver<(u64, AgentEvent)>,
        race: Option<Box<dyn FnOnce() + Send>>,
    }

    impl Events for Racing {
        fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Option<(u64, AgentEvent)>> {
            let polled = self.events.poll_recv(cx);
            if polled.is_pending()
                && let Some(race) = self.race.take()
            {
                race();
            }
            polled
        }

        fn try_recv(&mut self) -> Result<(u64, AgentEvent), TryRecvError> {
            self.events.try_recv()
        }
    }

    /// A turn's last chunk and its end: the actor gets the chunk first. Before the pump
    /// forwarded the events queued when it took a result, the end came first and the chunk
    /// was stored after the turn (P1's paced turn, now and then: a subscriber one chunk
    /// short of the stored transcript).
    #[tokio::test]
    async fn l05_a_turn_s_end_never_overtakes_its_last_chunk() {
        let (event_tx, events) = mpsc::unbounded_channel();
        let (result_tx, results) = mpsc::unbounded_channel();
        let (inbox_tx, mut inbox) = mpsc::channel(16);
        let race = move || {
            event_tx.send((1, AgentEvent::Closed)).unwrap();
            let result = Err(kandev_acp::AcpError::Closed { method: "session/prompt".into() });
            let done = Command::TurnDone { epoch: 7, turn_id: TurnId::new("turn"), result };
            result_tx.send(done).unwrap();
        };
        let events = Racing { events, race: Some(Box::new(race)) };
        let cancel = CancellationToken::new();
        let mut pump = tokio::task::JoinSet::new();
        pump.spawn(super::run(7, events, results, cancel.clone(), inbox_tx));
        let first = inbox.recv().await.unwrap();
        let second = inbox.recv().await.unwrap();
        assert!(
            matches!(first, Command::Agent { at: 1, .. }),
            "the chunk sent before the answer comes first"
        );
        assert!(matches!(second, Command::TurnDone { .. }), "then the turn's end");
        cancel.cancel();
        pump.join_next().await.unwrap().unwrap();
    }
}
