//! Shipping a task: `repository.branches`, `task.git_status`,
//! `task.rebase`, `task.merge`, `task.push`, `task.pr.*`, and review comments
//! (`review.comment.*`, `review.submit`). Git work is the engine's; refusals carry what blocks
//! them in `details` (`dirty`, `conflicts`).

use std::path::Path;

use kandev_api_types::requests::{
    ById, ByTask, ReviewCommentAdd, ReviewCommentUpdate, ReviewThreadResolve, TaskMerge,
    TaskPrCreate, TaskPush, TaskRebase,
};
use kandev_api_types::responses::{
    Branches, Deleted, MergeMadeDto, PushMadeDto, RepositoryUsage, ReviewCommentOne,
    ReviewComments, ReviewSubmitted, TaskGitStatus, TaskMerged, TaskPullRequests, TaskPushed,
    WorktreeUsageDto,
};
use kandev_api_types::{GitStatusDto, PrCheckDto, PrEventDto, PullRequestDto, ReviewCommentDto};
use kandev_domain::ship::DiffSide;
use kandev_domain::{RepositoryId, TaskId, validate};
use kandev_store::NewReviewComment;

use crate::accounts::Identity;
use crate::{ApiError, AppState};

/// Longest review comment, in bytes.
const MAX_COMMENT_BYTES: usize = 64 * 1024;

/// At most this many `copy_files` globs per repository.
const MAX_COPY_GLOBS: usize = 50;

pub async fn branches(s: &AppState, p: ById) -> Result<Branches, ApiError> {
    let repository = s.store().get_repository(&RepositoryId::new(p.id)).await?;
    let branches = s.engine().repository_branches(Path::new(&repository.local_path)).await?;
    Ok(Branches { branches })
}

pub async fn usage(s: &AppState, p: ById) -> Result<RepositoryUsage, ApiError> {
    let usage = s.engine().repository_usage(&RepositoryId::new(p.id)).await?;
    let worktrees: Vec<WorktreeUsageDto> = usage
        .into_iter()
        .map(|u| WorktreeUsageDto {
            task_id: u.task_id.to_string(),
            path: u.path,
            branch: u.branch,
            bytes: u.bytes,
            truncated: u.truncated,
        })
        .collect();
    let total_bytes = worktrees.iter().filter_map(|w| w.bytes).sum();
    Ok(RepositoryUsage { worktrees, total_bytes })
}

pub async fn git_status(s: &AppState, p: ByTask) -> Result<TaskGitStatus, ApiError> {
    let statuses = s.engine().task_git_status(&TaskId::new(p.task_id)).await?;
    Ok(TaskGitStatus { repositories: statuses.iter().map(GitStatusDto::from).collect() })
}

pub async fn rebase(s: &AppState, p: TaskRebase) -> Result<TaskGitStatus, ApiError> {
    let only = p.repository_id.map(RepositoryId::new);
    let statuses = s.engine().task_rebase(&TaskId::new(p.task_id), only.as_ref()).await?;
    Ok(TaskGitStatus { repositories: statuses.iter().map(GitStatusDto::from).collect() })
}

pub async fn merge(s: &AppState, who: &Identity, p: TaskMerge) -> Result<TaskMerged, ApiError> {
    let only = p.repository_id.map(RepositoryId::new);
    let (made, statuses) = s
        .engine()
        .task_merge(
            &TaskId::new(p.task_id),
            only.as_ref(),
            p.strategy.into(),
            p.message.as_deref(),
            &who.by(),
        )
        .await?;
    Ok(TaskMerged {
        merged: made
            .into_iter()
            .map(|m| MergeMadeDto {
                repository_id: m.repository_id.to_string(),
                base_branch: m.base_branch,
                commit: m.commit,
            })
            .collect(),
        repositories: statuses.iter().map(GitStatusDto::from).collect(),
    })
}

