//! Conversations: each session's cwd, selections and update history, in memory or in the state dir.
//!
//! Disk layout under `<state-dir>/sessions/`: `<id>.json` (cwd and selections, replaced
//! atomically by write-temp-then-rename) and `<id>.jsonl` (one ACP `update` object per line,
//! appended in batches).

use std::collections::HashMap;
use std::fs::{self, OpenOptions};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::catalog::Selection;
use crate::error::StateError;
use crate::lock;

/// What is known about a conversation besides its history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SessionMeta {
    pub(crate) cwd: PathBuf,
    pub(crate) selection: Selection,
}

/// The on-disk row of [`SessionMeta`].
#[derive(Serialize, Deserialize)]
struct MetaRow {
    cwd: PathBuf,
    mode: String,
    model: String,
    thought_level: String,
}

impl From<&SessionMeta> for MetaRow {
    fn from(meta: &SessionMeta) -> Self {
        MetaRow {
            cwd: meta.cwd.clone(),
            mode: meta.selection.mode.clone(),
            model: meta.selection.model.clone(),
            thought_level: meta.selection.thought_level.clone(),
        }
    }
}

impl From<MetaRow> for SessionMeta {
    fn from(row: MetaRow) -> Self {
        SessionMeta {
            cwd: row.cwd,
            selection: Selection {
                mode: row.mode,
                model: row.model,
                thought_level: row.thought_level,
            },
        }
    }
}

struct MemorySession {
    meta: SessionMeta,
    history: Vec<Value>,
}

enum Backend {
    Memory(Mutex<HashMap<String, MemorySession>>),
    Disk { sessions_dir: PathBuf },
}

/// Where conversations live.
pub(crate) struct Store {
    backend: Backend,
}

/// Session ids the store accepts (they become file names).
fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 128
        && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// Replaces `path` with `bytes` atomically (temp file in the same directory, then rename).
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), StateError> {
    let file_name = path.file_name().and_then(|n| n.to_str()).unwrap_or("state");
    let tmp = path.with_file_name(format!(
        ".{file_name}.{}.{}.tmp",
        std::process::id(),
        uuid::Uuid::new_v4().simple()
    ));
    fs::write(&tmp, bytes).map_err(|e| StateError::io(&tmp, e))?;
    fs::rename(&tmp, path).map_err(|e| {
        let _ = fs::remove_file(&tmp);
        StateError::io(path, e)
    })
}

impl Store {
    /// A store in `state_dir/sessions`, or in memory without a state dir.
    pub(crate) fn open(state_dir: Option<&Path>) -> Result<Store, StateError> {
        let backend = match state_dir {
            None => Backend::Memory(Mutex::new(HashMap::new())),
            Some(dir) => {
                let sessions_dir = dir.join("sessions");
                fs::create_dir_all(&sessions_dir).map_err(|e| StateError::io(&sessions_dir, e))?;
                Backend::Disk { sessions_dir }
            }
        };
        Ok(Store { backend })
    }

    /// Creates a conversation with a fresh unique id.
    pub(crate) fn create(&self, meta: &SessionMeta) -> Result<String, StateError> {
        let id = format!("sess_{}", uuid::Uuid::new_v4().simple());
        self.save_meta(&id, meta)?;
        Ok(id)
    }

    /// Replaces the conversation's meta (creating the conversation if needed).
    pub(crate) fn save_meta(&self, id: &str, meta: &SessionMeta) -> Result<(), StateError> {
        match &self.backend {
            Backend::Memory(sessions) => {
                lock(sessions)
                    .entry(id.to_owned())
                    .and_modify(|s| s.meta = meta.clone())
                    .or_insert_with(|| MemorySession { meta: meta.clone(), history: Vec::new() });
                Ok(())
            }
            Backend::Disk { sessions_dir } => {
                let path = sessions_dir.join(format!("{id}.json"));
                let row = MetaRow::from(meta);
                let bytes = serde_json::to_vec(&row).map_err(|source| StateError::Corrupt {
                    path: path.clone(),
                    line: 1,
                    source,
                })?;
                write_atomic(&path, &bytes)
            }
        }
    }

