//! Shipping a task as the API shows it: git status per repository, pull requests, review
//! comments. Each shape converts from its plain value in `kandev_domain::ship`.

use kandev_domain::ship::{GitStatus, PrCheck, PrEvent, PullRequest, RemoteStatus, ReviewComment};
use serde::{Deserialize, Serialize};
use ts_rs::TS;

use crate::rfc3339;

/// `task.merge`'s strategy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, TS)]
#[serde(rename_all = "snake_case")]
pub enum MergeStrategyDto {
    #[default]
    Merge,
    Squash,
    FastForward,
}

impl From<MergeStrategyDto> for kandev_domain::ship::MergeStrategy {
    fn from(s: MergeStrategyDto) -> Self {
        use kandev_domain::ship::MergeStrategy as M;
        match s {
            MergeStrategyDto::Merge => M::Merge,
            MergeStrategyDto::Squash => M::Squash,
            MergeStrategyDto::FastForward => M::FastForward,
        }
    }
}

impl From<kandev_domain::ship::MergeStrategy> for MergeStrategyDto {
    fn from(s: kandev_domain::ship::MergeStrategy) -> Self {
        use kandev_domain::ship::MergeStrategy as M;
        match s {
            M::Merge => MergeStrategyDto::Merge,
            M::Squash => MergeStrategyDto::Squash,
            M::FastForward => MergeStrategyDto::FastForward,
        }
    }
}

/// Uncommitted (tracked, changed or staged) and untracked files.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
pub struct DirtyDto {
    pub uncommitted: u32,
    pub untracked: u32,
    /// The files, uncommitted first (at most 200).
    pub files: Vec<String>,
}

/// The task branch against its branch on the remote.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
pub struct RemoteStatusDto {
    pub remote: String,
    pub pushed_head: String,
    pub upstream_ahead: u32,
    pub upstream_behind: u32,
}

impl From<&RemoteStatus> for RemoteStatusDto {
    fn from(r: &RemoteStatus) -> Self {
        RemoteStatusDto {
            remote: r.remote.clone(),
            pushed_head: r.pushed_head.clone(),
            upstream_ahead: r.upstream_ahead,
            upstream_behind: r.upstream_behind,
        }
    }
}

/// A pull (merge) request: `forge` is `github` or `gitlab`, `state` `open`, `merged` or
/// `closed`, `checks` `pending`, `success`, `failure` or `null`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
pub struct PullRequestDto {
    pub repository_id: String,
    pub forge: String,
    pub number: u64,
    pub url: String,
    pub state: String,
    pub checks: Option<String>,
    pub review_decision: Option<String>,
    pub head_branch: String,
    pub base_branch: String,
    pub updated_at: String,
}

impl From<&PullRequest> for PullRequestDto {
    fn from(p: &PullRequest) -> Self {
        PullRequestDto {
            repository_id: p.repository_id.to_string(),
            forge: p.forge.as_str().to_owned(),
            number: p.number,
            url: p.url.clone(),
            state: p.state.as_str().to_owned(),
            checks: p.checks.clone(),
            review_decision: p.review_decision.clone(),
            head_branch: p.head_branch.clone(),
            base_branch: p.base_branch.clone(),
            updated_at: rfc3339(p.updated_at),
        }
    }
}

/// One CI job of a pull request's head commit: `state` `pending`, `success` or `failure`; a
/// failed one with the end of its log, and `inherited` when it fails on the base too.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
pub struct PrCheckDto {
    pub repository_id: String,
    pub name: String,
    pub head_sha: String,
    pub state: String,
    pub url: String,
    pub log_tail: String,
    pub inherited: bool,
}

impl From<&PrCheck> for PrCheckDto {
    fn from(c: &PrCheck) -> Self {
        PrCheckDto {
            repository_id: c.repository_id.to_string(),
            name: c.name.clone(),
            head_sha: c.head_sha.clone(),
            state: c.state.clone(),
            url: c.url.clone(),
            log_tail: c.log_tail.clone(),
            inherited: c.inherited,
        }
    }
}

/// A forge event a step's trigger ran for: `kind` `checks_failed`, `checks_passed` or
/// `review`; `key` the head commit or the newest review note; `outcome` `sent`, `inherited`,
/// `capped`, `merged`, `merge_refused`, `ignored` or `none`, with `detail` in words.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
pub struct PrEventDto {
    pub repository_id: String,
    pub kind: String,
    pub key: String,
    pub outcome: String,
    pub detail: String,
    pub at: String,
}

