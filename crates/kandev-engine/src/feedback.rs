//! CI checks and reviews of a task's open pull request as workflow triggers (issue 46,
//! docs/workflows.md "The forge actions"). Each poll of an open pull request reads its head
//! commit's jobs and its review notes; a head commit whose jobs all finished fires
//! `on_pr_checks_failed` or `on_pr_checks_passed`, new review notes fire `on_pr_review`.
//!
//! Invariants:
//! - Each event runs once: it is recorded (`pr_events`, keyed by head commit or newest note)
//!   in the same transaction that queues its feedback, so neither a second poll nor a restart
//!   between two polls sends it again, and a crash before the commit leaves it to the next poll.
//! - Feedback goes through the session's durable queue; at most `max_rounds` messages per task,
//!   after which the task needs its developer (`NeedsYou::PullRequest`) with the reason.
//! - A failed job that also fails on the base branch's head is inherited: reported, never sent
//!   as the agent's fault. Bots' notes count only with `include_bots`.
//! - Auto-merge merges only a head commit whose jobs (as the forge lists them) all passed,
//!   with the forge's required approvals met; otherwise it records why not and tries again at
//!   each poll while that commit is the head.
//! - One follower per task at a time (`Inner::feedback_locks`): the poll and `task.pr.get`
//!   never count the rounds or the notes side by side.

use std::sync::Arc;

use kandev_domain::message_meta::StatusNote;
use kandev_domain::ship::{PrCheck, PrEvent, PullRequest};
use kandev_domain::workflow::{Action, EntryCause, Feedback, TASK_PROMPT_PLACEHOLDER, Trigger};
use kandev_forge::ForgeApi;
use kandev_forge::checks::{CheckJob, CheckState, ReviewNote};
use serde_json::Value;

use crate::api::QueueChange;
use crate::error::Result;
use crate::inner::Inner;

/// The most of one failed job's log that is kept and sent.
const LOG_TAIL_BYTES: usize = 4 * 1024;
/// The most failed jobs whose logs are read per head commit.
const LOGS_PER_COMMIT: usize = 5;
/// The most a feedback message may hold (the step's own prompt comes on top).
const MAX_FEEDBACK_BYTES: usize = 24 * 1024;

/// What one poll found, for the step's actions.
enum Found {
    /// The head commit's jobs, all finished.
    Checks { sha: String, checks: Vec<PrCheck> },
    /// Review notes newer than the last review event.
    Review { notes: Vec<ReviewNote> },
}

/// Reads the checks and reviews of an open pull request (`pr_body`: the forge's answer to
/// reading it) and runs the step's triggers for what is new. Called after each refresh.
pub(crate) async fn follow(
    inner: &Arc<Inner>,
    api: &ForgeApi,
    pr_body: &Value,
    pr: &PullRequest,
) -> Result<()> {
    // One at a time per task: two followers could both count the rounds or the notes.
    let _following = inner.feedback_locks.lock(&pr.task_id).await;
    let client = kandev_forge::client()?;
    if let Some(found) = read_checks(inner, api, &client, pr_body, pr).await? {
        let failed = matches!(&found, Found::Checks { checks, .. } if checks.iter().any(|c| c.state == "failure"));
        let (trigger, cause) = if failed {
            (Trigger::OnPrChecksFailed, EntryCause::PrChecksFailed)
        } else {
            (Trigger::OnPrChecksPassed, EntryCause::PrChecksPassed)
        };
        run(inner, api, &client, pr, trigger, cause, found).await?;
    }
    let notes = api.review_notes(&client, pr.number).await?;
    if let Some(found) = new_notes(inner, pr, notes).await? {
        run(inner, api, &client, pr, Trigger::OnPrReview, EntryCause::PrReview, found).await?;
    }
    Ok(())
}

