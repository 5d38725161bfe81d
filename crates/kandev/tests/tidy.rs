//! Tidy checks over the whole workspace: the layering of docs/architecture.md, a `//!` line
//! opening every Rust file, processes started only by the runtime crate, no import cycle
//! between the engine's modules, docs/api.md naming exactly the actions of the action table,
//! no task of the server without an owner, no test copying the shared test helpers, and no
//! test file that no test binary compiles.

#![allow(clippy::disallowed_methods, reason = "tests spawn tasks and start processes freely")]

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
/// The files of `tests/` (top level) that no test binary compiles: with `autotests = false`
/// (kandev-server's one binary) a file must be a `mod` of a declared test target, or its tests
/// silently never run.
fn uncompiled_test_files(meta: &Value) -> Vec<String> {
    let mut missing = Vec::new();
    for package in meta["packages"].as_array().unwrap() {
        let manifest = Path::new(package["manifest_path"].as_str().unwrap());
        let tests_dir = manifest.parent().unwrap().join("tests");
        let Ok(entries) = std::fs::read_dir(&tests_dir) else { continue };
        let roots: Vec<PathBuf> = package["targets"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["kind"].as_array().unwrap().iter().any(|k| k == "test"))
            .map(|t| PathBuf::from(t["src_path"].as_str().unwrap()))
            .collect();
        let declared: String = roots
            .iter()
            .filter(|root| root.parent() == Some(tests_dir.as_path()))
            .map(|root| std::fs::read_to_string(root).unwrap())
            .collect();
        for entry in entries {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|e| e != "rs") || roots.contains(&path) {
                continue;
            }
            let module = path.file_stem().unwrap().to_str().unwrap();
            if !declared.lines().any(|line| line.trim() == format!("mod {module};")) {
                missing.push(path.display().to_string());
            }
        }
    }
    missing
}

#[test]
fn every_test_file_is_compiled_into_a_test_binary() {
    let missing = uncompiled_test_files(&metadata());
    assert!(
        missing.is_empty(),
        "test files no test binary compiles (add `mod <file>;` to the crate's test root): {missing:?}"
    );
}

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

/// The `path`s of the `disallowed-methods` in a `clippy.toml`.
fn disallowed_methods(config: &Path) -> Vec<String> {
    let text =
        std::fs::read_to_string(config).unwrap_or_else(|err| panic!("{}: {err}", config.display()));
    text.lines()
        .filter_map(|line| line.split("path = \"").nth(1))
        .filter_map(|rest| rest.split('"').next())
        .map(str::to_owned)
        .collect()
}

/// House rules clippy checks (`clippy::disallowed_methods`, docs/architecture.md "Rules the
/// build checks"): every spawned task has an owner (a `TaskTracker` or `JoinSet`), so
/// shutdown is orderly, and only the runtime starts processes. This test keeps the rules in
/// force: the workspace's `clippy.toml` names them, the runtime's keeps the spawn rule, only
/// the benchmark (a client program) has none, no other crate has a config of its own (it
/// would replace the workspace's), and no crate's code switches the lint off but for its
/// unit tests (`cfg_attr(test, …)`) or the test-support crate: every other exception is an
/// `#[expect(…, reason = "…")]` at its site, saying what owns the task.
#[test]
fn i41_the_owner_and_process_rules_are_clippy_rules() {
    let root = workspace_root();
    let spawn = ["tokio::spawn", "tokio::task::spawn"];
    let process = ["std::process::Command::new", "tokio::process::Command::new"];
    let workspace = disallowed_methods(&root.join("clippy.toml"));
    for method in spawn.iter().chain(&process) {
        assert!(workspace.iter().any(|m| m == method), "clippy.toml disallows {method}");
    }
    let runtime = disallowed_methods(&root.join("crates/kandev-runtime/clippy.toml"));
    assert_eq!(runtime, spawn, "the runtime starts processes but spawns on owners");
    assert!(disallowed_methods(&root.join("crates/kandev-bench/clippy.toml")).is_empty());
    let mut own_configs = vec![];
    let mut switched_off = vec![];
    for entry in std::fs::read_dir(root.join("crates")).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if entry.path().join("clippy.toml").exists()
            && !["kandev-runtime", "kandev-bench"].contains(&name.as_str())
        {
            own_configs.push(name.clone());
        }
        if name == "kandev-testkit" {
            continue;
        }
        let mut files = vec![];
        rust_files(&entry.path().join("src"), &mut files);
        for path in files {
            // Without whitespace, so an attribute split over lines reads as one.
            let text: String = std::fs::read_to_string(&path).unwrap().split_whitespace().collect();
            let allows =
                ["#![allow(clippy::disallowed_methods", "#[allow(clippy::disallowed_methods"];
            let expects = text.split("#[expect(clippy::disallowed_methods").skip(1);
            if allows.iter().any(|allow| text.contains(allow))
                || expects.clone().any(|rest| !rest.starts_with(",reason=\""))
            {
                switched_off.push(path.display().to_string());
            }
        }
    }
    assert!(own_configs.is_empty(), "crates with their own clippy.toml: {own_configs:?}");
    assert!(switched_off.is_empty(), "the rules switched off:\n{}", switched_off.join("\n"));
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