pub async fn push(s: &AppState, who: &Identity, p: TaskPush) -> Result<TaskPushed, ApiError> {
    let only = p.repository_id.map(RepositoryId::new);
    let remote = p.remote.as_deref().map(str::trim).filter(|r| !r.is_empty()).unwrap_or("origin");
    if remote.starts_with('-') || remote.contains(char::is_whitespace) {
        return Err(ApiError::validation("remote must be the name of a git remote, e.g. origin"));
    }
    let (made, statuses) = s
        .engine()
        .task_push(&TaskId::new(p.task_id), only.as_ref(), remote, p.force_with_lease, &who.by())
        .await?;
    Ok(TaskPushed {
        pushed: made
            .into_iter()
            .map(|m| PushMadeDto {
                repository_id: m.repository_id.to_string(),
                remote: m.remote,
                branch: m.branch,
                head: m.head,
            })
            .collect(),
        repositories: statuses.iter().map(GitStatusDto::from).collect(),
    })
}

pub async fn pr_create(
    s: &AppState,
    who: &Identity,
    p: TaskPrCreate,
) -> Result<TaskPullRequests, ApiError> {
    let only = p.repository_id.map(RepositoryId::new);
    let title = p.title.as_deref().map(|t| validate::title("title", t)).transpose()?;
    let body = p.body.as_deref().map(|b| validate::description("body", b)).transpose()?;
    let task_id = TaskId::new(p.task_id);
    let prs =
        s.engine().task_pr_create(&task_id, only.as_ref(), title, body, p.draft, &who.by()).await?;
    pull_requests(s, &task_id, &prs).await
}

pub async fn pr_get(s: &AppState, p: ByTask) -> Result<TaskPullRequests, ApiError> {
    let task_id = TaskId::new(p.task_id);
    let prs = s.engine().task_pr_refresh(&task_id).await?;
    pull_requests(s, &task_id, &prs).await
}

/// The task's pull requests with their checks and the events their triggers ran for.
async fn pull_requests(
    s: &AppState,
    task_id: &TaskId,
    prs: &[kandev_domain::ship::PullRequest],
) -> Result<TaskPullRequests, ApiError> {
    let checks = s.store().pr_checks(task_id).await?;
    let events = s.store().pr_events(task_id).await?;
    let rounds = kandev_domain::ship::feedback_rounds(&events);
    Ok(TaskPullRequests {
        pull_requests: prs.iter().map(PullRequestDto::from).collect(),
        checks: checks.iter().map(PrCheckDto::from).collect(),
        stopped: kandev_domain::ship::feedback_stopped(&events).map(|e| e.detail.clone()),
        events: events.iter().map(PrEventDto::from).collect(),
        feedback_rounds: u32::try_from(rounds).unwrap_or(u32::MAX),
    })
}

/// The most lines one review comment covers (its quote is sent to the agent).
const MAX_RANGE: u32 = 200;

pub async fn comment_add(s: &AppState, p: ReviewCommentAdd) -> Result<ReviewCommentOne, ApiError> {
    let task_id = TaskId::new(p.task_id);
    s.store().get_task(&task_id).await?;
    let path = p.path.trim();
    if path.is_empty() || path.starts_with('/') || path.split('/').any(|c| c == "..") {
        return Err(ApiError::validation(
            "path must be the relative path of a file of the task's diff",
        ));
    }
    if p.line == 0 {
        return Err(ApiError::validation("line must be 1 or more"));
    }
    let start_line = match p.start_line {
        None => None,
        Some(start) if start == 0 || start > p.line => {
            return Err(ApiError::validation(
                "a comment's first line must be 1 or more and not after its last line",
            ));
        }
        Some(start) if p.line - start >= MAX_RANGE => {
            return Err(ApiError::validation(format!(
                "a comment covers at most {MAX_RANGE} lines; choose a shorter range"
            )));
        }
        Some(start) => Some(start).filter(|s| *s < p.line),
    };
    let side = match p.side.as_deref() {
        None => DiffSide::New,
        Some(side) => DiffSide::parse(side)
            .ok_or_else(|| ApiError::validation("side must be `old` or `new`"))?,
    };
    let text = comment_text(&p.text)?;
    // The engine fills in the quote and the diff hash.
    let new = NewReviewComment {
        task_id,
        path: path.to_owned(),
        line: p.line,
        side,
        text,
        quote: String::new(),
        diff_hash: String::new(),
        thread_id: p.thread_id,
        start_line,
    };
    let comment = s.engine().add_review_comment(new).await?;
    Ok(ReviewCommentOne { comment: ReviewCommentDto::from(&comment) })
}