    /// The conversation's meta and history, or `None` if it does not exist.
    pub(crate) fn load(&self, id: &str) -> Result<Option<(SessionMeta, Vec<Value>)>, StateError> {
        if !valid_id(id) {
            return Ok(None);
        }
        match &self.backend {
            Backend::Memory(sessions) => {
                Ok(lock(sessions).get(id).map(|s| (s.meta.clone(), s.history.clone())))
            }
            Backend::Disk { sessions_dir } => {
                let meta_path = sessions_dir.join(format!("{id}.json"));
                let bytes = match fs::read(&meta_path) {
                    Ok(bytes) => bytes,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
                    Err(e) => return Err(StateError::io(meta_path, e)),
                };
                let row: MetaRow = serde_json::from_slice(&bytes)
                    .map_err(|source| StateError::Corrupt { path: meta_path, line: 1, source })?;
                let history = read_history(&sessions_dir.join(format!("{id}.jsonl")))?;
                Ok(Some((row.into(), history)))
            }
        }
    }

    /// Appends updates to the conversation's history.
    pub(crate) fn append(&self, id: &str, updates: &[Value]) -> Result<(), StateError> {
        if updates.is_empty() {
            return Ok(());
        }
        match &self.backend {
            Backend::Memory(sessions) => {
                if let Some(session) = lock(sessions).get_mut(id) {
                    session.history.extend_from_slice(updates);
                }
                Ok(())
            }
            Backend::Disk { sessions_dir } => {
                let path = sessions_dir.join(format!("{id}.jsonl"));
                let mut batch = String::new();
                for update in updates {
                    batch.push_str(&update.to_string());
                    batch.push('\n');
                }
                let mut file = OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&path)
                    .map_err(|e| StateError::io(&path, e))?;
                file.write_all(batch.as_bytes()).map_err(|e| StateError::io(&path, e))
            }
        }
    }
}

fn read_history(path: &Path) -> Result<Vec<Value>, StateError> {
    let text = match fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(StateError::io(path, e)),
    };
    // A last line without its newline is an interrupted append: ignore it.
    let complete = match text.rfind('\n') {
        Some(end) => &text[..end],
        None => "",
    };
    let mut history = Vec::new();
    for (index, line) in complete.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let update = serde_json::from_str(line).map_err(|source| StateError::Corrupt {
            path: path.to_owned(),
            line: index + 1,
            source,
        })?;
        history.push(update);
    }
    Ok(history)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn meta() -> SessionMeta {
        SessionMeta { cwd: PathBuf::from("/work"), selection: Selection::default() }
    }

    fn round_trip(store: &Store) {
        let id = store.create(&meta()).unwrap();
        store.append(&id, &[json!({"a": 1}), json!({"b": 2})]).unwrap();
        store.append(&id, &[json!({"c": 3})]).unwrap();
        let (loaded, history) = store.load(&id).unwrap().unwrap();
        assert_eq!(loaded, meta());
        assert_eq!(history, vec![json!({"a": 1}), json!({"b": 2}), json!({"c": 3})]);
        assert!(store.load("sess_missing").unwrap().is_none());
        assert!(store.load("../../etc/passwd").unwrap().is_none());
    }

    #[test]
    fn memory_store_round_trips() {
        round_trip(&Store::open(None).unwrap());
    }

    #[test]
    fn disk_store_round_trips_and_survives_reopen() {
        let dir = std::env::temp_dir().join(format!("mock-store-{}", uuid::Uuid::new_v4()));
        let store = Store::open(Some(&dir)).unwrap();
        round_trip(&store);
        let id = store.create(&meta()).unwrap();
        store.append(&id, &[json!({"kept": true})]).unwrap();
        let reopened = Store::open(Some(&dir)).unwrap();
        assert_eq!(reopened.load(&id).unwrap().unwrap().1, vec![json!({"kept": true})]);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn interrupted_last_line_is_ignored() {
        let dir = std::env::temp_dir().join(format!("mock-history-{}", uuid::Uuid::new_v4()));
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join("h.jsonl");
        fs::write(&path, "{\"a\":1}\n{\"b\":").unwrap();
        assert_eq!(read_history(&path).unwrap(), vec![json!({"a": 1})]);
        fs::write(&path, "{\"a\":1}\nnot json\n").unwrap();
        assert!(matches!(read_history(&path), Err(StateError::Corrupt { line: 2, .. })));
        fs::remove_dir_all(&dir).unwrap();
    }
}
