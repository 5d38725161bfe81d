//! `kandev backup` and `kandev restore` (issue 43): one `.tar.gz` with the database as it was
//! at one moment (a logical copy read in one transaction, so a server may run meanwhile; on
//! either engine the archive holds a SQLite file), the attachments, and a manifest with
//! every file's SHA-256. Worktrees are not in it: commit or push work to keep it.
//!
//! Restore checks the whole archive before it writes anything, and builds the new home beside
//! the target before renaming it into place: a damaged archive changes nothing.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

use anyhow::{Context, Result, bail};
use clap::Args;
use kandev_store::Location;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The archive's top folder.
const TOP: &str = "kandev-backup";
/// The manifest's name in it.
const MANIFEST: &str = "MANIFEST.json";
/// The database's name in it.
const DATABASE: &str = "kandev.db";
/// The attachments' folder in it and in a home.
const ATTACHMENTS: &str = "attachments";
/// The manifest format this Kandev writes and reads.
const FORMAT: u32 = 1;

#[derive(Args, Debug)]
pub struct BackupArgs {
    /// The Kandev home to back up. Default: $KANDEV_HOME, else ~/.kandev
    #[arg(long, env = "KANDEV_HOME")]
    pub home: Option<PathBuf>,
    /// The database, when not <home>/kandev.db (a postgres:// URL).
    #[arg(long, env = "KANDEV_DATABASE_URL", hide_env_values = true)]
    pub database_url: Option<String>,
    /// The archive to write. Default: <home>/backups/kandev-<UTC time>.tar.gz
    #[arg(long)]
    pub to: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct RestoreArgs {
    /// The archive `kandev backup` wrote.
    pub file: PathBuf,
    /// The home to restore into: a folder that does not exist yet, or is empty.
    #[arg(long)]
    pub home: PathBuf,
    /// Restore the database into this empty PostgreSQL database instead of <home>/kandev.db.
    #[arg(long)]
    pub database_url: Option<String>,
}

/// What the archive says of itself.
#[derive(Debug, Serialize, Deserialize)]
struct Manifest {
    format: u32,
    /// The `kandev --version` that made it.
    kandev: String,
    /// When (UTC, RFC 3339).
    made_at: String,
    /// The engine the database was read from (`sqlite` or `postgres`).
    source: String,
    /// Every other file of the archive (path under the top folder) and its SHA-256.
    files: BTreeMap<String, String>,
}

pub async fn backup(args: BackupArgs) -> Result<()> {
    let home = crate::serve::home_or_default(args.home.as_ref())?;
    let location = crate::serve::database_location(&home, args.database_url.as_deref())?;
    let source = if matches!(location, Location::Postgres(_)) { "postgres" } else { "sqlite" };
    if let Location::File(path) = &location
        && !path.exists()
    {
        bail!(
            "{} holds no kandev.db: is it the right home (--home, or KANDEV_HOME)?",
            home.display()
        );
    }
    let to = match args.to {
        Some(to) => to,
        None => home.join("backups").join(format!("kandev-{}.tar.gz", stamp())),
    };
    if to.exists() {
        bail!("{} exists already: give another --to, or remove it first", to.display());
    }
    let made =
        until_stopped(write_backup(&home, Database::Copy(location), source, &to), "backup").await?;
    let attachments = made.files.len() - 1;
    println!("Backed up the database and {attachments} attachments to {}.", to.display());
    let key = home.join(kandev_engine::secrets::KEY_FILE);
    if key.exists() {
        // Secrets are in the archive sealed; the key that opens them never is.
        println!(
            "The archive does not hold the secret key: keep a copy of {} apart from it (a \
             restore needs it to read the secrets).",
            key.display()
        );
    }
    Ok(())
}

/// Runs `work`, or stops it at Ctrl-C or SIGTERM: dropping it removes its staging folder, so
/// a stopped backup or restore leaves nothing half-made behind.
async fn until_stopped<T>(work: impl Future<Output = Result<T>>, what: &str) -> Result<T> {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("cannot listen for SIGTERM")?;
    tokio::select! {
        done = work => done,
        _ = tokio::signal::ctrl_c() => bail!("the {what} was stopped; nothing was written"),
        _ = term.recv() => bail!("the {what} was stopped; nothing was written"),
    }
}

/// A staging folder in `folder` named `prefix…`, owner-only (it holds a copy of the database).
fn staging_in(folder: &Path, prefix: &str) -> Result<tempfile::TempDir> {
    tempfile::Builder::new()
        .prefix(prefix)
        .permissions(std::fs::Permissions::from_mode(0o700))
        .tempdir_in(folder)
        .with_context(|| format!("cannot write in {}", folder.display()))
}

/// The current UTC time as a file name part: `20261206T011502Z`.
fn stamp() -> String {
    let now = time::OffsetDateTime::now_utc();
    format!(
        "{:04}{:02}{:02}T{:02}{:02}{:02}Z",
        now.year(),
        u8::from(now.month()),
        now.day(),
        now.hour(),
        now.minute(),
        now.second()
    )
}

/// How the database gets into a backup.
enum Database {
    /// A logical copy read in one transaction (migrated to this Kandev's schema first).
    Copy(Location),
    /// The SQLite file as it is, schema and all (`VACUUM INTO`): the backup before an upgrade.
    AsIs(PathBuf),
}

/// Before a server migrates a SQLite database to a newer schema: a backup of it as it is,
/// with the attachments, in `<home>/backups/`, so the earlier Kandev can be run again on it
/// (restore it, then run that Kandev). A backup that fails stops the server before anything
/// changed. A PostgreSQL database is not backed up here: the log says so.
pub async fn before_upgrade(home: &Path, location: &Location) -> Result<()> {
    let state = kandev_store::schema_state(location)
        .await
        .context("cannot read the database's schema version")?;
    let Some(state) = state.filter(|s| s.upgrade_pending()) else { return Ok(()) };
    let from = state.applied.unwrap_or_default();
    let Location::File(path) = location else {
        tracing::warn!(
            from,
            to = state.latest,
            "upgrading the schema of a PostgreSQL database, which is not backed up automatically; \
             take one with `kandev backup` of the earlier kandev before upgrading"
        );
        return Ok(());
    };
    let to = home.join("backups").join(format!(
        "kandev-before-upgrade-{from}-to-{}-{}.tar.gz",
        state.latest,
        stamp()
    ));
    write_backup(home, Database::AsIs(path.clone()), "sqlite", &to).await.with_context(|| {
        format!(
            "cannot back up the database before upgrading its schema (nothing was changed); \
             free space in {} and start again",
            home.display()
        )
    })?;
    tracing::info!(backup = %to.display(), from, to = state.latest, "backed up the database before upgrading its schema");
    Ok(())
}

/// Writes the backup of `database` and `home`'s attachments to `to` (through a partial file
/// renamed at the end). Returns its manifest.
async fn write_backup(
    home: &Path,
    database: Database,
    source: &str,
    to: &Path,
) -> Result<Manifest> {
    let folder = to.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    if !folder.is_dir() {
        // Only the home's own backups folder is made (owner-only, like the home); a --to in a
        // folder that does not exist is more likely a typo.
        if folder != home.join("backups") {
            bail!("{} does not exist: make it first, or give another --to", folder.display());
        }
        std::fs::create_dir_all(folder)
            .with_context(|| format!("cannot make {}", folder.display()))?;
        std::fs::set_permissions(folder, std::fs::Permissions::from_mode(0o700))?;
    }
    let stage = staging_in(folder, ".kandev-backup-")?;
    let copy = stage.path().join(DATABASE);
    match database {
        Database::Copy(location) => {
            kandev_store::copy_database(location, Location::File(copy.clone()))
                .await
                .map(drop)
                .context("cannot read the database")?
        }
        Database::AsIs(path) => {
            kandev_store::vacuum_into(&path, &copy).await.context("cannot read the database")?
        }
    }
    let mut files = BTreeMap::new();
    files.insert(DATABASE.to_owned(), sha256_of(&copy)?);
    let attachments = home.join(ATTACHMENTS);
    let mut attachment_files = vec![];
    if attachments.is_dir() {
        for entry in std::fs::read_dir(&attachments)? {
            let entry = entry?;
            // Uploads in progress are hidden files; only stored attachments are kept.
            let name = entry.file_name().to_string_lossy().into_owned();
            if entry.file_type()?.is_file() && !name.starts_with('.') {
                files.insert(format!("{ATTACHMENTS}/{name}"), sha256_of(&entry.path())?);
                attachment_files.push((name, entry.path()));
            }
        }
    }
    let manifest = Manifest {
        format: FORMAT,
        kandev: crate::VERSION.to_owned(),
        made_at: time::OffsetDateTime::now_utc()
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap_or_default(),
        source: source.to_owned(),
        files,
    };
    let partial = stage.path().join("archive.tar.gz");
    {
        // Owner-only: it holds the database (secrets of profiles and channels among them).
        let file =
            std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&partial)?;
        let gzip = flate2::write::GzEncoder::new(file, flate2::Compression::default());
        let mut tar = tar::Builder::new(gzip);
        let text = serde_json::to_vec_pretty(&manifest)?;
        append_bytes(&mut tar, &format!("{TOP}/{MANIFEST}"), &text)?;
        tar.append_path_with_name(&copy, format!("{TOP}/{DATABASE}"))?;
        for (name, path) in &attachment_files {
            tar.append_path_with_name(path, format!("{TOP}/{ATTACHMENTS}/{name}"))?;
        }
        let gzip = tar.into_inner()?;
        gzip.finish()?.sync_all()?;
    }
    std::fs::rename(&partial, to).with_context(|| format!("cannot write {}", to.display()))?;
    Ok(manifest)
}