/// The head commit's jobs, stored; `Some` once every job finished.
async fn read_checks(
    inner: &Inner,
    api: &ForgeApi,
    client: &kandev_forge::HttpClient,
    pr_body: &Value,
    pr: &PullRequest,
) -> Result<Option<Found>> {
    let sha = api.head_sha(pr_body);
    if sha.is_empty() {
        return Ok(None);
    }
    let jobs = api.check_jobs(client, pr_body, &sha).await?;
    let done = !jobs.is_empty() && jobs.iter().all(|j| j.state != CheckState::Pending);
    let stored = inner.store.pr_checks(&pr.task_id).await?;
    let failing: Vec<&CheckJob> = jobs.iter().filter(|j| j.state == CheckState::Failure).collect();
    // What fails on the base branch's head too is not this branch's doing.
    // (A base that cannot be read now is read at the next poll: nothing is decided without it.)
    let inherited: Vec<String> = if done && !failing.is_empty() {
        let base = pr.base_branch.trim_start_matches("origin/");
        let on_base = api.base_check_jobs(client, base).await?;
        on_base.into_iter().filter(|j| j.state == CheckState::Failure).map(|j| j.name).collect()
    } else {
        vec![]
    };
    let mut checks: Vec<PrCheck> = vec![];
    let mut logs_read = 0;
    for job in &jobs {
        // Jobs of one name (a workflow run on push and on pull_request) are told apart.
        let mut name = job.name.clone();
        let mut n = 1;
        while checks.iter().any(|c| c.name == name) {
            n += 1;
            name = format!("{} ({n})", job.name);
        }
        let known = stored
            .iter()
            .find(|c| c.repository_id == pr.repository_id && c.name == name && c.head_sha == sha);
        let log_tail = match (job.state, known) {
            (CheckState::Failure, Some(c)) if !c.log_tail.is_empty() => c.log_tail.clone(),
            (CheckState::Failure, _) if done && logs_read < LOGS_PER_COMMIT => {
                logs_read += 1;
                // One that cannot be read now is asked for again at the next poll.
                api.job_log_tail(client, job, LOG_TAIL_BYTES).await.unwrap_or_default()
            }
            _ => String::new(),
        };
        checks.push(PrCheck {
            task_id: pr.task_id.clone(),
            repository_id: pr.repository_id.clone(),
            name,
            head_sha: sha.clone(),
            state: job.state.as_str().to_owned(),
            url: job.url.clone(),
            log_tail,
            inherited: job.state == CheckState::Failure && inherited.contains(&job.name),
        });
    }
    checks.sort_by(|a, b| a.name.cmp(&b.name)); // as the store lists them
    let mine: Vec<&PrCheck> =
        stored.iter().filter(|c| c.repository_id == pr.repository_id).collect();
    if mine.len() != checks.len() || mine.iter().zip(&checks).any(|(a, b)| *a != b) {
        let mut tx = inner.store.begin_write().await?;
        tx.replace_pr_checks(&pr.task_id, &pr.repository_id, &checks).await?;
        tx.commit().await?;
    }
    Ok(done.then_some(Found::Checks { sha, checks }))
}

/// The review notes after the last review event of this pull request, if any.
async fn new_notes(
    inner: &Inner,
    pr: &PullRequest,
    notes: Vec<ReviewNote>,
) -> Result<Option<Found>> {
    // After the newest note an earlier event saw that the forge still lists (the last one
    // seen may have been deleted); when none is listed any more, every note is new again
    // (rather than never hearing a review again; the rounds still bound what is sent).
    let seen: Vec<String> = inner
        .store
        .pr_events(&pr.task_id)
        .await?
        .into_iter()
        .filter(|e| e.kind == "review" && e.repository_id == pr.repository_id)
        .map(|e| e.key)
        .collect();
    let start = notes.iter().rposition(|n| seen.contains(&n.id)).map_or(0, |i| i + 1);
    let fresh: Vec<ReviewNote> = notes.into_iter().skip(start).collect();
    Ok((!fresh.is_empty()).then_some(Found::Review { notes: fresh }))
}

