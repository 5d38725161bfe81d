//! Executors (issue 20): named places agents run (`local`, `ssh` with how to reach the
//! host, or `container` with its settings as JSON, issue 42), and the executor each repository chose. Names are unique; an executor in use
//! cannot be deleted.

use kandev_domain::Timestamp;
use kandev_domain::executor::{ContainerSettings, Executor, ExecutorKind, SshSettings};
use sqlx::FromRow;

use crate::db::Db;
use crate::{Result, Store, StoreError, WriteTx};

#[derive(FromRow)]
struct ExecutorRow {
    id: String,
    name: String,
    kind: String,
    host: String,
    port: i64,
    user: String,
    identity_file: String,
    known_hosts: String,
    remote_home: String,
    container: Option<String>,
    /// A JSON list of secret names.
    allowed_secrets: String,
    created_at: i64,
    updated_at: i64,
}

impl ExecutorRow {
    fn into_executor(self, repository_ids: Vec<String>) -> Result<Executor> {
        let kind = match self.kind.as_str() {
            "local" => ExecutorKind::Local,
            "ssh" => ExecutorKind::Ssh(SshSettings {
                host: self.host,
                port: u16::try_from(self.port).map_err(|_| {
                    StoreError::Corrupt(format!("executor {} has port {}", self.id, self.port))
                })?,
                user: self.user,
                identity_file: self.identity_file.into(),
                known_hosts: self.known_hosts.into(),
                remote_home: self.remote_home,
            }),
            "container" => {
                let json = self.container.unwrap_or_default();
                ExecutorKind::Container(serde_json::from_str(&json).map_err(|e| {
                    StoreError::Corrupt(format!(
                        "executor {} has bad container settings: {e}",
                        self.id
                    ))
                })?)
            }
            other => {
                return Err(StoreError::Corrupt(format!(
                    "executor {} has the unknown kind {other}",
                    self.id
                )));
            }
        };
        let allowed_secrets = serde_json::from_str(&self.allowed_secrets).map_err(|e| {
            StoreError::Corrupt(format!("executor {} has bad allowed secrets: {e}", self.id))
        })?;
        Ok(Executor {
            id: self.id,
            name: self.name,
            kind,
            repository_ids,
            allowed_secrets,
            created_at: Timestamp(self.created_at),
            updated_at: Timestamp(self.updated_at),
        })
    }
}

async fn users(mut db: Db<'_>, executor: &str) -> Result<Vec<String>> {
    Ok(crate::sql::query_scalar::<String>(
        "SELECT repository_id FROM repository_executors WHERE executor_id = ? ORDER BY repository_id",
    )
    .bind(executor)
    .fetch_all(&mut db)
    .await?)
}

async fn get(mut db: Db<'_>, id: &str) -> Result<Executor> {
    let row = crate::sql::query_as::<ExecutorRow>("SELECT * FROM executors WHERE id = ?")
        .bind(id)
        .fetch_optional(&mut db)
        .await?
        .ok_or_else(|| StoreError::not_found("executor", id))?;
    let used_by = users(db, id).await?;
    row.into_executor(used_by)
}

async fn name_taken(mut db: Db<'_>, name: &str) -> Result<bool> {
    Ok(crate::sql::query_scalar::<i64>("SELECT COUNT(*) FROM executors WHERE name = ?")
        .bind(name)
        .fetch_one(&mut db)
        .await?
        > 0)
}

fn taken(name: &str) -> StoreError {
    StoreError::Conflict(format!(
        "an executor named {name} already exists; choose another name or update that one"
    ))
}

/// Whether two kinds put worktrees in the same place (same kind; for SSH the same host, port,
/// user and remote home: keys and known hosts may change).
fn same_place(a: &ExecutorKind, b: &ExecutorKind) -> bool {
    match (a, b) {
        (ExecutorKind::Local, ExecutorKind::Local) => true,
        (ExecutorKind::Ssh(a), ExecutorKind::Ssh(b)) => {
            (&a.host, a.port, &a.user, &a.remote_home) == (&b.host, b.port, &b.user, &b.remote_home)
        }
        // The worktrees stay on this host; a container is made anew from the settings.
        (ExecutorKind::Container(_), ExecutorKind::Container(_)) => true,
        _ => false,
    }
}

