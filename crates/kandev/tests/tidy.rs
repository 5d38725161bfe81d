//! Tidy checks over the whole workspace: the layering of docs/architecture.md, a `//!` line
//! opening every Rust file, and processes started only by the runtime crate.

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
    (
        "kandev-api-types",
        &["kandev-store", "kandev-engine", "kandev-server", "kandev-acp", "kandev-runtime"],
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
