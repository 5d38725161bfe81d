//! Process groups: the one supervisor of every child this crate starts ([`ProcessGroup`]:
//! agents, git commands, setup scripts), and signalling groups recorded by a previous run.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};

use nix::errno::Errno;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::{Pid, getpgrp};
use tokio::process::{Child, Command};

use crate::RuntimeError;

/// The process group a child leads, owned by one supervisor.
///
/// [`ProcessGroup::spawn`] starts the child as the leader of a new group
/// (`process_group(0)`), so signals reach everything it starts (`npx` wrappers, hooks,
/// background jobs of a script). The group is signalled as a whole, gets `SIGKILL` when its
/// owner drops it (a stopped agent, a cancelled git command), and is never signalled again
/// once it was observed empty (`ESRCH`: the pgid may be recycled from then on) or released.
#[derive(Debug)]
pub(crate) struct ProcessGroup {
    pgid: i32,
    /// Set once the group was observed empty or its owner let it go.
    retired: AtomicBool,
}

impl ProcessGroup {
    /// Starts `command` as the leader of a new process group. `kill_on_drop` is set on the
    /// child as a backstop for the leader alone; the group kill is this type's drop.
    pub(crate) fn spawn(command: &mut Command) -> io::Result<(Child, ProcessGroup)> {
        let child = command.process_group(0).kill_on_drop(true).spawn()?;
        let Some(pgid) = child.id().and_then(|id| i32::try_from(id).ok()) else {
            // Not expected for a child that was just started; `kill_on_drop` takes it down.
            return Err(io::Error::other("spawned process has no pid"));
        };
        Ok((child, ProcessGroup { pgid, retired: AtomicBool::new(false) }))
    }

    /// The group's id: the leader's pid.
    pub(crate) fn pgid(&self) -> i32 {
        self.pgid
    }

    /// Sends `signal` to the group unless it was observed empty or released.
    pub(crate) fn signal(&self, signal: Signal) {
        if self.retired.load(Ordering::Acquire) {
            return;
        }
        match signal_group(self.pgid, Some(signal)) {
            Ok(Delivery::Delivered) => {}
            Ok(Delivery::NoSuchGroup) => self.retired.store(true, Ordering::Release),
            Err(e) => {
                tracing::warn!(pgid = self.pgid, error = %e, "signalling a process group failed")
            }
        }
    }

    /// Sends `SIGKILL` to the group.
    pub(crate) fn kill(&self) {
        self.signal(Signal::SIGKILL);
    }

    /// Waits, up to `bound`, until no process of the group is alive (zombies waiting to be
    /// reaped count as gone: they run nothing). A signal is delivered asynchronously, so right
    /// after `SIGKILL` a member may still be running for a moment; a stop that answers only
    /// after this leaves no process behind (issue 3, acceptance 5). Returns whether the
    /// group emptied in time.
    pub(crate) async fn wait_empty(&self, bound: std::time::Duration) -> bool {
        let pgid = self.pgid;
        let deadline = tokio::time::Instant::now() + bound;
        loop {
            let alive = tokio::task::spawn_blocking(move || group_has_live_member(pgid)).await;
            if !alive.unwrap_or(true) {
                self.retired.store(true, Ordering::Release);
                return true;
            }
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            // Polling: the kernel offers no wait on another process's group from here.
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    }

    /// Stops supervising: the group is never signalled again, not even on drop. For a
    /// helper whose leader was reaped normally (what its script left running may stay).
    pub(crate) fn release(self) {
        self.retired.store(true, Ordering::Release);
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Whether the group `pgid` has a member that is not a zombie. On Linux `/proc` tells a
/// zombie from a live process; elsewhere any member (`kill(-pgid, 0)` succeeds) counts.
pub fn group_has_live_member(pgid: i32) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return group_alive(pgid);
    };
    if !group_alive(pgid) {
        return false;
    }
    entries.flatten().any(|entry| {
        let is_pid =
            entry.file_name().to_str().is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()));
        is_pid && is_live_member(&entry.path().join("stat"), pgid)
    })
}

/// Reads `/proc/<pid>/stat`: `pid (comm) state ppid pgrp ...`; `comm` may hold anything,
/// so the fields are taken after its closing parenthesis. A process gone meanwhile is not
/// a member.
fn is_live_member(stat: &std::path::Path, pgid: i32) -> bool {
    let Ok(text) = std::fs::read_to_string(stat) else {
        return false;
    };
    let Some((_, rest)) = text.rsplit_once(')') else {
        return false;
    };
    let mut fields = rest.split_whitespace();
    let state = fields.next();
    let pgrp = fields.nth(1).and_then(|p| p.parse::<i32>().ok());
    pgrp == Some(pgid) && state != Some("Z") && state != Some("X")
}

/// Live (non-zombie) processes of the session `sid`, with their process groups. A shell
/// with job control puts each job in a group of its own, all within its session, so a
/// terminal's shell is supervised by session rather than by group. Empty where `/proc` is
/// not available.
pub fn session_members(sid: i32) -> Vec<(i32, i32)> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| {
            let pid = entry.file_name().to_str()?.parse::<i32>().ok()?;
            let text = std::fs::read_to_string(entry.path().join("stat")).ok()?;
            let (_, rest) = text.rsplit_once(')')?;
            let mut fields = rest.split_whitespace();
            let state = fields.next()?;
            let pgrp = fields.nth(1)?.parse::<i32>().ok()?;
            let session = fields.next()?.parse::<i32>().ok()?;
            (session == sid && state != "Z" && state != "X").then_some((pid, pgrp))
        })
        .collect()
}

/// Sends `SIGKILL` to every process of the session `sid` and to their groups: a terminal's
/// shell, its jobs and what they left running in the background. Refuses ids `<= 1` and the
/// server's own session (and, through [`check_pgid`], its own group). What left the
/// session with `setsid` is not seen.
pub fn kill_session(sid: i32) -> Result<(), RuntimeError> {
    if sid <= 1 {
        return Err(RuntimeError::ForbiddenProcessGroup {
            pgid: sid,
            reason: "only sessions above 1 may be signalled",
        });
    }
    if nix::unistd::getsid(None).is_ok_and(|own| own.as_raw() == sid) {
        return Err(RuntimeError::ForbiddenProcessGroup {
            pgid: sid,
            reason: "it is the server's own session",
        });
    }
    // The leader's group first (the shell), then every other group of the session.
    let _ = signal_group(sid, Some(Signal::SIGKILL));
    for (pid, pgrp) in session_members(sid) {
        if pgrp != sid {
            let _ = signal_group(pgrp, Some(Signal::SIGKILL));
        }
        if pid > 1 {
            let _ = nix::sys::signal::kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
    }
    Ok(())
}

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
