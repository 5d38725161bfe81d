//! Typed identifiers, so a task id can never be passed where a step id is expected.

use std::fmt;

macro_rules! id_type {
    ($(#[$doc:meta] $name:ident),* $(,)?) => {$(
        #[$doc]
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(String);

        impl $name {
            pub fn new(value: impl Into<String>) -> Self {
                Self(value.into())
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }

            pub fn into_string(self) -> String {
                self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
    )*};
}

id_type!(
    /// Identifies a workspace.
    WorkspaceId,
    /// Identifies a repository registered in a workspace.
    RepositoryId,
    /// Identifies a workflow (a board).
    WorkflowId,
    /// Identifies a step (a column) of a workflow.
    StepId,
    /// Identifies a task.
    TaskId,
    /// Identifies an agent profile.
    AgentProfileId,
    /// Identifies an agent session.
    SessionId,
    /// Identifies one turn of a session.
    TurnId,
    /// Identifies a transcript message.
    MessageId,
    /// Identifies a queued prompt.
    QueuedPromptId,
);
