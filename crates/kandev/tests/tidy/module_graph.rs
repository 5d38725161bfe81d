//! The imports between the modules of one crate, read from its sources with `syn`.
//!
//! A module is one `.rs` file (`src/lib.rs` is `crate`, `src/a/mod.rs` and `src/a.rs` are
//! `crate::a`); a module inline in a file (`mod tests { .. }`) belongs to its file. An edge
//! goes from a file to every module a path in it names: `use crate::..`, `use super::..`,
//! `use self::..`, a path into a child module declared in the file (`session::Command` in
//! `lib.rs`), and the same paths written out in code (`crate::write::add_message(..)`). A
//! path to an item that a module re-exports (`pub use a::Name`) leads to the module it comes
//! from, so a crate root that only re-exports is no hub every module depends on; a path to
//! an item defined in the root (or any module) leads there. Limits: paths inside macro
//! invocations (`json!`, `tracing::info!`) are not seen, nor `#[path]` attributes or items
//! brought in by a glob re-export.

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
fn expand(tree: &syn::UseTree, prefix: Vec<String>, out: &mut Vec<(Vec<String>, Option<String>)>) {
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
        syn::UseTree::Name(n) => out.push((with(n.ident.to_string()), Some(n.ident.to_string()))),
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
                let module = std::iter::once("crate".to_owned()).chain(parts).collect::<Vec<_>>();
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
        let here: Vec<String> = split(module).into_iter().chain(scope.iter().cloned()).collect();
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
