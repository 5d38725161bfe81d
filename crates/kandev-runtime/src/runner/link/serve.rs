//! Serving one connection: the frames the runner sends routed to the execution each belongs
//! to, the frames of the executions and callers written in order by a writer task, the
//! commands that need a connection, and on a new connection the take-over of every execution
//! the link follows.

use std::collections::HashMap;

use futures::{SinkExt, StreamExt};
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_util::codec::Framed;
use tokio_util::task::AbortOnDropHandle;

use super::connection::{Handshaken, RunnerStream};
use super::reconnect::offline;
use super::{CLOSE_BOUND, Command, Ended, Event, LOST, Link, Route, SpawnError, admit, reap};
use crate::runner::proto::{
    ExecutionInfo, FromRunner, ProtocolError, ServerCodec, ToRunner, kind_of,
};

impl Link {
    /// Serves one connection until it drops, is killed or the link is closed. Frames go out
    /// through a writer task of the connection, so the actor reads while a write waits (the
    /// runner writes while it reads too: both waiting on a full pipe would be a deadlock).
    pub(super) async fn serve(
        &mut self,
        connection: Handshaken,
        routes: &mut HashMap<String, Route>,
        followers: &mut JoinSet<()>,
        number: u64,
    ) -> Ended {
        let Handshaken { framed, executions } = connection;
        let (sink, mut stream) = framed.split();
        let (wire, frames) = mpsc::unbounded_channel();
        #[expect(
            clippy::disallowed_methods,
            reason = "owned: aborted when the connection's serving ends (`AbortOnDropHandle`)"
        )]
        let mut writer = AbortOnDropHandle::new(tokio::spawn(write_frames(sink, frames)));
        if number == 1 {
            // Held for the caller, who takes each over or forgets it; nothing forgets them.
            for info in &executions {
                routes.entry(info.exec.clone()).or_insert_with(|| Route::Parked(Vec::new()));
            }
        } else {
            self.take_over(&wire, &executions, routes);
        }
        loop {
            tokio::select! {
                frame = stream.next() => match frame {
                    Some(Ok(frame)) => {
                        route(frame, routes, &wire);
                        self.count_parked(routes);
                    }
                    Some(Err(err)) => {
                        tracing::warn!(error = %err, "reading from the runner failed");
                        return Ended::Dropped;
                    }
                    None => return Ended::Dropped,
                },
                Some(frame) = self.outbox.recv() => accept(&wire, frame, routes),
                Some(command) = self.commands.recv() => match command {
                    Command::Close(done) => {
                        // What was sent before (the last acknowledgements) goes out, then the
                        // write side is shut; bounded, as a transport may not take it.
                        while let Ok(frame) = self.outbox.try_recv() {
                            accept(&wire, frame, routes);
                        }
                        drop(wire);
                        let _ = tokio::time::timeout(CLOSE_BOUND, &mut writer).await;
                        return Ended::Closed(done);
                    }
                    Command::DropTransport => return Ended::Killed,
                    command => {
                        self.online(command, &wire, &executions, routes, followers);
                        self.count_parked(routes);
                    }
                },
                written = &mut writer => {
                    if let Ok(Err(err)) = written {
                        tracing::warn!(error = %err, "writing to the runner failed");
                    }
                    return Ended::Dropped;
                }
                Some(()) = reap(followers) => {}
            }
        }
    }

    fn count_parked(&self, routes: &HashMap<String, Route>) {
        let parked = routes
            .values()
            .map(|route| if let Route::Parked(p) = route { p.len() } else { 0 })
            .sum();
        self.parked.store(parked, std::sync::atomic::Ordering::Relaxed);
    }

    /// A command while connected (`listed`: what the connection's `welcome` listed).
    fn online(
        &mut self,
        command: Command,
        wire: &Wire,
        listed: &[ExecutionInfo],
        routes: &mut HashMap<String, Route>,
        followers: &mut JoinSet<()>,
    ) {
        match command {
            Command::Spawn { exec, follower } => {
                let Some(spec) = follower.spawn.clone() else { return };
                if !admit(&exec, &follower, routes) {
                    return;
                }
                routes.insert(exec.clone(), Route::Follow(follower));
                let _ = wire.send(ToRunner::Spawn { exec, spec });
            }
            Command::Attach { info, committed, follower } => {
                if !admit(&info.exec, &follower, routes) {
                    return;
                }
                // Gone meanwhile (forgotten on a reconnect, or exited and acknowledged):
                // nothing would ever come for it.
                if !listed.iter().any(|e| e.exec == info.exec) {
                    let _ = follower.events.send(Event::Lost(LOST.into()));
                    return;
                }
                let mut follower = follower;
                if let Some(Route::Parked(parked)) = routes.remove(&info.exec) {
                    // The scrollback comes first: after any event it was had or there is none.
                    follower.scrollback &= parked.is_empty();
                    for event in parked {
                        let _ = follower.events.send(event);
                    }
                }
                // Input from the first item the runner did not take (an input queue of an
                // earlier connection has some), before any new one.
                follower.sent = info.input_taken;
                follower.inputs.resume(self.out.clone(), info.input_taken, info.input_acked);
                let exec = info.exec.clone();
                routes.insert(exec.clone(), Route::Follow(follower));
                if committed > info.acked {
                    let _ = wire.send(ToRunner::Ack { exec, seq: committed });
                }
            }
            Command::Forget { exec } => {
                routes.insert(exec.clone(), Route::Forgotten);
                let _ = wire.send(ToRunner::Forget { exec });
            }
            Command::Stop { exec, grace } => {
                if let Some(Route::Follow(follower)) = routes.get_mut(&exec) {
                    follower.stopping = Some(grace);
                }
                let grace_ms = u64::try_from(grace.as_millis()).unwrap_or(u64::MAX);
                let _ = wire.send(ToRunner::Kill { exec, grace_ms });
            }
            Command::Resize { exec, cols, rows } => {
                let _ = wire.send(ToRunner::Resize { exec, cols, rows });
            }
            other => {
                offline(other, routes, followers);
            }
        }
    }

    /// On a new connection: every followed execution is taken over (or learns it is lost), a
    /// spawn whose answer was lost is sent again or answered from the list, executions held
    /// for the caller stay held (their replay comes again), and what the runner holds that
    /// nobody here follows or holds is forgotten (killed).
    fn take_over(
        &mut self,
        wire: &Wire,
        executions: &[ExecutionInfo],
        routes: &mut HashMap<String, Route>,
    ) {
        let listed = |exec: &str| executions.iter().find(|e| e.exec == exec);
        let mut dropped = vec![];
        for (exec, route) in routes.iter_mut() {
            match route {
                Route::Follow(follower) if follower.events.is_closed() => {
                    // Its caller went away (a cancelled start): it ends.
                    if listed(exec).is_some() {
                        let _ = wire.send(ToRunner::Forget { exec: exec.clone() });
                    }
                    *route = Route::Forgotten;
                }
                Route::Follow(follower) => match listed(exec) {
                    None => match follower.spawn.clone() {
                        Some(spec) => {
                            let _ = wire.send(ToRunner::Spawn { exec: exec.clone(), spec });
                        }
                        None => {
                            // The runner that answered is not the one that ran it (that
                            // one died).
                            tracing::warn!(exec, "the runner no longer holds the execution");
                            let _ = follower.events.send(Event::Lost(LOST.into()));
                            dropped.push(exec.clone());
                        }
                    },
                    Some(info) => {
                        if follower.spawn.take().is_some() {
                            let _ = follower.events.send(Event::Spawned(info.pid));
                        }
                        let committed = follower.acks.committed();
                        if committed > info.acked {
                            let _ = wire.send(ToRunner::Ack { exec: exec.clone(), seq: committed });
                        }
                        // Input from the first item the runner did not take, in order, before
                        // any new one.
                        follower.sent = info.input_taken;
                        follower.inputs.resume(
                            self.out.clone(),
                            info.input_taken,
                            info.input_acked,
                        );
                        if let Some(grace) = follower.stopping {
                            let grace_ms = u64::try_from(grace.as_millis()).unwrap_or(u64::MAX);
                            let _ = wire.send(ToRunner::Kill { exec: exec.clone(), grace_ms });
                        }
                    }
                },
                Route::Parked(parked) => match listed(exec) {
                    // The runner replays what it holds again: what was parked would repeat.
                    Some(_) => parked.clear(),
                    None => dropped.push(exec.clone()),
                },
                Route::Forgotten => match listed(exec) {
                    // The forget may have been lost with the connection.
                    Some(_) => {
                        let _ = wire.send(ToRunner::Forget { exec: exec.clone() });
                    }
                    None => dropped.push(exec.clone()),
                },
            }
        }
        for exec in dropped {
            routes.remove(&exec);
        }
        for info in executions {
            if !routes.contains_key(&info.exec) {
                tracing::info!(exec = %info.exec, pid = info.pid, "forgetting an execution nobody here follows");
                routes.insert(info.exec.clone(), Route::Forgotten);
                let _ = wire.send(ToRunner::Forget { exec: info.exec.clone() });
            }
        }
    }
}

