//! Tidy checks over the whole workspace: the layering of docs/architecture.md, a `//!` line
//! opening every Rust file, processes started only by the runtime crate, docs/api.md naming
//! exactly the actions of the action table, and no task of the server without an owner.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// For each crate, the crates (workspace or external) it must never depend on.
const FORBIDDEN: &[(&str, &[&str])] = &[
    (
        "kandev-domain",
        &[
            "kandev-store",
            "kandev-acp",
            "kandev-runtime",
            "kandev-engine",
            "kandev-server",
            "kandev-mock-agent",
            "kandev-api-types",
            "kandev-workflow-yaml",
            "serde",
            "sqlx",
            "tokio",
        ],
    ),
    (
        "kandev-store",
        &["kandev-acp", "kandev-runtime", "kandev-engine", "kandev-server", "kandev-mock-agent"],
    ),
    (
        "kandev-acp",
        &["kandev-store", "kandev-runtime", "kandev-engine", "kandev-server", "kandev-domain"],
    ),
    ("kandev-runtime", &["kandev-store", "kandev-engine", "kandev-server"]),
    ("kandev-engine", &["kandev-server"]),
    ("kandev-server", &["kandev-acp", "kandev-runtime", "kandev-mock-agent"]),
    ("kandev-mock-agent", &["kandev-store", "kandev-engine", "kandev-server", "kandev-runtime"]),
    // The shapes of the wire only: no transport, no database, no runtime.
    (
        "kandev-api-types",
        &[
            "kandev-store",
            "kandev-engine",
            "kandev-server",
            "kandev-acp",
            "kandev-runtime",
            "axum",
            "sqlx",
            "tokio",
        ],
    ),
    (
        "kandev-workflow-yaml",
        &["kandev-store", "kandev-engine", "kandev-server", "kandev-acp", "kandev-runtime"],
    ),
    // The benchmark drives the real binary through the public API only.
    (
        "kandev-bench",
        &[
            "kandev-domain",
            "kandev-store",
            "kandev-workflow-yaml",
            "kandev-acp",
            "kandev-runtime",
            "kandev-engine",
            "kandev-server",
            "kandev-api-types",
        ],
    ),
];

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

fn metadata() -> Value {
    let output = Command::new(env!("CARGO"))
        .args(["metadata", "--format-version", "1", "--no-deps", "--offline"])
        .current_dir(workspace_root())
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout).unwrap()
}

/// Normal and build dependencies of each workspace package (dev-dependencies may cross
/// layers: tests wire real parts together).
fn dependencies(meta: &Value) -> Vec<(String, BTreeSet<String>)> {
    meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|package| {
            let deps = package["dependencies"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|d| d["kind"].as_str() != Some("dev"))
                .map(|d| d["name"].as_str().unwrap().to_owned())
                .collect();
            (package["name"].as_str().unwrap().to_owned(), deps)
        })
        .collect()
}

#[test]
fn crates_depend_only_on_lower_layers() {
    let meta = metadata();
    let packages = dependencies(&meta);
    let mut violations = vec![];
    for (name, deps) in &packages {
        let forbidden =
            FORBIDDEN.iter().find(|(crate_name, _)| crate_name == name).map(|(_, f)| *f);
        match forbidden {
            Some(list) => violations.extend(
                list.iter()
                    .filter(|f| deps.contains(**f))
                    .map(|f| format!("{name} must not depend on {f}")),
            ),
            None if name != "kandev" => {
                violations.push(format!("{name} has no layering rule in tidy.rs"))
            }
            None => {}
        }
    }
    assert!(
        violations.is_empty(),
        "layering violations (see docs/architecture.md):\n{}",
        violations.join("\n")
    );
}

/// The actions docs/api.md documents: every name in backticks in the first cell of a row of
/// its "Actions" table (a cell may name several: `` `workspace.get` / `workspace.delete` ``).
/// Backticked text that is not an action name (`` `start_agent: true` ``) is skipped.
fn documented_actions(api_md: &str) -> BTreeSet<String> {
    let is_name = |t: &str| {
        t.starts_with(|c: char| c.is_ascii_lowercase())
            && t.chars().all(|c| c.is_ascii_lowercase() || c == '.' || c == '_')
    };
    let mut section = false;
    let mut names = BTreeSet::new();
    for line in api_md.lines() {
        if line.starts_with("## ") {
            section = line.trim() == "## Actions";
            continue;
        }
        let Some(row) = line.strip_prefix('|').filter(|_| section) else { continue };
        let first = row.split('|').next().unwrap_or("");
        names.extend(first.split('`').skip(1).step_by(2).filter(|t| is_name(t)).map(str::to_owned));
    }
    names.remove("action"); // the header row
    names
}

/// What is wrong between the declared actions and the documented ones.
fn action_doc_problems(declared: &[&str], documented: &BTreeSet<String>) -> Vec<String> {
    let mut problems: Vec<String> = declared
        .iter()
        .filter(|name| !documented.contains(**name))
        .map(|name| format!("{name} is an action but docs/api.md does not document it"))
        .collect();
    problems.extend(
        documented
            .iter()
            .filter(|name| !declared.contains(&name.as_str()))
            .map(|name| format!("docs/api.md documents {name}, which is not an action")),
    );
    problems
}

