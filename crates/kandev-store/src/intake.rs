//! Intake sources (issue 47): the row, reads and writes, and the deliveries each source's
//! webhook accepted (a delivery id seen before is a replay).

use kandev_domain::intake::{Hook, HookScheme, IntakeSource, SourceKind};
use kandev_domain::{RepositoryId, StepId, Timestamp, WorkflowId, WorkspaceId};
use sqlx::FromRow;

use crate::db::Db;
use crate::{Result, Store, StoreError, WriteTx};

#[derive(FromRow)]
struct SourceRow {
    id: String,
    workspace_id: String,
    name: String,
    kind: String,
    repository_id: Option<String>,
    label: String,
    workflow_id: String,
    step_id: String,
    hook_scheme: String,
    hook_secret: String,
    enabled: i64,
    last_polled_at: Option<i64>,
    last_error: String,
    created_at: i64,
}

impl TryFrom<SourceRow> for IntakeSource {
    type Error = StoreError;

    fn try_from(r: SourceRow) -> Result<IntakeSource> {
        let kind = SourceKind::parse(&r.kind).ok_or_else(|| {
            StoreError::Corrupt(format!("intake source {} kind {:?}", r.id, r.kind))
        })?;
        let hook = match r.hook_scheme.as_str() {
            "" => None,
            scheme => Some(Hook {
                scheme: HookScheme::parse(scheme).ok_or_else(|| {
                    StoreError::Corrupt(format!("intake source {} hook {scheme:?}", r.id))
                })?,
                secret: r.hook_secret,
            }),
        };
        Ok(IntakeSource {
            id: r.id,
            workspace_id: WorkspaceId::new(r.workspace_id),
            name: r.name,
            kind,
            repository_id: r.repository_id.map(RepositoryId::new),
            label: r.label,
            workflow_id: WorkflowId::new(r.workflow_id),
            step_id: StepId::new(r.step_id),
            hook,
            enabled: r.enabled != 0,
            last_polled_at: r.last_polled_at.map(Timestamp),
            last_error: r.last_error,
            created_at: Timestamp(r.created_at),
        })
    }
}

/// A new intake source as checked by the engine.
#[derive(Debug, Clone)]
pub struct NewIntakeSource {
    pub workspace_id: WorkspaceId,
    pub name: String,
    pub kind: SourceKind,
    pub repository_id: Option<RepositoryId>,
    pub label: String,
    pub workflow_id: WorkflowId,
    pub step_id: StepId,
    pub hook: Option<Hook>,
}

async fn get(mut db: Db<'_>, id: &str) -> Result<IntakeSource> {
    crate::sql::query_as::<SourceRow>("SELECT * FROM intake_sources WHERE id = ?")
        .bind(id)
        .fetch_optional(&mut db)
        .await?
        .ok_or_else(|| StoreError::not_found("intake source", id))?
        .try_into()
}

impl Store {
    /// The workspace's intake sources by name.
    pub async fn list_intake_sources(&self, workspace: &WorkspaceId) -> Result<Vec<IntakeSource>> {
        crate::sql::query_as::<SourceRow>(
            "SELECT * FROM intake_sources WHERE workspace_id = ? ORDER BY name, id",
        )
        .bind(workspace.as_str())
        .fetch_all(&self.read)
        .await?
        .into_iter()
        .map(IntakeSource::try_from)
        .collect()
    }

    /// Every enabled source that is polled (its kind reads issues), oldest first.
    pub async fn polled_intake_sources(&self) -> Result<Vec<IntakeSource>> {
        crate::sql::query_as::<SourceRow>(
            "SELECT * FROM intake_sources WHERE enabled = 1 AND kind = ? ORDER BY created_at, id",
        )
        .bind(SourceKind::Issues.as_str())
        .fetch_all(&self.read)
        .await?
        .into_iter()
        .map(IntakeSource::try_from)
        .collect()
    }

    pub async fn get_intake_source(&self, id: &str) -> Result<IntakeSource> {
        get(self.db(), id).await
    }
}

