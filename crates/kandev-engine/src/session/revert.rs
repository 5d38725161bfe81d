//! `turn.revert`: the session's worktrees back to how they were before one of its turns
//! (issue 48). It runs in the actor, so no turn starts while files are restored; it is
//! refused while a turn runs, starts or resets. The restore itself is
//! `crate::checkpoints`.

use kandev_domain::TurnId;
use kandev_domain::message_meta::StatusNote;
use kandev_store::SessionUpdate;

use crate::api::{Discard, RevertOutcome};
use crate::checkpoints;
use crate::error::{EngineError, Result};
use crate::session::state::{Phase, SessionActor};

impl SessionActor {
    /// Reverts to before `turn_id` (`dry_run`: only says what that would do). Edits made
    /// since the agent's last turn by someone else are refused by name unless `discard`
    /// allows each (a person confirmed exactly those paths, or all).
    /// Once done: a divider in the transcript, the undone turns marked, the baseline moved
    /// to the restored state, and a notice the agent gets with its next prompt.
    pub(super) async fn revert(
        &mut self,
        turn_id: TurnId,
        discard: Discard,
        dry_run: bool,
    ) -> Result<RevertOutcome> {
        if !matches!(self.phase, Phase::Idle | Phase::Ready(_)) || self.unsettled.is_some() {
            return Err(EngineError::Busy(
                "the agent is working; wait for its turn to end (or cancel it), then revert".into(),
            ));
        }
        let plan = checkpoints::plan_revert(&self.inner, &self.session.id, &turn_id).await?;
        if dry_run {
            return Ok(plan.outcome);
        }
        let refused = discard.refused(&plan.outcome.outside_edits);
        if !refused.is_empty() {
            let names: Vec<&str> = refused.iter().map(|f| f.path.as_str()).take(20).collect();
            let more = if refused.len() > names.len() { ", …" } else { "" };
            return Err(EngineError::Conflict(format!(
                "changed since the agent's last turn by someone else: {}{more}; confirm \
                 discarding those changes too, or keep them and do not revert",
                names.join(", ")
            )));
        }
        checkpoints::restore(&plan).await?;
        let outcome = RevertOutcome { reverted: true, ..plan.outcome };
        let undone = checkpoints::undone_ids(&outcome);
        let (divider, notice) = checkpoints::describe(&outcome);
        let mut tx = self.begin_write().await?;
        tx.mark_turns_undone(&self.session.id, &undone).await?;
        for (path, commit) in &plan.targets {
            tx.set_checkpoint_baseline(&self.session.id, path, commit).await?;
        }
        tx.set_checkpoint_notice(&self.session.id, &notice).await?;
        let note = StatusNote::Reverted {
            turn_id: turn_id.to_string(),
            undone: undone.iter().map(ToString::to_string).collect(),
            files: outcome.files.iter().map(|f| f.path.clone()).collect(),
        };
        self.commit_tx(tx, SessionUpdate::default(), Some((divider, note.into()))).await?;
        let (inner, task_id) = (self.inner.clone(), self.session.task_id.clone());
        self.spawn(async move { crate::workdir::status::refresh_status(&inner, &task_id).await });
        Ok(outcome)
    }
}
