//! The live links to SSH executors' hosts, by executor id, and to task containers, by
//! container name, with the settings each was made with (`sites.rs` and `containers.rs` make
//! and use them; kept apart so `inner` imports nothing of either).
//! One slot per executor with its own lock: connecting to one host (install, handshake: up to
//! tens of seconds when it is down) never holds up work on another, and the map's own lock is
//! held only to find a slot.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use kandev_domain::executor::{ContainerSettings, SshSettings};
use kandev_runtime::runner::RunnerClient;

/// The settings a link was made with: a link made with others is replaced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum MadeWith {
    Ssh(SshSettings),
    Container(ContainerSettings),
}

/// An executor's link, or the last failure to make one.
#[derive(Default)]
pub(crate) struct Slot {
    pub link: Option<(MadeWith, RunnerClient)>,
    /// When connecting with these settings failed, and why (answered again for a few seconds
    /// instead of every request waiting for its own attempt on a host that is down).
    pub failed: Option<(SshSettings, Instant, String)>,
}

#[derive(Default)]
pub(crate) struct Links {
    slots: Mutex<HashMap<String, Arc<tokio::sync::Mutex<Slot>>>>,
}

impl Links {
    /// The slot of `executor_id` (made empty on first use).
    pub fn slot(&self, executor_id: &str) -> Arc<tokio::sync::Mutex<Slot>> {
        self.slots
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(executor_id.to_owned())
            .or_default()
            .clone()
    }

    /// Empties the map and returns every link made (the server shuts down: each is closed
    /// and awaited, `Engine::shutdown`).
    pub fn take_all(&self) -> Vec<RunnerClient> {
        let slots: Vec<_> = {
            let mut slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
            slots.drain().map(|(_, slot)| slot).collect()
        };
        let mut links = Vec::new();
        for slot in slots {
            // A slot held is connecting (up to tens of seconds): its old link, if any, is
            // dropped with it rather than awaited.
            if let Ok(mut slot) = slot.try_lock()
                && let Some((_, link)) = slot.link.take()
            {
                links.push(link);
            }
        }
        links
    }
}
