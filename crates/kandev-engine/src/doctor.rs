//! What `kandev doctor` and Settings → Health check (issue 43): each finding says what was
//! found, or, for a problem, the line that fixes it. The command line runs them on a home
//! before or beside a server; a running server runs the ones that need its store
//! ([`Engine::doctor`](crate::Engine::doctor)).

use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use kandev_domain::agent::AgentKind;
use kandev_domain::executor::ExecutorKind;
use kandev_runtime::program::{command_found, free_bytes, version_of};
use kandev_runtime::runner::container as engine_cli;
use kandev_store::{Location, Store, StoreError, schema_state};

/// One check's outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// What was checked (`git`, `home`, `agent claude`, ...).
    pub check: String,
    pub ok: bool,
    /// What was found; for a problem, what is wrong and the line that fixes it.
    pub detail: String,
}

impl Finding {
    fn ok(check: impl Into<String>, detail: impl Into<String>) -> Finding {
        Finding { check: check.into(), ok: true, detail: detail.into() }
    }

    fn problem(check: impl Into<String>, detail: impl Into<String>) -> Finding {
        Finding { check: check.into(), ok: false, detail: detail.into() }
    }
}

/// Less free space than this where the home is, is a problem.
pub const MIN_FREE_BYTES: u64 = 1 << 30;
/// The oldest git Kandev's worktree commands work with.
const MIN_GIT: (u32, u32) = (2, 25);

/// git is found and new enough.
pub async fn git() -> Finding {
    let Some(said) = version_of("git", &["--version"]).await else {
        return Finding::problem(
            "git",
            "git is not found on PATH: install it (e.g. apt-get install git)",
        );
    };
    let version = said.trim_start_matches("git version ").to_owned();
    let mut parts = version.split(['.', ' ']).map(|p| p.parse::<u32>().unwrap_or(0));
    let found = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    if found < MIN_GIT {
        return Finding::problem(
            "git",
            format!("git {version} is older than {}.{}: install a newer git", MIN_GIT.0, MIN_GIT.1),
        );
    }
    Finding::ok("git", said)
}

/// The home exists as a private folder this user can write (or does not exist yet).
pub fn home(home: &Path) -> Vec<Finding> {
    let shown = home.display();
    if !home.exists() {
        return vec![Finding::ok("home", format!("{shown} is made at the first start"))];
    }
    if !home.is_dir() {
        return vec![Finding::problem(
            "home",
            format!("{shown} is not a folder: move it away, or pass another --home"),
        )];
    }
    let mut found = vec![];
    let probe = home.join(format!(".kandev-doctor-{}", std::process::id()));
    match std::fs::write(&probe, b"") {
        Ok(()) => {
            let _ = std::fs::remove_file(&probe);
            found.push(Finding::ok("home", format!("{shown} is writable")));
        }
        Err(err) => found.push(Finding::problem(
            "home",
            format!(
                "cannot write in {shown} ({err}): chown -R \"$USER\" {shown} && chmod 700 {shown}"
            ),
        )),
    }
    if let Ok(meta) = std::fs::metadata(home)
        && meta.permissions().mode() & 0o077 != 0
    {
        found.push(Finding::problem(
            "home permissions",
            format!(
                "{shown} can be read by other users (mode {:o}); it holds the database and \
                 agents' secrets: chmod 700 {shown}",
                meta.permissions().mode() & 0o777
            ),
        ));
    }
    found
}

/// Enough free space where the home is (or would be).
pub fn disk(home: &Path, min_free: u64) -> Finding {
    let mut at = home;
    while !at.exists() {
        match at.parent() {
            Some(parent) => at = parent,
            None => break,
        }
    }
    match free_bytes(at) {
        Ok(free) if free < min_free => Finding::problem(
            "disk",
            format!(
                "only {} MiB free where the home is ({}): free some space (the database, \
                 worktrees and attachments grow there)",
                free >> 20,
                at.display()
            ),
        ),
        Ok(free) => Finding::ok("disk", format!("{} MiB free in {}", free >> 20, at.display())),
        Err(err) => Finding::problem(
            "disk",
            format!("cannot read the free space of {}: {err}", at.display()),
        ),
    }
}

