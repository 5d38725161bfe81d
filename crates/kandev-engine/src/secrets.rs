//! Secrets (issue 50): values sealed with XChaCha20-Poly1305 under one key that is never in
//! the database: the file `<home>/secret.key` (made on the first start, 0600), or
//! `KANDEV_SECRET_KEY`. Each value's associated data is its row's id, so a sealed value
//! copied onto another row does not open. Rotating the key re-seals every value in one
//! transaction; the new key is written beside the old one first (`secret.key.next`) and
//! renamed over it once the transaction is committed, and a start after a crash in between
//! finishes or undoes the rename by the key ids the rows hold.
//!
//! A value is opened only to go into the environment of the process that references it
//! ([`resolve`]): no answer, log line or event carries one, and `Debug` of a key shows its
//! id only.

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use kandev_domain::agent::{AgentProfile, EnvVar, McpServerConfig};
use kandev_domain::secret::{self, Sealed, Secret, SecretScope};
use kandev_store::{ProfilePatch, WriteTx};

use crate::error::{EngineError, Result};
use crate::inner::Inner;
pub use crate::sealing::SecretKey;

/// The key file's name in the home.
pub const KEY_FILE: &str = "secret.key";
/// The environment variable that gives the key instead of the file (base64 of 32 bytes).
pub const KEY_ENV: &str = "KANDEV_SECRET_KEY";
/// Where a rotation writes the new key before its transaction commits.
const NEXT_KEY_FILE: &str = "secret.key.next";

fn unavailable(what: impl std::fmt::Display) -> EngineError {
    EngineError::Unavailable(what.to_string())
}

fn read_key_file(path: &Path) -> Result<Option<SecretKey>> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(err) => return Err(unavailable(format!("cannot read {}: {err}", path.display()))),
    };
    let mode = std::fs::metadata(path).map(|m| m.permissions().mode() & 0o777).unwrap_or(0o600);
    if mode & 0o077 != 0 {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(|e| {
            unavailable(format!("cannot make {} private (chmod 600): {e}", path.display()))
        })?;
        tracing::warn!(path = %path.display(), "made the secret key file readable by its owner only");
    }
    SecretKey::parse(&text).map(Some).map_err(|e| unavailable(format!("{}: {e}", path.display())))
}

/// Writes `key` to `path` (0600) through a temporary file, so no reader sees half a key.
fn write_key_file(path: &Path, key: &SecretKey) -> Result<()> {
    let tmp = path.with_extension("tmp");
    let _ = std::fs::remove_file(&tmp);
    let write = || -> std::io::Result<()> {
        let mut file =
            std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&tmp)?;
        file.write_all(format!("{}\n", key.encode()).as_bytes())?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)?;
        if let Some(dir) = path.parent() {
            std::fs::File::open(dir)?.sync_all()?;
        }
        Ok(())
    };
    write().map_err(|e| unavailable(format!("cannot write the secret key {}: {e}", path.display())))
}

impl Inner {
    fn key_path(&self) -> PathBuf {
        self.config.home.join(KEY_FILE)
    }

    /// The key: the configured one, else the key file (made when missing: [`Inner::open_secrets`]
    /// has refused a start that would need an old key it does not have).
    pub(crate) fn secret_key(&self) -> Result<Arc<SecretKey>> {
        if let Some(key) = self.vault.get() {
            return Ok(key);
        }
        if let Some(key) = self.config.secret_key.clone() {
            return Ok(self.vault.set(key));
        }
        let path = self.key_path();
        let key = match read_key_file(&path)? {
            Some(key) => key,
            None => {
                let key = SecretKey::generate();
                write_key_file(&path, &key)?;
                tracing::info!(path = %path.display(), "made the secret key; keep a copy of it apart from your backups");
                key
            }
        };
        Ok(self.vault.set(key))
    }
}