/// Records the event once and runs the step's actions under `trigger` for it.
async fn run(
    inner: &Arc<Inner>,
    api: &ForgeApi,
    client: &kandev_forge::HttpClient,
    pr: &PullRequest,
    trigger: Trigger,
    cause: EntryCause,
    found: Found,
) -> Result<()> {
    let task = inner.store.get_task(&pr.task_id).await?;
    if task.archived_at.is_some() {
        return Ok(());
    }
    let workflow = inner.store.get_workflow(&task.workflow_id).await?;
    let Some(step) = workflow.step(&task.step_id).cloned() else { return Ok(()) };
    let actions = step.events.actions(trigger).to_vec();
    let (kind, key) = match &found {
        Found::Checks { sha, .. } => (trigger_kind(trigger), sha.clone()),
        Found::Review { notes } => {
            ("review", notes.last().map(|n| n.id.clone()).unwrap_or_default())
        }
    };
    let mut event = PrEvent {
        task_id: pr.task_id.clone(),
        repository_id: pr.repository_id.clone(),
        kind: kind.to_owned(),
        key,
        outcome: "none".into(),
        detail: String::new(),
        at: inner.store.now(),
    };
    let feedback = actions.iter().find_map(|a| match a {
        Action::SendFeedback(f) => Some(*f),
        _ => None,
    });
    let mut tx = inner.store.begin_write().await?;
    if !tx.record_pr_event(&event).await? {
        // This commit's (or review's) event ran already; a merge that was refused (approvals
        // missing, the forge busy) is tried again while the same green commit is the head.
        drop(tx);
        return retry_merge(inner, api, client, pr, &found, &actions).await;
    }
    let mut queued = None;
    if let Some(feedback) = feedback {
        let rounds = kandev_domain::ship::feedback_rounds(&tx.pr_events(&pr.task_id).await?);
        let decided = decide(pr, &found, feedback, rounds, &step.prompt, &task.prompt());
        event.outcome = decided.outcome.to_owned();
        event.detail = decided.detail;
        let cap = inner.config.queue_cap;
        let full = match &task.primary_session_id {
            Some(id) => cap > 0 && tx.list_queue(id).await?.len() >= cap,
            None => false,
        };
        if decided.message.is_some() && full {
            event.outcome = "none".into();
            event.detail = format!("the session's queue already holds {cap} messages; not sent");
        } else if let (Some(text), Some(session_id)) = (decided.message, &task.primary_session_id) {
            tx.enqueue(session_id, &text, &[], None, "forge").await?;
            let session = tx.get_session(session_id).await?;
            let queue = tx.list_queue(session_id).await?;
            crate::publish::queue_changed(&mut tx, &session, &queue).await?;
            queued = Some(session_id.clone());
        } else if decided.outcome == "sent" {
            event.outcome = "none".into();
            event.detail = "the task has no session to send the feedback to".into();
        }
    }
    tx.set_pr_event_outcome(&event).await?;
    note(&mut tx, &task, &event).await?;
    tx.commit().await?;
    if let Some(session_id) = queued {
        // Runs the queued feedback now when the agent is idle (and auto-run is on).
        let nudge = crate::handle::ask(inner, &session_id, |reply| {
            crate::command::Command::Queue { change: QueueChange::Nudge, reply }
        });
        if let Err(err) = nudge.await {
            tracing::warn!(task = %pr.task_id, error = %err, "the queued feedback did not start");
        }
    }
    if let (Found::Checks { sha, .. }, Some(strategy)) = (&found, auto_merge(&actions)) {
        merge(inner, api, client, pr, sha, strategy, &mut event).await?;
    }
    let from = Some(step.id.clone());
    crate::workflow::forge_move(inner.clone(), pr.task_id.clone(), from, trigger, cause).await
}