/// `Conflict` when another SSH executor than `except` reaches the same runner (host, port,
/// user and remote home): two links to one runner would keep replacing each other.
async fn same_runner(mut db: Db<'_>, kind: &ExecutorKind, except: Option<&str>) -> Result<()> {
    let ExecutorKind::Ssh(s) = kind else { return Ok(()) };
    let other = crate::sql::query_scalar::<String>(
        "SELECT name FROM executors WHERE kind = 'ssh' AND host = ? AND port = ? \
         AND \"user\" = ? AND remote_home = ? AND id <> ? LIMIT 1",
    )
    .bind(&s.host)
    .bind(i64::from(s.port))
    .bind(&s.user)
    .bind(&s.remote_home)
    .bind(except.unwrap_or(""))
    .fetch_optional(&mut db)
    .await?;
    match other {
        Some(name) => Err(StoreError::Conflict(format!(
            "the executor {name} already uses {}@{}:{} with remote home {}; use that one or \
             choose another remote home",
            s.user, s.host, s.port, s.remote_home
        ))),
        None => Ok(()),
    }
}

/// `Conflict` when tasks have live worktrees on `executor`: `what` would strand them.
fn in_use(executor: &str, what: &str, tasks: &[String]) -> StoreError {
    StoreError::Conflict(format!(
        "cannot {what} the executor {executor}: tasks have worktrees there ({}); archive them first",
        tasks.join(", ")
    ))
}

/// The columns of a kind.
struct Columns {
    kind: &'static str,
    host: String,
    port: i64,
    user: String,
    identity_file: String,
    known_hosts: String,
    remote_home: String,
    container: Option<String>,
}

fn columns(kind: &ExecutorKind) -> Result<Columns> {
    let none = |kind| Columns {
        kind,
        host: String::new(),
        port: 22,
        user: String::new(),
        identity_file: String::new(),
        known_hosts: String::new(),
        remote_home: String::new(),
        container: None,
    };
    Ok(match kind {
        ExecutorKind::Local => none("local"),
        ExecutorKind::Ssh(s) => Columns {
            kind: "ssh",
            host: s.host.clone(),
            port: i64::from(s.port),
            user: s.user.clone(),
            identity_file: s.identity_file.display().to_string(),
            known_hosts: s.known_hosts.display().to_string(),
            remote_home: s.remote_home.clone(),
            container: None,
        },
        ExecutorKind::Container(settings) => {
            Columns { container: Some(container_json(settings)?), ..none("container") }
        }
    })
}

fn container_json(settings: &ContainerSettings) -> Result<String> {
    serde_json::to_string(settings)
        .map_err(|e| StoreError::Corrupt(format!("cannot store container settings: {e}")))
}

impl Store {
    /// Every executor, by name.
    pub async fn list_executors(&self) -> Result<Vec<Executor>> {
        let rows = crate::sql::query_as::<ExecutorRow>("SELECT * FROM executors ORDER BY name")
            .fetch_all(&self.read)
            .await?;
        let mut executors = Vec::with_capacity(rows.len());
        for row in rows {
            let used_by = users(self.db(), &row.id).await?;
            executors.push(row.into_executor(used_by)?);
        }
        Ok(executors)
    }

    pub async fn get_executor(&self, id: &str) -> Result<Executor> {
        get(self.db(), id).await
    }

    /// The executor a repository chose (`None`: it runs locally).
    pub async fn repository_executor(&self, repository: &str) -> Result<Option<Executor>> {
        let id = crate::sql::query_scalar::<String>(
            "SELECT executor_id FROM repository_executors WHERE repository_id = ?",
        )
        .bind(repository)
        .fetch_optional(&self.read)
        .await?;
        match id {
            Some(id) => Ok(Some(get(self.db(), &id).await?)),
            None => Ok(None),
        }
    }
}

impl WriteTx {
    /// Replaces the secrets an executor's host may receive; answers the executor.
    pub async fn set_executor_secrets(&mut self, id: &str, names: &[String]) -> Result<Executor> {
        let json = serde_json::to_string(names)
            .map_err(|e| StoreError::Corrupt(format!("cannot store secret names: {e}")))?;
        let changed = crate::sql::query(
            "UPDATE executors SET allowed_secrets = ?, updated_at = ? WHERE id = ?",
        )
        .bind(json)
        .bind(self.now().millis())
        .bind(id)
        .execute(self.conn())
        .await?
        .rows_affected();
        if changed == 0 {
            return Err(StoreError::not_found("executor", id));
        }
        get(self.db(), id).await
    }

