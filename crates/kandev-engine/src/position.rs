//! Exactly once into the transcript through a runner (issue 20, lifecycle rule 42): which
//! bytes of a runner execution's output a session has handled, recorded in every transaction
//! that commits their effects and acknowledged to the runner only after that commit, so a
//! server that dies at any point is followed by one that gets the rest of the output, once.

use kandev_domain::SessionId;
use kandev_runtime::runner::{Acks, RemoteExecution};
use kandev_store::WriteTx;

use crate::error::Result;

/// The runner execution a live session follows.
pub(crate) struct Track {
    pub acks: Acks,
    /// Bytes of the stdout pipe dropped before the ACP reader saw any (the part of the first
    /// replayed item an earlier server had handled): pipe offset = ACP offset + `skipped`.
    pub skipped: u64,
    /// The ACP offset up to which the agent's lines are handled (the end of the line of the
    /// event being handled, while it is).
    pub handled: u64,
    /// The ACP offset up to which an earlier server committed the effects of the replayed
    /// output already (`RunnerPosition::ahead`: output stored while a permission request
    /// before it waited): events ending there or before are not handled again, except
    /// requests, which are answered (asked) again.
    pub replayed: u64,
}

impl Track {
    /// The mark of ACP offset `at` (`None` when a later one is committed already), with the
    /// effects of the output up to ACP offset `stored` committed too (at least up to
    /// [`Self::replayed`]; `stored` past `at` when a permission request holds the position
    /// back).
    pub fn mark(&self, session_id: &SessionId, epoch: i64, at: u64, stored: u64) -> Option<Mark> {
        let (seq, skip) = self.acks.position(at + self.skipped)?;
        let ahead = stored.max(self.replayed).saturating_sub(at);
        Some(Mark {
            session_id: session_id.clone(),
            epoch,
            seq,
            skip,
            ahead,
            acks: self.acks.clone(),
        })
    }

    /// Whether the event whose line ends at ACP offset `at` was handled by an earlier server
    /// (its effects are committed: [`Self::replayed`]).
    pub fn already_handled(&self, at: u64) -> bool {
        at <= self.replayed
    }
}

/// A runner position to record with a transaction's effects, and to acknowledge once it is
/// committed.
#[derive(Clone)]
pub(crate) struct Mark {
    session_id: SessionId,
    epoch: i64,
    seq: u64,
    skip: u64,
    /// Bytes past the position whose effects are committed too.
    ahead: u64,
    acks: Acks,
}

impl Mark {
    /// Records the position in `tx` (never moves back; fenced by the epoch).
    pub async fn record(&self, tx: &mut WriteTx) -> Result<()> {
        tx.commit_runner_position(&self.session_id, self.epoch, self.seq, self.skip, self.ahead)
            .await?;
        Ok(())
    }

    /// Acknowledges the runner items wholly handled: call only after the commit.
    pub fn ack(&self) {
        crate::fault::before_ack();
        self.acks.commit(self.seq);
    }
}

/// A live execution a session takes over (rule 42's re-adopt branch): the session's actor
/// joins its conversation (`session/adopt.rs`).
pub(crate) struct Adoption {
    pub session_id: SessionId,
    /// The execution's epoch (its runtime row's; the session's own is later after a live
    /// context reset): the live session's, which fences every position it records.
    pub epoch: i64,
    pub execution: RemoteExecution,
    /// Bytes of the first replayed item the last run had handled.
    pub skip: u64,
    /// Bytes of the replay after those whose effects the last run committed (`Track::replayed`).
    pub ahead: u64,
    /// This server's run on the conversation (its request ids start at `run << 32`).
    pub run: u64,
    /// The open turn (its prompt's id is recorded).
    pub turn: Option<kandev_store::OpenTurn>,
    /// The keys of the input the runner took (`session/inputs.rs`).
    pub taken: Vec<String>,
    /// Whether the runner runs on this host (an SSH executor's does not).
    pub here: bool,
}
