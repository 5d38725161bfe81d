//! Shipping a task: the pull requests opened for it and the review comments on its diff.

use crate::{RepositoryId, TaskId, Timestamp};

/// Which forge a repository's pull requests go to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Forge {
    /// GitHub or GitHub Enterprise (REST v3).
    GitHub,
    /// GitLab, hosted or self-managed (REST v4).
    GitLab,
}

impl Forge {
    pub fn as_str(self) -> &'static str {
        match self {
            Forge::GitHub => "github",
            Forge::GitLab => "gitlab",
        }
    }

    pub fn parse(value: &str) -> Option<Forge> {
        [Forge::GitHub, Forge::GitLab].into_iter().find(|f| f.as_str() == value)
    }
}

/// The state of a pull request as the forge last reported it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrState {
    Open,
    Merged,
    Closed,
}

impl PrState {
    pub fn as_str(self) -> &'static str {
        match self {
            PrState::Open => "open",
            PrState::Merged => "merged",
            PrState::Closed => "closed",
        }
    }

    pub fn parse(value: &str) -> Option<PrState> {
        [PrState::Open, PrState::Merged, PrState::Closed].into_iter().find(|s| s.as_str() == value)
    }
}

/// The pull (merge) request of a task's branch in one repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullRequest {
    pub task_id: TaskId,
    pub repository_id: RepositoryId,
    pub forge: Forge,
    pub number: u64,
    pub url: String,
    pub state: PrState,
    /// `pending`, `success` or `failure`; `None` when the forge reports no checks.
    pub checks: Option<String>,
    /// The forge's review decision (`approved`, `changes_requested`, ...), if any.
    pub review_decision: Option<String>,
    pub head_branch: String,
    pub base_branch: String,
    pub updated_at: Timestamp,
}

/// Where a task branch stands in one repository (`task.git_status`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitStatus {
    pub repository_id: RepositoryId,
    pub branch: String,
    pub base_branch: String,
    /// The commit the task branch started from.
    pub base_commit: String,
    /// The base branch's current tip.
    pub base_tip: String,
    pub head: String,
    /// Commits on the task branch not on the base tip.
    pub ahead: u32,
    /// Commits on the base tip not on the task branch.
    pub behind: u32,
    /// Tracked files changed or staged.
    pub uncommitted: Vec<String>,
    /// Files neither tracked nor ignored.
    pub untracked: Vec<String>,
    /// Files that would conflict when merged into the base tip.
    pub conflicts_with_base: Vec<String>,
    /// The branch on the remote, once pushed.
    pub remote: Option<RemoteStatus>,
    pub pr: Option<PullRequest>,
    /// `task.merge` landed the branch as it is now (`head`) on the base branch.
    pub merged: bool,
}

/// A task's git status summed over its repositories, as its card shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GitSummary {
    pub ahead: u32,
    pub behind: u32,
    /// Uncommitted and untracked files.
    pub dirty: u32,
    /// Files that would conflict with the base tip.
    pub conflicts: u32,
    /// Open while any pull request is open, merged when all are, else closed; `None`
    /// without pull requests.
    pub pr_state: Option<PrState>,
    /// Every repository's task branch is merged into its base as it is now.
    pub merged: bool,
}

impl GitSummary {
    pub fn of(statuses: &[GitStatus]) -> GitSummary {
        let count = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
        let states: Vec<PrState> =
            statuses.iter().filter_map(|s| s.pr.as_ref()).map(|p| p.state).collect();
        let pr_state = if states.is_empty() {
            None
        } else if states.contains(&PrState::Open) {
            Some(PrState::Open)
        } else if states.iter().all(|s| *s == PrState::Merged) {
            Some(PrState::Merged)
        } else {
            Some(PrState::Closed)
        };
        GitSummary {
            ahead: statuses.iter().map(|s| s.ahead).sum(),
            behind: statuses.iter().map(|s| s.behind).sum(),
            dirty: statuses.iter().map(|s| count(s.uncommitted.len() + s.untracked.len())).sum(),
            conflicts: statuses.iter().map(|s| count(s.conflicts_with_base.len())).sum(),
            pr_state,
            merged: !statuses.is_empty() && statuses.iter().all(|s| s.merged),
        }
    }
}

/// The task branch against its remote-tracking branch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteStatus {
    pub remote: String,
    pub pushed_head: String,
    pub upstream_ahead: u32,
    pub upstream_behind: u32,
}