/// The database's schema against this Kandev's, read without changing anything; on SQLite
/// also the file's permissions.
pub async fn database_schema(location: &Location) -> Finding {
    let state = match schema_state(location).await {
        Ok(Some(state)) => state,
        Ok(None) => return Finding::ok("database", "none yet: made at the first start"),
        Err(err) => {
            let fix = match location {
                Location::Postgres(_) => {
                    "check --database-url (KANDEV_DATABASE_URL) and that PostgreSQL runs and \
                     lets this user in"
                }
                _ => {
                    "if the file is damaged, restore the latest backup into a new home: kandev \
                     restore FILE --home NEW_HOME"
                }
            };
            return Finding::problem("database", format!("cannot read it ({err}): {fix}"));
        }
    };
    if state.newer {
        let refused = StoreError::NewerDatabase { recorded: state.recorded.clone() };
        return Finding::problem("database", refused.to_string());
    }
    if state.upgrade_pending() {
        return Finding::ok(
            "database",
            format!(
                "schema {} of an earlier kandev ({}): migrated to {} at the next start, after a \
                 backup",
                state.applied.unwrap_or_default(),
                state.recorded.as_deref().unwrap_or("unknown"),
                state.latest
            ),
        );
    }
    Finding::ok("database", format!("schema {} (this kandev's)", state.latest))
}

/// A SQLite database file only its owner can read.
pub fn database_file(location: &Location) -> Option<Finding> {
    let Location::File(path) = location else { return None };
    let mode = std::fs::metadata(path).ok()?.permissions().mode() & 0o777;
    (mode & 0o077 != 0).then(|| {
        Finding::problem(
            "database permissions",
            format!(
                "{} can be read by other users (mode {mode:o}): chmod 600 {}",
                path.display(),
                path.display()
            ),
        )
    })
}

/// The open database answers and (SQLite) passes its integrity check.
pub async fn database_integrity(store: &Store) -> Finding {
    match store.quick_check().await {
        Ok(said) if said == "ok" => Finding::ok("database integrity", "ok"),
        Ok(said) => Finding::problem(
            "database integrity",
            format!(
                "the database is damaged ({said}): stop the server and restore the latest \
                 backup (kandev restore FILE --home NEW_HOME)"
            ),
        ),
        Err(err) => Finding::problem("database integrity", format!("cannot check it: {err}")),
    }
}

/// The agent of each kind a profile uses is installed.
pub async fn agents(home: &Path, store: &Store) -> Vec<Finding> {
    let prefix = kandev_runtime::agent_install::AgentPrefix::in_home(home);
    let profiles = match store.list_profiles().await {
        Ok(profiles) => profiles,
        Err(err) => {
            return vec![Finding::problem("agents", format!("cannot read the profiles: {err}"))];
        }
    };
    let mut seen = BTreeSet::new();
    let mut found = vec![];
    for profile in profiles {
        let default = profile.kind.default_command();
        let program = match profile.command.split_whitespace().next() {
            Some(program) => program.to_owned(),
            None if profile.kind == AgentKind::Mock => continue,
            None if profile.kind == AgentKind::Custom => {
                found.push(Finding::problem(
                    format!("agent of {}", profile.name),
                    "a custom profile without a command: give it the command of an ACP agent",
                ));
                continue;
            }
            // A version Kandev installed (issue 51), else the default on PATH.
            None => match (&profile.agent_version, crate::installs::package_of(profile.kind)) {
                (Some(version), Ok(agent)) => prefix.program(&agent, version).display().to_string(),
                _ => default.program.to_owned(),
            },
        };
        if !seen.insert(program.clone()) {
            continue;
        }
        let check = format!("agent {}", profile.kind.as_str());
        if !command_found(&program) {
            found.push(Finding::problem(
                check,
                format!(
                    "{program} (profile \"{}\") is not installed: {}",
                    profile.name,
                    default.install()
                ),
            ));
            continue;
        }
        let version = version_of(&program, &["--version"]).await;
        let detail = match version {
            Some(version) => format!("{program}: {version}"),
            None => format!("{program} is installed (it did not say its version)"),
        };
        found.push(Finding::ok(check, detail));
    }
    found
}

