//! Issue 13 (store by aggregate): every table is queried from its aggregate's file only,
//! and no SQL statement is written twice (a read both `Store` and `WriteTx` answer is one
//! function over `db::Db`). Reads the crate's sources, files in module directories too
//! (`tasks/board.rs` belongs to `tasks.rs`); adding a table means naming its file.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Which file owns each table: the only file whose SQL names it.
const OWNERS: &[(&str, &str)] = &[
    ("pg_stat_user_tables", "statistics.rs"),
    ("workspaces", "workspaces.rs"),
    ("repositories", "repositories.rs"),
    ("executors", "executors.rs"),
    ("repository_executors", "executors.rs"),
    ("workflows", "workflows.rs"),
    ("workflow_steps", "workflows.rs"),
    ("tasks", "tasks.rs"),
    ("task_repositories", "tasks.rs"),
    ("task_step_history", "tasks.rs"),
    ("task_blockers", "tasks.rs"),
    ("task_git_summaries", "tasks.rs"),
    ("task_origins", "tasks.rs"),
    ("intake_sources", "intake.rs"),
    ("webhook_deliveries", "intake.rs"),
    ("schedules", "schedules.rs"),
    ("schedule_runs", "schedules.rs"),
    ("user_questions", "questions.rs"),
    ("sessions", "sessions.rs"),
    ("session_runtime", "runtime.rs"),
    ("mcp_tokens", "mcp_tokens.rs"),
    ("child_processes", "children.rs"),
    ("runner_terminals", "children.rs"),
    ("turns", "turns.rs"),
    ("turn_checkpoints", "checkpoints.rs"),
    ("checkpoint_baselines", "checkpoints.rs"),
    ("checkpoint_notices", "checkpoints.rs"),
    ("messages", "messages.rs"),
    ("message_chunks", "messages.rs"),
    ("tasks_fts", "search.rs"),
    ("messages_fts", "search.rs"),
    ("queued_prompts", "queue.rs"),
    ("notifications", "notifications.rs"),
    ("notification_channels", "notifications.rs"),
    ("notification_deliveries", "notifications.rs"),
    ("notification_attempts", "notifications.rs"),
    ("permission_answers", "permissions.rs"),
    ("session_resets", "session_resets.rs"),
    ("agent_profiles", "profiles.rs"),
    ("saved_prompts", "saved_prompts.rs"),
    ("worktrees", "worktrees.rs"),
    ("task_base_branches", "ship.rs"),
    ("task_pull_requests", "ship.rs"),
    ("pr_checks", "feedback.rs"),
    ("pr_events", "feedback.rs"),
    ("review_comments", "ship.rs"),
    ("file_views", "file_views.rs"),
    ("users", "accounts.rs"),
    ("user_sessions", "accounts.rs"),
    ("user_tokens", "accounts.rs"),
    ("workspace_members", "members.rs"),
    ("audit_log", "audit.rs"),
    ("secrets", "secrets.rs"),
    ("secret_imports", "secrets.rs"),
    ("events", "events.rs"),
    ("sqlite_sequence", "events.rs"),
    ("event_seq", "events.rs"),
    ("sqlite_master", "copy.rs"),
    ("kandev_version", "version.rs"),
    ("_sqlx_migrations", "version.rs"),
];

/// The few reads across an aggregate's edge, each for a reason the aggregate owns.
const ALLOWED: &[(&str, &str, &str)] = &[
    ("tasks.rs", "workflow_steps", "board order sorts tasks by their step's position"),
    ("tasks.rs", "sessions", "a deleted primary session is replaced by the task's oldest"),
    ("permissions.rs", "messages", "a permission request is a transcript message"),
    ("turns.rs", "messages", "a turn is named by the prompt it carried (a revert lists them)"),
    ("search.rs", "tasks", "a hit names its task (the index's external content)"),
    ("search.rs", "messages", "a message hit names its message (the index's external content)"),
    ("search.rs", "sessions", "a message hit's task is its session's"),
    ("copy.rs", "tasks", "a copied task's parent is set once every task is in"),
    ("executors.rs", "repositories", "a repository chooses an executor only if it exists"),
    (
        "worktrees.rs",
        "tasks",
        "a refused executor change names the tasks whose worktrees are there",
    ),
    ("members.rs", "users", "a member is listed with their user name"),
    ("messages.rs", "events", "a streamed group writes its messages and events in one round trip"),
    ("messages.rs", "sqlite_sequence", "a streamed group reads the next seq with its heads"),
    ("messages.rs", "event_seq", "a streamed group reads the next seq with its heads"),
];

/// The string literals of a Rust source, with `\`-newline continuations joined.
fn string_literals(src: &str) -> Vec<String> {
    let chars: Vec<char> = src.chars().collect();
    let mut out = vec![];
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '/' if chars.get(i + 1) == Some(&'/') => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
            }
            '\'' if chars.get(i + 1) == Some(&'\\') => i += 4,
            '\'' if chars.get(i + 2) == Some(&'\'') => i += 3,
            '"' => {
                let mut text = String::new();
                i += 1;
                while i < chars.len() && chars[i] != '"' {
                    if chars[i] == '\\' && chars.get(i + 1) == Some(&'\n') {
                        i += 2;
                        while i < chars.len() && chars[i].is_whitespace() {
                            i += 1;
                        }
                        continue;
                    }
                    if chars[i] == '\\' {
                        text.push(chars[i]);
                        i += 1;
                    }
                    if let Some(c) = chars.get(i) {
                        text.push(*c);
                    }
                    i += 1;
                }
                out.push(text);
                i += 1;
            }
            _ => i += 1,
        }
    }
    out
}

