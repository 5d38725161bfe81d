//! Kandev's domain model: plain Rust types and pure rules, with no IO or async. serde derives
//! only on values that are stored or travel as they are: the working-directory values of
//! [`files`] (to and from a build host), transcript metadata ([`message_meta`]) and a
//! container executor's settings ([`container`], stored as JSON).

pub mod account;
pub mod agent;
pub mod attachment;
pub mod container;
pub mod executor;
pub mod files;
pub mod ids;
pub mod intake;
pub mod message_meta;
pub mod needs_you;
pub mod notify;
pub mod question;
pub mod saved_prompt;
pub mod schedule;
pub mod secret;
pub mod session;
pub mod ship;
pub mod task;
pub mod time;
pub mod transcript;
pub mod validate;
pub mod workflow;
pub mod workspace;

pub use ids::*;
pub use time::{Clock, IdGenerator, Timestamp};