    /// Adds an executor; `Conflict` when one of that name exists.
    pub async fn insert_executor(&mut self, name: &str, kind: &ExecutorKind) -> Result<Executor> {
        same_runner(self.db(), kind, None).await?;
        if name_taken(self.db(), name).await? {
            return Err(taken(name));
        }
        let (id, now) = (self.new_id(), self.now().millis());
        let c = columns(kind)?;
        crate::sql::query(
            "INSERT INTO executors (id, name, kind, host, port, \"user\", identity_file, known_hosts, \
             remote_home, container, created_at, updated_at) \
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(&id)
        .bind(name)
        .bind(c.kind)
        .bind(c.host)
        .bind(c.port)
        .bind(c.user)
        .bind(c.identity_file)
        .bind(c.known_hosts)
        .bind(c.remote_home)
        .bind(c.container)
        .bind(now)
        .bind(now)
        .execute(self.conn())
        .await?;
        get(self.db(), &id).await
    }

    /// Renames an executor and/or replaces its kind and settings (`None` keeps them).
    pub async fn update_executor(
        &mut self,
        id: &str,
        name: Option<&str>,
        kind: Option<&ExecutorKind>,
    ) -> Result<Executor> {
        let current = get(self.db(), id).await?;
        if let Some(kind) = kind {
            same_runner(self.db(), kind, Some(id)).await?;
        }
        if let Some(kind) = kind
            && !same_place(kind, &current.kind)
        {
            let tasks = crate::worktrees::titles_of_tasks_on_executor(self.db(), id).await?;
            if !tasks.is_empty() {
                return Err(in_use(
                    &current.name,
                    "change the kind, host, port, user or remote home of",
                    &tasks,
                ));
            }
        }
        let name = name.unwrap_or(&current.name);
        if name != current.name && name_taken(self.db(), name).await? {
            return Err(taken(name));
        }
        let c = columns(kind.unwrap_or(&current.kind))?;
        crate::sql::query(
            "UPDATE executors SET name = ?, kind = ?, host = ?, port = ?, \"user\" = ?, \
             identity_file = ?, known_hosts = ?, remote_home = ?, container = ?, updated_at = ? \
             WHERE id = ?",
        )
        .bind(name)
        .bind(c.kind)
        .bind(c.host)
        .bind(c.port)
        .bind(c.user)
        .bind(c.identity_file)
        .bind(c.known_hosts)
        .bind(c.remote_home)
        .bind(c.container)
        .bind(self.now().millis())
        .bind(id)
        .execute(self.conn())
        .await?;
        get(self.db(), id).await
    }

    /// Removes an executor no repository uses; `Conflict` naming the count otherwise.
    pub async fn delete_executor(&mut self, id: &str) -> Result<Executor> {
        let current = get(self.db(), id).await?;
        let tasks = crate::worktrees::titles_of_tasks_on_executor(self.db(), id).await?;
        if !tasks.is_empty() {
            return Err(in_use(&current.name, "delete", &tasks));
        }
        if !current.repository_ids.is_empty() {
            return Err(StoreError::Conflict(format!(
                "executor {} is used by {} repositories; choose another executor for them first \
                 in Settings › Repositories",
                current.name,
                current.repository_ids.len()
            )));
        }
        crate::sql::query("DELETE FROM executors WHERE id = ?")
            .bind(id)
            .execute(self.conn())
            .await?;
        Ok(current)
    }

    /// Sets the executor a repository's agents run on (`None`: locally). Both must exist.
    pub async fn set_repository_executor(
        &mut self,
        repository: &str,
        executor: Option<&str>,
    ) -> Result<Option<Executor>> {
        let exists =
            crate::sql::query_scalar::<i64>("SELECT COUNT(*) FROM repositories WHERE id = ?")
                .bind(repository)
                .fetch_one(self.conn())
                .await?;
        if exists == 0 {
            return Err(StoreError::not_found("repository", repository));
        }
        crate::sql::query("DELETE FROM repository_executors WHERE repository_id = ?")
            .bind(repository)
            .execute(self.conn())
            .await?;
        let Some(executor) = executor else { return Ok(None) };
        get(self.db(), executor).await?;
        crate::sql::query(
            "INSERT INTO repository_executors (repository_id, executor_id) VALUES (?, ?)",
        )
        .bind(repository)
        .bind(executor)
        .execute(self.conn())
        .await?;
        Ok(Some(get(self.db(), executor).await?))
    }
}