/// What the copied-helper check sees in one test file: the free functions named `call` (a
/// copy of the HTTP helper) and the functions holding a loop that sleeps (a sleep-poll).
/// Limits: methods named `call` are not seen (the in-process harnesses' own `call`), nor a
/// sleep inside a macro (`tokio::select!`) or behind a helper function called in a loop.
fn copied_helpers(source: &str) -> Vec<String> {
    use syn::visit::{self, Visit};
    #[derive(Default)]
    struct Seen {
        fns: Vec<String>,
        loops: usize,
        found: Vec<String>,
    }
    impl Seen {
        fn looping(&mut self, visit: impl FnOnce(&mut Self)) {
            self.loops += 1;
            visit(self);
            self.loops -= 1;
        }
    }
    impl<'ast> Visit<'ast> for Seen {
        fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
            if f.sig.ident == "call" {
                self.found.push("its own `fn call` (use kandev_testkit::server::call)".into());
            }
            self.fns.push(f.sig.ident.to_string());
            visit::visit_item_fn(self, f);
            self.fns.pop();
        }
        fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
            self.fns.push(f.sig.ident.to_string());
            visit::visit_impl_item_fn(self, f);
            self.fns.pop();
        }
        fn visit_expr_loop(&mut self, e: &'ast syn::ExprLoop) {
            self.looping(|s| visit::visit_expr_loop(s, e));
        }
        fn visit_expr_while(&mut self, e: &'ast syn::ExprWhile) {
            self.looping(|s| visit::visit_expr_while(s, e));
        }
        fn visit_expr_for_loop(&mut self, e: &'ast syn::ExprForLoop) {
            self.looping(|s| visit::visit_expr_for_loop(s, e));
        }
        fn visit_expr_call(&mut self, e: &'ast syn::ExprCall) {
            let sleeps = matches!(&*e.func, syn::Expr::Path(p)
                if p.path.segments.last().is_some_and(|s| s.ident == "sleep"));
            if sleeps && self.loops > 0 {
                let name = self.fns.last().map_or("?", String::as_str);
                self.found.push(format!(
                    "a sleep-poll loop in `fn {name}` (wait for the event \
                    with a timeout, or kandev_testkit::wait::eventually)"
                ));
            }
            visit::visit_expr_call(self, e);
        }
    }
    let mut seen = Seen::default();
    seen.visit_file(&syn::parse_file(source).unwrap());
    seen.found
}

/// Issue 41: test support is one crate (kandev-testkit), not copies. No test file under
/// `crates/*/tests` defines its own `fn call` (the HTTP helper) or waits in a loop of sleeps:
/// an event is awaited with a timeout, a state that no event announces with the one
/// `kandev_testkit::wait` helper.
#[test]
fn i41_no_test_copies_the_call_helper_or_polls_with_sleeps() {
    let mut files = vec![];
    for entry in std::fs::read_dir(workspace_root().join("crates")).unwrap().flatten() {
        rust_files(&entry.path().join("tests"), &mut files);
    }
    assert!(files.len() > 50, "found the tests");
    let offenders: Vec<String> = (files.iter())
        .flat_map(|path| {
            let found = copied_helpers(&std::fs::read_to_string(path).unwrap());
            found.into_iter().map(move |what| format!("{}: {what}", path.display()))
        })
        .collect();
    assert!(offenders.is_empty(), "copied test helpers:\n{}", offenders.join("\n"));
}