/// The disk a task's worktree takes (`repository.usage`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorktreeUsage {
    pub task_id: TaskId,
    pub path: String,
    pub branch: String,
    /// Bytes of its files, `.git` excluded; `None` when it could not be measured.
    pub bytes: Option<u64>,
    /// The count stopped at its limit of entries: `bytes` is a lower bound.
    pub truncated: bool,
}

/// How `task.merge` lands a task branch on its base.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MergeStrategy {
    Merge,
    Squash,
    FastForward,
}

impl MergeStrategy {
    pub const ALL: [MergeStrategy; 3] =
        [MergeStrategy::Merge, MergeStrategy::Squash, MergeStrategy::FastForward];

    pub fn as_str(self) -> &'static str {
        match self {
            MergeStrategy::Merge => "merge",
            MergeStrategy::Squash => "squash",
            MergeStrategy::FastForward => "fast_forward",
        }
    }

    pub fn parse(value: &str) -> Option<MergeStrategy> {
        MergeStrategy::ALL.into_iter().find(|s| s.as_str() == value)
    }
}

/// The side of a diff a review comment is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiffSide {
    /// The base version (a removed line).
    Old,
    /// The task's version (an added or unchanged line).
    New,
}

impl DiffSide {
    pub fn as_str(self) -> &'static str {
        match self {
            DiffSide::Old => "old",
            DiffSide::New => "new",
        }
    }

    pub fn parse(value: &str) -> Option<DiffSide> {
        [DiffSide::Old, DiffSide::New].into_iter().find(|s| s.as_str() == value)
    }
}

/// A line comment on a task's diff.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReviewComment {
    pub id: String,
    pub task_id: TaskId,
    pub path: String,
    /// 1-based line number on `side`: the last line of a range.
    pub line: u32,
    /// The first line of a range of lines (`None`: the one line `line`).
    pub start_line: Option<u32>,
    pub side: DiffSide,
    pub text: String,
    /// The commented lines as they were when the comment was made.
    pub quote: String,
    /// The hash of the file's diff the comment was made on.
    pub diff_hash: String,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    /// When `review.submit` sent it to the agent; `None` while open.
    pub sent_at: Option<Timestamp>,
    /// The thread it replies in (the thread's first comment); `None` on a first comment.
    pub thread_id: Option<String>,
    /// On a thread's first comment: when the thread was resolved.
    pub resolved_at: Option<Timestamp>,
}

impl ReviewComment {
    /// The id of the thread it belongs to (its own, for a first comment).
    pub fn thread(&self) -> &str {
        self.thread_id.as_deref().unwrap_or(&self.id)
    }

    /// `path:line`, or `path:first-last` for a range.
    pub fn location(&self) -> String {
        match self.start_line {
            Some(start) if start < self.line => format!("{}:{start}-{}", self.path, self.line),
            _ => format!("{}:{}", self.path, self.line),
        }
    }
}

/// The text of lines `first..=last` on `side` of a file's diff, one per line, as far as the
/// diff shows them (`None` when it shows none of them).
pub fn quote_lines(
    change: &crate::files::FileChange,
    first: u32,
    last: u32,
    side: DiffSide,
) -> Option<String> {
    let lines: Vec<String> = (first..=last).filter_map(|n| quote_line(change, n, side)).collect();
    (!lines.is_empty()).then(|| lines.join("\n"))
}

/// The text of `line` on `side` of a file's diff, if the diff shows that line.
pub fn quote_line(change: &crate::files::FileChange, line: u32, side: DiffSide) -> Option<String> {
    use crate::files::LineKind;
    for hunk in &change.hunks {
        let (mut old, mut new) = (hunk.old_start, hunk.new_start);
        for l in &hunk.lines {
            let (on_old, on_new) = match l.kind {
                LineKind::Context => (true, true),
                LineKind::Added => (false, true),
                LineKind::Removed => (true, false),
            };
            let hit = match side {
                DiffSide::Old => on_old && old == line,
                DiffSide::New => on_new && new == line,
            };
            if hit {
                return Some(l.text.trim_end_matches(['\n', '\r']).to_owned());
            }
            old += u32::from(on_old);
            new += u32::from(on_new);
        }
    }
    None
}

/// A short hash of a file's diff (its hunks), so comments can be tied to the diff they
/// were made on: 16 hex digits of FNV-1a 64.
pub fn diff_hash(change: &crate::files::FileChange) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut feed = |bytes: &[u8]| {
        for byte in bytes {
            hash ^= u64::from(*byte);
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
    };
    for hunk in &change.hunks {
        feed(hunk.header.as_bytes());
        for line in &hunk.lines {
            feed(line.text.as_bytes());
            feed(b"\n");
        }
    }
    format!("{hash:016x}")
}

