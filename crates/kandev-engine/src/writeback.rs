//! Write-back to the issue a task was made from (issue 47, docs/intake.md): the step's
//! `comment_issue` and `close_issue` under `on_pr_merged` / `on_pr_closed` comment with the
//! task's pull requests and close the issue, and each outcome is a status note in the task's
//! primary session.
//!
//! Invariants:
//! - Runs when a pull request's change of state is recorded (`workflow::pr_settled`), which
//!   happens once per change; an issue is closed at most once (`task_origins.closed`).
//! - A failure (the forge refused, no token) is a note saying why, never a failed move.
//! - Only the issue's own repository's forge is called.

use std::path::Path;
use std::sync::Arc;

use kandev_domain::intake::{IntakeSource, SourceKind, TaskOrigin};
use kandev_domain::message_meta::StatusNote;
use kandev_domain::ship::PullRequest;
use kandev_domain::workflow::{Action, Trigger};
use kandev_domain::{RepositoryId, TaskId};
use kandev_forge::ForgeApi;
use kandev_forge::issues::IssueTracker;
use kandev_runtime::git;

use crate::error::{EngineError, Result, not_found};
use crate::inner::Inner;
use crate::workdir::shared::ship_error;

/// The forge of a repository, from its settings and its `origin`.
pub(crate) async fn repository_forge(inner: &Inner, id: &RepositoryId) -> Result<ForgeApi> {
    let repository = inner.store.get_repository(id).await.map_err(not_found)?;
    let remote =
        git::remote_url(Path::new(&repository.local_path), "origin").await.map_err(ship_error)?;
    let tokens = crate::secrets::forge_tokens(inner, &repository).await?;
    Ok(kandev_forge::forge_api(&repository, &remote, &tokens)?)
}

/// The tracker an intake source reads issues from: its repository's forge (GitHub or
/// GitLab). A source of another kind has none.
pub(crate) async fn tracker_of(
    inner: &Inner,
    source: &IntakeSource,
) -> Result<Box<dyn IssueTracker>> {
    match (source.kind, &source.repository_id) {
        (SourceKind::Issues, Some(repository)) => {
            Ok(Box::new(repository_forge(inner, repository).await?))
        }
        _ => Err(EngineError::Validation(format!(
            "{} takes only what its webhook delivers; it has no issues to read or write",
            source.name
        ))),
    }
}

/// Runs the write-back actions of the task's step under `trigger`.
pub(crate) async fn run(inner: &Arc<Inner>, task_id: &TaskId, trigger: Trigger) -> Result<()> {
    let task = inner.store.get_task(task_id).await?;
    let workflow = inner.store.get_workflow(&task.workflow_id).await?;
    let Some(step) = workflow.step(&task.step_id) else { return Ok(()) };
    let actions: Vec<Action<_>> = step
        .events
        .actions(trigger)
        .iter()
        .filter(|a| matches!(a, Action::CommentIssue | Action::CloseIssue))
        .cloned()
        .collect();
    if actions.is_empty() {
        return Ok(());
    }
    let Some(origin) = inner.store.task_origin(task_id).await? else {
        return Ok(()); // a task typed in by hand has no issue to write to
    };
    let prs = inner.store.pull_requests(task_id).await?;
    for action in actions {
        let outcome = one(inner, task_id, &origin, &action, &prs).await;
        let (text, result) = match &outcome {
            Ok(Some(done)) => (done.clone(), "done"),
            Ok(None) => continue,
            Err(err) => (format!("could not {}: {err}", what(&action)), "failed"),
        };
        let note = StatusNote::IssueUpdate {
            action: action.type_name().to_owned(),
            outcome: result.to_owned(),
        };
        crate::notes::task_status_message(inner, task_id, &text, note).await?;
    }
    Ok(())
}

fn what<S>(action: &Action<S>) -> &'static str {
    match action {
        Action::CloseIssue => "close the issue",
        _ => "comment on the issue",
    }
}

/// One write-back action; `Ok(None)` when there was nothing to do.
async fn one(
    inner: &Arc<Inner>,
    task_id: &TaskId,
    origin: &TaskOrigin,
    action: &Action<kandev_domain::StepId>,
    prs: &[PullRequest],
) -> Result<Option<String>> {
    let (Some(source_id), Some(number)) = (&origin.source_id, origin.number) else {
        return Ok(None); // made by a generic webhook or a schedule: no issue
    };
    let source = inner.store.get_intake_source(source_id).await.map_err(|_| {
        EngineError::NotFound(format!(
            "the intake source of {} was removed; its issue cannot be reached",
            origin.external_id
        ))
    })?;
    let tracker = tracker_of(inner, &source).await?;
    // The repository's remote may have moved (a rename, a transfer): issue #n there is not the
    // task's issue any more.
    let now_named = tracker.external_id(number);
    if now_named != origin.external_id {
        return Err(EngineError::Conflict(format!(
            "the repository's forge project changed: issue #{number} there is {now_named}, not {}",
            origin.external_id
        )));
    }
    let client = kandev_forge::client()?;
    match action {
        Action::CommentIssue => {
            tracker.comment_issue(&client, number, &comment(prs)).await?;
            Ok(Some(format!("commented on issue #{number}")))
        }
        Action::CloseIssue => {
            if origin.closed {
                return Ok(None);
            }
            tracker.close_issue(&client, number).await?;
            let mut tx = inner.store.begin_write().await?;
            tx.mark_origin_closed(task_id).await?;
            tx.commit().await?;
            Ok(Some(format!("closed issue #{number}")))
        }
        _ => Ok(None),
    }
}

/// The comment: each pull request of the task with its state.
fn comment(prs: &[PullRequest]) -> String {
    if prs.is_empty() {
        return "Kandev: this task has no pull request.".to_owned();
    }
    let lines: Vec<String> =
        prs.iter().map(|p| format!("- {} ({})", p.url, p.state.as_str())).collect();
    format!("Kandev: the pull request for this issue:\n{}", lines.join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use kandev_domain::Timestamp;
    use kandev_domain::ship::{Forge, PrState};

    #[test]
    fn i47_the_comment_links_each_pull_request_with_its_state() {
        let pr = PullRequest {
            task_id: TaskId::new("t"),
            repository_id: RepositoryId::new("r"),
            forge: Forge::GitHub,
            number: 7,
            url: "https://github.com/acme/widget/pull/7".into(),
            state: PrState::Merged,
            head_branch: "kandev/t".into(),
            base_branch: "main".into(),
            checks: None,
            review_decision: None,
            updated_at: Timestamp(0),
        };
        assert_eq!(
            comment(&[pr]),
            "Kandev: the pull request for this issue:\n- https://github.com/acme/widget/pull/7 (merged)"
        );
        assert!(comment(&[]).contains("no pull request"));
    }
}
