//! Work that arrives by itself (issue 47, docs/intake.md): intake sources, their polling and
//! their webhooks. More `Engine` methods; nothing below the engine imports this module.
//!
//! Invariants:
//! - One issue (delivery, occurrence) makes at most one task per workspace, whichever way
//!   it arrives and however often: its external id is recorded in the transaction that
//!   creates the task (`task_origins`), and a second arrival finds it there.
//! - A webhook delivery is checked in this order, each with its own refusal: the source
//!   exists, has a webhook and is on; the signature; the headers; an event the scheme knows; a
//!   JSON body; the delivery id not seen before (a replay, recorded here); the event's fields.
//!   A delivery whose action fails on Kandev's side is forgotten again, so a retry is acted on.
//! - Tasks made by intake never start an agent by themselves; their step's `auto_start_agent`
//!   decides, as for any task.
//! - The only network calls are to the source's repository's forge, with its token.

use kandev_domain::intake::{Arrival, Hook, HookScheme, IntakeSource, SourceKind, TaskOrigin};
use kandev_domain::task::Task;
use kandev_domain::validate::{MAX_DESCRIPTION_BYTES, MAX_TITLE_CHARS};
use kandev_domain::{RepositoryId, StepId, TaskId, Timestamp, WorkflowId, WorkspaceId};
use kandev_forge::webhook::{self, Refusal, Scheme};
use kandev_store::{NewIntakeSource, StoreError};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::engine::Engine;
use crate::error::{EngineError, Result, not_found};
use crate::usecases::NewTaskRequest;
use crate::writeback::tracker_of;

/// The longest external id a generic webhook may give.
const MAX_EXTERNAL_ID_BYTES: usize = 200;
/// The longest URL a generic webhook may give.
const MAX_URL_BYTES: usize = 2048;
/// The beginnings of the keys Kandev makes itself.
const RESERVED_PREFIXES: [&str; 4] = ["github:", "gitlab:", "schedule:", "hook:"];

/// How long an accepted delivery id is remembered: a replay within it is refused.
const DELIVERY_MEMORY_MS: i64 = 30 * 24 * 60 * 60 * 1000;

/// `intake.source.create` as decoded: names and label checked, ids not yet.
pub struct IntakeSourceRequest {
    pub workspace_id: WorkspaceId,
    pub name: String,
    pub kind: SourceKind,
    pub repository_id: Option<RepositoryId>,
    pub label: String,
    pub workflow_id: Option<WorkflowId>,
    pub step_id: Option<StepId>,
    pub hook_scheme: Option<HookScheme>,
}

/// What a webhook delivery did.
#[derive(Debug)]
pub enum HookOutcome {
    /// It made this task.
    Created(Box<Task>),
    /// Its issue made a task before (this one, possibly deleted since).
    Known(TaskId),
    /// It was read and needs nothing (a closed issue, another label, a ping), and why.
    Ignored(String),
    /// The open pull requests of the source's repository are being read again (their
    /// checks and reviews run the steps' triggers).
    Refreshing(usize),
}