/// A green head commit whose merge was refused: merged now if the forge allows it.
async fn retry_merge(
    inner: &Arc<Inner>,
    api: &ForgeApi,
    client: &kandev_forge::HttpClient,
    pr: &PullRequest,
    found: &Found,
    actions: &[Action<kandev_domain::StepId>],
) -> Result<()> {
    let (Found::Checks { sha, .. }, Some(strategy)) = (found, auto_merge(actions)) else {
        return Ok(());
    };
    let refused = inner.store.pr_events(&pr.task_id).await?.into_iter().find(|e| {
        e.repository_id == pr.repository_id
            && e.kind == "checks_passed"
            && e.key == *sha
            && e.outcome == "merge_refused"
    });
    match refused {
        Some(mut event) => merge(inner, api, client, pr, sha, strategy, &mut event).await,
        None => Ok(()),
    }
}

fn trigger_kind(trigger: Trigger) -> &'static str {
    match trigger {
        Trigger::OnPrChecksFailed => "checks_failed",
        Trigger::OnPrChecksPassed => "checks_passed",
        _ => "review",
    }
}

fn auto_merge(
    actions: &[Action<kandev_domain::StepId>],
) -> Option<kandev_domain::ship::MergeStrategy> {
    actions.iter().find_map(|a| match a {
        Action::AutoMerge { strategy } => Some(*strategy),
        _ => None,
    })
}

/// What `send_feedback` does with an event: its outcome, why, and the message to queue.
struct Decided {
    outcome: &'static str,
    detail: String,
    message: Option<String>,
}

/// Decides what feedback an event gets, after `rounds` messages sent for the task.
fn decide(
    pr: &PullRequest,
    found: &Found,
    feedback: Feedback,
    rounds: usize,
    step_prompt: &str,
    task_prompt: &str,
) -> Decided {
    let body = match found {
        Found::Checks { sha, checks } => {
            let failed: Vec<&PrCheck> = checks.iter().filter(|c| c.state == "failure").collect();
            if failed.is_empty() {
                return Decided { outcome: "none", detail: String::new(), message: None };
            }
            if failed.iter().all(|c| c.inherited) {
                let names = names(&failed);
                let detail = format!(
                    "{names} also fail on {}: inherited from the base branch, not sent to the agent",
                    pr.base_branch
                );
                return Decided { outcome: "inherited", detail, message: None };
            }
            checks_text(pr, sha, &failed)
        }
        Found::Review { notes } => {
            let asked: Vec<&ReviewNote> =
                notes.iter().filter(|n| feedback.include_bots || !n.bot).collect();
            if asked.is_empty() {
                let detail = "only bots commented; their notes are not sent".to_owned();
                return Decided { outcome: "ignored", detail, message: None };
            }
            review_text(pr, &asked)
        }
    };
    let max = feedback.max_rounds as usize;
    if rounds >= max {
        let detail = format!(
            "auto-fix stopped: {rounds} of {max} feedback rounds were sent and pull request #{} still asks for changes",
            pr.number
        );
        return Decided { outcome: "capped", detail, message: None };
    }
    let mut message = bounded(body, MAX_FEEDBACK_BYTES);
    message.push_str(&format!("\n(feedback round {} of {max})\n", rounds + 1));
    // The step's own prompt says what to do about it (a mock agent's script, too).
    if !step_prompt.trim().is_empty() {
        message.push('\n');
        message.push_str(&step_prompt.replace(TASK_PROMPT_PLACEHOLDER, task_prompt));
    }
    let detail = format!("sent to the agent (round {} of {max})", rounds + 1);
    Decided { outcome: "sent", detail, message: Some(message) }
}

fn names(checks: &[&PrCheck]) -> String {
    checks.iter().map(|c| format!("`{}`", c.name)).collect::<Vec<_>>().join(", ")
}

fn checks_text(pr: &PullRequest, sha: &str, failed: &[&PrCheck]) -> String {
    let short = sha.get(..10).unwrap_or(sha);
    let mut text = format!("The checks of pull request #{} failed on commit {short}:\n", pr.number);
    for check in failed {
        if check.inherited {
            text.push_str(&format!(
                "\n- `{}` fails on {} too (inherited, not this branch's doing): {}\n",
                check.name, pr.base_branch, check.url
            ));
            continue;
        }
        text.push_str(&format!("\n- `{}` failed: {}\n", check.name, check.url));
        if !check.log_tail.trim().is_empty() {
            text.push_str(&format!(
                "  The end of its log:\n```\n{}\n```\n",
                check.log_tail.trim_end()
            ));
        }
    }
    text.push_str("\nFix what failed and commit; the checks run again on the new commit.\n");
    text
}

