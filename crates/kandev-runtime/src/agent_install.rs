//! Agents installed by Kandev (issue 51): each exact version of an agent's npm package in a
//! folder of its own, `<root>/<kind>/<version>`, installed with this machine's `npm` (its own
//! registry settings: `~/.npmrc`, `npm_config_registry`). A version is pinned: no range, no
//! tag, so what a profile runs never changes under it; an update is an install of another
//! version. An install runs in a hidden folder beside the others and is renamed into place
//! only once complete, so a version that is listed is whole: an interrupted install leaves a
//! hidden folder that the next install of that version removes.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::process::Command;
use tokio::sync::Mutex;

use crate::group::ProcessGroup;
use crate::program::on_path;

/// How long one `npm install` may take (the largest agents download ~200 MB).
const INSTALL_TIMEOUT: Duration = Duration::from_secs(600);
/// How long asking the registry for a package's versions may take.
const VIEW_TIMEOUT: Duration = Duration::from_secs(60);
/// Most versions `available` lists.
pub const MAX_AVAILABLE: usize = 50;
/// Most lines of npm's output an error quotes.
const OUTPUT_LINES: usize = 8;
/// Hidden folders: an install in progress, a removal in progress.
const PARTIAL: &str = ".partial-";
const REMOVING: &str = ".removing-";

/// Why an install, a removal or a look at the registry failed. Each says what to do.
#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    #[error(
        "npm is not installed on this machine: install Node.js 20 or later with npm (e.g. apt-get install nodejs npm)"
    )]
    NpmMissing,
    #[error("version {0:?} is not an exact version: give one like 1.2.3 (no range or tag)")]
    BadVersion(String),
    #[error("{package}@{version} is not installed by Kandev")]
    NotInstalled { package: String, version: String },
    #[error("the registry has no version {version} of {package}: pick one it offers")]
    NoSuchVersion { package: String, version: String },
    #[error("npm could not {what}: {output}")]
    Npm { what: String, output: String },
    #[error(
        "npm could not {what} within {} s: check that its registry (npm_config_registry, ~/.npmrc) can be reached from this machine, then try again",
        .timeout.as_secs()
    )]
    TimedOut { what: String, timeout: Duration },
    #[error("{what}: {source}")]
    Io { what: String, source: std::io::Error },
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> InstallError {
    let what = what.into();
    move |source| InstallError::Io { what, source }
}

/// An agent package: the kind's folder name, the npm package and the command it installs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentPackage {
    pub kind: String,
    pub package: String,
    pub program: String,
}

/// The versions a registry offers: newest first (at most [`MAX_AVAILABLE`]), and its
/// `latest` tag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Available {
    pub versions: Vec<String>,
    pub latest: Option<String>,
}

/// A finished install: the command's path, and whether the version was there already.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Installed {
    pub program: PathBuf,
    pub already: bool,
}

/// The folder of Kandev's agent installs. Installs and removals run one at a time.
#[derive(Debug)]
pub struct AgentPrefix {
    root: PathBuf,
    busy: Mutex<()>,
}

/// An exact version (`1.2.3`, `1.2.3-beta.1`), or `BadVersion`; its text is a safe folder
/// name (digits, letters, dots, dashes, plus).
pub fn exact_version(version: &str) -> Result<semver::Version, InstallError> {
    semver::Version::parse(version.trim())
        .ok()
        .filter(|v| v.to_string() == version.trim())
        .ok_or_else(|| InstallError::BadVersion(version.to_owned()))
}

impl AgentPrefix {
    pub fn new(root: impl Into<PathBuf>) -> AgentPrefix {
        AgentPrefix { root: root.into(), busy: Mutex::new(()) }
    }