/// The one prompt `review.submit` sends: each comment as `path:line`, the quoted line and
/// the comment, in the order given; those named in `changed` (their lines changed since they
/// were quoted) say so, so the agent does not take the quote for the file as it is.
pub fn review_prompt(comments: &[ReviewComment], changed: &[&str]) -> String {
    let mut text = String::from("Please address these review comments:\n");
    for comment in comments {
        text.push_str(&format!("\n{}", comment.location()));
        if comment.thread_id.is_some() {
            text.push_str(" (a reply in the thread on these lines)");
        }
        if comment.side == DiffSide::Old {
            text.push_str(" (old side: the base's version)");
        }
        if changed.contains(&comment.id.as_str()) {
            text.push_str(" (these lines have changed since; quoted as they were)");
        }
        text.push('\n');
        for line in comment.quote.lines() {
            text.push_str(&format!("> {line}\n"));
        }
        text.push_str(comment.text.trim_end());
        text.push('\n');
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn i16_a6_the_review_prompt_lists_path_line_quote_and_comment() {
        let comment = |path: &str, line, quote: &str, text: &str| ReviewComment {
            id: "c".into(),
            task_id: TaskId::new("t"),
            path: path.into(),
            line,
            side: DiffSide::New,
            text: text.into(),
            quote: quote.into(),
            diff_hash: String::new(),
            created_at: Timestamp(0),
            updated_at: Timestamp(0),
            sent_at: None,
            thread_id: None,
            resolved_at: None,
            start_line: None,
        };
        let prompt = review_prompt(
            &[
                comment("src/a.rs", 3, "let x = 1;", "use a constant"),
                comment("b.txt", 1, "hello", "say hi"),
            ],
            &[],
        );
        assert_eq!(
            prompt,
            "Please address these review comments:\n\nsrc/a.rs:3\n> let x = 1;\nuse a constant\n\nb.txt:1\n> hello\nsay hi\n"
        );
    }

    #[test]
    fn wire_names_round_trip() {
        for f in [Forge::GitHub, Forge::GitLab] {
            assert_eq!(Forge::parse(f.as_str()), Some(f));
        }
        for s in [PrState::Open, PrState::Merged, PrState::Closed] {
            assert_eq!(PrState::parse(s.as_str()), Some(s));
        }
        for s in [DiffSide::Old, DiffSide::New] {
            assert_eq!(DiffSide::parse(s.as_str()), Some(s));
        }
    }
}

/// One CI job of a pull request's head commit, as the forge reported it last (issue 46).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrCheck {
    pub task_id: TaskId,
    pub repository_id: RepositoryId,
    pub name: String,
    /// The commit the job ran on.
    pub head_sha: String,
    /// `pending`, `success` or `failure`.
    pub state: String,
    /// The job's page on the forge.
    pub url: String,
    /// A failed job's last log lines (bounded); empty otherwise.
    pub log_tail: String,
    /// A failed job that also fails on the base branch's head: not the branch's fault.
    pub inherited: bool,
}

/// Something the forge reported that a step's trigger ran for, recorded once: a head commit's
/// checks failing or passing, or a new review (issue 46). The record is what makes each one
/// run once across polls and restarts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrEvent {
    pub task_id: TaskId,
    pub repository_id: RepositoryId,
    /// `checks_failed`, `checks_passed` or `review`.
    pub kind: String,
    /// The head commit (checks), or the newest review note's id (reviews).
    pub key: String,
    /// What came of it: `sent` (feedback queued to the agent), `inherited` (every failure
    /// also fails on the base branch), `capped` (the rounds were used up), `merged`,
    /// `merge_refused`, `ignored` (only bots spoke), or `none` (no action ran).
    pub outcome: String,
    /// The reason, in words (why auto-fix stopped, why the merge was refused).
    pub detail: String,
    pub at: Timestamp,
}

/// The newest checks or review event of a task when it stopped auto-fix (its rounds were
/// used up): the task needs its developer until a later event (green checks, a review answered
/// within the rounds) says otherwise. Events that only bots caused do not count.
pub fn feedback_stopped(events: &[PrEvent]) -> Option<&PrEvent> {
    events
        .iter()
        .filter(|e| e.outcome != "ignored")
        .max_by_key(|e| e.at)
        .filter(|e| e.outcome == "capped")
}

/// How many feedback messages the task's pull requests sent to its agent.
pub fn feedback_rounds(events: &[PrEvent]) -> usize {
    events.iter().filter(|e| e.outcome == "sent").count()
}