fn review_text(pr: &PullRequest, notes: &[&ReviewNote]) -> String {
    let mut text = format!("A review of pull request #{} asks for changes:\n", pr.number);
    for note in notes {
        let place = match (&note.path, note.line) {
            (Some(path), Some(line)) => format!(" on {path}:{line}"),
            (Some(path), None) => format!(" on {path}"),
            _ => String::new(),
        };
        let what = if note.changes_requested { "requested changes" } else { "wrote" };
        let body = if note.body.trim().is_empty() { "(no comment)" } else { note.body.trim() };
        text.push_str(&format!(
            "\n- {} {what}{place}:\n  {}\n",
            note.author,
            body.replace('\n', "\n  ")
        ));
    }
    text.push_str("\nAddress these comments and commit.\n");
    text
}

/// `text` cut to at most `max` bytes at a character boundary, saying so when cut.
fn bounded(mut text: String, max: usize) -> String {
    if text.len() <= max {
        return text;
    }
    let mut cut = max;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    text.truncate(cut);
    text.push_str("\n(cut: the rest is on the forge)\n");
    text
}

/// Merges the pull request on its forge when its required approvals are met; records the
/// outcome either way.
async fn merge(
    inner: &Arc<Inner>,
    api: &ForgeApi,
    client: &kandev_forge::HttpClient,
    pr: &PullRequest,
    sha: &str,
    strategy: kandev_domain::ship::MergeStrategy,
    event: &mut PrEvent,
) -> Result<()> {
    let method = match strategy {
        kandev_domain::ship::MergeStrategy::Merge => "merge",
        kandev_domain::ship::MergeStrategy::Squash => "squash",
        kandev_domain::ship::MergeStrategy::FastForward => "rebase",
    };
    let refused = match api.get(client, pr.number).await {
        Err(err) => Some(err.to_string()),
        Ok(body) => match api.approvals(client, pr.number, &body).await {
            Err(err) => Some(err.to_string()),
            Ok(Err(reason)) => Some(reason),
            Ok(Ok(())) => {
                api.merge(client, pr.number, sha, method).await.err().map(|e| e.to_string())
            }
        },
    };
    let before = (event.outcome.clone(), event.detail.clone());
    match refused {
        Some(reason) => {
            event.outcome = "merge_refused".into();
            event.detail = format!("auto-merge refused: {reason}");
        }
        None => {
            event.outcome = "merged".into();
            event.detail = format!("auto-merged pull request #{} ({method})", pr.number);
        }
    }
    if before == (event.outcome.clone(), event.detail.clone()) {
        return Ok(()); // refused again for the same reason: said once
    }
    let task = inner.store.get_task(&pr.task_id).await?;
    let mut tx = inner.store.begin_write().await?;
    tx.set_pr_event_outcome(event).await?;
    note(&mut tx, &task, event).await?;
    tx.commit().await?;
    Ok(())
}