/// The values of the secrets `names` for a process of `workspace_id` (and `repository_id`):
/// of each name, the repository's secret, else the workspace's, else the server's. A name
/// with none is an error saying where to add it.
pub(crate) async fn resolve(
    inner: &Inner,
    names: &[String],
    workspace_id: &str,
    repository_id: Option<&str>,
) -> Result<HashMap<String, String>> {
    let mut wanted: Vec<String> = names.to_vec();
    wanted.sort();
    wanted.dedup();
    if wanted.is_empty() {
        return Ok(HashMap::new());
    }
    let found = inner.store.sealed_secrets_for(&wanted, workspace_id, repository_id).await?;
    let mut best: BTreeMap<&str, &(Secret, Sealed)> = BTreeMap::new();
    for entry in &found {
        let better =
            best.get(entry.0.name.as_str()).is_none_or(|b| entry.0.scope.rank() > b.0.scope.rank());
        if better {
            best.insert(&entry.0.name, entry);
        }
    }
    if let Some(missing) = wanted.iter().find(|n| !best.contains_key(n.as_str())) {
        return Err(EngineError::Validation(format!(
            "the secret {missing} is not set for this task (its repository or workspace) or the \
             server: add it in Settings → Secrets"
        )));
    }
    let key = inner.secret_key()?;
    let mut values = HashMap::new();
    for (name, (secret, sealed)) in best {
        let value = key
            .open(&secret.id, sealed)
            .map_err(|why| unavailable(format!("the secret {name} cannot be read: {why}")))?;
        values.insert(name.to_owned(), value);
    }
    Ok(values)
}

/// The environment a repository's setup, cleanup and dev scripts get: its `script_secrets`,
/// each the repository's secret of that name, else its workspace's, else the server's. On
/// an SSH or container executor each must be allowed there; a missing or refused one is an
/// error saying what to change, and the script does not run.
pub(crate) async fn script_env(
    inner: &Inner,
    repository: &kandev_domain::workspace::Repository,
) -> Result<Vec<(String, String)>> {
    let names = &repository.script_secrets;
    if names.is_empty() {
        return Ok(vec![]);
    }
    if let Some(executor) = inner.store.repository_executor(repository.id.as_str()).await?
        && !matches!(executor.kind, kandev_domain::executor::ExecutorKind::Local)
        && let Some(name) = names.iter().find(|n| !executor.allowed_secrets.contains(n))
    {
        return Err(EngineError::Validation(format!(
            "the executor {} is not allowed the secret {name} the scripts of repository {} \
             use: allow it in Settings → Executors, or remove it from the repository's script \
             secrets",
            executor.name, repository.name
        )));
    }
    let workspace = repository.workspace_id.to_string();
    let values = resolve(inner, names, &workspace, Some(repository.id.as_str())).await?;
    Ok(names.iter().filter_map(|n| values.get(n).map(|v| (n.clone(), v.clone()))).collect())
}

/// Server secrets by name, for what runs outside a task: a webhook channel's signing
/// secret (`deliveries.rs`). A missing one is an error saying where to add it.
pub(crate) fn server_secrets(inner: Arc<Inner>) -> crate::deliveries::StoredSecret {
    Arc::new(move |name: String| {
        let inner = inner.clone();
        Box::pin(async move {
            let names = std::slice::from_ref(&name);
            match resolve(&inner, names, "", None).await {
                Ok(mut values) => values.remove(&name).ok_or_else(|| missing_server(&name)),
                Err(EngineError::Validation(_)) => Err(missing_server(&name)),
                Err(err) => Err(err.to_string()),
            }
        })
    })
}

fn missing_server(name: &str) -> String {
    format!(
        "the server secret {name} the channel signs with is not set: add it in Settings → Secrets"
    )
}

/// The secret names `profile` references (its env, and its MCP servers' env and headers).
pub(crate) fn profile_references(profile: &AgentProfile) -> Vec<String> {
    let mut names: Vec<String> = all_vars(profile).filter_map(|v| v.secret.clone()).collect();
    names.sort();
    names.dedup();
    names
}

fn all_vars(profile: &AgentProfile) -> impl Iterator<Item = &EnvVar> {
    let servers = profile.mcp_servers.iter().flat_map(|server| match server {
        McpServerConfig::Stdio { env, .. } => env.iter(),
        McpServerConfig::Remote { headers, .. } => headers.iter(),
    });
    profile.env.iter().chain(servers)
}

