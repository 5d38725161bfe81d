//! Generates the web UI's TypeScript API types from these Rust types and fails when the
//! committed file `web/src/api/generated/api.ts` differs, so the two cannot drift.
//!
//! Regenerate with `cargo test -p kandev-api-types --test ts_bindings` (it writes the new file
//! and fails once; run it again and commit `web/src/api/generated/`).

use std::path::PathBuf;

use kandev_api_types::requests::*;
use kandev_api_types::*;
use ts_rs::{Config, TS};

/// Every type the UI sees, in the order they appear in the generated file.
fn declarations(cfg: &Config) -> Vec<String> {
    macro_rules! decls {
        ($($t:ty),* $(,)?) => { vec![$(<$t as TS>::decl(cfg)),*] };
    }
    decls![
        // free-form JSON (`serde_json::Value` fields)
        serde_json::Value,
        // errors
        ErrorCode,
        ErrorBody,
        // objects
        WorkspaceDto,
        RepositoryDto,
        ActionDto,
        EventsDto,
        StepDto,
        WorkflowDto,
        TaskDto,
        EnvVarDto,
        AgentProfileDto,
        LastErrorDto,
        SessionDto,
        MessageDto,
        QueuedPromptDto,
        // files and git
        DiffLineDto,
        HunkDto,
        FileChangeDto,
        WorktreeDto,
        TreeEntryDto,
        FileContentDto,
        CommitDto,
        KeptWorktreeDto,
        // requests
        ById,
        Page,
        WorkspaceCreate,
        WorkspaceUpdate,
        ByWorkspace,
        RepositoryCreate,
        RepositoryUpdate,
        WorkflowCreate,
        WorkflowUpdate,
        WorkflowExport,
        WorkflowImport,
        StepCreate,
        StepUpdate,
        StepReorder,
        TaskCreate,
        TaskList,
        TaskUpdate,
        TaskMove,
        ProfileCreate,
        ProfileUpdate,
        ByTask,
        BySession,
        SessionLaunch,
        SessionSetMode,
        SessionSetConfigOption,
        MessageAdd,
        MessageList,
        PermissionRespond,
        QueueAdd,
        QueueUpdate,
        QueueRemove,
        QueueReorder,
        AutoRunSet,
        Subscribe,
        Unsubscribe,
        SessionResume,
        SessionAuthenticate,
        TaskRemove,
        TaskFileRead,
        TaskCommit,
    ]
}

fn generate() -> String {
    // i64 fields (seq, epoch, position) stay far below 2^53: plain numbers in JSON.
    let cfg = Config::new().with_large_int("number");
    let mut out = String::from(
        "// Generated from crates/kandev-api-types by its `ts_bindings` test. Do not edit:\n\
         // change the Rust types, run `cargo test -p kandev-api-types --test ts_bindings`\n\
         // twice and commit this file.\n",
    );
    for decl in declarations(&cfg) {
        out.push('\n');
        out.push_str("export ");
        out.push_str(decl.trim());
        out.push('\n');
    }
    out
}

#[test]
fn typescript_bindings_match_the_rust_types() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../web/src/api/generated");
    let path = dir.join("api.ts");
    let fresh = generate();
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    if committed != fresh {
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(&path, &fresh).unwrap();
        panic!(
            "{} was out of date with the Rust API types and has been regenerated; \
             review and commit it",
            path.display()
        );
    }
}

#[test]
fn generated_types_have_the_shapes_the_ui_relies_on() {
    let text = generate();
    assert!(text.contains("export type ErrorCode = \"BAD_REQUEST\""), "{text}");
    assert!(text.contains("export type TaskDto = {"), "{text}");
    // optional request fields may be left out by the UI
    assert!(text.contains("description?: string"), "{text}");
    // i64 maps to number, not bigint
    assert!(!text.contains("bigint"), "{text}");
}
