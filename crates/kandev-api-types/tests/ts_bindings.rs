//! Generates the web UI's TypeScript API types from these Rust types and fails when the
//! committed file `web/src/api/generated/api.ts` differs, so the two cannot drift: every type
//! the action table (`kandev_api_types::actions`) and the notifications reach, the `Actions`
//! map the web client's `call` is typed by, and the notification frame.
//!
//! Regenerate with `cargo test -p kandev-api-types --test ts_bindings` (it writes the new file
//! and fails once; run it again and commit `web/src/api/generated/`).

use std::any::TypeId;
use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;

use kandev_api_types::notifications::typescript_frame;
use kandev_api_types::*;
use ts_rs::{Config, TS, TypeVisitor};

/// Collects the declaration of every type reached, by TypeScript name (the file lists them
/// in name order: ts-rs does not visit dependencies in a fixed order, and TypeScript does not
/// need a type declared before its use).
struct Declarations<'a> {
    cfg: &'a Config,
    seen: HashSet<TypeId>,
    /// TypeScript name -> (Rust type, declaration).
    names: BTreeMap<String, (&'static str, String)>,
}

impl TypeVisitor for Declarations<'_> {
    fn visit<T: TS + 'static + ?Sized>(&mut self) {
        if T::output_path().is_none() {
            // Built in (string, number, arrays, maps...): only what they hold is declared.
            T::visit_generics(self);
            return;
        }
        if !self.seen.insert(TypeId::of::<T>()) {
            return;
        }
        let name = T::ident(self.cfg);
        let rust = std::any::type_name::<T>();
        let decl = T::decl(self.cfg);
        if let Some((other, earlier)) = self.names.get(&name) {
            // ts-rs declares `serde_json::Value` through a stand-in type of the same name.
            assert_eq!(
                earlier, &decl,
                "{rust} and {other} are both called {name} in TypeScript; rename one"
            );
            return;
        }
        self.names.insert(name, (rust, decl));
        T::visit_dependencies(self);
    }
}

fn generate() -> String {
    // i64 fields (seq, epoch, position) stay far below 2^53: plain numbers in JSON.
    let cfg = Config::new().with_large_int("number");
    let mut all = Declarations { cfg: &cfg, seen: HashSet::new(), names: BTreeMap::new() };
    all.visit::<ErrorBody>();
    actions::visit_types(&mut all);
    all.visit::<WorkspacesEvent>();
    all.visit::<ProfilesEvent>();
    all.visit::<NotificationsEvent>();
    all.visit::<AttachmentUploaded>();
    all.visit::<WorkspaceEvent>();
    all.visit::<SessionEvent>();
    let mut out = String::from(
        "// Generated from crates/kandev-api-types by its `ts_bindings` test. Do not edit:\n\
         // change the Rust types, run `cargo test -p kandev-api-types --test ts_bindings`\n\
         // twice and commit this file.\n",
    );
    for (_, decl) in all.names.values() {
        out.push('\n');
        out.push_str("export ");
        out.push_str(decl.trim());
        out.push('\n');
    }
    out.push('\n');
    out.push_str(&actions::typescript(&cfg));
    out.push('\n');
    out.push_str(&typescript_frame());
    out.push('\n');
    out.push_str(&kandev_api_types::frames::typescript_frames());
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
    // optional request fields may be left out by the UI, defaulted ones too
    assert!(text.contains("description?: string"), "{text}");
    assert!(text.contains("start_agent?: boolean"), "{text}");
    // i64 maps to number, not bigint
    assert!(!text.contains("bigint"), "{text}");
    // enums on the wire are unions
    assert!(text.contains("export type SessionStateDto = \"CREATED\" | \"STARTING\""), "{text}");
    assert!(text.contains("state: SessionStateDto"), "{text}");
    // every action of the table is in the map the web client's `call` is typed by
    for name in actions::NAMES {
        assert!(text.contains(&format!("  \"{name}\": {{ request: ")), "{name} missing");
    }
    assert!(text.contains("\"message.add\": { request: MessageAdd, response: MessageAdded }"));
    assert!(text.contains("export type Notification = "), "{text}");
}
