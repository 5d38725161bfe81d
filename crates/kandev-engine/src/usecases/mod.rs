//! The API's write actions as use cases (issue 40): each opens the write transaction,
//! checks what only the transaction can see, writes, announces its change in the same
//! transaction (published after the commit), commits, then does the engine's follow-up work.
//! The server's handlers decode a request, call one use case and encode its answer; they
//! never open a write transaction themselves (tidy). One file per aggregate.

mod accounts;
mod agents;
mod channels;
mod executors;
mod profiles;
mod prompts;
mod repositories;
mod reviews;
mod secrets;
mod tasks;
mod workflows;
mod workspaces;

pub use agents::{AgentVersions, InstalledVersion};
pub use tasks::{NewTaskRequest, TaskArchival, TaskCreation, TaskDeletion, TaskEdit};
