//! Checkpoints of a session's worktrees around its turns, and reverting to one (issue 48).
//!
//! Before each turn every worktree the session works in (an attempt's own, else the task's)
//! that is on this server's host (local and container executors; not SSH ones) is recorded
//! under
//! `refs/kandev/checkpoints/<session>/<turn>`, and when the turn ends again under
//! `.../<turn>-after`; the commits are in `turn_checkpoints`. A turn's end also sets the
//! session's baseline there: the state the agent's turns last left, which a revert compares
//! the worktree with to find edits made by anyone else. `kandev_runtime::git::checkpoint`
//! does the git part without touching the user's index, `HEAD` or stash.
//!
//! Invariants:
//! - A checkpoint that cannot be taken never fails or delays the turn beyond the attempt:
//!   it is logged, and that turn then has no checkpoint to revert to (the UI offers none).
//! - An unchanged worktree makes no new commit: the snapshot reuses the baseline's (before a
//!   turn) or the turn's own before commit (after it).
//! - After each turn's end, only the newest `checkpoint_turns` turns younger than
//!   `checkpoint_age` keep their refs and rows; the rest are collected.
//! - A revert runs inside the session's actor (`session/revert.rs`), so no turn can start
//!   while it restores files.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::time::SystemTime;

use kandev_domain::transcript::Session;
use kandev_domain::{RepositoryId, SessionId, Timestamp, TurnId};
use kandev_runtime::git::{self, CheckpointTurn, GitError, Retention};
use kandev_store::{TurnCheckpoint, WorktreeRecord};

use crate::api::{CheckpointedTurn, RevertFile, RevertOutcome, UndoneTurn};
use crate::error::{EngineError, Result};
use crate::inner::Inner;
use crate::workdir::shared::{exists, git_error};

/// The ref name of a turn's checkpoint after it (beside `<turn>`, its checkpoint before).
fn after_name(turn: &TurnId) -> String {
    format!("{turn}-after")
}

/// The live worktrees a session works in (an attempt's own, else the task's) that are on
/// this server's host.
async fn local_worktrees(inner: &Inner, session: &Session) -> Result<Vec<WorktreeRecord>> {
    let mut local = vec![];
    for record in inner.store.live_worktrees(&session.task_id).await? {
        let mine = match session.attempt {
            Some(_) => record.session_id.as_ref() == Some(&session.id),
            None => record.is_task_worktree(),
        };
        if !mine {
            continue;
        }
        if crate::sites::ssh_of(inner, &record).await?.is_none() && exists(&record.path).await {
            local.push(record);
        }
    }
    Ok(local)
}

/// Records the session's worktrees before `turn` (logged, never failing the turn).
pub(crate) async fn before_turn(inner: &Inner, session: &Session, turn: &TurnId) {
    if inner.config.checkpoint_turns == 0 {
        return;
    }
    if let Err(err) = take_before(inner, session, turn).await {
        tracing::warn!(session = %session.id, %turn, error = %err, "no checkpoint before the turn");
    }
}

async fn take_before(inner: &Inner, session: &Session, turn: &TurnId) -> Result<()> {
    let worktrees = local_worktrees(inner, session).await?;
    let session = &session.id;
    if worktrees.is_empty() {
        return Ok(());
    }
    let baselines: HashMap<String, String> =
        inner.store.checkpoint_baselines(session).await?.into_iter().collect();
    let reference = git::checkpoint_ref(session.as_str(), turn.as_str()).map_err(git_error)?;
    let mut taken = vec![];
    for worktree in worktrees {
        let path = Path::new(&worktree.path);
        let previous = baselines.get(&worktree.path).map(String::as_str);
        let snapshot = match git::snapshot(path, &reference, previous).await {
            // A baseline collected by `git gc` meanwhile: a new commit instead.
            Err(GitError::UnknownCommit { .. }) => git::snapshot(path, &reference, None).await,
            other => other,
        }
        .map_err(git_error)?;
        taken.push((worktree, snapshot.commit));
    }
    let mut tx = inner.store.begin_write().await?;
    for (worktree, commit) in &taken {
        let repository = worktree.repository_id.as_ref();
        tx.record_checkpoint_before(turn, session, repository, &worktree.path, commit).await?;
    }
    tx.commit().await?;
    Ok(())
}

