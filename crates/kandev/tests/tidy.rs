//! Tidy checks over the whole workspace: the layering of docs/architecture.md, a `//!` line
//! opening every Rust file, processes started only by the runtime crate, no import cycle
//! between the engine's modules, docs/api.md naming exactly the actions of the action table,
//! and no task of the server without an owner.

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
            // serde is allowed: the working-directory values a build host answers
            // (`files.rs`) are serialized as they are (docs/architecture.md).
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
    // The forge client knows nothing of sessions, the store or the orchestration.
    (
        "kandev-forge",
        &[
            "kandev-store",
            "kandev-workflow-yaml",
            "kandev-acp",
            "kandev-runtime",
            "kandev-engine",
            "kandev-server",
            "kandev-api-types",
            "kandev-mock-agent",
        ],
    ),
    // Outbound notifications know nothing of sessions, the store or the orchestration.
    (
        "kandev-notify",
        &[
            "kandev-store",
            "kandev-workflow-yaml",
            "kandev-acp",
            "kandev-runtime",
            "kandev-engine",
            "kandev-server",
            "kandev-api-types",
            "kandev-mock-agent",
        ],
    ),
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
    // The allocator and its settings: nothing of Kandev.
    (
        "kandev-alloc",
        &[
            "kandev-domain",
            "kandev-store",
            "kandev-workflow-yaml",
            "kandev-acp",
            "kandev-runtime",
            "kandev-engine",
            "kandev-server",
            "kandev-api-types",
            "kandev-mock-agent",
        ],
    ),
    // Shared test support, below every crate that takes it (the runtime too): the domain's
    // types (an SSH executor's settings) and nothing of Kandev's machinery.
    (
        "kandev-testkit",
        &[
            "kandev-store",
            "kandev-workflow-yaml",
            "kandev-acp",
            "kandev-runtime",
            "kandev-engine",
            "kandev-server",
            "kandev-api-types",
            "kandev-mock-agent",
        ],
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
        // Test support is never shipped: a dev-dependency only.
        if deps.contains("kandev-testkit") {
            violations.push(format!("{name} takes kandev-testkit as more than a dev-dependency"));
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

/// Where a crate writes events: its one function that takes a typed `Notification`, or
/// `None` for a crate that writes none itself (the server: its changes are the engine's use
/// cases, issue 40).
const NOTIFY: &[(&str, Option<&str>)] =
    &[("kandev-server", None), ("kandev-engine", Some("src/publish.rs"))];

/// Every notification the server publishes is a typed `Notification`: `WriteTx::emit`, which
/// takes any topic, action and JSON, is called only by the engine's `notify`.
#[test]
fn i13_the_server_publishes_only_typed_notifications() {
    for (krate, notify) in NOTIFY {
        let root = workspace_root().join("crates").join(krate);
        let mut files = vec![];
        rust_files(&root.join("src"), &mut files);
        assert!(files.len() > 10, "found the sources of {krate}");
        let offenders: Vec<String> = files
            .iter()
            .filter(|path| notify.is_none_or(|notify| **path != root.join(notify)))
            .filter(|path| production_source(path).contains(".emit("))
            .map(|p| p.display().to_string())
            .collect();
        assert!(
            offenders.is_empty(),
            "{krate} writes events without `notify` (a typed Notification) in:\n{}",
            offenders.join("\n")
        );
        if let Some(notify) = notify {
            assert!(production_source(&root.join(notify)).contains(".emit("), "{krate}: {notify}");
        }
    }
}

/// Whether Rust source opens a write transaction or holds one: `begin_write`, or a `WriteTx`
/// taken or named.
fn writes_in_a_transaction(source: &str) -> bool {
    source.contains("begin_write") || source.contains("WriteTx")
}

/// Issue 40, acceptance 4: a handler decodes its request, calls one engine use case and
/// encodes the answer. The write transaction is the engine's (`kandev-engine/src/usecases/`),
/// so that a task's row and the engine's follow-up writes are one; a handler that opens one
/// of its own (or takes one from a helper) fails here. This covers the whole server — the
/// action handlers of `handlers/`, the `user.*` ones (`accounts.rs`) and the login pages
/// (`ui.rs`) — but the first-run seeding (`bootstrap.rs`), which writes before the server
/// answers anything and before the engine exists.
#[test]
fn i40_a4_no_handler_opens_a_write_transaction() {
    let mut files = vec![];
    rust_files(&workspace_root().join("crates/kandev-server/src"), &mut files);
    files.retain(|path| !path.ends_with("bootstrap.rs"));
    assert!(files.len() > 30, "found the server's files");
    let offenders: Vec<String> = files
        .iter()
        .filter(|path| writes_in_a_transaction(&production_source(path)))
        .map(|p| p.display().to_string())
        .collect();
    assert!(
        offenders.is_empty(),
        "handlers write in a transaction of their own (make it an engine use case) in:\n{}",
        offenders.join("\n")
    );
}

#[test]
fn i40_a4_the_handler_check_sees_a_transaction_and_passes_a_use_case() {
    let opens = "pub async fn create(s: &AppState, p: WorkspaceCreate) -> R {\n    \
                 let mut tx = s.store().begin_write().await?;\n    tx.commit().await?;\n}";
    assert!(writes_in_a_transaction(opens), "a handler opening a transaction");
    let helper = "async fn publish_task(mut tx: kandev_store::WriteTx, task: &Task) -> R {}";
    assert!(writes_in_a_transaction(helper), "a handler's helper taking one");
    let calls = "pub async fn create(s: &AppState, p: WorkspaceCreate) -> R {\n    \
                 let workspace = s.engine().create_workspace(&p.name).await?;\n}";
    assert!(!writes_in_a_transaction(calls), "a handler calling a use case");
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
        // The benchmark starts the real server and raw mock agents as a user would; the test
        // support starts the real binary, git and sshd as a test would.
        if !["kandev-runtime", "kandev-bench", "kandev-testkit"]
            .contains(&&*entry.file_name().to_string_lossy())
        {
            rust_files(&entry.path().join("src"), &mut files);
        }
    }
    // The mock agent starts the stdio MCP servers it is handed, as every agent does.
    let mock_mcp = Path::new("kandev-mock-agent").join("src").join("mcp.rs");
    let offenders: Vec<String> = files
        .iter()
        .filter(|path| !path.ends_with(&mock_mcp))
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

/// Crates whose modules must import each other without a cycle (docs/architecture.md).
const ACYCLIC_CRATES: &[&str] = &["kandev-engine"];

#[test]
fn engine_modules_import_each_other_without_a_cycle() {
    for name in ACYCLIC_CRATES {
        let graph =
            module_graph::Graph::of_crate(&workspace_root().join("crates").join(name).join("src"));
        assert!(graph.module_count() > 20, "{name}: found its modules");
        assert!(
            graph.depends("crate::session::boot", "crate::handshake"),
            "{name}: the checker sees imports between modules"
        );
        if let Some(cycle) = graph.cycle() {
            panic!(
                "{name}: modules import each other in a cycle (see docs/architecture.md):\n{}",
                cycle.join("\n  -> ")
            );
        }
        // A directory is one module to the reader: `session/` is `crate::session`, so a
        // cycle through two of its files is still a cycle between layers.
        let top_level = graph.top_level();
        assert!(
            top_level.depends("crate::session", "crate::handshake"),
            "{name}: the folded graph sees imports between directories and files"
        );
        if let Some(cycle) = top_level.cycle() {
            panic!(
                "{name}: top-level modules (a directory is one) import each other in a cycle \
                 (see docs/architecture.md):\n{}",
                cycle.join("\n  -> ")
            );
        }
    }
}

/// The imports between the modules of one crate, read from its sources with `syn`.
///
/// A module is one `.rs` file (`src/lib.rs` is `crate`, `src/a/mod.rs` and `src/a.rs` are
/// `crate::a`); a module inline in a file (`mod tests { .. }`) belongs to its file. An edge
/// goes from a file to every module a path in it names: `use crate::..`, `use super::..`,
/// `use self::..`, a path into a child module declared in the file (`session::Command` in
/// `lib.rs`), and the same paths written out in code (`crate::write::add_message(..)`). A
/// path to an item that a module re-exports (`pub use a::Name`) leads to the module it comes
/// from, so a crate root that only re-exports is no hub every module depends on; a path to
/// an item defined in the root (or any module) leads there. Limits: paths inside macro
/// invocations (`json!`, `tracing::info!`) are not seen, nor `#[path]` attributes or items
/// brought in by a glob re-export.
mod module_graph {
    use std::collections::{BTreeMap, BTreeSet};
    use std::path::Path;

    use syn::visit::Visit;

    pub struct Graph {
        modules: BTreeSet<String>,
        edges: BTreeMap<String, BTreeSet<String>>,
    }

    /// What one file says: the child modules it declares, its imports and the paths in it.
    #[derive(Default)]
    struct FileFacts {
        children: BTreeSet<String>,
        /// (scope: the inline modules it is in, path, name it is re-exported as).
        uses: Vec<(Vec<String>, Vec<String>, Option<String>)>,
        /// (scope, path) of paths written in code.
        paths: Vec<(Vec<String>, Vec<String>)>,
    }

    struct Collector {
        inline: Vec<String>,
        facts: FileFacts,
    }

    impl<'ast> Visit<'ast> for Collector {
        fn visit_item_mod(&mut self, item: &'ast syn::ItemMod) {
            match &item.content {
                Some(_) => {
                    self.inline.push(item.ident.to_string());
                    syn::visit::visit_item_mod(self, item);
                    self.inline.pop();
                }
                None if self.inline.is_empty() => {
                    self.facts.children.insert(item.ident.to_string());
                }
                None => {}
            }
        }

        fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
            let exported = !matches!(item.vis, syn::Visibility::Inherited);
            let mut found = vec![];
            expand(&item.tree, vec![], &mut found);
            for (path, alias) in found {
                let name = exported.then(|| alias.clone());
                self.facts.uses.push((self.inline.clone(), path, name.flatten()));
            }
        }

        fn visit_path(&mut self, path: &'ast syn::Path) {
            let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
            if segments.len() > 1 && path.leading_colon.is_none() {
                self.facts.paths.push((self.inline.clone(), segments));
            }
            syn::visit::visit_path(self, path);
        }
    }

    /// The paths a `use` tree names, each with the name it binds (`None` for a glob).
    fn expand(
        tree: &syn::UseTree,
        prefix: Vec<String>,
        out: &mut Vec<(Vec<String>, Option<String>)>,
    ) {
        let with = |name: String| {
            let mut path = prefix.clone();
            path.push(name);
            path
        };
        match tree {
            syn::UseTree::Path(p) => expand(&p.tree, with(p.ident.to_string()), out),
            syn::UseTree::Name(n) if n.ident == "self" => {
                let name = prefix.last().cloned();
                out.push((prefix.clone(), name));
            }
            syn::UseTree::Name(n) => {
                out.push((with(n.ident.to_string()), Some(n.ident.to_string())))
            }
            syn::UseTree::Rename(r) if r.ident == "self" => {
                out.push((prefix.clone(), Some(r.rename.to_string())))
            }
            syn::UseTree::Rename(r) => {
                out.push((with(r.ident.to_string()), Some(r.rename.to_string())))
            }
            syn::UseTree::Glob(_) => out.push((prefix.clone(), None)),
            syn::UseTree::Group(g) => {
                for item in &g.items {
                    expand(item, prefix.clone(), out);
                }
            }
        }
    }

    fn join(path: &[String]) -> String {
        path.join("::")
    }

    fn split(module: &str) -> Vec<String> {
        module.split("::").map(str::to_owned).collect()
    }

    impl Graph {
        /// Reads every `.rs` file under a crate's `src`.
        pub fn of_crate(src: &Path) -> Graph {
            let mut files = vec![];
            super::rust_files(src, &mut files);
            let sources: Vec<(String, String)> = files
                .iter()
                .map(|file| {
                    let relative = file.strip_prefix(src).unwrap().with_extension("");
                    let mut parts: Vec<String> =
                        relative.iter().map(|p| p.to_string_lossy().into_owned()).collect();
                    if matches!(parts.last().map(String::as_str), Some("mod" | "lib" | "main")) {
                        parts.pop();
                    }
                    let module =
                        std::iter::once("crate".to_owned()).chain(parts).collect::<Vec<_>>();
                    (join(&module), std::fs::read_to_string(file).unwrap())
                })
                .collect();
            Graph::from_sources(&sources)
        }

        /// Builds the graph from (module path, source) pairs.
        pub fn from_sources(sources: &[(String, String)]) -> Graph {
            let modules: BTreeSet<String> = sources.iter().map(|(m, _)| m.clone()).collect();
            let facts: BTreeMap<String, FileFacts> = sources
                .iter()
                .map(|(module, text)| {
                    let file = syn::parse_file(text)
                        .unwrap_or_else(|e| panic!("{module} does not parse: {e}"));
                    let mut collector = Collector { inline: vec![], facts: FileFacts::default() };
                    collector.visit_file(&file);
                    (module.clone(), collector.facts)
                })
                .collect();
            let mut graph = Graph { modules, edges: BTreeMap::new() };
            // Re-exports: module -> name -> the absolute path it stands for.
            let mut exports: BTreeMap<String, BTreeMap<String, Vec<String>>> = BTreeMap::new();
            for (module, file) in &facts {
                for (scope, path, name) in &file.uses {
                    if let (true, Some(name), Some(absolute)) =
                        (scope.is_empty(), name, graph.absolute(module, scope, path, file))
                    {
                        exports.entry(module.clone()).or_default().insert(name.clone(), absolute);
                    }
                }
            }
            for (module, file) in &facts {
                let named = file.uses.iter().map(|(scope, path, _)| (scope, path));
                let written = file.paths.iter().map(|(scope, path)| (scope, path));
                for (scope, path) in named.chain(written) {
                    let Some(absolute) = graph.absolute(module, scope, path, file) else {
                        continue;
                    };
                    let target = graph.resolve(&absolute, &exports, 0);
                    if &target != module {
                        graph.edges.entry(module.clone()).or_default().insert(target);
                    }
                }
            }
            graph
        }

        /// `path` as written in `module` (inside its inline modules `scope`), from the crate
        /// root; `None` for a path that does not start in this crate.
        fn absolute(
            &self,
            module: &str,
            scope: &[String],
            path: &[String],
            file: &FileFacts,
        ) -> Option<Vec<String>> {
            let here: Vec<String> =
                split(module).into_iter().chain(scope.iter().cloned()).collect();
            let first = path.first()?;
            let (mut base, rest) = match first.as_str() {
                "crate" => (vec!["crate".to_owned()], &path[1..]),
                "self" => (here, &path[1..]),
                "super" => {
                    let supers = path.iter().take_while(|s| *s == "super").count();
                    let mut base = here;
                    for _ in 0..supers {
                        base.pop()?;
                    }
                    (base, &path[supers..])
                }
                name if scope.is_empty() && file.children.contains(name) => (here, path),
                _ => return None,
            };
            base.extend(rest.iter().cloned());
            Some(base)
        }

        /// The module an absolute path leads to: its longest prefix that is a module, or,
        /// for an item that module re-exports, the module the item comes from.
        fn resolve(
            &self,
            path: &[String],
            exports: &BTreeMap<String, BTreeMap<String, Vec<String>>>,
            depth: usize,
        ) -> String {
            let module = (1..=path.len())
                .rev()
                .map(|n| join(&path[..n]))
                .find(|m| self.modules.contains(m))
                .unwrap_or_else(|| "crate".to_owned());
            let used = split(&module).len();
            let reexported = path.get(used).and_then(|name| exports.get(&module)?.get(name));
            match reexported {
                Some(source) if depth < 16 => {
                    let mut source = source.clone();
                    source.extend(path[used + 1..].iter().cloned());
                    self.resolve(&source, exports, depth + 1)
                }
                _ => module,
            }
        }

        /// The same imports with every module folded into its top-level module
        /// (`crate::session::boot` counts as `crate::session`); imports within one
        /// top-level module vanish. The crate root stays `crate`.
        pub fn top_level(&self) -> Graph {
            let fold = |module: &str| join(&split(module).into_iter().take(2).collect::<Vec<_>>());
            let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
            for (from, targets) in &self.edges {
                for to in targets {
                    let (from, to) = (fold(from), fold(to));
                    if from != to {
                        edges.entry(from).or_default().insert(to);
                    }
                }
            }
            Graph { modules: self.modules.iter().map(|m| fold(m)).collect(), edges }
        }

        pub fn module_count(&self) -> usize {
            self.modules.len()
        }

        /// Whether `from` imports from `to` directly.
        pub fn depends(&self, from: &str, to: &str) -> bool {
            self.edges.get(from).is_some_and(|e| e.contains(to))
        }

        /// A cycle of imports, as the modules along it (the first one again at the end).
        pub fn cycle(&self) -> Option<Vec<String>> {
            #[derive(Clone, Copy, PartialEq)]
            enum Mark {
                Open,
                Done,
            }
            fn visit(
                graph: &Graph,
                module: &str,
                marks: &mut BTreeMap<String, Mark>,
                stack: &mut Vec<String>,
            ) -> Option<Vec<String>> {
                match marks.get(module) {
                    Some(Mark::Done) => return None,
                    Some(Mark::Open) => {
                        let start = stack.iter().position(|m| m == module).unwrap_or(0);
                        let mut cycle = stack[start..].to_vec();
                        cycle.push(module.to_owned());
                        return Some(cycle);
                    }
                    None => {}
                }
                marks.insert(module.to_owned(), Mark::Open);
                stack.push(module.to_owned());
                for next in graph.edges.get(module).into_iter().flatten() {
                    if let Some(cycle) = visit(graph, next, marks, stack) {
                        return Some(cycle);
                    }
                }
                stack.pop();
                marks.insert(module.to_owned(), Mark::Done);
                None
            }
            let mut marks = BTreeMap::new();
            self.modules.iter().find_map(|m| visit(self, m, &mut marks, &mut vec![]))
        }
    }

    #[cfg(test)]
    mod tests {
        use super::Graph;

        fn graph(files: &[(&str, &str)]) -> Graph {
            let sources: Vec<(String, String)> =
                files.iter().map(|(m, s)| ((*m).to_owned(), (*s).to_owned())).collect();
            Graph::from_sources(&sources)
        }

        #[test]
        fn a_cycle_between_modules_is_found() {
            let cyclic = graph(&[
                ("crate", "mod a; mod b; mod c;"),
                ("crate::a", "use crate::b::B; pub struct A;"),
                ("crate::b", "pub struct B; fn f() { super::c::g(); }"),
                ("crate::c", "use crate::{a::A}; pub fn g() {}"),
            ]);
            assert_eq!(
                cyclic.cycle().unwrap(),
                ["crate::a", "crate::b", "crate::c", "crate::a"],
                "use crate::.., a path written out with super::, a use group"
            );
        }

        #[test]
        fn i40_a_cycle_between_directories_is_found_though_their_files_have_none() {
            let layered = graph(&[
                ("crate", "mod s; mod w;"),
                ("crate::s", "mod actor; mod handle;"),
                ("crate::s::actor", "use crate::w::prepare; fn run() { prepare(); }"),
                ("crate::s::handle", "pub struct Handle;"),
                ("crate::w", "pub fn prepare() {} fn poke(_: crate::s::handle::Handle) {}"),
            ]);
            assert_eq!(layered.cycle(), None, "file by file: s::actor -> w -> s::handle");
            assert_eq!(
                layered.top_level().cycle().unwrap(),
                ["crate::s", "crate::w", "crate::s"],
                "a directory is one module"
            );
        }

        #[test]
        fn a_tree_of_imports_has_no_cycle() {
            let tree = graph(&[
                ("crate", "mod a; mod b; pub use a::A; pub use b::B;"),
                ("crate::a", "pub struct A; #[cfg(test)] mod tests { use super::*; }"),
                // `crate::A` is `a::A` re-exported: b depends on a, not on the root.
                ("crate::b", "use crate::A; pub struct B(A);"),
            ]);
            assert_eq!(tree.cycle(), None);
            assert!(tree.depends("crate::b", "crate::a"));
            assert!(tree.depends("crate", "crate::b"));
        }

        #[test]
        fn an_item_defined_in_the_root_that_reexports_the_module_is_a_cycle() {
            let hub = graph(&[
                ("crate", "mod a; pub use a::A; pub struct Shared;"),
                ("crate::a", "use crate::Shared; pub struct A(Shared);"),
            ]);
            assert_eq!(hub.cycle().unwrap(), ["crate", "crate::a", "crate"]);
        }

        #[test]
        fn child_modules_and_parents_resolve_like_rustc() {
            let nested = graph(&[
                ("crate", "mod s; mod w;"),
                ("crate::s", "mod x; mod y;"),
                ("crate::s::x", "use super::y::Y; pub struct X;"),
                ("crate::s::y", "pub struct Y; fn f() { let _ = crate::w::make(); }"),
                ("crate::w", "pub fn make() -> u8 { 0 }"),
            ]);
            assert!(nested.depends("crate::s::x", "crate::s::y"));
            assert!(nested.depends("crate::s::y", "crate::w"));
            assert!(!nested.depends("crate", "crate::s"), "declaring a module is no import");
            assert_eq!(nested.cycle(), None);
        }
    }
}
