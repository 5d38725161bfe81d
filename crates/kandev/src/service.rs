//! `kandev service install | uninstall | status`: Kandev as a systemd service (issue 43). A
//! user unit by default (`~/.config/systemd/user/kandev.service`), a system one with
//! `--system` (`/etc/systemd/system/kandev.service`, run as a named user).
//!
//! The unit runs this very binary (`kandev serve`) with the home, address and `PATH` of the
//! shell that installed it (an agent's command must be found as it is in that shell), is
//! restarted on failure, and stops only the server's process (`KillMode=process`): the local
//! runner outlives a restart, so the agents it holds are taken over by the restarted server.

use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};

/// The unit's file name.
const UNIT: &str = "kandev.service";

#[derive(Subcommand, Debug)]
pub enum ServiceCommand {
    /// Write the unit, then enable and start it with systemctl (unless --no-start).
    Install(InstallArgs),
    /// Stop and disable the service, and remove its unit.
    Uninstall(ScopeArgs),
    /// Where the unit is, and what systemd says of the service.
    Status(ScopeArgs),
}

#[derive(Args, Debug)]
pub struct ScopeArgs {
    /// A system service (/etc/systemd/system) instead of one of your user's.
    #[arg(long)]
    pub system: bool,
    /// Folder of the unit file instead of systemd's own (for packaging and tests): only the
    /// file is written or removed; systemctl is not run.
    #[arg(long)]
    pub unit_dir: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct InstallArgs {
    #[command(flatten)]
    pub scope: ScopeArgs,
    /// Data directory of the service. Default: $KANDEV_HOME, else ~/.kandev of the user it
    /// runs as.
    #[arg(long, env = "KANDEV_HOME")]
    pub home: Option<PathBuf>,
    /// Address the service listens on (anything but loopback needs a token, see `kandev serve
    /// --help`: pass it in an environment file you add to the unit).
    #[arg(long, default_value = crate::serve::DEFAULT_ADDR)]
    pub addr: std::net::SocketAddr,
    /// With --system: the user the service runs as. Default: the user who ran sudo, else the
    /// current one.
    #[arg(long, requires = "system")]
    pub user: Option<String>,
    /// Only write the unit; say how to start it.
    #[arg(long)]
    pub no_start: bool,
}

pub fn run(command: ServiceCommand) -> Result<()> {
    match command {
        ServiceCommand::Install(args) => install(&args),
        ServiceCommand::Uninstall(scope) => uninstall(&scope),
        ServiceCommand::Status(scope) => status(&scope),
    }
}

/// The unit file's path for `scope`.
fn unit_path(scope: &ScopeArgs) -> Result<PathBuf> {
    if let Some(dir) = &scope.unit_dir {
        return Ok(dir.join(UNIT));
    }
    if scope.system {
        return Ok(PathBuf::from("/etc/systemd/system").join(UNIT));
    }
    let config = match std::env::var_os("XDG_CONFIG_HOME").filter(|v| !v.is_empty()) {
        Some(config) => PathBuf::from(config),
        None => {
            let home = std::env::var_os("HOME").context("HOME is not set: pass --unit-dir")?;
            PathBuf::from(home).join(".config")
        }
    };
    Ok(config.join("systemd/user").join(UNIT))
}

/// The environment file the unit reads (it may not exist): where settings that are secrets
/// go (`KANDEV_TOKEN`, `KANDEV_DATABASE_URL`), never into the unit, which others may read.
fn env_file(scope: &ScopeArgs) -> (&'static str, String) {
    if scope.system {
        ("/etc/kandev/env", "/etc/kandev/env".to_owned())
    } else {
        let shown = std::env::var_os("HOME")
            .map(|h| format!("{}/.config/kandev/env", PathBuf::from(h).display()))
            .unwrap_or_else(|| "~/.config/kandev/env".into());
        ("%h/.config/kandev/env", shown)
    }
}

/// `systemctl [--user]`, to be given its arguments.
#[expect(
    clippy::disallowed_methods,
    reason = "a command the user runs in the foreground, not a process of the server's"
)]
fn systemctl_command(scope: &ScopeArgs) -> Command {
    let mut command = Command::new("systemctl");
    if !scope.system {
        command.arg("--user");
    }
    command
}

/// `systemctl [--user] args…`: `Ok` when it succeeded, else what it said.
fn systemctl(scope: &ScopeArgs, args: &[&str]) -> std::result::Result<(), String> {
    let output = systemctl_command(scope)
        .args(args)
        .output()
        .map_err(|e| format!("cannot run systemctl ({e}); is systemd installed?"))?;
    if output.status.success() {
        return Ok(());
    }
    let said = String::from_utf8_lossy(&output.stderr);
    Err(said.lines().rfind(|l| !l.trim().is_empty()).unwrap_or("no message").trim().to_owned())
}

/// How `systemctl` is written for `scope` in the lines Kandev prints.
fn systemctl_line(scope: &ScopeArgs) -> &'static str {
    if scope.system { "sudo systemctl" } else { "systemctl --user" }
}