/// Why a webhook delivery is refused; each is answered with its own status and code.
#[derive(Debug, thiserror::Error)]
pub enum HookError {
    /// No such source, or it has no webhook.
    #[error("{0}")]
    NotFound(String),
    /// The source is turned off.
    #[error("{0}")]
    Disabled(String),
    #[error("{0}")]
    BadSignature(String),
    /// A header the scheme needs is missing.
    #[error("{0}")]
    MissingHeader(String),
    /// This delivery id was accepted before.
    #[error("{0}")]
    Replayed(String),
    /// An event the scheme does not handle.
    #[error("{0}")]
    UnknownEvent(String),
    /// The body is not what the event carries.
    #[error("{0}")]
    BadPayload(String),
    #[error(transparent)]
    Engine(#[from] EngineError),
}

impl From<StoreError> for HookError {
    fn from(err: StoreError) -> Self {
        HookError::Engine(EngineError::Store(err))
    }
}

/// What a known event asks for.
enum HookEvent {
    Ping,
    Issue,
    PullRequests,
    Task,
}

/// The event of a delivery, by scheme; `None` for one it does not handle.
fn classify(scheme: HookScheme, event: &str) -> Option<HookEvent> {
    match (scheme, event) {
        (HookScheme::GitHub, "ping") | (HookScheme::Hmac, "ping") => Some(HookEvent::Ping),
        (HookScheme::GitHub, "issues") | (HookScheme::GitLab, "Issue Hook") => {
            Some(HookEvent::Issue)
        }
        (
            HookScheme::GitHub,
            "pull_request"
            | "pull_request_review"
            | "pull_request_review_comment"
            | "check_run"
            | "check_suite"
            | "workflow_run"
            | "status",
        )
        | (HookScheme::GitLab, "Merge Request Hook" | "Pipeline Hook" | "Job Hook" | "Note Hook") => {
            Some(HookEvent::PullRequests)
        }
        (HookScheme::Hmac, "task") => Some(HookEvent::Task),
        _ => None,
    }
}

/// The events a scheme handles, for the refusal of another.
fn known_events(scheme: HookScheme) -> &'static str {
    match scheme {
        HookScheme::GitHub => {
            "ping, issues, pull_request, pull_request_review, pull_request_review_comment, check_run, check_suite, workflow_run, status"
        }
        HookScheme::GitLab => "Issue Hook, Merge Request Hook, Pipeline Hook, Job Hook, Note Hook",
        HookScheme::Hmac => "ping, task",
    }
}

fn scheme_of(scheme: HookScheme) -> Scheme {
    match scheme {
        HookScheme::GitHub => Scheme::GitHub,
        HookScheme::GitLab => Scheme::GitLab,
        HookScheme::Hmac => Scheme::Hmac,
    }
}

/// `text` cut to at most `max` bytes at a character boundary.
fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
}

/// A task title from an issue's: one line, within the limit, never empty.
fn title_of(title: &str, external_id: &str) -> String {
    let line: String = title
        .lines()
        .next()
        .unwrap_or_default()
        .chars()
        .filter(|c| !c.is_control() && !kandev_domain::validate::is_bidi_control(*c))
        .take(MAX_TITLE_CHARS)
        .collect();
    match line.trim() {
        "" => external_id.to_owned(),
        line => line.to_owned(),
    }
}

/// A new secret for a webhook: two random UUIDs' 244 random bits, hex.
fn new_secret() -> String {
    format!("{}{}", uuid::Uuid::new_v4().simple(), uuid::Uuid::new_v4().simple())
}

impl Engine {
    /// Where intake's tasks go: `step` of `workflow`, by default the workspace's first
    /// workflow and its start step; both checked against the workspace. Sources and
    /// schedules share it.
    pub(crate) async fn target_step(
        &self,
        workspace: &WorkspaceId,
        workflow: Option<&WorkflowId>,
        step: Option<&StepId>,
    ) -> Result<(WorkflowId, StepId)> {
        let store = &self.inner.store;
        let workflow = match workflow {
            Some(id) => store.get_workflow(id).await.map_err(not_found)?,
            None => store.list_workflows(workspace).await?.into_iter().next().ok_or_else(|| {
                EngineError::Conflict("the workspace has no workflow; add one first".into())
            })?,
        };
        if &workflow.workspace_id != workspace {
            return Err(EngineError::Validation("the workflow is not in this workspace".into()));
        }
        let step = match step {
            Some(id) => workflow.step(id).ok_or_else(|| {
                EngineError::Validation(format!("step {id} is not a step of {}", workflow.name))
            })?,
            None => workflow.start_step().ok_or_else(|| {
                EngineError::Conflict("the workflow has no steps; add one first".into())
            })?,
        };
        Ok((workflow.id.clone(), step.id.clone()))
    }