pub async fn comment_list(s: &AppState, p: ByTask) -> Result<ReviewComments, ApiError> {
    let task_id = TaskId::new(p.task_id);
    s.store().get_task(&task_id).await?;
    let comments = s.engine().review_comments(&task_id).await?;
    let comments = comments
        .iter()
        .map(|(comment, outdated)| ReviewCommentDto {
            outdated: *outdated,
            ..ReviewCommentDto::from(comment)
        })
        .collect();
    Ok(ReviewComments { comments })
}

pub async fn thread_resolve(
    s: &AppState,
    p: ReviewThreadResolve,
) -> Result<ReviewCommentOne, ApiError> {
    let comment = s.engine().resolve_review_thread(&p.id, p.resolved).await?;
    Ok(ReviewCommentOne { comment: ReviewCommentDto::from(&comment) })
}

pub async fn comment_update(
    s: &AppState,
    p: ReviewCommentUpdate,
) -> Result<ReviewCommentOne, ApiError> {
    let text = comment_text(&p.text)?;
    let comment = s.engine().update_review_comment(&p.id, &text).await?;
    Ok(ReviewCommentOne { comment: ReviewCommentDto::from(&comment) })
}

pub async fn comment_delete(s: &AppState, p: ById) -> Result<Deleted, ApiError> {
    s.engine().delete_review_comment(&p.id).await?;
    Ok(Deleted { deleted: true, id: p.id })
}

pub async fn submit(s: &AppState, p: ByTask) -> Result<ReviewSubmitted, ApiError> {
    let sent = s.engine().review_submit(&TaskId::new(p.task_id)).await?;
    Ok(ReviewSubmitted {
        comments: sent.comments.iter().map(ReviewCommentDto::from).collect(),
        session_id: sent.session_id.to_string(),
        queued: sent.queued,
    })
}

fn comment_text(text: &str) -> Result<String, ApiError> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err(ApiError::validation("text is required; write the comment"));
    }
    if trimmed.len() > MAX_COMMENT_BYTES {
        return Err(ApiError::validation(format!(
            "text is longer than {MAX_COMMENT_BYTES} bytes; shorten the comment"
        )));
    }
    Ok(trimmed.to_owned())
}

/// Checks a repository's `copy_files`: relative git globs without `..` or pathspec magic.
pub fn copy_globs(globs: Vec<String>) -> Result<Vec<String>, ApiError> {
    if globs.len() > MAX_COPY_GLOBS {
        return Err(ApiError::validation(format!(
            "there are more than {MAX_COPY_GLOBS} patterns of files to copy; combine them with globs"
        )));
    }
    let mut checked = vec![];
    for glob in globs {
        let glob = glob.trim().to_owned();
        let bad = glob.is_empty()
            || glob.len() > 256
            || glob.starts_with('/')
            || glob.starts_with(':')
            || glob.contains('\0')
            || glob.split('/').any(|c| c == ".." || c == ".git");
        if bad {
            return Err(validate::FieldError::new(
                "copy_files",
                format!(
                    "{glob:?} is not a usable pattern; give a relative path or glob inside the repository, such as .env or config/local.*"
                ),
            )
            .into());
        }
        if !checked.contains(&glob) {
            checked.push(glob);
        }
    }
    Ok(checked)
}