    /// The prefix of a Kandev home: `<home>/agents`.
    pub fn in_home(home: &Path) -> AgentPrefix {
        AgentPrefix::new(home.join("agents"))
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    fn kind_dir(&self, agent: &AgentPackage) -> PathBuf {
        self.root.join(&agent.kind)
    }

    /// Where `version`'s command is (whether or not it is installed).
    pub fn program(&self, agent: &AgentPackage, version: &str) -> PathBuf {
        self.kind_dir(agent).join(version).join("node_modules/.bin").join(&agent.program)
    }

    /// The versions installed, newest first.
    pub fn installed(&self, agent: &AgentPackage) -> Vec<String> {
        let Ok(entries) = std::fs::read_dir(self.kind_dir(agent)) else { return vec![] };
        let mut versions: Vec<semver::Version> = entries
            .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
            .filter_map(|name| exact_version(&name).ok())
            .filter(|version| self.program(agent, &version.to_string()).is_file())
            .collect();
        versions.sort_by(|a, b| b.cmp(a));
        versions.iter().map(ToString::to_string).collect()
    }

    /// Installs `version` of the agent (nothing to do when it is there); npm runs with `env`
    /// added to this process's environment (a server's `npm_config_*` on a build host).
    pub async fn install(
        &self,
        agent: &AgentPackage,
        version: &str,
        env: &[(String, String)],
    ) -> Result<Installed, InstallError> {
        let version = exact_version(version)?.to_string();
        let _busy = self.busy.lock().await;
        let program = self.program(agent, &version);
        if program.is_file() {
            return Ok(Installed { program, already: true });
        }
        if !on_path("npm") {
            return Err(InstallError::NpmMissing);
        }
        let kind_dir = self.kind_dir(agent);
        remove_hidden(&kind_dir, &format!("{PARTIAL}{version}-"));
        let partial = kind_dir.join(format!("{PARTIAL}{version}-{}", std::process::id()));
        std::fs::create_dir_all(&partial)
            .map_err(io(format!("cannot create {}", partial.display())))?;
        let installed = self.install_into(&partial, agent, &version, env).await;
        if let Err(err) = installed {
            let _ = std::fs::remove_dir_all(&partial);
            return Err(err);
        }
        let dir = kind_dir.join(&version);
        std::fs::rename(&partial, &dir)
            .map_err(io(format!("cannot move the install to {}", dir.display())))?;
        tracing::info!(package = %agent.package, %version, dir = %dir.display(), "installed an agent");
        Ok(Installed { program, already: false })
    }

    async fn install_into(
        &self,
        dir: &Path,
        agent: &AgentPackage,
        version: &str,
        env: &[(String, String)],
    ) -> Result<(), InstallError> {
        let manifest = r#"{"name": "kandev-agent", "private": true}"#;
        std::fs::write(dir.join("package.json"), manifest)
            .map_err(io("cannot write package.json"))?;
        let spec = format!("{}@{version}", agent.package);
        let what = format!("install {spec}");
        let prefix = dir.display().to_string();
        let args = ["install", "--prefix", &prefix, "--save-exact", "--no-audit", "--no-fund"];
        let args: Vec<&str> = args.into_iter().chain(["--loglevel=error", &spec]).collect();
        match npm(&args, &what, INSTALL_TIMEOUT, env).await {
            Err(InstallError::Npm { output, .. })
                if output.contains("ETARGET") || output.contains("E404") =>
            {
                let (package, version) = (agent.package.clone(), version.to_owned());
                return Err(InstallError::NoSuchVersion { package, version });
            }
            other => other?,
        };
        let manifest = dir.join("node_modules").join(&agent.package).join("package.json");
        let got = std::fs::read_to_string(&manifest).ok().and_then(|text| {
            let value: serde_json::Value = serde_json::from_str(&text).ok()?;
            value["version"].as_str().map(str::to_owned)
        });
        if got.as_deref() != Some(version) {
            let output =
                format!("the registry gave version {} instead", got.as_deref().unwrap_or("(none)"));
            return Err(InstallError::Npm { what, output });
        }
        let program = dir.join("node_modules/.bin").join(&agent.program);
        if !program.is_file() {
            let output = format!("the package has no `{}` command", agent.program);
            return Err(InstallError::Npm { what, output });
        }
        Ok(())
    }

    /// Removes an installed version.
    pub async fn uninstall(&self, agent: &AgentPackage, version: &str) -> Result<(), InstallError> {
        let version = exact_version(version)?.to_string();
        let _busy = self.busy.lock().await;
        let kind_dir = self.kind_dir(agent);
        let dir = kind_dir.join(&version);
        if !dir.is_dir() {
            let package = agent.package.clone();
            return Err(InstallError::NotInstalled { package, version });
        }
        // Renamed first, so a removal cut short never leaves a half version listed.
        let doomed = kind_dir.join(format!("{REMOVING}{version}-{}", std::process::id()));
        std::fs::rename(&dir, &doomed).map_err(io(format!("cannot remove {}", dir.display())))?;
        std::fs::remove_dir_all(&doomed)
            .map_err(io(format!("cannot remove {}", doomed.display())))?;
        remove_hidden(&kind_dir, &format!("{REMOVING}{version}-"));
        Ok(())
    }
}

/// The versions of `package` the registry offers.
pub async fn available(package: &str) -> Result<Available, InstallError> {
    if !on_path("npm") {
        return Err(InstallError::NpmMissing);
    }
    let what = format!("get the versions of {package} from its registry");
    let args = ["view", package, "versions", "dist-tags", "--json"];
    let out = npm(&args, &what, VIEW_TIMEOUT, &[]).await?;
    parse_view(&out)
        .ok_or_else(|| InstallError::Npm { what, output: "an answer it could not read".into() })
}

/// `npm view <package> versions dist-tags --json`: `versions` is a list, or one string when
/// the package has a single version.
fn parse_view(out: &str) -> Option<Available> {
    let value: serde_json::Value = serde_json::from_str(out).ok()?;
    let listed = match &value["versions"] {
        serde_json::Value::Array(items) => items.iter().filter_map(|v| v.as_str()).collect(),
        serde_json::Value::String(one) => vec![one.as_str()],
        _ => return None,
    };
    let mut versions: Vec<semver::Version> =
        listed.into_iter().filter_map(|v| exact_version(v).ok()).collect();
    versions.sort_by(|a, b| b.cmp(a));
    versions.truncate(MAX_AVAILABLE);
    let latest = value["dist-tags"]["latest"].as_str().map(str::to_owned);
    Some(Available { versions: versions.iter().map(ToString::to_string).collect(), latest })
}

/// The `npm_config_*` variables of this process (its registry, cache, proxy settings), which
/// an install on a build host is given: the server's npm settings apply there too.
pub fn npm_settings() -> Vec<(String, String)> {
    let npm = |name: &str| name.to_ascii_lowercase().starts_with("npm_config_");
    std::env::vars().filter(|(name, _)| npm(name)).collect()
}

/// Removes the hidden folders of `dir` whose names start with `prefix` and whose process
/// (the name's last part) is gone: left by a crash. Another process's install in progress (a
/// build host runs one `kandev remote-op` per request) is left alone.
fn remove_hidden(dir: &Path, prefix: &str) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = name.strip_prefix(prefix) else { continue };
        let alive = pid != std::process::id().to_string() && Path::new("/proc").join(pid).exists();
        if !alive {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// Runs npm; its stdout, or an error quoting the end of what it said.
async fn npm(
    args: &[&str],
    what: &str,
    timeout: Duration,
    env: &[(String, String)],
) -> Result<String, InstallError> {
    let mut command = Command::new("npm");
    command
        .args(args)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .env("npm_config_update_notifier", "false")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let (child, group) =
        ProcessGroup::spawn(&mut command).map_err(io(format!("cannot run npm to {what}")))?;
    let output = match tokio::time::timeout(timeout, child.wait_with_output()).await {
        Ok(output) => output.map_err(io(format!("npm failed to {what}")))?,
        // Dropping the group's owner kills npm and everything it started.
        Err(_) => return Err(InstallError::TimedOut { what: what.to_owned(), timeout }),
    };
    group.release();
    if output.status.success() {
        return Ok(String::from_utf8_lossy(&output.stdout).into_owned());
    }
    // npm says the cause first (`npm error code …`) and where its log is last.
    let said = String::from_utf8_lossy(&output.stderr);
    let lines: Vec<&str> = said
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.contains("A complete log of this run"))
        .take(OUTPUT_LINES)
        .collect();
    let quoted = lines.join(" / ");
    let output = if quoted.is_empty() {
        format!("npm ended with {} and said nothing", output.status)
    } else {
        quoted
    };
    Err(InstallError::Npm { what: what.to_owned(), output })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn qwen() -> AgentPackage {
        AgentPackage {
            kind: "qwen".into(),
            package: "@qwen-code/qwen-code".into(),
            program: "qwen".into(),
        }
    }

    #[test]
    fn i51_2_only_exact_versions_are_installed() {
        for good in ["1.2.3", "0.24.4", "1.0.0-beta.1", "2.0.0+build.5"] {
            assert_eq!(exact_version(good).unwrap().to_string(), good);
        }
        for bad in ["latest", "^1.2.3", "1.2", "1.2.3 || 2", "../1.2.3", "", " 1.2.3x", "v1.2.3"] {
            let err = exact_version(bad).unwrap_err();
            assert!(err.to_string().contains("not an exact version"), "{bad}: {err}");
        }
    }

    #[test]
    fn i51_2_the_registry_s_versions_are_listed_newest_first() {
        let many = r#"{"versions": ["0.9.0", "1.10.0", "1.2.0", "1.10.0-rc.1", "junk"],
                       "dist-tags": {"latest": "1.10.0"}}"#;
        let got = parse_view(many).unwrap();
        assert_eq!(got.versions, ["1.10.0", "1.10.0-rc.1", "1.2.0", "0.9.0"]);
        assert_eq!(got.latest.as_deref(), Some("1.10.0"));
        let one = parse_view(r#"{"versions": "1.0.0", "dist-tags": {}}"#).unwrap();
        assert_eq!((one.versions, one.latest), (vec!["1.0.0".to_owned()], None));
        assert_eq!(parse_view("not json"), None);
    }

    #[test]
    fn i51_2_a_half_install_is_not_listed() {
        let dir = tempfile::tempdir().unwrap();
        let prefix = AgentPrefix::new(dir.path());
        let whole = prefix.program(&qwen(), "1.0.0");
        std::fs::create_dir_all(whole.parent().unwrap()).unwrap();
        std::fs::write(&whole, "#!/bin/sh\n").unwrap();
        // A version folder without its command, an install in progress, a stray folder.
        std::fs::create_dir_all(dir.path().join("qwen/1.1.0/node_modules")).unwrap();
        std::fs::create_dir_all(dir.path().join("qwen/.partial-1.2.0-7/node_modules/.bin"))
            .unwrap();
        std::fs::create_dir_all(dir.path().join("qwen/notes")).unwrap();
        assert_eq!(prefix.installed(&qwen()), ["1.0.0"]);
    }
}