fn install(args: &InstallArgs) -> Result<()> {
    let scope = &args.scope;
    let path = unit_path(scope)?;
    let unit = unit_text(args)?;
    let dir = path.parent().context("the unit's path has no folder")?;
    std::fs::create_dir_all(dir).with_context(|| format!("cannot make {}", dir.display()))?;
    // Written beside, then renamed over: a unit is never seen half written.
    let partial = dir.join(format!(".{UNIT}.new"));
    std::fs::write(&partial, unit)
        .with_context(|| format!("cannot write {}", partial.display()))?;
    std::fs::rename(&partial, &path).with_context(|| format!("cannot write {}", path.display()))?;
    println!("Wrote {}.", path.display());
    let (_, env) = env_file(scope);
    println!(
        "Settings that are secrets (KANDEV_TOKEN, KANDEV_DATABASE_URL) go in {env}: one NAME=value a line, mode 600."
    );
    for name in ["KANDEV_TOKEN", "KANDEV_DATABASE_URL"] {
        if std::env::var_os(name).is_some() {
            eprintln!("warning: {name} is set here but not copied into the unit: put it in {env}");
        }
    }
    if !args.addr.ip().is_loopback() {
        eprintln!(
            "warning: {} is not a loopback address: the server starts only with a token \
             (KANDEV_TOKEN in {env}) or users (kandev user add)",
            args.addr
        );
    }
    let ctl = systemctl_line(scope);
    if args.no_start || scope.unit_dir.is_some() {
        println!("Start it with: {ctl} daemon-reload && {ctl} enable --now {UNIT}");
        return Ok(());
    }
    let started = systemctl(scope, &["daemon-reload"])
        .and_then(|()| systemctl(scope, &["enable", "--now", UNIT]));
    if let Err(why) = started {
        bail!(
            "the unit is written but systemd did not start it: {why}; fix that, then run: {ctl} \
             daemon-reload && {ctl} enable --now {UNIT}"
        );
    }
    println!("Started and enabled {UNIT}; see `kandev service status`.");
    if !scope.system {
        println!(
            "A user service stops when you log out; to keep it running: loginctl enable-linger"
        );
    }
    Ok(())
}

fn uninstall(scope: &ScopeArgs) -> Result<()> {
    let path = unit_path(scope)?;
    if !path.exists() {
        println!("No unit at {}: nothing to remove.", path.display());
        return Ok(());
    }
    // A systemd that cannot be reached (no session bus) does not keep the unit on disk; a
    // unit written elsewhere (--unit-dir) is not systemd's to stop.
    let managed = scope.unit_dir.is_none();
    if managed && let Err(why) = systemctl(scope, &["disable", "--now", UNIT]) {
        eprintln!("warning: systemctl could not stop and disable {UNIT}: {why}");
    }
    std::fs::remove_file(&path).with_context(|| format!("cannot remove {}", path.display()))?;
    if managed && let Err(why) = systemctl(scope, &["daemon-reload"]) {
        eprintln!("warning: systemctl daemon-reload failed: {why}");
    }
    println!("Removed {}. The data in the service's home is kept.", path.display());
    Ok(())
}

fn status(scope: &ScopeArgs) -> Result<()> {
    let path = unit_path(scope)?;
    if !path.exists() {
        bail!("no unit at {}: install one with `kandev service install`", path.display());
    }
    println!("Unit: {}", path.display());
    if scope.unit_dir.is_some() {
        return Ok(());
    }
    let state = systemctl_command(scope)
        .args(["status", "--no-pager", UNIT])
        .status()
        .context("cannot run systemctl; is systemd installed?")?;
    // systemctl's status codes: 3 is "not running", anything else but 0 a failure to tell.
    match state.code() {
        Some(0) => Ok(()),
        Some(3) => {
            bail!("{UNIT} is not running: start it with {} start {UNIT}", systemctl_line(scope))
        }
        _ => bail!(
            "systemctl could not say how {UNIT} is (see above); for a user service, run this in \
             your login session (systemd needs XDG_RUNTIME_DIR), or enable lingering: \
             loginctl enable-linger"
        ),
    }
}

/// The user a system service runs as, and that user's home folder.
fn service_user(args: &InstallArgs) -> Result<(String, PathBuf)> {
    use nix::unistd::{Uid, User};
    let found = match &args.user {
        Some(name) => User::from_name(name)?,
        None => match std::env::var("SUDO_USER").ok().filter(|u| !u.is_empty()) {
            Some(name) => User::from_name(&name)?,
            None => User::from_uid(Uid::current())?,
        },
    };
    let user = found.context("no such user on this machine: name one that exists with --user")?;
    if !user.dir.is_dir() {
        bail!(
            "{}'s home {} does not exist: the service keeps its data there unless --home says \
             otherwise; make it, or name another user",
            user.name,
            user.dir.display()
        );
    }
    Ok((user.name, user.dir))
}