/// `profile` with every reference replaced by its value from `values` (which [`resolve`]
/// filled for all of [`profile_references`]).
pub(crate) fn fill_profile(
    mut profile: AgentProfile,
    values: &HashMap<String, String>,
) -> AgentProfile {
    let fill = |vars: &mut Vec<EnvVar>| {
        for var in vars.iter_mut() {
            if let Some(value) = var.secret.as_ref().and_then(|name| values.get(name)) {
                var.value = value.clone();
            }
        }
    };
    fill(&mut profile.env);
    for server in &mut profile.mcp_servers {
        match server {
            McpServerConfig::Stdio { env, .. } => fill(env),
            McpServerConfig::Remote { headers, .. } => fill(headers),
        }
    }
    profile
}

/// The forge token candidates of `repository` kept as secrets (by variable name): the one
/// its settings name, else `GITHUB_TOKEN` and `GITLAB_TOKEN`. A name with no secret is left
/// out (the forge then reads the server's environment).
pub(crate) async fn forge_tokens(
    inner: &Inner,
    repository: &kandev_domain::workspace::Repository,
) -> Result<HashMap<String, String>> {
    let names: Vec<String> = match repository.forge_token_env.trim() {
        "" => vec!["GITHUB_TOKEN".into(), "GITLAB_TOKEN".into()],
        named => vec![named.to_owned()],
    };
    let workspace = repository.workspace_id.to_string();
    let repository_id = repository.id.to_string();
    let mut tokens = HashMap::new();
    for name in names {
        match resolve(inner, std::slice::from_ref(&name), &workspace, Some(&repository_id)).await {
            Ok(mut values) => tokens.extend(values.drain()),
            Err(EngineError::Validation(_)) => {}
            Err(err) => return Err(err),
        }
    }
    Ok(tokens)
}

/// A secret name made from `text` (a variable or header name): upper case, `_` for
/// anything else than a letter or digit.
fn name_from(text: &str) -> String {
    let mut name: String = text
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_uppercase() } else { '_' })
        .collect();
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        name.insert(0, '_');
    }
    name.truncate(secret::MAX_SECRET_NAME_BYTES - 8);
    name
}

/// Moves one plain value into a server secret during an import: a secret of the same name
/// and value is shared; a name taken by another value gets a number.
async fn import_value(
    tx: &mut WriteTx,
    key: &SecretKey,
    taken: &mut HashMap<String, String>,
    base: &str,
    value: &str,
) -> Result<String> {
    let base = name_from(base);
    let mut name = base.clone();
    let mut n = 1;
    loop {
        match taken.get(&name) {
            Some(existing) if existing == value => return Ok(name),
            Some(_) => {
                n += 1;
                name = format!("{base}_{n}");
            }
            None => break,
        }
    }
    tx.put_secret(&SecretScope::Server, &name, |id| Ok(key.seal(id, value))).await?;
    taken.insert(name.clone(), value.to_owned());
    Ok(name)
}

impl Inner {
    /// At start, before anything uses a secret: reads the key (or makes one when the
    /// database holds no secret yet), refuses a key that is not the one the secrets were
    /// sealed with, finishes a rotation a crash interrupted, and runs the one-time imports
    /// of older plain-text values (profiles' environment, the forge token variables).
    pub(crate) async fn open_secrets(&self) -> Result<()> {
        let inner = self;
        let sealed = inner.store.all_sealed_secrets().await?;
        self.finish_rotation(&sealed)?;
        let path = inner.key_path();
        if inner.config.secret_key.is_none() && !path.exists() && !sealed.is_empty() {
            return Err(unavailable(format!(
                "the database holds {} secret(s) but the key file {} is missing: copy secret.key \
                 from the home this database came from (backups do not hold it), or set {KEY_ENV}",
                sealed.len(),
                path.display()
            )));
        }
        let key = inner.secret_key()?;
        if let Some((secret, stored)) = sealed.iter().find(|(_, s)| s.key_id != key.id()) {
            return Err(unavailable(format!(
                "the secret {} was sealed with the key {}, but this server's key is {}: start \
                 with the key file (or {KEY_ENV}) the secrets were written with",
                secret.name,
                stored.key_id,
                key.id()
            )));
        }
        self.import_secrets(&key).await
    }