    /// `intake.source.create`: an `issues` source names a repository of the workspace; a
    /// `webhook` source gets the generic HMAC scheme. Tasks go to the given step, by default
    /// the start step of the workspace's first workflow. Answers the webhook's secret, once.
    pub async fn create_intake_source(
        &self,
        request: IntakeSourceRequest,
    ) -> Result<(IntakeSource, Option<String>)> {
        let store = &self.inner.store;
        store.get_workspace(&request.workspace_id).await.map_err(not_found)?;
        if let Some(repository) = &request.repository_id {
            let repository = store.get_repository(repository).await.map_err(not_found)?;
            if repository.workspace_id != request.workspace_id {
                return Err(EngineError::Validation(format!(
                    "repository {} is not in this workspace",
                    repository.name
                )));
            }
        }
        let hook_scheme = match (request.kind, request.hook_scheme) {
            (SourceKind::Issues, _) if request.repository_id.is_none() => {
                return Err(EngineError::Validation(
                    "an issues source needs a repository: its forge's issues are read".into(),
                ));
            }
            (SourceKind::Webhook, Some(HookScheme::GitHub | HookScheme::GitLab)) => {
                return Err(EngineError::Validation(
                    "a webhook-only source takes the generic HMAC scheme; GitHub and GitLab webhooks belong to an issues source".into(),
                ));
            }
            (SourceKind::Webhook, _) => Some(HookScheme::Hmac),
            (SourceKind::Issues, scheme) => scheme,
        };
        let (workflow_id, step_id) = self
            .target_step(
                &request.workspace_id,
                request.workflow_id.as_ref(),
                request.step_id.as_ref(),
            )
            .await?;
        let hook = hook_scheme.map(|scheme| Hook { scheme, secret: new_secret() });
        let secret = hook.as_ref().map(|h| h.secret.clone());
        let new = NewIntakeSource {
            workspace_id: request.workspace_id,
            name: request.name,
            kind: request.kind,
            repository_id: request.repository_id,
            label: request.label,
            workflow_id,
            step_id,
            hook,
        };
        let mut tx = store.begin_write().await?;
        let source = tx.insert_intake_source(&new).await?;
        tx.commit().await?;
        Ok((source, secret))
    }

    /// `intake.source.update`: turns a source's polling and webhook on or off.
    pub async fn set_intake_source_enabled(&self, id: &str, enabled: bool) -> Result<IntakeSource> {
        let mut tx = self.inner.store.begin_write().await?;
        let source = tx.set_intake_source_enabled(id, enabled).await.map_err(not_found)?;
        tx.commit().await?;
        Ok(source)
    }

    /// `intake.source.delete`. The tasks it made keep their origin (their issue is not taken
    /// in again by another source of the workspace).
    pub async fn delete_intake_source(&self, id: &str) -> Result<()> {
        let mut tx = self.inner.store.begin_write().await?;
        tx.delete_intake_source(id).await.map_err(not_found)?;
        tx.commit().await?;
        Ok(())
    }

    /// `intake.source.poll`: reads the source's open issues once and takes in the new ones;
    /// the poll's end (and why it failed) is recorded on the source.
    pub async fn poll_intake_source(&self, id: &str) -> Result<(IntakeSource, Vec<Task>)> {
        let source = self.inner.store.get_intake_source(id).await.map_err(not_found)?;
        if source.kind != SourceKind::Issues {
            return Err(EngineError::Validation(format!(
                "{} takes only what its webhook delivers; there is nothing to poll",
                source.name
            )));
        }
        let (created, failed) = match self.poll_issues(&source).await {
            Ok((created, failed)) => (created, failed),
            Err(err) => (vec![], Some(err)),
        };
        let mut tx = self.inner.store.begin_write().await?;
        let error = failed.as_ref().map(ToString::to_string).unwrap_or_default();
        tx.record_intake_poll(&source.id, &error).await?;
        tx.commit().await?;
        if let Some(err) = failed.filter(|_| created.is_empty()) {
            return Err(err);
        }
        let source = self.inner.store.get_intake_source(id).await?;
        Ok((source, created))
    }

    async fn poll_issues(&self, source: &IntakeSource) -> Result<(Vec<Task>, Option<EngineError>)> {
        let tracker = tracker_of(&self.inner, source).await?;
        let client = kandev_forge::client()?;
        let issues = tracker.open_issues(&client, &source.label).await?;
        let (mut created, mut failed) = (vec![], None);
        for issue in issues {
            let arrival = Arrival {
                external_id: tracker.external_id(issue.number),
                url: issue.url,
                title: issue.title,
                description: issue.body,
                number: Some(issue.number),
            };
            // One issue that cannot be taken in (a title the checks refuse) does not keep
            // the others out; the first such error is the poll's.
            match self.take_in(source, arrival).await {
                Ok(Some(task)) => created.push(task),
                Ok(None) => {}
                Err(err) => failed = failed.or(Some(err)),
            }
        }
        Ok((created, failed))
    }