/// Records the worktrees again when `turn` ended, then collects what the retention setting
/// no longer keeps (logged, never failing the turn).
pub(crate) async fn after_turn(inner: &Inner, session: &SessionId, turn: &TurnId) {
    if inner.config.checkpoint_turns == 0 {
        return;
    }
    let result = async {
        take_after(inner, session, turn).await?;
        collect(inner, session).await
    };
    if let Err(err) = result.await {
        tracing::warn!(%session, %turn, error = %err, "no checkpoint after the turn");
    }
}

/// One turn's checkpoint rows, one per worktree.
async fn rows_of_turn(
    inner: &Inner,
    session: &SessionId,
    turn: &TurnId,
) -> Result<Vec<TurnCheckpoint>> {
    let rows = inner.store.turn_checkpoints(session).await?;
    Ok(rows.into_iter().filter(|row| &row.turn_id == turn).collect())
}

async fn take_after(inner: &Inner, session: &SessionId, turn: &TurnId) -> Result<()> {
    let rows = rows_of_turn(inner, session, turn).await?;
    if rows.is_empty() {
        return Ok(());
    }
    let reference = git::checkpoint_ref(session.as_str(), &after_name(turn)).map_err(git_error)?;
    let mut taken = vec![];
    for row in rows {
        if !exists(&row.path).await {
            continue;
        }
        let snapshot = git::snapshot(Path::new(&row.path), &reference, Some(&row.before_commit))
            .await
            .map_err(git_error)?;
        taken.push((row.path, snapshot.commit));
    }
    let mut tx = inner.store.begin_write().await?;
    for (path, commit) in &taken {
        tx.record_checkpoint_after(turn, session, path, commit).await?;
    }
    tx.commit().await?;
    Ok(())
}

/// Deletes the refs and rows of the session's turns the retention setting no longer keeps.
async fn collect(inner: &Inner, session: &SessionId) -> Result<()> {
    let rows = inner.store.turn_checkpoints(session).await?;
    // Turns oldest first (rows come ordered by when they were taken).
    let mut turns: Vec<(TurnId, Timestamp)> = vec![];
    for row in &rows {
        if turns.last().is_none_or(|(id, _)| *id != row.turn_id) {
            turns.push((row.turn_id.clone(), row.taken_at));
        }
    }
    let now = inner.store.now();
    let age = inner.config.checkpoint_age;
    let young = |taken: Timestamp| {
        age.is_zero() || now.millis().saturating_sub(taken.millis()) <= age.as_millis() as i64
    };
    let keep = inner.config.checkpoint_turns;
    let candidates: Vec<&TurnId> =
        turns.iter().filter(|(_, taken)| young(*taken)).map(|(id, _)| id).collect();
    let kept: Vec<&TurnId> = candidates[candidates.len().saturating_sub(keep)..].to_vec();
    let doomed: Vec<TurnId> =
        turns.iter().map(|(id, _)| id).filter(|id| !kept.contains(id)).cloned().collect();
    if doomed.is_empty() {
        return Ok(());
    }
    let names: Vec<String> =
        kept.iter().flat_map(|turn| [turn.to_string(), after_name(turn)]).collect();
    let listed: Vec<CheckpointTurn<'_>> = names
        .iter()
        .map(|name| CheckpointTurn { turn: name, taken_at: SystemTime::UNIX_EPOCH })
        .collect();
    let paths: std::collections::BTreeSet<&str> = rows.iter().map(|r| r.path.as_str()).collect();
    for path in paths {
        if exists(path).await {
            git::collect(Path::new(path), session.as_str(), &listed, KEEP_LISTED)
                .await
                .map_err(git_error)?;
        }
    }
    let mut tx = inner.store.begin_write().await?;
    tx.forget_checkpoints(session, &doomed).await?;
    tx.commit().await?;
    tracing::debug!(%session, collected = doomed.len(), "checkpoints collected");
    Ok(())
}

/// The session's turns that have a checkpoint, oldest first.
pub(crate) async fn checkpointed_turns(
    inner: &Inner,
    session: &SessionId,
) -> Result<Vec<CheckpointedTurn>> {
    let rows = inner.store.turn_checkpoints(session).await?;
    let all = inner.store.turn_prompts(session).await?;
    Ok(all
        .into_iter()
        .enumerate()
        .filter_map(|(index, turn)| {
            let mine: Vec<&TurnCheckpoint> =
                rows.iter().filter(|row| row.turn_id == turn.turn_id).collect();
            (!mine.is_empty()).then(|| CheckpointedTurn {
                number: index + 1,
                message_id: turn.message_id,
                undone: mine.iter().any(|row| row.undone_at.is_some()),
                diff: mine.iter().all(|row| row.after_commit.is_some()),
                turn_id: turn.turn_id,
            })
        })
        .collect())
}

