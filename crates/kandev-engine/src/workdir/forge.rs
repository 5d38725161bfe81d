//! Pull (merge) requests of a task's repositories: `task.pr.create` pushes the task branch
//! when needed and opens one; `task.pr.get` reads its state back from the forge. The forge
//! client itself (GitHub, GitLab, the token, the requests) is `kandev-forge`'s; this module
//! decides when to call it and records, publishes and notes what it answers.

use std::path::Path;

use kandev_domain::message_meta::StatusNote;
use kandev_domain::ship::{PrState, PullRequest};
use kandev_domain::{RepositoryId, TaskId};
use kandev_runtime::git;
use serde_json::json;

use kandev_forge::{client, forge_api};

use crate::error::{EngineError, Result, not_found};
use crate::inner::Inner;
use crate::workdir::branch::Target;
use crate::workdir::status::{publish_status, ship_error, targets};

/// The branch name on the remote for a base (`origin/main` → `main`).
fn remote_base(base_branch: &str, remote: &str) -> String {
    base_branch.strip_prefix(&format!("{remote}/")).unwrap_or(base_branch).to_owned()
}

/// The default title and body of a task's pull request: its title; its description and the
/// summaries of its commits.
async fn default_text(inner: &Inner, target: &Target) -> Result<(String, String)> {
    let task = inner.store.get_task(&target.record.task_id).await.map_err(not_found)?;
    let status = target.branch_status().await?;
    let summaries = target.commit_summaries(&status.base_tip).await?;
    let mut body = task.description.trim().to_owned();
    if !summaries.is_empty() {
        if !body.is_empty() {
            body.push_str("\n\n");
        }
        body.push_str("Commits:\n");
        for summary in summaries {
            body.push_str(&format!("- {summary}\n"));
        }
    }
    Ok((task.title, body))
}

/// Opens (or returns the open) pull request of one repository of the task.
async fn create_one(
    inner: &Inner,
    target: &Target,
    title: Option<&str>,
    body: Option<&str>,
    draft: bool,
) -> Result<PullRequest> {
    let task_id = &target.record.task_id;
    let existing = inner.store.pull_requests(task_id).await?;
    if let Some(open) = existing
        .into_iter()
        .find(|p| p.repository_id == target.repository.id && p.state == PrState::Open)
    {
        return Ok(open);
    }
    let dirty = target.dirty().await?;
    if !dirty.is_clean() {
        return Err(EngineError::Refused {
            message: format!(
                "the task has uncommitted changes in repository {}; commit them first, then open the pull request",
                target.repository.name
            ),
            details: json!({ "dirty": dirty.paths() }),
        });
    }
    // The server's repository and a worktree of it share their remotes; a build host's
    // worktree has none (its branch is pushed from the server's repository).
    let remote_url = git::remote_url(Path::new(&target.repository.local_path), "origin")
        .await
        .map_err(ship_error)?;
    let tokens = crate::secrets::forge_tokens(inner, &target.repository).await?;
    let api = forge_api(&target.repository, &remote_url, &tokens)?;
    let status = target.branch_status().await?;
    if status.ahead == 0 {
        return Err(EngineError::Validation(format!(
            "the task branch has no commits beyond {} in repository {}; commit the work first",
            target.base_branch, target.repository.name
        )));
    }
    let pushed = status.upstream.as_ref().is_some_and(|u| u.ahead == 0 && u.behind == 0);
    if !pushed {
        target.push("origin", false).await?;
    }
    let (default_title, default_body) = default_text(inner, target).await?;
    let title = title.unwrap_or(&default_title);
    let body = body.unwrap_or(&default_body);
    let base = remote_base(&target.base_branch, "origin");
    let client = client()?;
    let answer = api.create(&client, &target.record.branch, &base, title, body, draft).await?;
    let mut pr =
        api.read(&client, &answer, task_id, &target.repository.id, inner.store.now()).await?;
    if pr.head_branch.is_empty() {
        pr.head_branch = target.record.branch.clone();
    }
    if pr.base_branch.is_empty() {
        pr.base_branch = base;
    }
    let mut tx = inner.store.begin_write().await?;
    tx.save_pull_request(&pr).await?;
    tx.commit().await?;
    Ok(pr)
}