impl WriteTx {
    pub async fn insert_intake_source(&mut self, new: &NewIntakeSource) -> Result<IntakeSource> {
        let (id, now) = (self.new_id(), self.now().millis());
        let (scheme, secret) = match &new.hook {
            Some(hook) => (hook.scheme.as_str(), hook.secret.as_str()),
            None => ("", ""),
        };
        crate::sql::query(
            "INSERT INTO intake_sources (id, workspace_id, name, kind, repository_id, label, \
             workflow_id, step_id, hook_scheme, hook_secret, enabled, last_polled_at, \
             last_error, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, NULL, '', ?)",
        )
        .bind(&id)
        .bind(new.workspace_id.as_str())
        .bind(&new.name)
        .bind(new.kind.as_str())
        .bind(new.repository_id.as_ref().map(RepositoryId::as_str))
        .bind(&new.label)
        .bind(new.workflow_id.as_str())
        .bind(new.step_id.as_str())
        .bind(scheme)
        .bind(secret)
        .bind(now)
        .execute(self.conn())
        .await?;
        get(self.db(), &id).await
    }

    pub async fn get_intake_source(&mut self, id: &str) -> Result<IntakeSource> {
        get(self.db(), id).await
    }

    /// Turns a source's polling and webhook on or off.
    pub async fn set_intake_source_enabled(
        &mut self,
        id: &str,
        enabled: bool,
    ) -> Result<IntakeSource> {
        get(self.db(), id).await?;
        crate::sql::query("UPDATE intake_sources SET enabled = ? WHERE id = ?")
            .bind(i64::from(enabled))
            .bind(id)
            .execute(self.conn())
            .await?;
        get(self.db(), id).await
    }

    /// Records a poll's end: when, and why it failed (empty: it did not).
    pub async fn record_intake_poll(&mut self, id: &str, error: &str) -> Result<()> {
        crate::sql::query(
            "UPDATE intake_sources SET last_polled_at = ?, last_error = ? WHERE id = ?",
        )
        .bind(self.now().millis())
        .bind(error)
        .bind(id)
        .execute(self.conn())
        .await?;
        Ok(())
    }

    /// Removes a source and the deliveries its webhook accepted; returns it.
    pub async fn delete_intake_source(&mut self, id: &str) -> Result<IntakeSource> {
        let source = get(self.db(), id).await?;
        crate::sql::query("DELETE FROM webhook_deliveries WHERE source_id = ?")
            .bind(id)
            .execute(self.conn())
            .await?;
        crate::sql::query("DELETE FROM intake_sources WHERE id = ?")
            .bind(id)
            .execute(self.conn())
            .await?;
        Ok(source)
    }

    /// Records a delivery a source's webhook accepted; false when its id was seen before
    /// (a replay), in which case nothing is written.
    pub async fn record_delivery(
        &mut self,
        source_id: &str,
        delivery_id: &str,
        event: &str,
        outcome: &str,
    ) -> Result<bool> {
        let done = crate::sql::query(
            "INSERT INTO webhook_deliveries (source_id, delivery_id, event, outcome, received_at) \
             VALUES (?, ?, ?, ?, ?) ON CONFLICT (source_id, delivery_id) DO NOTHING",
        )
        .bind(source_id)
        .bind(delivery_id)
        .bind(event)
        .bind(outcome)
        .bind(self.now().millis())
        .execute(self.conn())
        .await?;
        Ok(done.rows_affected() > 0)
    }

    /// Forgets one delivery (its action failed: the sender may deliver it again).
    pub async fn forget_delivery(&mut self, source_id: &str, delivery_id: &str) -> Result<()> {
        crate::sql::query("DELETE FROM webhook_deliveries WHERE source_id = ? AND delivery_id = ?")
            .bind(source_id)
            .bind(delivery_id)
            .execute(self.conn())
            .await?;
        Ok(())
    }

    /// Forgets the deliveries received before `before` (their ids can no longer be replayed
    /// against anything this old).
    pub async fn prune_deliveries(&mut self, before: Timestamp) -> Result<u64> {
        let done = crate::sql::query("DELETE FROM webhook_deliveries WHERE received_at < ?")
            .bind(before.millis())
            .execute(self.conn())
            .await?;
        Ok(done.rows_affected())
    }
}