/// A revert worked out: the worktrees to restore and to which commits.
pub(crate) struct RevertPlan {
    pub outcome: RevertOutcome,
    /// `(worktree path, commit before the turn)`.
    pub targets: Vec<(String, String)>,
}

/// Deletes the checkpoints of a removed worktree: its sessions' refs in its repository (kept
/// there, shared with every worktree of it) and its rows. Logged, never failing the removal.
pub(crate) async fn forget_worktree(inner: &Inner, record: &WorktreeRecord) {
    let result = async {
        let sessions = inner.store.checkpoint_sessions_at(&record.path).await?;
        if sessions.is_empty() {
            return Ok(());
        }
        let repository = Path::new(&record.repository_path);
        if exists(&record.repository_path).await {
            for session in &sessions {
                git::collect(repository, session.as_str(), &[], KEEP_LISTED)
                    .await
                    .map_err(git_error)?;
            }
        }
        let mut tx = inner.store.begin_write().await?;
        tx.forget_checkpoints_at(&record.path).await?;
        tx.commit().await?;
        Ok::<(), EngineError>(())
    };
    if let Err(err) = result.await {
        tracing::warn!(path = %record.path, error = %err, "the removed worktree's checkpoints stay");
    }
}

/// The worktrees a session has checkpoints of (read before the session is deleted).
pub(crate) async fn session_paths(inner: &Inner, session: &SessionId) -> Vec<String> {
    let rows = inner.store.turn_checkpoints(session).await.unwrap_or_default();
    let paths: std::collections::BTreeSet<String> = rows.into_iter().map(|r| r.path).collect();
    paths.into_iter().collect()
}

/// Deletes a deleted session's checkpoint refs from the worktrees at `paths` (its rows went
/// with it). Logged, never failing the deletion.
pub(crate) async fn forget_session(session: &SessionId, paths: &[String]) {
    let result = async {
        for path in paths {
            if exists(path).await {
                git::collect(Path::new(path), session.as_str(), &[], KEEP_LISTED)
                    .await
                    .map_err(git_error)?;
            }
        }
        Ok::<(), EngineError>(())
    };
    if let Err(err) = result.await {
        tracing::warn!(%session, error = %err, "the deleted session's checkpoint refs stay");
    }
}

/// Keeps exactly the refs listed to [`git::collect`] (ages decided by the caller).
const KEEP_LISTED: Retention =
    Retention { keep: usize::MAX, max_age: None, now: SystemTime::UNIX_EPOCH };

/// Works out a revert of `session`'s worktrees to before `turn`.
pub(crate) async fn plan_revert(
    inner: &Inner,
    session: &SessionId,
    turn: &TurnId,
) -> Result<RevertPlan> {
    let rows = inner.store.turn_checkpoints(session).await?;
    let Some(first) = rows.iter().position(|row| &row.turn_id == turn) else {
        return Err(EngineError::NotFound(format!(
            "turn {turn} of this session has no checkpoint: it ran in no worktree on this \
             server, or its checkpoint was collected (only the newest {} turns keep one)",
            inner.config.checkpoint_turns
        )));
    };
    let target: Vec<&TurnCheckpoint> = rows.iter().filter(|row| &row.turn_id == turn).collect();
    if target.iter().any(|row| row.undone_at.is_some()) {
        return Err(EngineError::Conflict(
            "that turn was already undone by a revert; revert to an earlier turn instead".into(),
        ));
    }
    let mut undone: Vec<&TurnId> = vec![];
    for row in &rows[first..] {
        if row.undone_at.is_none() && !undone.contains(&&row.turn_id) {
            undone.push(&row.turn_id);
        }
    }
    let baselines: HashMap<String, String> =
        inner.store.checkpoint_baselines(session).await?.into_iter().collect();
    let (mut files, mut outside, mut targets) = (vec![], vec![], vec![]);
    for row in target {
        if !exists(&row.path).await {
            return Err(EngineError::Conflict(format!(
                "the worktree {} is gone, so it cannot be reverted",
                row.path
            )));
        }
        let path = Path::new(&row.path);
        let named = |paths: Vec<String>| {
            paths
                .into_iter()
                .map(|p| RevertFile { repository_id: row.repository_id.clone(), path: p })
        };
        files.extend(named(git::changed_since(path, &row.before_commit).await.map_err(git_error)?));
        if let Some(baseline) = baselines.get(&row.path) {
            let changed = git::changed_since(path, baseline).await.map_err(git_error)?;
            outside.extend(named(changed));
        }
        targets.push((row.path.clone(), row.before_commit.clone()));
    }
    files.sort();
    outside.sort();
    let turns = number_turns(inner, session, &undone).await?;
    let outcome = RevertOutcome { turns, files, outside_edits: outside, reverted: false };
    Ok(RevertPlan { outcome, targets })
}