#[test]
fn i41_the_copied_helper_check_sees_a_call_copy_and_a_sleep_loop() {
    let found = |source: &str| copied_helpers(source).len();
    assert_eq!(found("async fn call(s: &Server) -> Value { post(s).await }"), 1, "fn call");
    let poll = "async fn wait(p: &Path) { while !p.exists() { tokio::time::sleep(D).await; } }";
    assert_eq!(found(poll), 1, "a sleep in a while loop");
    let nested = "fn f() { let _ = timeout(W, async { loop { std::thread::sleep(D); } }); }";
    assert_eq!(found(nested), 1, "a sleep in a loop in an async block");
    let fine = "impl C { async fn call(&self) {} } async fn stall(d: Duration) { sleep(d).await }";
    assert_eq!(found(fine), 0, "a method named call, a sleep outside a loop");
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

#[path = "tidy/module_graph.rs"]
mod module_graph;

#[path = "tidy/error_words.rs"]
mod error_words;

/// The server's crates whose texts people read (their errors reach the API and the UI).
const SERVER_CRATES: [&str; 8] = [
    "kandev-server",
    "kandev-engine",
    "kandev-domain",
    "kandev-runtime",
    "kandev-store",
    "kandev-forge",
    "kandev-notify",
    "kandev-workflow-yaml",
];

fn error_words() -> error_words::Words {
    let requests =
        std::fs::read_to_string(workspace_root().join("crates/kandev-api-types/src/requests.rs"))
            .unwrap();
    error_words::Words::new(kandev_api_types::actions::NAMES, &requests)
}

fn web_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if path.is_dir() {
            if name != "generated" {
                web_files(&path, out);
            }
        } else if (name.ends_with(".ts") || name.ends_with(".tsx"))
            && !name.contains(".test.")
            && !name.contains("typetest")
        {
            out.push(path);
        }
    }
}

/// Issue 45 acceptance 3: no error text of the server or the web names an API action or a
/// request field ("set one with repository.update", "forge_api_base_url must be ..."): people
/// read them in the UI, which has its own words for both.
#[test]
fn i45_a3_no_error_text_names_an_action_or_a_request_field() {
    let words = error_words();
    let root = workspace_root();
    let mut problems = vec![];
    for krate in SERVER_CRATES {
        let mut files = vec![];
        rust_files(&root.join("crates").join(krate).join("src"), &mut files);
        for file in files {
            if file.components().any(|c| c.as_os_str() == "mcp") && krate == "kandev-server" {
                continue; // agents' tool errors name the tool's parameters on purpose
            }
            if file.ends_with("kandev-workflow-yaml/src/export.rs") {
                continue; // writes a workflow's YAML: its keys are the file format's
            }
            for (line, named, text) in error_words::rust_findings(&words, &production_source(&file))
            {
                problems.push(format!("{}:{line}: {named:?} in {text:?}", file.display()));
            }
        }
    }
    let mut files = vec![];
    web_files(&root.join("web/src"), &mut files);
    for file in files {
        let source = std::fs::read_to_string(&file).unwrap();
        for (line, named, text) in error_words::web_findings(&words, &source) {
            problems.push(format!("{}:{line}: {named:?} in {text:?}", file.display()));
        }
    }
    assert!(
        problems.is_empty(),
        "texts that name an API action or request field; say it in the user's words:\n{}",
        problems.join("\n")
    );
}

#[test]
fn i45_a3_the_error_text_check_sees_actions_and_fields_and_passes_keys_and_sql() {
    let words = error_words::Words::new(
        &["repository.update", "task.list"],
        "pub struct R {\n    pub forge_api_base_url: Option<String>,\n    pub url: String,\n}",
    );
    let rust = r#"
        // "set one with repository.update" in a comment is no text
        let a = "repository {} has no dev script; set one with repository.update";
        let b = format!("forge_api_base_url must be a URL, not {forge_api_base_url}");
        let c = "SELECT forge_api_base_url FROM repositories WHERE id = ?";
        let d = "task.list";
        let e = format!("url must be http, not {url}");
        let f = '"'; let g = "the forge API URL is missing";
    "#;
    let found: Vec<usize> =
        error_words::rust_findings(&words, rust).into_iter().map(|(line, ..)| line).collect();
    assert_eq!(found, [3, 4], "{found:?}");
    let web = "const x = call('task.list', {});\n\
               <p>Set it with repository.update first</p>\n\
               setError(`${forge_api_base_url} is wrong`);\n\
               setError(`forge_api_base_url is wrong: ${why}`);\n\
               // call task.list here is a comment\n\
               onClick={() => void call('task.list', { query: 'a b' })}\n\
               <b className=\"x\">Run task.list now</b>\n";
    let found: Vec<usize> =
        error_words::web_findings(&words, web).into_iter().map(|(line, ..)| line).collect();
    assert_eq!(found, [2, 4, 7], "{found:?}");
}
