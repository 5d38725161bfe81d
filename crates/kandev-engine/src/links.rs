//! The live links to SSH executors' hosts, by executor id, with the settings each was made
//! with (`sites.rs` makes and uses them; kept apart so `inner` imports nothing of `sites`).

use std::collections::HashMap;
use std::sync::Arc;

use kandev_domain::executor::SshSettings;
use kandev_runtime::ssh_link::SshLink;

#[derive(Default)]
pub(crate) struct Links {
    links: tokio::sync::Mutex<HashMap<String, (SshSettings, Arc<SshLink>)>>,
}

impl Links {
    pub async fn lock(
        &self,
    ) -> tokio::sync::MutexGuard<'_, HashMap<String, (SshSettings, Arc<SshLink>)>> {
        self.links.lock().await
    }
}