/// The unit's text.
fn unit_text(args: &InstallArgs) -> Result<String> {
    let exe = std::env::current_exe().context("cannot find this kandev binary")?;
    let exe = exe.canonicalize().unwrap_or(exe);
    let (user, user_home) = if args.scope.system {
        let (name, home) = service_user(args)?;
        (Some(name), home)
    } else {
        let home = std::env::var_os("HOME").context("HOME is not set: pass --home")?;
        (None, PathBuf::from(home))
    };
    let home = args.home.clone().unwrap_or_else(|| user_home.join(".kandev"));
    let home = if home.is_absolute() {
        home
    } else {
        std::env::current_dir().context("cannot read the current folder")?.join(home)
    };
    let path = std::env::var("PATH").unwrap_or_else(|_| "/usr/local/bin:/usr/bin:/bin".into());
    // Each folder once, in the installing shell's order.
    let mut folders: Vec<&str> = vec![];
    for folder in path.split(':').filter(|f| !f.is_empty()) {
        if !folders.contains(&folder) {
            folders.push(folder);
        }
    }
    let path = folders.join(":");
    let mut unit = String::new();
    unit.push_str(
        "# Written by `kandev service install`; `kandev service uninstall` removes it.\n",
    );
    unit.push_str("[Unit]\nDescription=Kandev, a control plane for AI coding agents\n");
    if args.scope.system {
        // A user manager has no such target: the ordering means nothing there.
        unit.push_str("After=network-online.target\nWants=network-online.target\n");
    }
    unit.push_str("\n[Service]\n");
    unit.push_str("Type=simple\n");
    if let Some(user) = &user {
        unit.push_str(&format!("User={}\n", quote(user)));
    }
    let exec = [exe.display().to_string(), "serve".into(), "--addr".into(), args.addr.to_string()];
    let exec: Vec<String> = exec.iter().map(|a| quote(a)).collect();
    unit.push_str(&format!("ExecStart={}\n", exec.join(" ")));
    unit.push_str(&format!("Environment={}\n", quote(&format!("KANDEV_HOME={}", home.display()))));
    unit.push_str(&format!("Environment={}\n", quote(&format!("PATH={path}"))));
    let (env_file, _) = env_file(&args.scope);
    // `-`: a missing file is fine. `%h` is the user's home (a specifier, not escaped).
    unit.push_str(&format!("EnvironmentFile=-{env_file}\n"));
    unit.push_str(&format!("WorkingDirectory={}\n", quote(&user_home.display().to_string())));
    // Restarted when it fails, not when it is stopped; a crash loop is bounded by systemd's
    // start limit. Only the server is signalled: the runner (its own process group, same
    // cgroup) keeps the agents for the restarted server to take over.
    unit.push_str("Restart=on-failure\nRestartSec=2\nKillMode=process\nTimeoutStopSec=30\n");
    let target = if args.scope.system { "multi-user.target" } else { "default.target" };
    unit.push_str(&format!("\n[Install]\nWantedBy={target}\n"));
    Ok(unit)
}

/// A word of a unit file: quoted when it holds a space, quote or backslash; `%` (a systemd
/// specifier) doubled.
fn quote(word: &str) -> String {
    let word = word.replace('%', "%%");
    if word.chars().any(|c| c.is_whitespace() || c == '"' || c == '\\' || c == '\'') {
        format!("\"{}\"", word.replace('\\', "\\\\").replace('"', "\\\""))
    } else {
        word
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn i43_s3_unit_words_are_quoted_and_specifiers_escaped() {
        assert_eq!(quote("/usr/bin/kandev"), "/usr/bin/kandev");
        assert_eq!(quote("/home/a b/.kandev"), "\"/home/a b/.kandev\"");
        assert_eq!(quote("50%"), "50%%");
        assert_eq!(quote("a\"b"), "\"a\\\"b\"");
    }

    #[test]
    fn i43_s3_a_user_unit_runs_this_binary_with_the_home_and_restarts_on_failure() {
        let args = InstallArgs {
            scope: ScopeArgs { system: false, unit_dir: None },
            home: Some("/srv/kandev home".into()),
            addr: "127.0.0.1:38429".parse().unwrap(),
            user: None,
            no_start: true,
        };
        let unit = unit_text(&args).unwrap();
        let exe = std::env::current_exe().unwrap().canonicalize().unwrap();
        assert!(unit.contains(&format!("ExecStart={} ", exe.display())), "{unit}");
        assert!(unit.contains("serve --addr 127.0.0.1:38429\n"), "{unit}");
        assert!(unit.contains("Environment=\"KANDEV_HOME=/srv/kandev home\"\n"), "{unit}");
        assert!(unit.contains("Restart=on-failure\n") && unit.contains("KillMode=process\n"));
        assert!(unit.contains("WantedBy=default.target\n") && !unit.contains("User="), "{unit}");
    }
}