/// A pull request read again from its forge: the record, the state stored before when this
/// refresh changed it, and how to reach the forge with what it answered (for its checks).
pub(crate) struct Refreshed {
    pub pr: PullRequest,
    pub changed: Option<PrState>,
    pub api: kandev_forge::ForgeApi,
    pub answer: serde_json::Value,
}

/// Reads a recorded pull request from its forge again and stores it.
pub(crate) async fn refresh_one(inner: &Inner, pr: &PullRequest) -> Result<Refreshed> {
    let repository = inner.store.get_repository(&pr.repository_id).await.map_err(not_found)?;
    let remote_url =
        git::remote_url(Path::new(&repository.local_path), "origin").await.map_err(ship_error)?;
    let tokens = crate::secrets::forge_tokens(inner, &repository).await?;
    let api = forge_api(&repository, &remote_url, &tokens)?;
    let client = client()?;
    let answer = api.get(&client, pr.number).await?;
    let mut fresh =
        api.read(&client, &answer, &pr.task_id, &pr.repository_id, inner.store.now()).await?;
    if fresh.url.is_empty() {
        fresh.url = pr.url.clone();
    }
    if fresh.head_branch.is_empty() {
        fresh.head_branch = pr.head_branch.clone();
    }
    if fresh.base_branch.is_empty() {
        fresh.base_branch = pr.base_branch.clone();
    }
    let mut tx = inner.store.begin_write().await?;
    let before = tx.update_pull_request(&fresh).await?;
    let changed = before.filter(|b| *b != fresh.state);
    if let Some(was) = changed {
        pr_attention(&mut tx, &fresh, was).await?;
    }
    tx.commit().await?;
    Ok(Refreshed { pr: fresh, changed, api, answer })
}

/// A pull request changed state: a status note in the task's primary session and a
/// notification record (browser, webhooks, ntfy) with the note's seq. A task without a
/// session gets neither (a record belongs to a session).
async fn pr_attention(
    tx: &mut kandev_store::WriteTx,
    pr: &PullRequest,
    was: PrState,
) -> Result<()> {
    let task = tx.get_task(&pr.task_id).await?;
    let Some(session_id) = &task.primary_session_id else { return Ok(()) };
    let session = tx.get_session(session_id).await?;
    let (number, state) = (pr.number, pr.state.as_str());
    let text = format!("pull request #{number} is {state} (was {})", was.as_str());
    let note = StatusNote::PullRequest {
        repository_id: pr.repository_id.to_string(),
        number,
        url: pr.url.clone(),
        state: state.to_owned(),
        was: was.as_str().to_owned(),
    };
    // The notification's data: the note's facts (its `reason` aside).
    let mut data = serde_json::to_value(&note).unwrap_or_default();
    if let Some(fields) = data.as_object_mut() {
        fields.remove("reason");
    }
    let note = crate::write::add_message(tx, &session, None, &text, note).await?;
    // A pull request that is no longer open needs nobody for its auto-fix any more.
    crate::publish::sync_task(tx, &session).await?;
    let title = format!("{}: {text}", task.title);
    let notification = kandev_domain::notify::NotificationKind::PrStateChanged;
    crate::publish::attention(tx, notification, &session, note.seq, title, data).await
}

/// Opens pull requests for each repository of the task (or one): pushes the task branch
/// when the remote does not have it yet; an open one is returned as it is. Publishes the
/// task's git status.
pub(crate) async fn create_prs(
    inner: &Inner,
    task_id: &TaskId,
    only: Option<&RepositoryId>,
    title: Option<&str>,
    body: Option<&str>,
    draft: bool,
) -> Result<Vec<PullRequest>> {
    let targets = targets(inner, task_id, only).await?;
    let mut prs = vec![];
    {
        let _guard = inner.task_locks.lock(task_id).await;
        for target in &targets {
            prs.push(create_one(inner, target, title, body, draft).await?);
        }
    }
    if let Err(err) = publish_status(inner, task_id).await {
        tracing::debug!(task = %task_id, error = %err, "git status not published");
    }
    Ok(prs)
}