/// The frames of one connection, in the order they are to be written.
type Wire = mpsc::UnboundedSender<ToRunner>;

/// Writes a connection's frames, as many as are ready before each flush, until the actor
/// lets go of the channel (then shuts the write side) or the transport fails.
async fn write_frames(
    mut sink: futures::stream::SplitSink<Framed<Box<dyn RunnerStream>, ServerCodec>, ToRunner>,
    mut frames: mpsc::UnboundedReceiver<ToRunner>,
) -> Result<(), ProtocolError> {
    while let Some(frame) = frames.recv().await {
        sink.feed(frame).await?;
        while let Ok(frame) = frames.try_recv() {
            sink.feed(frame).await?;
        }
        sink.flush().await?;
    }
    sink.close().await
}

/// Passes a frame from the outbox to the connection's writer. An input item goes only in
/// order after the last one written on this connection: an older one is a duplicate, a later
/// one was queued before a reconnect and follows again from the input queue's resend.
fn accept(wire: &Wire, frame: ToRunner, routes: &mut HashMap<String, Route>) {
    if let ToRunner::Input { exec, seq, .. } | ToRunner::CloseInput { exec, seq } = &frame {
        match routes.get_mut(exec.as_str()) {
            Some(Route::Follow(follower)) if *seq == follower.sent + 1 => follower.sent = *seq,
            _ => return,
        }
    }
    let _ = wire.send(frame);
}

