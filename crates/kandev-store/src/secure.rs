//! File modes of the database: it holds profile secrets, so it and its `-wal` and `-shm`
//! files are readable by their owner only.

use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::{Result, StoreError};

/// Mode of the database file and its `-wal` and `-shm` companions.
pub const DB_FILE_MODE: u32 = 0o600;

/// Creates the database file with [`DB_FILE_MODE`] before SQLite opens it (SQLite gives the
/// `-wal` and `-shm` files it creates the mode of the database file), and tightens the
/// files of an existing install that are open to the group or others.
pub(crate) fn secure_db_files(path: &Path) -> Result<()> {
    let io = |path: &Path, source| StoreError::Io { path: path.display().to_string(), source };
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(DB_FILE_MODE)
        .open(path)
        .map_err(|e| io(path, e))?;
    for suffix in ["", "-wal", "-shm"] {
        let mut file = path.as_os_str().to_owned();
        file.push(suffix);
        let file = PathBuf::from(file);
        let Ok(meta) = std::fs::metadata(&file) else { continue };
        if meta.permissions().mode() & 0o077 != 0 {
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(DB_FILE_MODE))
                .map_err(|e| io(&file, e))?;
            tracing::info!(file = %file.display(), "made the database file readable by its owner only");
        }
    }
    Ok(())
}
