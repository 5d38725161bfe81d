//! Dev servers as the API shows them (`devserver.*`, docs/terminals.md).

use serde::{Deserialize, Serialize};
use ts_rs::TS;

/// A task's dev server: the port it got in `PORT`, the link to open, whether it still runs,
/// and its most recent output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
pub struct DevServerDto {
    pub task_id: String,
    pub repository_id: String,
    pub port: u16,
    pub url: String,
    /// `running` or `exited`.
    pub state: String,
    pub exit_code: Option<i32>,
    pub log: String,
    /// Older output was dropped (the log keeps the last 256 KiB).
    pub truncated: bool,
}
