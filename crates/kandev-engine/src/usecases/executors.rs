//! Executor use cases (issue 20): named executors and the one each repository chose. The
//! settings arrive checked (`SshSettings::validated`, in the handler's decoding).

use kandev_domain::executor::{Executor, ExecutorKind};

use crate::engine::Engine;
use crate::error::{EngineError, Result};

impl Engine {
    /// `executor.create`.
    /// `allowed_secrets`: the secrets (issue 50) its host may receive, by name.
    pub async fn create_executor(
        &self,
        name: &str,
        kind: &ExecutorKind,
        allowed_secrets: Option<&[String]>,
    ) -> Result<Executor> {
        let mut tx = self.inner.store.begin_write().await?;
        let mut executor = tx.insert_executor(name, kind).await?;
        if let Some(names) = allowed_secrets {
            executor = tx.set_executor_secrets(&executor.id, &secret_names(names)?).await?;
        }
        tx.commit().await?;
        Ok(executor)
    }

    /// `executor.update`. New settings without a new kind keep the executor an ssh one:
    /// a local executor is refused them.
    pub async fn update_executor(
        &self,
        id: &str,
        name: Option<&str>,
        kind: Option<&ExecutorKind>,
        kind_given: bool,
        allowed_secrets: Option<&[String]>,
    ) -> Result<Executor> {
        if !kind_given && kind.is_some() {
            let current = self.inner.store.get_executor(id).await?;
            if matches!(current.kind, ExecutorKind::Local) {
                return Err(EngineError::Validation(
                    "ssh settings need kind ssh; send kind: \"ssh\" to change a local executor"
                        .into(),
                ));
            }
        }
        let mut tx = self.inner.store.begin_write().await?;
        let mut executor = tx.update_executor(id, name, kind).await?;
        if let Some(names) = allowed_secrets {
            executor = tx.set_executor_secrets(id, &secret_names(names)?).await?;
        }
        tx.commit().await?;
        Ok(executor)
    }

    /// `executor.delete`.
    pub async fn delete_executor(&self, id: &str) -> Result<()> {
        let mut tx = self.inner.store.begin_write().await?;
        tx.delete_executor(id).await?;
        tx.commit().await?;
        Ok(())
    }

    /// `repository.executor.set`: the repository's executor (`None`: this host); returns it.
    pub async fn set_repository_executor(
        &self,
        repository_id: &str,
        executor_id: Option<&str>,
    ) -> Result<Option<Executor>> {
        let mut tx = self.inner.store.begin_write().await?;
        let executor = tx.set_repository_executor(repository_id, executor_id).await?;
        tx.commit().await?;
        Ok(executor)
    }
}

/// Checked secret names, sorted, each once.
fn secret_names(names: &[String]) -> Result<Vec<String>> {
    kandev_domain::secret::secret_names(names)
        .map_err(|e| EngineError::Validation(format!("allowed secrets: {}", e.problem)))
}