fn append_bytes<W: Write>(tar: &mut tar::Builder<W>, name: &str, bytes: &[u8]) -> Result<()> {
    let mut header = tar::Header::new_gnu();
    header.set_size(bytes.len() as u64);
    header.set_mode(0o600);
    header.set_cksum();
    tar.append_data(&mut header, name, bytes)?;
    Ok(())
}

fn sha256_of(path: &Path) -> Result<String> {
    let mut file =
        std::fs::File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        let n = file.read(&mut buffer)?;
        if n == 0 {
            break;
        }
        hasher.update(&buffer[..n]);
    }
    Ok(hex(&hasher.finalize()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub async fn restore(args: RestoreArgs) -> Result<()> {
    until_stopped(restore_into(args), "restore").await
}

async fn restore_into(args: RestoreArgs) -> Result<()> {
    let home = args.home;
    if home.exists() && !home.is_dir() {
        bail!("{} is a file, not a folder: give a new or empty folder", home.display());
    }
    if home.exists() && std::fs::read_dir(&home)?.next().is_some() {
        bail!("{} is not empty: restore into a new or empty folder", home.display());
    }
    if !args.file.is_file() {
        bail!("cannot read {}: no such file", args.file.display());
    }
    if let Some(url) = &args.database_url
        && !matches!(Location::parse(url)?, Location::Postgres(_))
    {
        bail!("--database-url takes an empty PostgreSQL database (postgres://…)");
    }
    let parent = home.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent)?;
    // Everything is unpacked and checked first, beside the target.
    let stage = staging_in(parent, ".kandev-restore-")?;
    let damaged =
        |why: String| anyhow::anyhow!("{} {why}; nothing was restored", args.file.display());
    let unpacked = stage.path().join("unpacked");
    unpack(&args.file, &unpacked).map_err(|e| damaged(e.to_string()))?;
    let manifest = check(&unpacked.join(TOP))
        .map_err(|e| damaged(format!("is not a usable Kandev backup: {e:#}")))?;

    // The new home, whole, then renamed into place.
    let new_home = stage.path().join("home");
    std::fs::create_dir_all(new_home.join(ATTACHMENTS))?;
    // Private from the start, as the server keeps a home.
    std::fs::set_permissions(&new_home, std::fs::Permissions::from_mode(0o700))?;
    let target = match &args.database_url {
        Some(url) => Location::parse(url)?,
        None => Location::File(new_home.join(DATABASE)),
    };
    kandev_store::copy_database(Location::File(unpacked.join(TOP).join(DATABASE)), target)
        .await
        .context("cannot restore the database; nothing was restored")?;
    for name in manifest.files.keys().filter_map(|f| f.strip_prefix(&format!("{ATTACHMENTS}/"))) {
        std::fs::rename(
            unpacked.join(TOP).join(ATTACHMENTS).join(name),
            new_home.join(ATTACHMENTS).join(name),
        )?;
    }
    if home.exists() {
        std::fs::remove_dir(&home)?;
    }
    std::fs::rename(&new_home, &home)
        .with_context(|| format!("cannot move the restored home to {}", home.display()))?;
    let with_url = if args.database_url.is_some() { " --database-url <that URL>" } else { "" };
    println!(
        "Restored the backup of {} (made by kandev {}) into {}. Start it with: kandev serve \
         --home {}{with_url}",
        manifest.made_at,
        manifest.kandev,
        home.display(),
        home.display(),
    );
    println!(
        "If the server had secrets, copy its key file ({}) into {} first (a backup never holds \
         it; a backup made before a key rotation needs the key of that time).",
        kandev_engine::secrets::KEY_FILE,
        home.display(),
    );
    Ok(())
}

/// Unpacks `file` into `into`: regular files and folders only, every path under the top
/// folder, none leaving it.
fn unpack(file: &Path, into: &Path) -> Result<()> {
    const DAMAGED: &str = "is damaged or cut short";
    const FOREIGN: &str = "is not a Kandev backup (it has no kandev-backup/MANIFEST.json)";
    let archive = std::fs::File::open(file).map_err(|e| anyhow::anyhow!("cannot be read ({e})"))?;
    let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(archive));
    std::fs::create_dir_all(into)?;
    let entries = tar.entries().map_err(|_| anyhow::anyhow!(DAMAGED))?;
    for entry in entries {
        let mut entry = entry.map_err(|_| anyhow::anyhow!(DAMAGED))?;
        let path = entry.path().map_err(|_| anyhow::anyhow!(DAMAGED))?.into_owned();
        let inside =
            path.starts_with(TOP) && path.components().all(|c| matches!(c, Component::Normal(_)));
        let kind = entry.header().entry_type();
        if !inside || !(kind.is_file() || kind.is_dir()) {
            bail!(FOREIGN);
        }
        entry.unpack_in(into).map_err(|_| anyhow::anyhow!(DAMAGED))?;
    }
    if !into.join(TOP).join(MANIFEST).is_file() {
        bail!(FOREIGN);
    }
    Ok(())
}