    /// A rotation that wrote `secret.key.next` and then stopped: the rows tell whether its
    /// transaction committed (they hold the new key's id) or not.
    fn finish_rotation(&self, sealed: &[(Secret, Sealed)]) -> Result<()> {
        let next_path = self.config.home.join(NEXT_KEY_FILE);
        let Some(next) = read_key_file(&next_path)? else { return Ok(()) };
        if sealed.iter().any(|(_, s)| s.key_id == next.id()) {
            std::fs::rename(&next_path, self.key_path())
                .map_err(|e| unavailable(format!("cannot finish the key rotation: {e}")))?;
            tracing::info!("finished a key rotation a stop interrupted");
        } else {
            let _ = std::fs::remove_file(&next_path);
        }
        Ok(())
    }

    async fn import_secrets(&self, key: &SecretKey) -> Result<()> {
        let mut tx = self.store.begin_write().await?;
        let pending = tx.pending_secret_imports().await?;
        if pending.is_empty() {
            return Ok(());
        }
        let mut taken: HashMap<String, String> = HashMap::new();
        for (secret, sealed) in tx.all_sealed_secrets().await? {
            if secret.scope == SecretScope::Server {
                let value = key.open(&secret.id, &sealed).map_err(unavailable)?;
                taken.insert(secret.name, value);
            }
        }
        let mut moved = 0;
        for kind in pending {
            match kind.as_str() {
                "profile_env" => moved += import_profiles(&mut tx, key, &mut taken).await?,
                "forge_tokens" => {
                    moved += self.import_forge_tokens(&mut tx, key, &mut taken).await?
                }
                _ => {}
            }
            tx.finish_secret_import(&kind).await?;
        }
        tx.commit().await?;
        self.store.fold_write_ahead_log().await?;
        if moved > 0 {
            tracing::info!(moved, "moved plain-text keys and tokens into the secret store");
        }
        Ok(())
    }

    async fn import_forge_tokens(
        &self,
        tx: &mut WriteTx,
        key: &SecretKey,
        taken: &mut HashMap<String, String>,
    ) -> Result<usize> {
        let mut names = vec!["GITHUB_TOKEN".to_owned(), "GITLAB_TOKEN".to_owned()];
        for workspace in self.store.list_workspaces().await? {
            for repository in self.store.list_repositories(&workspace.id).await? {
                let named = repository.forge_token_env.trim();
                if !named.is_empty() && !names.iter().any(|n| n == named) {
                    names.push(named.to_owned());
                }
            }
        }
        let mut moved = 0;
        for name in names {
            let Ok(value) = std::env::var(&name) else { continue };
            if value.trim().is_empty() || taken.contains_key(&name) {
                continue;
            }
            tx.put_secret(&SecretScope::Server, &name, |id| Ok(key.seal(id, &value))).await?;
            taken.insert(name, value);
            moved += 1;
        }
        Ok(moved)
    }

    /// `secret.set`: `value` sealed under `name` in `scope` (replacing the value of that name).
    pub(crate) async fn set_secret(
        &self,
        scope: &SecretScope,
        name: &str,
        value: &str,
    ) -> Result<Secret> {
        let name = secret::secret_name(name).map_err(field_error)?;
        secret::secret_value(value).map_err(field_error)?;
        let key = self.secret_key()?;
        let mut tx = self.store.begin_write().await?;
        let secret = tx.put_secret(scope, &name, |id| Ok(key.seal(id, value))).await?;
        tx.commit().await?;
        Ok(secret)
    }

    /// `secret.remove`.
    pub(crate) async fn remove_secret(&self, scope: &SecretScope, name: &str) -> Result<Secret> {
        let mut tx = self.store.begin_write().await?;
        let removed = tx.remove_secret(scope, name).await.map_err(|err| match err {
            kandev_store::StoreError::NotFound { .. } => EngineError::NotFound(format!(
                "there is no {} secret {name}: give the workspace (and the repository) it was \
                 set for",
                scope.kind()
            )),
            other => EngineError::Store(other),
        })?;
        tx.commit().await?;
        Ok(removed)
    }