    /// Makes a task of `arrival` in the source's step, unless its external id made one
    /// before; `None` then.
    async fn take_in(&self, source: &IntakeSource, arrival: Arrival) -> Result<Option<Task>> {
        let store = &self.inner.store;
        if store.task_from(&source.workspace_id, &arrival.external_id).await?.is_some() {
            return Ok(None);
        }
        let mut description = cut(&arrival.description, MAX_DESCRIPTION_BYTES - 1024);
        if !arrival.url.is_empty() {
            description = format!("{description}\n\n{}", arrival.url).trim_start().to_owned();
        }
        let origin = TaskOrigin {
            external_id: arrival.external_id.clone(),
            url: arrival.url,
            source_id: Some(source.id.clone()),
            number: arrival.number,
            closed: false,
        };
        let request = NewTaskRequest::arrival(
            (source.workflow_id.clone(), source.step_id.clone()),
            title_of(&arrival.title, &arrival.external_id),
            description,
            source.repository_id.iter().cloned().collect(),
            origin,
        );
        let external_id = arrival.external_id;
        match self.create_task(request).await {
            Ok(created) => Ok(Some(created.task)),
            // Another arrival of the same issue made it first (a conflict of anything else,
            // a step removed meanwhile, stays the error it is).
            Err(EngineError::Store(StoreError::Conflict(message))) => {
                match store.task_from(&source.workspace_id, &external_id).await? {
                    Some(_) => Ok(None),
                    None => Err(EngineError::Store(StoreError::Conflict(message))),
                }
            }
            Err(err) => Err(err),
        }
    }

    /// `POST /hooks/<id>`: checks a delivery (see the module's invariants) and acts on it.
    pub async fn receive_hook(
        &self,
        source_id: &str,
        headers: &kandev_forge::webhook::HeaderMap,
        body: &[u8],
    ) -> std::result::Result<HookOutcome, HookError> {
        let store = &self.inner.store;
        let missing = || HookError::NotFound(format!("no webhook {source_id}; check the URL"));
        let source = store.get_intake_source(source_id).await.map_err(|_| missing())?;
        let Some(hook) = &source.hook else { return Err(missing()) };
        if !source.enabled {
            // Answered before the signature is checked: it names nothing of the source.
            return Err(HookError::Disabled(
                "this intake source is turned off; turn it on in Kandev's settings".into(),
            ));
        }
        let delivery = webhook::verify(scheme_of(hook.scheme), &hook.secret, headers, body)
            .map_err(|refusal| match refusal {
                Refusal::MissingHeader(m) => HookError::MissingHeader(m),
                other => HookError::BadSignature(other.to_string()),
            })?;
        let Some(event) = classify(hook.scheme, &delivery.event) else {
            return Err(HookError::UnknownEvent(format!(
                "event {} is not one this webhook handles ({}); turn it off on the sender",
                delivery.event,
                known_events(hook.scheme)
            )));
        };
        let payload: Value = serde_json::from_slice(body)
            .map_err(|e| HookError::BadPayload(format!("the delivery's body is not JSON: {e}")))?;
        let mut tx = store.begin_write().await?;
        let first =
            tx.record_delivery(&source.id, &delivery.id, &delivery.event, "accepted").await?;
        let forget_before = Timestamp(store.now().millis() - DELIVERY_MEMORY_MS);
        tx.prune_deliveries(forget_before).await?;
        tx.commit().await?;
        if !first {
            return Err(HookError::Replayed(format!(
                "delivery {} was received before; a replay is not acted on again",
                delivery.id
            )));
        }
        let acted = match event {
            HookEvent::Ping => Ok(HookOutcome::Ignored("pong".into())),
            HookEvent::Issue => self.hook_issue(&source, &payload).await,
            HookEvent::Task => self.hook_task(&source, &delivery.id, &payload).await,
            HookEvent::PullRequests => Ok(self.hook_pull_requests(&source).await?),
        };
        if let Err(HookError::Engine(_)) = &acted {
            // The action failed on Kandev's side (the forge, the database): the sender may
            // deliver it again (taking an issue in twice makes one task anyway).
            let mut tx = store.begin_write().await?;
            tx.forget_delivery(&source.id, &delivery.id).await?;
            tx.commit().await?;
        }
        acted
    }