/// SQL statements (and fragments that select) among a file's string literals.
fn sql_of(src: &str) -> Vec<String> {
    string_literals(src)
        .into_iter()
        .map(|s| s.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|s| {
            let upper = s.to_uppercase();
            ["SELECT ", "INSERT ", "UPDATE ", "DELETE "].iter().any(|k| upper.starts_with(k))
        })
        .collect()
}

/// SQLite's table-valued functions: named after `FROM` like a table, owned by no aggregate
/// (`json_each` takes many rows in one parameter: the group commit of streamed text).
const TABLE_FUNCTIONS: &[&str] = &["json_each"];

/// The tables a statement names after `FROM`, `INTO`, `UPDATE` (not `DO UPDATE SET`) or
/// `JOIN`.
fn tables_of(sql: &str) -> BTreeSet<String> {
    let words: Vec<&str> = sql.split(|c: char| c.is_whitespace() || c == '(' || c == ')').collect();
    words
        .windows(3)
        .filter(|w| ["FROM", "INTO", "UPDATE", "JOIN"].contains(&w[1].to_uppercase().as_str()))
        .filter(|w| !(w[0].eq_ignore_ascii_case("DO") && w[1].eq_ignore_ascii_case("UPDATE")))
        .map(|w| w[2].trim_matches(',').to_owned())
        .filter(|t| !t.is_empty() && t.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
        .filter(|t| !TABLE_FUNCTIONS.contains(&t.as_str()))
        .collect()
}

/// Every source file of the crate, by the aggregate file it belongs to: `x.rs`, or for a
/// module split into a directory, each file under `x/` as `x.rs` (so a table owned by
/// `tasks.rs` may be queried from `tasks/board.rs`). With each file's source, its path.
fn sources() -> Vec<(String, String, String)> {
    fn walk(dir: &Path, module: Option<&str>, out: &mut Vec<(String, String, String)>) {
        let mut entries: Vec<_> =
            std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
        entries.sort();
        for path in entries {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if path.is_dir() {
                walk(&path, Some(module.unwrap_or(&name)), out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let owner = match module {
                    Some(module) => format!("{module}.rs"),
                    None => name,
                };
                let shown = path.strip_prefix(src_dir()).unwrap().display().to_string();
                out.push((owner, shown, std::fs::read_to_string(&path).unwrap()));
            }
        }
    }
    let mut files = vec![];
    walk(&src_dir(), None, &mut files);
    files
}

fn src_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn i13_each_table_is_queried_from_its_aggregate_file_only() {
    let owners: BTreeMap<&str, &str> = OWNERS.iter().copied().collect();
    let mut problems = vec![];
    for (file, path, src) in sources() {
        for sql in sql_of(&src) {
            for table in tables_of(&sql) {
                match owners.get(table.as_str()) {
                    None => problems.push(format!("{path}: table {table} has no owner in OWNERS")),
                    Some(owner) if *owner == file => {}
                    Some(owner) => {
                        if !ALLOWED.iter().any(|(f, t, _)| *f == file && *t == table) {
                            problems
                                .push(format!("{path} queries {table}, owned by {owner}: {sql}"));
                        }
                    }
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn i13_no_sql_statement_is_written_twice() {
    let mut seen: BTreeMap<String, String> = BTreeMap::new();
    let mut twice = vec![];
    for (_, path, src) in sources() {
        for sql in sql_of(&src) {
            if let Some(first) = seen.insert(sql.clone(), path.clone()) {
                twice.push(format!("{first} and {path}: {sql}"));
            }
        }
    }
    assert!(twice.is_empty(), "written twice:\n{}", twice.join("\n"));
}

#[test]
fn the_sql_scanner_finds_tables_and_statements() {
    let src = "let c = '\\\\'; // \"SELECT x FROM comment\"\nlet q = \"INSERT INTO t1 SELECT a FROM t1 JOIN t2 \\\n    ON x WHERE y IN (SELECT b FROM t3) ON CONFLICT(a) DO UPDATE SET a = 1\";";
    let sql = sql_of(src);
    assert_eq!(
        sql,
        vec![
            "INSERT INTO t1 SELECT a FROM t1 JOIN t2 ON x WHERE y IN (SELECT b FROM t3) ON CONFLICT(a) DO UPDATE SET a = 1"
        ]
    );
    let tables: Vec<String> = tables_of(&sql[0]).into_iter().collect();
    assert_eq!(tables, ["t1", "t2", "t3"]);
}

#[test]
fn files_of_a_module_directory_are_scanned_as_their_aggregates() {
    let files = sources();
    let owner_of = |path: &str| files.iter().find(|(_, p, _)| p == path).map(|(o, _, _)| o.clone());
    assert_eq!(owner_of("tasks/board.rs").as_deref(), Some("tasks.rs"));
    assert_eq!(owner_of("messages/group.rs").as_deref(), Some("messages.rs"));
    assert_eq!(owner_of("sql.rs").as_deref(), Some("sql.rs"));
}
