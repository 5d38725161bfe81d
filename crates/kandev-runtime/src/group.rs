//! Signalling whole process groups, including groups recorded by a previous server run.

use nix::errno::Errno;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::{Pid, getpgrp};

use crate::RuntimeError;

/// Outcome of signalling a group that passed the safety checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Delivery {
    /// At least one process of the group received the signal.
    Delivered,
    /// The group has no members (`ESRCH`).
    NoSuchGroup,
}

/// Checks that `pgid` may be signalled at all: never 0, 1, negative ids (which would
/// address our own group, init, or every process), and never the server's own group.
fn check_pgid(pgid: i32) -> Result<Pid, RuntimeError> {
    if pgid <= 1 {
        return Err(RuntimeError::ForbiddenProcessGroup {
            pgid,
            reason: "only process groups above 1 may be signalled",
        });
    }
    let pgid = Pid::from_raw(pgid);
    if pgid == getpgrp() {
        return Err(RuntimeError::ForbiddenProcessGroup {
            pgid: pgid.as_raw(),
            reason: "it is the server's own process group",
        });
    }
    Ok(pgid)
}

/// Sends `signal` (or only checks for existence with `None`) to the group `pgid`.
pub(crate) fn signal_group(pgid: i32, signal: Option<Signal>) -> Result<Delivery, RuntimeError> {
    let target = check_pgid(pgid)?;
    match killpg(target, signal) {
        Ok(()) => Ok(Delivery::Delivered),
        Err(Errno::ESRCH) => Ok(Delivery::NoSuchGroup),
        Err(source) => Err(RuntimeError::Signal {
            pgid,
            signal: signal.map_or("signal 0", Signal::as_str),
            source,
        }),
    }
}

/// Whether the process group `pgid` still has members (zombies included).
///
/// Meant for startup reconciliation: a pgid recorded by a previous run is checked before it
/// is killed or re-adopted. Returns `false` for ids that must never be signalled (`<= 1`,
/// or the server's own group). A group that exists but belongs to another user counts as
/// alive.
pub fn group_alive(pgid: i32) -> bool {
    match signal_group(pgid, None) {
        Ok(Delivery::Delivered) => true,
        Ok(Delivery::NoSuchGroup) => false,
        Err(RuntimeError::Signal { source: Errno::EPERM, .. }) => true,
        Err(_) => false,
    }
}

/// Sends `SIGKILL` to the process group `pgid`, e.g. one recorded by a previous server run.
///
/// A group that no longer exists is not an error. Ids `<= 1` and the server's own group are
/// refused with [`RuntimeError::ForbiddenProcessGroup`].
pub fn kill_group(pgid: i32) -> Result<(), RuntimeError> {
    match signal_group(pgid, Some(Signal::SIGKILL))? {
        Delivery::Delivered => tracing::debug!(pgid, "sent sigkill to process group"),
        Delivery::NoSuchGroup => tracing::debug!(pgid, "process group already gone"),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forbidden_groups_are_refused() {
        for pgid in [-5, 0, 1, getpgrp().as_raw()] {
            assert!(
                matches!(kill_group(pgid), Err(RuntimeError::ForbiddenProcessGroup { .. })),
                "pgid {pgid} must be refused"
            );
            assert!(!group_alive(pgid), "pgid {pgid} must not be reported alive");
        }
    }
}