    async fn hook_issue(
        &self,
        source: &IntakeSource,
        payload: &Value,
    ) -> std::result::Result<HookOutcome, HookError> {
        let tracker = tracker_of(&self.inner, source).await?;
        let Some(issue) = tracker.issue_from_hook(payload) else {
            return Ok(HookOutcome::Ignored("not an issue of this repository".into()));
        };
        let external_id = tracker.external_id(issue.number);
        if let Some(task) = self.inner.store.task_from(&source.workspace_id, &external_id).await? {
            return Ok(HookOutcome::Known(task));
        }
        if !issue.open {
            return Ok(HookOutcome::Ignored(format!("issue #{} is closed", issue.number)));
        }
        if !source.label.is_empty()
            && !issue.labels.iter().any(|l| l.eq_ignore_ascii_case(&source.label))
        {
            let label = &source.label;
            return Ok(HookOutcome::Ignored(format!(
                "issue #{} is not labeled {label}",
                issue.number
            )));
        }
        let arrival = Arrival {
            external_id: external_id.clone(),
            url: issue.url,
            title: issue.title,
            description: issue.body,
            number: Some(issue.number),
        };
        match self.take_in(source, arrival).await? {
            Some(task) => Ok(HookOutcome::Created(Box::new(task))),
            None => {
                let task = self.inner.store.task_from(&source.workspace_id, &external_id).await?;
                Ok(task.map_or_else(|| HookOutcome::Ignored("taken in".into()), HookOutcome::Known))
            }
        }
    }

    /// The generic scheme's `task` event: `{"title", "description"?, "external_id"?, "url"?}`.
    /// Without an external id the delivery's id is the key.
    async fn hook_task(
        &self,
        source: &IntakeSource,
        delivery: &str,
        payload: &Value,
    ) -> std::result::Result<HookOutcome, HookError> {
        let text = |field: &str| payload.get(field).and_then(Value::as_str).unwrap_or_default();
        let title = kandev_domain::validate::title("title", text("title"))
            .map_err(|e| HookError::BadPayload(format!("the task's {} {}", e.field, e.problem)))?;
        let external_id = match text("external_id").trim() {
            "" => format!("hook:{}:{delivery}", source.id),
            id if id.len() > MAX_EXTERNAL_ID_BYTES => {
                return Err(HookError::BadPayload(format!(
                    "the external ID is longer than {MAX_EXTERNAL_ID_BYTES} bytes"
                )));
            }
            // Kandev's own keys (an issue's, a schedule's, a delivery's) are not for senders:
            // one would stop that issue or occurrence from ever making its task.
            id if RESERVED_PREFIXES.iter().any(|p| id.starts_with(p)) => {
                return Err(HookError::BadPayload(format!(
                    "the external ID may not start with {}; they are Kandev's own",
                    RESERVED_PREFIXES.join(", ")
                )));
            }
            id => id.to_owned(),
        };
        let url = text("url").trim();
        let web = url.starts_with("https://") || url.starts_with("http://");
        if !url.is_empty() && (!web || url.len() > MAX_URL_BYTES) {
            return Err(HookError::BadPayload(format!(
                "the URL must be an http or https address of at most {MAX_URL_BYTES} bytes"
            )));
        }
        let arrival = Arrival {
            external_id: external_id.clone(),
            url: url.to_owned(),
            title,
            description: text("description").to_owned(),
            number: None,
        };
        match self.take_in(source, arrival).await? {
            Some(task) => Ok(HookOutcome::Created(Box::new(task))),
            None => {
                let task = self.inner.store.task_from(&source.workspace_id, &external_id).await?;
                Ok(task.map_or_else(|| HookOutcome::Ignored("taken in".into()), HookOutcome::Known))
            }
        }
    }

