//! Work that arrives by itself (issue 47, docs/intake.md): intake sources (a repository's
//! forge issues, polled and by webhook, or a generic signed webhook), the origin a task made
//! from one keeps, and schedules that make tasks on a cron expression in a named time zone.

use crate::validate::{self, FieldError};
use crate::{RepositoryId, StepId, Timestamp, WorkflowId, WorkspaceId};

/// Longest accepted issue label of a source, in characters.
pub const MAX_LABEL_CHARS: usize = 100;

/// What an intake source reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceKind {
    /// The open issues of a repository's forge (GitHub or GitLab), polled, with the label.
    Issues,
    /// Only what its webhook delivers (the generic HMAC scheme): no polling.
    Webhook,
}

impl SourceKind {
    pub fn as_str(self) -> &'static str {
        match self {
            SourceKind::Issues => "issues",
            SourceKind::Webhook => "webhook",
        }
    }

    pub fn parse(s: &str) -> Option<SourceKind> {
        match s {
            "issues" => Some(SourceKind::Issues),
            "webhook" => Some(SourceKind::Webhook),
            _ => None,
        }
    }
}

/// How a source's webhook signs its deliveries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookScheme {
    /// GitHub's `X-Hub-Signature-256`.
    GitHub,
    /// GitLab's `X-Gitlab-Token`.
    GitLab,
    /// A generic HMAC-SHA256 of the body in `X-Kandev-Signature`.
    Hmac,
}

impl HookScheme {
    pub fn as_str(self) -> &'static str {
        match self {
            HookScheme::GitHub => "github",
            HookScheme::GitLab => "gitlab",
            HookScheme::Hmac => "hmac",
        }
    }

    pub fn parse(s: &str) -> Option<HookScheme> {
        match s {
            "github" => Some(HookScheme::GitHub),
            "gitlab" => Some(HookScheme::GitLab),
            "hmac" => Some(HookScheme::Hmac),
            _ => None,
        }
    }
}

/// A source's webhook: how it signs, and the secret both sides share.
#[derive(Clone, PartialEq, Eq)]
pub struct Hook {
    pub scheme: HookScheme,
    pub secret: String,
}

impl std::fmt::Debug for Hook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hook").field("scheme", &self.scheme).field("secret", &"********").finish()
    }
}

/// Where work comes from, and where its tasks go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IntakeSource {
    pub id: String,
    pub workspace_id: WorkspaceId,
    pub name: String,
    pub kind: SourceKind,
    /// The repository whose forge holds the issues (`Issues`), or the one a webhook's tasks
    /// get (`Webhook`, optional).
    pub repository_id: Option<RepositoryId>,
    /// Only issues with this label (empty: every open issue).
    pub label: String,
    pub workflow_id: WorkflowId,
    pub step_id: StepId,
    /// Its webhook, when it has one (`POST /hooks/<id>`).
    pub hook: Option<Hook>,
    /// Whether it is polled and its webhook accepted.
    pub enabled: bool,
    pub last_polled_at: Option<Timestamp>,
    /// Why the last poll failed (empty after a good one).
    pub last_error: String,
    pub created_at: Timestamp,
}

/// What a task was made from: an issue, a webhook's delivery or a schedule's occurrence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskOrigin {
    /// The idempotency key in its workspace (`github:owner/repo#12`, `schedule:<id>@<ms>`).
    pub external_id: String,
    /// Its web page, when it has one.
    pub url: String,
    /// The intake source it came through.
    pub source_id: Option<String>,
    /// The issue's number on its forge.
    pub number: Option<u64>,
    /// Whether the issue was closed by a workflow's `close_issue`.
    pub closed: bool,
}

/// A task's origin as the task shows it: its key and its page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OriginLink {
    pub external_id: String,
    pub url: String,
}

/// What a new task made by intake holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Arrival {
    pub external_id: String,
    pub url: String,
    pub title: String,
    pub description: String,
    pub number: Option<u64>,
}

/// What a schedule does with the occurrences missed while the server was down.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MissedRuns {
    /// The latest missed occurrence fires once, at startup.
    RunOnce,
    /// Missed occurrences are recorded as skipped; the next one fires as usual.
    Skip,
}

impl MissedRuns {
    pub fn as_str(self) -> &'static str {
        match self {
            MissedRuns::RunOnce => "run_once",
            MissedRuns::Skip => "skip",
        }
    }

    pub fn parse(s: &str) -> Option<MissedRuns> {
        match s {
            "run_once" => Some(MissedRuns::RunOnce),
            "skip" => Some(MissedRuns::Skip),
            _ => None,
        }
    }
}

/// A recurring task: a title and description made into a task at each occurrence of a cron
/// expression in a named time zone (`crate::schedule` has the firing rules).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    pub id: String,
    pub workspace_id: WorkspaceId,
    pub name: String,
    pub cron: String,
    pub time_zone: String,
    pub title: String,
    pub description: String,
    pub workflow_id: WorkflowId,
    pub step_id: StepId,
    pub repository_ids: Vec<RepositoryId>,
    pub missed: MissedRuns,
    pub enabled: bool,
    /// The newest occurrence handled (fired or skipped); `None` before the first.
    pub last_occurrence: Option<Timestamp>,
    pub created_at: Timestamp,
}

/// One occurrence of a schedule, handled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleRun {
    pub occurrence: Timestamp,
    /// The task it made; `None` when it was skipped or failed.
    pub task_id: Option<crate::TaskId>,
    /// Why it made no task when it failed (empty otherwise).
    pub error: String,
    pub at: Timestamp,
}

/// A source's issue label: up to [`MAX_LABEL_CHARS`] characters, no commas (forges read a
/// comma as a list), or empty.
pub fn label(field: &str, value: &str) -> Result<String, FieldError> {
    let value = value.trim();
    if value.is_empty() {
        return Ok(String::new());
    }
    let value = validate::label(field, value, MAX_LABEL_CHARS)?;
    if value.contains(',') {
        return Err(FieldError::new(field, "must be one label, without commas"));
    }
    Ok(value)
}

/// The external id of what a schedule made at `occurrence`.
pub fn schedule_external_id(schedule_id: &str, occurrence: Timestamp) -> String {
    format!("schedule:{schedule_id}@{}", occurrence.millis())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn i47_labels_are_one_label_or_none() {
        assert_eq!(label("label", "  kandev "), Ok("kandev".to_owned()));
        assert_eq!(label("label", ""), Ok(String::new()));
        assert!(label("label", "a,b").unwrap_err().problem.contains("without commas"));
        assert!(label("label", &"x".repeat(MAX_LABEL_CHARS + 1)).is_err());
    }

    #[test]
    fn i47_names_round_trip() {
        for kind in [SourceKind::Issues, SourceKind::Webhook] {
            assert_eq!(SourceKind::parse(kind.as_str()), Some(kind));
        }
        for scheme in [HookScheme::GitHub, HookScheme::GitLab, HookScheme::Hmac] {
            assert_eq!(HookScheme::parse(scheme.as_str()), Some(scheme));
        }
        for missed in [MissedRuns::RunOnce, MissedRuns::Skip] {
            assert_eq!(MissedRuns::parse(missed.as_str()), Some(missed));
        }
        assert_eq!(HookScheme::parse("bitbucket"), None);
    }

    #[test]
    fn i47_a_hook_never_shows_its_secret() {
        let hook = Hook { scheme: HookScheme::Hmac, secret: "s3cret".into() };
        assert!(!format!("{hook:?}").contains("s3cret"));
    }
}