    /// The id of the key secrets are sealed with.
    pub(crate) fn secret_key_id(&self) -> Result<String> {
        Ok(self.secret_key()?.id())
    }

    /// `secret.key.rotate`: a new key, every secret re-sealed with it in one transaction (a
    /// fresh nonce each); answers the new key's id and how many secrets were re-sealed.
    pub(crate) async fn rotate_secret_key(&self) -> Result<(String, usize)> {
        let inner = self;
        if inner.config.secret_key.is_some() {
            return Err(EngineError::Conflict(format!(
                "the secret key comes from {KEY_ENV}, which the server cannot change: write that \
                 key into {} (0600), unset the variable, restart, and rotate then",
                inner.key_path().display()
            )));
        }
        let old = inner.secret_key()?;
        let new = SecretKey::generate();
        let next_path = inner.config.home.join(NEXT_KEY_FILE);
        write_key_file(&next_path, &new)?;
        let rotated = async {
            let mut tx = inner.store.begin_write().await?;
            let all = tx.all_sealed_secrets().await?;
            for (secret, sealed) in &all {
                let value = old.open(&secret.id, sealed).map_err(|why| {
                    unavailable(format!("the secret {} cannot be read: {why}", secret.name))
                })?;
                tx.reseal_secret(&secret.id, &new.seal(&secret.id, &value)).await?;
            }
            tx.commit().await?;
            Ok::<usize, EngineError>(all.len())
        }
        .await;
        let count = match rotated {
            Ok(count) => count,
            Err(err) => {
                let _ = std::fs::remove_file(&next_path);
                return Err(err);
            }
        };
        std::fs::rename(&next_path, inner.key_path()).map_err(|e| {
            unavailable(format!(
                "the secrets are re-sealed but {} could not replace the key file ({e}): the \
                 next start finishes it",
                next_path.display()
            ))
        })?;
        let id = new.id();
        inner.vault.set(new);
        inner.store.fold_write_ahead_log().await?;
        tracing::info!(key = %id, secrets = count, "rotated the secret key; backups made before need the old key");
        Ok((id, count))
    }
}

fn field_error(err: kandev_domain::validate::FieldError) -> EngineError {
    EngineError::Validation(format!(
        "{} {}",
        kandev_domain::validate::spoken(&err.field),
        err.problem
    ))
}

/// The import of profiles' plain env values (and their MCP servers' env and header values)
/// into server secrets; each variable then references its secret.
async fn import_profiles(
    tx: &mut WriteTx,
    key: &SecretKey,
    taken: &mut HashMap<String, String>,
) -> Result<usize> {
    let mut moved = 0;
    for profile in tx.list_profiles().await? {
        let mut changed = false;
        let mut env = profile.env.clone();
        for var in &mut env {
            if var.secret.is_none() && !var.value.is_empty() {
                let name = import_value(tx, key, taken, &var.name, &var.value).await?;
                *var = EnvVar::secret(var.name.clone(), name);
                changed = true;
                moved += 1;
            }
        }
        let mut servers = profile.mcp_servers.clone();
        for server in &mut servers {
            let vars = match server {
                McpServerConfig::Stdio { env, .. } => env,
                McpServerConfig::Remote { headers, .. } => headers,
            };
            for var in vars.iter_mut() {
                if var.secret.is_none() && !var.value.is_empty() {
                    let name = import_value(tx, key, taken, &var.name, &var.value).await?;
                    *var = EnvVar::secret(var.name.clone(), name);
                    changed = true;
                    moved += 1;
                }
            }
        }
        if changed {
            let patch = ProfilePatch {
                env: Some(env),
                mcp_servers: Some(servers),
                ..ProfilePatch::default()
            };
            tx.update_profile(&profile.id, &patch).await?;
        }
    }
    Ok(moved)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn imported_names_are_environment_names() {
        assert_eq!(name_from("Authorization"), "AUTHORIZATION");
        assert_eq!(name_from("x-api-key"), "X_API_KEY");
        assert_eq!(name_from("1PASS"), "_1PASS");
    }
}