/// The container engine and the SSH client, when executors use them.
pub async fn executors(store: &Store) -> Vec<Finding> {
    let executors = match store.list_executors().await {
        Ok(executors) => executors,
        Err(err) => {
            return vec![Finding::problem(
                "executors",
                format!("cannot read the executors: {err}"),
            )];
        }
    };
    let mut found = vec![];
    let mut engines = vec![];
    let mut ssh = false;
    for executor in executors {
        match executor.kind {
            ExecutorKind::Container(settings) if !engines.contains(&settings.engine) => {
                engines.push(settings.engine);
            }
            ExecutorKind::Ssh(_) => ssh = true,
            _ => {}
        }
    }
    for chosen in engines {
        let named = chosen.map(|e| format!(" {}", e.program())).unwrap_or_default();
        let check = format!("container engine{named}");
        found.push(match engine_cli::resolve_engine(chosen).await {
            Ok(engine) => Finding::ok(check, format!("{} runs", engine.program())),
            Err(err) => Finding::problem(check, err.to_string()),
        });
    }
    if ssh {
        found.push(match version_of("ssh", &["-V"]).await {
            Some(version) => Finding::ok("ssh client", version),
            None => Finding::problem(
                "ssh client",
                "an SSH executor needs the OpenSSH client: install it (apt-get install openssh-client)",
            ),
        });
    }
    found
}

/// The local runner's socket fits a socket address, and whether a runner listens on it.
pub async fn runner(home: &Path) -> Finding {
    let socket = kandev_runtime::runner::socket_path(home);
    let length = socket.as_os_str().len();
    if length > 107 {
        return Finding::problem(
            "runner",
            format!(
                "the runner's socket path {} is {length} bytes, more than a socket address \
                 holds (107): use a shorter KANDEV_HOME",
                socket.display()
            ),
        );
    }
    if tokio::net::UnixStream::connect(&socket).await.is_ok() {
        Finding::ok(
            "runner",
            format!("a runner listens on {} (it keeps agents across restarts)", socket.display()),
        )
    } else {
        Finding::ok("runner", "none running: the server starts it")
    }
}

/// The secret key (issue 50): present when secrets exist (the file, or `KANDEV_SECRET_KEY`),
/// readable by its owner only, and the key the secrets were sealed with.
pub async fn secret_key(home: &Path, store: &Store) -> Finding {
    use std::os::unix::fs::PermissionsExt;
    const CHECK: &str = "secret key";
    let sealed = match store.all_sealed_secrets().await {
        Ok(sealed) => sealed,
        Err(err) => return Finding::problem(CHECK, format!("cannot read the secrets: {err}")),
    };
    let path = home.join(crate::secrets::KEY_FILE);
    let (key, source) = match std::env::var(crate::secrets::KEY_ENV) {
        Ok(text) => (Some(text), crate::secrets::KEY_ENV.to_owned()),
        Err(_) => (std::fs::read_to_string(&path).ok(), path.display().to_string()),
    };
    let Some(text) = key else {
        return match sealed.len() {
            0 => Finding::ok(CHECK, "no secrets yet: the server makes the key when it starts"),
            n => Finding::problem(
                CHECK,
                format!(
                    "{n} secret(s) but {source} is missing: copy secret.key from the home this \
                     database came from (backups do not hold it)"
                ),
            ),
        };
    };
    if source != crate::secrets::KEY_ENV
        && let Ok(meta) = std::fs::metadata(&path)
        && meta.permissions().mode() & 0o077 != 0
    {
        return Finding::problem(
            CHECK,
            format!("{source} is readable by others: chmod 600 {source}"),
        );
    }
    let key = match crate::secrets::SecretKey::parse(&text) {
        Ok(key) => key,
        Err(err) => return Finding::problem(CHECK, format!("{source}: {err}")),
    };
    match sealed.iter().find(|(_, s)| s.key_id != key.id()) {
        Some((secret, stored)) => Finding::problem(
            CHECK,
            format!(
                "the secret {} was sealed with the key {}, but {source} is the key {}: use the \
                 key file the secrets were written with",
                secret.name,
                stored.key_id,
                key.id()
            ),
        ),
        None => Finding::ok(CHECK, format!("key {} ({} secrets)", key.id(), sealed.len())),
    }
}

/// Every check a running server can make on itself.
pub async fn examine(home: &Path, store: &Store) -> Vec<Finding> {
    let mut found = vec![git().await];
    found.extend(self::home(home));
    found.push(disk(home, MIN_FREE_BYTES));
    found.push(database_integrity(store).await);
    found.push(secret_key(home, store).await);
    found.extend(agents(home, store).await);
    found.extend(executors(store).await);
    found.push(runner(home).await);
    found
}

impl crate::Engine {
    /// [`examine`] on this server's home and database (Settings → Health).
    pub async fn doctor(&self) -> Vec<Finding> {
        examine(&self.inner.config.home, &self.inner.store).await
    }
}