impl From<&PrEvent> for PrEventDto {
    fn from(e: &PrEvent) -> Self {
        PrEventDto {
            repository_id: e.repository_id.to_string(),
            kind: e.kind.clone(),
            key: e.key.clone(),
            outcome: e.outcome.clone(),
            detail: e.detail.clone(),
            at: rfc3339(e.at),
        }
    }
}

/// A task branch in one repository: against the current tip of its base (`ahead`,
/// `behind`, `conflicts_with_base`), its uncommitted work, its remote, its pull request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
pub struct GitStatusDto {
    pub repository_id: String,
    pub branch: String,
    pub base_branch: String,
    pub base_commit: String,
    pub base_tip: String,
    pub head: String,
    pub ahead: u32,
    pub behind: u32,
    pub dirty: DirtyDto,
    pub conflicts_with_base: Vec<String>,
    pub remote: Option<RemoteStatusDto>,
    pub pr: Option<PullRequestDto>,
    /// `task.merge` landed the branch as it is now on the base branch.
    pub merged: bool,
}

impl From<&GitStatus> for GitStatusDto {
    fn from(g: &GitStatus) -> Self {
        GitStatusDto {
            repository_id: g.repository_id.to_string(),
            branch: g.branch.clone(),
            base_branch: g.base_branch.clone(),
            base_commit: g.base_commit.clone(),
            base_tip: g.base_tip.clone(),
            head: g.head.clone(),
            ahead: g.ahead,
            behind: g.behind,
            dirty: DirtyDto {
                uncommitted: g.uncommitted.len() as u32,
                untracked: g.untracked.len() as u32,
                files: g.uncommitted.iter().chain(&g.untracked).take(200).cloned().collect(),
            },
            conflicts_with_base: g.conflicts_with_base.clone(),
            remote: g.remote.as_ref().map(RemoteStatusDto::from),
            pr: g.pr.as_ref().map(PullRequestDto::from),
            merged: g.merged,
        }
    }
}

/// A task's git status summed over its repositories, as its card shows it: commits ahead of
/// and behind the base tip, dirty files, files conflicting with the base, and the pull
/// requests' state (`open` while any is, `merged` when all are, else `closed`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
pub struct GitSummaryDto {
    pub ahead: u32,
    pub behind: u32,
    pub dirty: u32,
    pub conflicts: u32,
    pub pr_state: Option<String>,
    /// Every repository's task branch is merged into its base as it is now (`task.merge`).
    pub merged: bool,
}

impl From<&kandev_domain::ship::GitSummary> for GitSummaryDto {
    fn from(g: &kandev_domain::ship::GitSummary) -> Self {
        GitSummaryDto {
            ahead: g.ahead,
            behind: g.behind,
            dirty: g.dirty,
            conflicts: g.conflicts,
            pr_state: g.pr_state.map(|s| s.as_str().to_owned()),
            merged: g.merged,
        }
    }
}

/// A line comment on a task's diff; `side` is `old` or `new`, `sent_at` is set once
/// `review.submit` delivered it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
pub struct ReviewCommentDto {
    pub id: String,
    pub task_id: String,
    pub path: String,
    pub line: u32,
    pub side: String,
    pub text: String,
    pub quote: String,
    pub diff_hash: String,
    pub created_at: String,
    pub updated_at: String,
    pub sent_at: Option<String>,
    /// The thread it replies in (its first comment's id); `null` on a first comment.
    pub thread_id: Option<String>,
    /// The first line of a range of lines ending at `line`; `null` for one line.
    pub start_line: Option<u32>,
    /// On a thread's first comment: when it was resolved.
    pub resolved_at: Option<String>,
    /// The lines it was made on changed since (`review.comment.list` says; `false` elsewhere).
    pub outdated: bool,
}

impl From<&ReviewComment> for ReviewCommentDto {
    fn from(c: &ReviewComment) -> Self {
        ReviewCommentDto {
            id: c.id.clone(),
            task_id: c.task_id.to_string(),
            path: c.path.clone(),
            line: c.line,
            side: c.side.as_str().to_owned(),
            text: c.text.clone(),
            quote: c.quote.clone(),
            diff_hash: c.diff_hash.clone(),
            created_at: rfc3339(c.created_at),
            updated_at: rfc3339(c.updated_at),
            sent_at: c.sent_at.map(rfc3339),
            thread_id: c.thread_id.clone(),
            start_line: c.start_line,
            resolved_at: c.resolved_at.map(rfc3339),
            outdated: false,
        }
    }
}