#[test]
fn api_md_documents_exactly_the_declared_actions() {
    let api_md = std::fs::read_to_string(workspace_root().join("docs/api.md")).unwrap();
    let documented = documented_actions(&api_md);
    let problems = action_doc_problems(kandev_api_types::actions::NAMES, &documented);
    assert!(
        problems.is_empty(),
        "docs/api.md and the action table (kandev_api_types::actions) disagree:\n{}",
        problems.join("\n")
    );
}

/// The checker on a fixture: the table of docs/api.md before issue 13 lacked
/// `session.reset_context`, and a documented action that does not exist is caught too.
#[test]
fn i13_the_api_md_check_names_missing_and_unknown_actions() {
    let fixture = "# API\n\n## Actions\n\n| action | payload | result |\n|---|---|---|\n\
                   | `session.get` / `session.stop` | `id*` | `session` |\n\
                   | `task.create` … `start_agent: true` | as `task.create` | `task` |\n\
                   | `session.rename` | `id*, name*` | `session` |\n\n\
                   ## Notifications\n\n| topic | actions |\n|---|---|\n\
                   | `workspaces` | `workspace.created` |\n";
    let documented = documented_actions(fixture);
    assert_eq!(
        documented.iter().map(String::as_str).collect::<Vec<_>>(),
        ["session.get", "session.rename", "session.stop", "task.create"]
    );
    let declared = ["session.get", "session.stop", "session.reset_context", "task.create"];
    assert_eq!(
        action_doc_problems(&declared, &documented),
        [
            "session.reset_context is an action but docs/api.md does not document it",
            "docs/api.md documents session.rename, which is not an action",
        ]
    );
}

/// The source of `path` outside its `#[cfg(test)]` module (tests may spawn freely).
fn production_source(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    match text.find("#[cfg(test)]") {
        Some(at) => text[..at].to_owned(),
        None => text,
    }
}

/// House rule: every spawned task has an owner (a `TaskTracker` or `JoinSet`), so shutdown is
/// orderly. The server's tasks are its `AppState`'s tracker's or a connection's `JoinSet`'s.
#[test]
fn i13_the_server_spawns_no_task_without_an_owner() {
    let mut files = vec![];
    rust_files(&workspace_root().join("crates/kandev-server/src"), &mut files);
    assert!(files.len() > 10, "found the server's sources");
    let offenders: Vec<String> = files
        .iter()
        .filter(|path| production_source(path).contains("tokio::spawn("))
        .map(|p| p.display().to_string())
        .collect();
    assert!(offenders.is_empty(), "bare tokio::spawn in:\n{}", offenders.join("\n"));
}

/// Where a crate writes events: its one function that takes a typed `Notification`.
const NOTIFY: &[(&str, &str)] = &[("kandev-server", "src/handlers/mod.rs")];

/// Every notification the server publishes is a typed `Notification`: `WriteTx::emit`, which
/// takes any topic, action and JSON, is called only by its `notify`.
#[test]
fn i13_the_server_publishes_only_typed_notifications() {
    for (krate, notify) in NOTIFY {
        let root = workspace_root().join("crates").join(krate);
        let mut files = vec![];
        rust_files(&root.join("src"), &mut files);
        let offenders: Vec<String> = files
            .iter()
            .filter(|path| **path != root.join(notify))
            .filter(|path| production_source(path).contains(".emit("))
            .map(|p| p.display().to_string())
            .collect();
        assert!(
            offenders.is_empty(),
            "{krate} writes events without `notify` (a typed Notification) in:\n{}",
            offenders.join("\n")
        );
        assert!(production_source(&root.join(notify)).contains(".emit("), "{krate}: {notify}");
    }
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        if path.is_dir()
            && name != "target"
            && name != "node_modules"
            && !name.to_string_lossy().starts_with('.')
        {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn every_rust_file_opens_with_a_module_doc_line() {
    let mut files = vec![];
    rust_files(&workspace_root().join("crates"), &mut files);
    assert!(files.len() > 20, "found the sources");
    let missing: Vec<String> = files
        .iter()
        .filter(|path| {
            let text = std::fs::read_to_string(path).unwrap();
            !text.lines().find(|l| !l.trim().is_empty()).is_some_and(|l| l.starts_with("//!"))
        })
        .map(|p| p.display().to_string())
        .collect();
    assert!(missing.is_empty(), "files without a `//!` first line:\n{}", missing.join("\n"));
}

#[test]
fn only_the_runtime_crate_starts_processes() {
    let mut files = vec![];
    for entry in std::fs::read_dir(workspace_root().join("crates")).unwrap().flatten() {
        // The benchmark starts the real server and raw mock agents as a user would.
        if entry.file_name() != "kandev-runtime" && entry.file_name() != "kandev-bench" {
            rust_files(&entry.path().join("src"), &mut files);
        }
    }
    let offenders: Vec<String> = files
        .iter()
        .filter(|path| {
            let text = std::fs::read_to_string(path).unwrap();
            text.contains("process::Command") || text.contains("Command::new(")
        })
        .map(|p| p.display().to_string())
        .collect();
    assert!(
        offenders.is_empty(),
        "process spawning outside kandev-runtime:\n{}",
        offenders.join("\n")
    );
}