/// Reads the manifest of the unpacked `top` folder and checks every file against it; no
/// file may be missing, changed or extra.
fn check(top: &Path) -> Result<Manifest> {
    let text = std::fs::read(top.join(MANIFEST)).context("it has no manifest")?;
    let manifest: Manifest = serde_json::from_slice(&text).context("its manifest is unreadable")?;
    if manifest.format != FORMAT {
        bail!("its format is {} (this kandev reads {FORMAT}): use a newer kandev", manifest.format);
    }
    if !manifest.files.contains_key(DATABASE) {
        bail!("it has no database");
    }
    for (name, expected) in &manifest.files {
        let path = top.join(name);
        if !path.is_file() {
            bail!("{name} is missing");
        }
        if sha256_of(&path)? != *expected {
            bail!("{name} does not match its checksum");
        }
    }
    let mut found = vec![];
    list_files(top, top, &mut found)?;
    if let Some(extra) = found.iter().find(|f| *f != MANIFEST && !manifest.files.contains_key(*f)) {
        bail!("{extra} is not in its manifest");
    }
    Ok(manifest)
}

fn list_files(top: &Path, dir: &Path, found: &mut Vec<String>) -> Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            list_files(top, &path, found)?;
        } else if let Ok(relative) = path.strip_prefix(top) {
            found.push(relative.to_string_lossy().into_owned());
        }
    }
    Ok(())
}