/// `undone` with their numbers in the session and their prompts' first lines.
async fn number_turns(
    inner: &Inner,
    session: &SessionId,
    undone: &[&TurnId],
) -> Result<Vec<UndoneTurn>> {
    let all = inner.store.turn_prompts(session).await?;
    let numbers: BTreeMap<&TurnId, (usize, Option<&String>)> =
        all.iter().enumerate().map(|(i, t)| (&t.turn_id, (i + 1, t.content.as_ref()))).collect();
    Ok(undone
        .iter()
        .map(|turn| {
            let (number, prompt) = numbers.get(turn).copied().unwrap_or((0, None));
            let prompt = prompt.map(|p| first_line(p)).unwrap_or_default();
            UndoneTurn { turn_id: (*turn).clone(), number, prompt }
        })
        .collect())
}

/// The first non-empty line of a prompt, at most 80 characters.
fn first_line(text: &str) -> String {
    let line = text.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or_default();
    match line.char_indices().nth(80) {
        Some((cut, _)) => format!("{}…", &line[..cut]),
        None => line.to_owned(),
    }
}

/// Restores each worktree of `plan` to its commit before the turn.
pub(crate) async fn restore(plan: &RevertPlan) -> Result<()> {
    for (path, commit) in &plan.targets {
        git::restore(Path::new(path), commit).await.map_err(git_error)?;
    }
    Ok(())
}

/// What the transcript's divider and the agent's next prompt say about a revert.
pub(crate) fn describe(outcome: &RevertOutcome) -> (String, String) {
    let numbers: Vec<String> = outcome.turns.iter().map(|t| t.number.to_string()).collect();
    let first = outcome.turns.first().map_or(0, |t| t.number);
    let files = outcome.files.len();
    let plural = if files == 1 { "" } else { "s" };
    let undone = match numbers.as_slice() {
        [one] => format!("turn {one} undone"),
        many => format!("turns {} undone", many.join(", ")),
    };
    let divider = format!(
        "Files reverted to before turn {first}: {undone}, {files} file{plural} changed back"
    );
    let mut listed: Vec<&str> = outcome.files.iter().map(|f| f.path.as_str()).take(20).collect();
    if files > listed.len() {
        listed.push("…");
    }
    let notice = format!(
        "[Kandev] The user reverted the working tree to how it was before turn {first}; the \
         file changes of {} are undone, so files may differ from what you last saw{}.",
        undone.trim_end_matches(" undone"),
        if listed.is_empty() { String::new() } else { format!(" ({})", listed.join(", ")) }
    );
    (divider, notice)
}

/// `undone` turn ids, for the store and the transcript note.
pub(crate) fn undone_ids(outcome: &RevertOutcome) -> Vec<TurnId> {
    outcome.turns.iter().map(|t| t.turn_id.clone()).collect()
}

/// The files one turn changed, per worktree: its checkpoint before to its checkpoint after.
pub(crate) async fn turn_changes(
    inner: &Inner,
    session: &SessionId,
    turn: &TurnId,
) -> Result<Vec<(Option<RepositoryId>, Vec<kandev_domain::files::FileChange>)>> {
    let rows = rows_of_turn(inner, session, turn).await?;
    if rows.is_empty() {
        return Err(EngineError::NotFound(format!(
            "turn {turn} of this session has no checkpoint, so what it changed is not known"
        )));
    }
    let mut all = vec![];
    for row in rows {
        let Some(after) = &row.after_commit else {
            return Err(EngineError::Conflict(
                "the turn has not ended (or ended with its agent), so it has no checkpoint after it"
                    .into(),
            ));
        };
        if !exists(&row.path).await {
            continue;
        }
        let files = git::commits_changes(Path::new(&row.path), &row.before_commit, after)
            .await
            .map_err(git_error)?;
        all.push((row.repository_id, files));
    }
    Ok(all)
}
