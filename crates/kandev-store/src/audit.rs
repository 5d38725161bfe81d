//! The audit log (issue 49): one row per write action someone did, read in Settings →
//! Activity. Rows are only added; `prune_audit` drops the oldest.

use kandev_domain::Timestamp;
use kandev_domain::account::AuditEntry;
use sqlx::FromRow;

use crate::sql::QueryBuilder;
use crate::{Result, Store, WriteTx};

#[derive(FromRow)]
struct AuditRow {
    id: String,
    at: i64,
    by_name: String,
    action: String,
    workspace_id: Option<String>,
    target: Option<String>,
}

impl From<AuditRow> for AuditEntry {
    fn from(r: AuditRow) -> AuditEntry {
        AuditEntry {
            id: r.id,
            at: Timestamp(r.at),
            by: r.by_name,
            action: r.action,
            workspace_id: r.workspace_id,
            target: r.target,
        }
    }
}

/// Which entries to read: all of them, or narrowed by any of these; newest first.
#[derive(Debug, Clone, Default)]
pub struct AuditFilter {
    /// Only these workspaces (`None`: every entry, server-wide ones too).
    pub workspaces: Option<Vec<String>>,
    pub by: Option<String>,
    /// An action name, or a prefix of one ending in `.` (`task.`).
    pub action: Option<String>,
    /// Entries after this one in the order (newest first, then by id): the last entry of the
    /// page before, as (time, id).
    pub after: Option<(Timestamp, String)>,
    pub limit: i64,
}

impl Store {
    /// Audit entries matching `filter`, newest first.
    pub async fn list_audit(&self, filter: &AuditFilter) -> Result<Vec<AuditEntry>> {
        let mut query = QueryBuilder::new(
            self.dialect(),
            "SELECT id, at, by_name, action, workspace_id, target FROM audit_log WHERE 1 = 1",
        );
        if let Some(workspaces) = &filter.workspaces {
            if workspaces.is_empty() {
                return Ok(vec![]);
            }
            query.push(" AND workspace_id IN (");
            for (i, id) in workspaces.iter().enumerate() {
                query.push(if i == 0 { "" } else { ", " }).push_bind(id.clone());
            }
            query.push(")");
        }
        if let Some(by) = &filter.by {
            query.push(" AND by_name = ").push_bind(by.clone());
        }
        match filter.action.as_deref() {
            Some(prefix) if prefix.ends_with('.') => {
                query.push(" AND substr(action, 1, ").push_bind(prefix.len() as i64);
                query.push(") = ").push_bind(prefix.to_owned());
            }
            Some(action) => {
                query.push(" AND action = ").push_bind(action.to_owned());
            }
            None => {}
        }
        if let Some((at, id)) = &filter.after {
            query.push(" AND (at < ").push_bind(at.millis());
            query.push(" OR (at = ").push_bind(at.millis());
            query.push(" AND id < ").push_bind(id.clone()).push("))");
        }
        query.push(" ORDER BY at DESC, id DESC LIMIT ").push_bind(filter.limit);
        let rows: Vec<AuditRow> = query.build_query_as().fetch_all(&self.read).await?;
        Ok(rows.into_iter().map(AuditEntry::from).collect())
    }
}

impl Store {
    /// Drops the entries recorded before `before`; answers how many went. One short
    /// transaction per thousand rows, so writers never wait for a whole pass.
    pub async fn prune_audit(&self, before: Timestamp) -> Result<u64> {
        let mut pruned = 0;
        loop {
            let mut tx = self.begin_write().await?;
            let done = crate::sql::query(
                "DELETE FROM audit_log WHERE id IN \
                 (SELECT id FROM audit_log WHERE at < ? ORDER BY at LIMIT 1000)",
            )
            .bind(before.millis())
            .execute(tx.conn())
            .await?;
            tx.commit().await?;
            pruned += done.rows_affected();
            if done.rows_affected() < 1000 {
                return Ok(pruned);
            }
            tokio::task::yield_now().await;
        }
    }
}

impl WriteTx {
    /// Records one write action.
    pub async fn insert_audit(
        &mut self,
        by: &str,
        action: &str,
        workspace_id: Option<&str>,
        target: Option<&str>,
    ) -> Result<()> {
        let (id, now) = (self.new_id(), self.now().millis());
        crate::sql::query(
            "INSERT INTO audit_log (id, at, by_name, action, workspace_id, target) \
             VALUES (?, ?, ?, ?, ?, ?)",
        )
        .bind(&id)
        .bind(now)
        .bind(by)
        .bind(action)
        .bind(workspace_id)
        .bind(target)
        .execute(self.conn())
        .await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 49: pages follow (time, id), so entries of one millisecond are neither skipped
    /// nor repeated across pages.
    #[tokio::test]
    async fn i49_pages_of_entries_in_one_millisecond_skip_and_repeat_none() {
        let store = Store::in_memory().await.unwrap();
        let mut tx = store.begin_write().await.unwrap();
        for n in 0..5 {
            tx.insert_audit("alice", "task.create", Some("w1"), Some(&format!("t{n}")))
                .await
                .unwrap();
        }
        tx.commit().await.unwrap();
        let mut seen = vec![];
        let mut after = None;
        loop {
            let page = AuditFilter { after: after.clone(), limit: 2, ..AuditFilter::default() };
            let entries = store.list_audit(&page).await.unwrap();
            seen.extend(entries.iter().map(|e| e.target.clone().unwrap()));
            match entries.last() {
                Some(last) if entries.len() == 2 => after = Some((last.at, last.id.clone())),
                _ => break,
            }
        }
        seen.sort();
        assert_eq!(seen, ["t0", "t1", "t2", "t3", "t4"]);
    }

    /// Issue 49: the audit log keeps what is younger than the retention and drops the rest.
    #[tokio::test]
    async fn i49_pruning_drops_only_entries_older_than_the_bound() {
        let store = Store::in_memory().await.unwrap();
        let mut tx = store.begin_write().await.unwrap();
        tx.insert_audit("alice", "task.create", Some("w1"), Some("t1")).await.unwrap();
        tx.commit().await.unwrap();
        let all = AuditFilter { limit: 10, ..AuditFilter::default() };
        let entry = store.list_audit(&all).await.unwrap().remove(0);
        assert_eq!(store.prune_audit(entry.at).await.unwrap(), 0, "as old as the bound: kept");
        assert_eq!(store.list_audit(&all).await.unwrap().len(), 1);
        assert_eq!(store.prune_audit(Timestamp(entry.at.millis() + 1)).await.unwrap(), 1);
        assert!(store.list_audit(&all).await.unwrap().is_empty());
    }
}