/// The event's outcome as a status note in the task's primary session (none without one), and
/// the task's needs-you kept in step (auto-fix stopped, or going again).
async fn note(
    tx: &mut kandev_store::WriteTx,
    task: &kandev_domain::task::Task,
    event: &PrEvent,
) -> Result<()> {
    let Some(session_id) = &task.primary_session_id else { return Ok(()) };
    let session = tx.get_session(session_id).await?;
    if event.outcome != "none" {
        let what = match event.kind.as_str() {
            "checks_failed" => "the checks failed",
            "checks_passed" => "the checks passed",
            _ => "a review came",
        };
        let text = format!("pull request: {what}; {}", event.detail);
        let note = StatusNote::PrFeedback {
            repository_id: event.repository_id.to_string(),
            event: event.kind.clone(),
            outcome: event.outcome.clone(),
        };
        crate::write::add_message(tx, &session, None, &text, note).await?;
    }
    crate::publish::sync_task(tx, &session).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use kandev_domain::ship::{Forge, PrState};
    use kandev_domain::{RepositoryId, TaskId, Timestamp};

    fn pr() -> PullRequest {
        PullRequest {
            task_id: TaskId::new("t"),
            repository_id: RepositoryId::new("r"),
            forge: Forge::GitHub,
            number: 7,
            url: String::new(),
            state: PrState::Open,
            checks: None,
            review_decision: None,
            head_branch: "task".into(),
            base_branch: "main".into(),
            updated_at: Timestamp(0),
        }
    }

    fn check(name: &str, state: &str, inherited: bool) -> PrCheck {
        PrCheck {
            task_id: TaskId::new("t"),
            repository_id: RepositoryId::new("r"),
            name: name.into(),
            head_sha: "abc".into(),
            state: state.into(),
            url: format!("http://ci/{name}"),
            log_tail: format!("{name} log"),
            inherited,
        }
    }

    fn checks(list: Vec<PrCheck>) -> Found {
        Found::Checks { sha: "abc".into(), checks: list }
    }

    #[test]
    fn i46_failures_are_sent_until_the_rounds_are_used_up() {
        let found = checks(vec![check("test", "failure", false), check("lint", "success", false)]);
        let sent = decide(&pr(), &found, Feedback::default(), 0, "", "");
        assert_eq!(sent.outcome, "sent");
        let text = sent.message.unwrap();
        assert!(
            text.contains("`test` failed: http://ci/test") && text.contains("test log"),
            "{text}"
        );
        assert!(!text.contains("lint"), "{text}");
        assert!(text.contains("round 1 of 3"), "{text}");
        let capped = decide(&pr(), &found, Feedback::default(), 3, "", "");
        assert_eq!((capped.outcome, capped.message), ("capped", None));
        assert!(capped.detail.contains("auto-fix stopped"), "{}", capped.detail);
    }

    #[test]
    fn i46_failures_that_fail_on_the_base_too_are_not_the_agents_fault() {
        let found = checks(vec![check("test", "failure", true)]);
        let decided = decide(&pr(), &found, Feedback::default(), 0, "", "");
        assert_eq!((decided.outcome, decided.message), ("inherited", None));
        assert!(decided.detail.contains("also fail on main"), "{}", decided.detail);
        // With a failure of its own, the inherited one is named as such.
        let found = checks(vec![check("test", "failure", true), check("unit", "failure", false)]);
        let text = decide(&pr(), &found, Feedback::default(), 0, "", "").message.unwrap();
        assert!(text.contains("`test` fails on main too (inherited"), "{text}");
    }

    #[test]
    fn i46_bots_are_ignored_unless_asked_and_the_step_prompt_follows() {
        let note = |author: &str, bot: bool| ReviewNote {
            id: format!("comment:{author}"),
            author: author.into(),
            bot,
            changes_requested: false,
            body: "please rename".into(),
            path: Some("src/a.rs".into()),
            line: Some(3),
        };
        let bots = Found::Review { notes: vec![note("ci[bot]", true)] };
        assert_eq!(decide(&pr(), &bots, Feedback::default(), 0, "", "").outcome, "ignored");
        let asked = Feedback { include_bots: true, ..Feedback::default() };
        assert_eq!(decide(&pr(), &bots, asked, 0, "", "").outcome, "sent");
        let review = Found::Review { notes: vec![note("ana", false)] };
        let text = decide(&pr(), &review, Feedback::default(), 0, "Fix {{task_prompt}}", "it")
            .message
            .unwrap();
        assert!(text.contains("ana wrote on src/a.rs:3:\n  please rename"), "{text}");
        assert!(text.ends_with("Fix it"), "{text}");
    }

    #[test]
    fn i46_a_long_feedback_is_cut_at_a_character_boundary() {
        let text = bounded("é".repeat(100), 51);
        assert!(text.starts_with(&"é".repeat(25)) && text.contains("(cut"), "{text}");
    }
}
