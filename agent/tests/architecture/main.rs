//! The agent's architecture, checked on its source: imports go one way through
//! the layers (inventory ← cni ← detect ← report ← adapters ← entry points), no
//! module cycle, no file or function over the size a reader holds in mind.
//!
//! Here, in the agent crate, rather than with the root-only tests: it reads
//! files only, so a plain `cargo test` runs it.
#![allow(clippy::unwrap_used, reason = "tests unwrap to keep the stack trace")]

mod functions;

use std::{
    collections::{BTreeMap, BTreeSet},
    path::{Path, PathBuf},
};

/// Each top-level module of the agent and its layer (lower = more basic).
const LAYERS: &[(&str, u8)] = &[
    ("inventory", 0),
    ("cni", 1),
    ("detect", 2),
    ("report", 3),
    ("netlink", 4),
    ("kube", 4),
    ("ebpf", 4),
    ("privileges", 4),
    ("reconcile", 5),
    ("check", 5),
    ("audit", 5),
    ("daemon", 5),
    ("cli", 5),
];

/// Files of the agent may grow to about this many lines (STYLE.md: ~100-500).
const MAX_LINES: usize = 400;

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The top-level module a file belongs to (`None` for lib.rs and main.rs).
fn module_of(file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src()).unwrap();
    let first = rel.components().next()?.as_os_str().to_str()?.to_owned();
    let name = first.trim_end_matches(".rs").to_owned();
    (name != "lib" && name != "main").then_some(name)
}

/// The first path segment of every `crate::…` path in `text`, including each
/// item of a `crate::{a, b::c}` group.
fn crate_imports(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    for (i, _) in text.match_indices("crate::") {
        // `ipshadow_tests::`-like names end in "crate::" only by accident: skip
        // anything preceded by an identifier character.
        if text[..i]
            .chars()
            .last()
            .is_some_and(|c| c.is_alphanumeric() || c == '_')
        {
            continue;
        }
        let rest = &text[i + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            // The group's items, split at depth 0.
            let mut depth = 0;
            let mut item = String::new();
            for c in group.chars() {
                match c {
                    '{' => {
                        depth += 1;
                        item.push(c);
                    }
                    '}' if depth == 0 => break,
                    '}' => {
                        depth -= 1;
                        item.push(c);
                    }
                    ',' if depth == 0 => {
                        out.insert(ident(item.trim()));
                        item.clear();
                    }
                    c => item.push(c),
                }
            }
            if !item.trim().is_empty() {
                out.insert(ident(item.trim()));
            }
        } else {
            out.insert(ident(rest));
        }
    }
    out.retain(|m| !m.is_empty());
    out
}

/// module -> modules it imports, over every file of the agent.
fn import_graph() -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in files {
        let Some(module) = module_of(&f) else {
            continue;
        };
        let text = std::fs::read_to_string(&f).unwrap();
        let imports = crate_imports(&text);
        graph
            .entry(module.clone())
            .or_default()
            .extend(imports.into_iter().filter(|m| *m != module));
    }
    graph
}

fn layer(module: &str) -> u8 {
    LAYERS
        .iter()
        .find(|(m, _)| *m == module)
        .unwrap_or_else(|| {
            panic!("module {module} is in no layer: add it to LAYERS and docs/architecture.md")
        })
        .1
}

#[test]
fn imports_go_down_the_layers_only() {
    let mut upward = Vec::new();
    for (module, imports) in import_graph() {
        for imported in imports {
            if layer(&imported) > layer(&module) {
                upward.push(format!("{module} imports {imported}"));
            }
        }
    }
    assert!(upward.is_empty(), "imports against the layers: {upward:#?}");
}

/// Depth-first search from `m`: the first cycle found, as a path.
fn visit<'a>(
    m: &'a str,
    graph: &'a BTreeMap<String, BTreeSet<String>>,
    path: &mut Vec<&'a str>,
    done: &mut BTreeSet<&'a str>,
) -> Option<Vec<String>> {
    if let Some(i) = path.iter().position(|p| *p == m) {
        let mut cycle: Vec<String> = path[i..].iter().map(|s| (*s).to_owned()).collect();
        cycle.push(m.to_owned());
        return Some(cycle);
    }
    if !done.insert(m) {
        return None;
    }
    path.push(m);
    for next in graph.get(m).into_iter().flatten() {
        if let Some(c) = visit(next, graph, path, done) {
            return Some(c);
        }
    }
    path.pop();
    None
}

#[test]
fn no_module_imports_itself_through_others() {
    let graph = import_graph();
    let mut done = BTreeSet::new();
    for m in graph.keys() {
        let cycle = visit(m, &graph, &mut Vec::new(), &mut done);
        assert!(
            cycle.is_none(),
            "import cycle: {}",
            cycle.unwrap().join(" -> ")
        );
    }
}

#[test]
fn the_layer_table_knows_every_module_of_lib_rs() {
    let lib = std::fs::read_to_string(src().join("lib.rs")).unwrap();
    let declared: BTreeSet<&str> = lib
        .lines()
        .filter_map(|l| l.strip_prefix("pub mod "))
        .map(|l| l.trim_end_matches(';'))
        .collect();
    let known: BTreeSet<&str> = LAYERS.iter().map(|(m, _)| *m).collect();
    assert_eq!(declared, known);
}

#[test]
fn no_agent_file_is_longer_than_a_reader_can_hold() {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let long: Vec<String> = files
        .iter()
        .filter_map(|f| {
            let n = std::fs::read_to_string(f).unwrap().lines().count();
            (n > MAX_LINES).then(|| format!("{} ({n} lines)", f.display()))
        })
        .collect();
    assert!(long.is_empty(), "over {MAX_LINES} lines: {long:#?}");
}

#[test]
fn group_imports_are_split_into_their_modules() {
    let got = crate_imports(
        "use crate::{\n    detect::{Finding, Role},\n    inventory::Pod,\n};\nlet x = crate::report::message::render(f);",
    );
    assert_eq!(
        got,
        ["detect", "inventory", "report"]
            .into_iter()
            .map(str::to_owned)
            .collect()
    );
}