    /// Reads the open pull requests of the source's repository again, in the background (a
    /// sender waits only seconds for an answer).
    async fn hook_pull_requests(&self, source: &IntakeSource) -> Result<HookOutcome> {
        let Some(repository) = &source.repository_id else {
            return Ok(HookOutcome::Ignored("the source has no repository".into()));
        };
        let open: Vec<_> = self
            .inner
            .store
            .open_pull_requests()
            .await?
            .into_iter()
            .filter(|p| &p.repository_id == repository)
            .collect();
        let count = open.len();
        // A push sends dozens of check events: one read of the repository's pull requests at
        // a time, and one more after it when events came meanwhile.
        {
            let mut running = self.inner.hook_refreshes.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(again) = running.get_mut(repository) {
                *again = true;
                return Ok(HookOutcome::Refreshing(count));
            }
            running.insert(repository.clone(), false);
        }
        let (inner, repository) = (self.inner.clone(), repository.clone());
        self.inner.tracker.spawn(async move {
            let mut open = open;
            loop {
                for pr in &open {
                    if let Err(err) = crate::engine::ship::refresh_and_follow(&inner, pr).await {
                        tracing::debug!(task = %pr.task_id, error = %err, "a webhook's pull request refresh failed");
                    }
                }
                {
                    let mut running = inner.hook_refreshes.lock().unwrap_or_else(|e| e.into_inner());
                    if running.get(&repository) != Some(&true) {
                        running.remove(&repository);
                        return;
                    }
                    running.insert(repository.clone(), false);
                }
                open = match inner.store.open_pull_requests().await {
                    Ok(all) => all.into_iter().filter(|p| p.repository_id == repository).collect(),
                    Err(_) => vec![],
                };
            }
        });
        Ok(HookOutcome::Refreshing(count))
    }

    /// Polls every enabled issues source every `EngineConfig::intake_poll_interval` until
    /// `shutdown` (zero: never; `intake.source.poll` still polls). The first poll comes
    /// one interval after the start.
    pub async fn poll_intake(self, shutdown: CancellationToken) {
        let every = self.inner.config.intake_poll_interval;
        if every.is_zero() {
            return;
        }
        let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = ticks.tick() => {}
            }
            let sources = match self.inner.store.polled_intake_sources().await {
                Ok(sources) => sources,
                Err(err) => {
                    tracing::warn!(error = %err, "cannot list the intake sources");
                    continue;
                }
            };
            for source in sources {
                let polled = tokio::select! {
                    _ = shutdown.cancelled() => return,
                    polled = self.poll_intake_source(&source.id) => polled,
                };
                if let Err(err) = polled {
                    tracing::debug!(source = %source.id, error = %err, "an intake poll failed");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn i47_titles_are_one_clean_line_and_never_empty() {
        assert_eq!(title_of("Fix it\nmore", "x"), "Fix it");
        assert_eq!(title_of("  \u{202e}  ", "github:a/b#1"), "github:a/b#1");
        assert_eq!(
            title_of(&"y".repeat(MAX_TITLE_CHARS + 9), "x").chars().count(),
            MAX_TITLE_CHARS
        );
    }

    #[test]
    fn i47_cut_keeps_whole_characters() {
        assert_eq!(cut("héllo", 2), "h");
        assert_eq!(cut("abc", 10), "abc");
    }

    #[test]
    fn i47_each_scheme_knows_its_events() {
        assert!(matches!(classify(HookScheme::GitHub, "issues"), Some(HookEvent::Issue)));
        assert!(matches!(classify(HookScheme::GitLab, "Issue Hook"), Some(HookEvent::Issue)));
        assert!(matches!(
            classify(HookScheme::GitLab, "Pipeline Hook"),
            Some(HookEvent::PullRequests)
        ));
        assert!(matches!(classify(HookScheme::Hmac, "task"), Some(HookEvent::Task)));
        assert!(classify(HookScheme::GitHub, "Issue Hook").is_none());
        assert!(classify(HookScheme::GitHub, "star").is_none());
        assert!(classify(HookScheme::Hmac, "issues").is_none());
    }
}