/// Hands a frame from the runner to the execution it belongs to. An execution whose caller
/// went away (a start cancelled before its answer) is forgotten, which kills it.
fn route(frame: FromRunner, routes: &mut HashMap<String, Route>, wire: &Wire) {
    let (exec, event) = match frame {
        FromRunner::Spawned { exec, pid } => (exec, Event::Spawned(pid)),
        FromRunner::SpawnFailed { exec, message } => {
            (exec, Event::SpawnFailed(SpawnError::Failed(message)))
        }
        FromRunner::Output { exec, seq, data } => (exec, Event::Output(seq, data.0)),
        FromRunner::Exited { exec, seq, exit, stderr } => {
            (exec, Event::Exited(seq, exit.into(), stderr))
        }
        FromRunner::Scrollback { exec, data } => {
            // The runner sends it on every connection: only a follower that took nothing of
            // the execution yet takes it (one taken over from an earlier server).
            match routes.get_mut(&exec) {
                Some(Route::Parked(parked)) => parked.push(Event::Scrollback(data.0)),
                Some(Route::Follow(follower)) if follower.scrollback => {
                    follower.scrollback = false;
                    let _ = follower.events.send(Event::Scrollback(data.0));
                }
                _ => {}
            }
            return;
        }
        FromRunner::InputAck { exec, seq } => {
            if let Some(Route::Follow(follower)) = routes.get(&exec) {
                follower.inputs.acked(seq);
            }
            return;
        }
        FromRunner::Error { message } => {
            tracing::warn!(message, "the runner reported an error");
            return;
        }
        other => {
            tracing::warn!(frame = kind_of(&other), "unexpected frame from the runner");
            return;
        }
    };
    // The last event of an execution: it is routed no more (its exit is still acknowledged
    // through its ledger, which needs no route).
    let last = matches!(event, Event::SpawnFailed(_) | Event::Exited(..));
    match routes.entry(exec.clone()).or_insert_with(|| Route::Parked(Vec::new())) {
        Route::Follow(follower) => {
            if matches!(event, Event::Spawned(_)) {
                follower.spawn = None;
            }
            follower.scrollback = false;
            let gone = follower.events.send(event).is_err();
            if last {
                routes.remove(&exec);
            } else if gone {
                routes.insert(exec.clone(), Route::Forgotten);
                let _ = wire.send(ToRunner::Forget { exec });
            }
        }
        Route::Parked(parked) => parked.push(event),
        Route::Forgotten => {}
    }
}
