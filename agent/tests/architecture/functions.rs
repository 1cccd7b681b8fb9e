//! No non-test function of the agent over [`MAX_FN_LINES`] lines, none excepted.
//! Functions are what syn parses: those a macro's body writes are the macro's.

use std::{
    collections::BTreeSet,
    path::{Path, PathBuf},
};

use syn::{Attribute, visit::Visit};

use super::{rust_files, src};

/// A function should fit on a screen: a reader holds it in mind whole.
const MAX_FN_LINES: usize = 60;

/// A function's span: from the line of `fn` to the line of its closing brace.
#[derive(Debug)]
struct Function {
    file: String,
    name: String,
    lines: usize,
}

/// Whether an item is `#[cfg(test)]`.
fn is_test(attrs: &[Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg") && a.parse_args::<syn::Ident>().is_ok_and(|i| i == "test")
    })
}

/// The functions with a body outside `#[cfg(test)]` items, and the modules
/// declared `#[cfg(test)] mod name;` (test-only files), as syn parses a file.
struct Functions<'a> {
    file: &'a str,
    found: Vec<Function>,
    test_mods: Vec<String>,
}

impl Functions<'_> {
    fn add(&mut self, name: &syn::Ident, fn_token: &syn::token::Fn, body: &syn::Block) {
        let from = fn_token.span.start().line;
        let to = body.brace_token.span.close().start().line;
        self.found.push(Function {
            file: self.file.to_owned(),
            name: name.to_string(),
            lines: to - from + 1,
        });
    }
}

impl<'ast> Visit<'ast> for Functions<'_> {
    fn visit_item(&mut self, i: &'ast syn::Item) {
        let attrs: &[Attribute] = match i {
            syn::Item::Fn(f) => &f.attrs,
            syn::Item::Impl(m) => &m.attrs,
            syn::Item::Trait(t) => &t.attrs,
            syn::Item::Mod(m) => &m.attrs,
            _ => &[],
        };
        if !is_test(attrs) {
            syn::visit::visit_item(self, i);
        } else if let syn::Item::Mod(m) = i
            && m.content.is_none()
        {
            self.test_mods.push(m.ident.to_string());
        }
    }

    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        self.add(&f.sig.ident, &f.sig.fn_token, &f.block);
        syn::visit::visit_item_fn(self, f);
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        if !is_test(&f.attrs) {
            self.add(&f.sig.ident, &f.sig.fn_token, &f.block);
            syn::visit::visit_impl_item_fn(self, f);
        }
    }

    fn visit_trait_item_fn(&mut self, f: &'ast syn::TraitItemFn) {
        if is_test(&f.attrs) {
            return;
        }
        if let Some(body) = &f.default {
            self.add(&f.sig.ident, &f.sig.fn_token, body);
        }
        syn::visit::visit_trait_item_fn(self, f);
    }
}

/// The functions of one file outside `#[cfg(test)]` items, and the modules it
/// declares `#[cfg(test)] mod name;` (test-only files).
fn functions_of(file: &str, text: &str) -> (Vec<Function>, Vec<String>) {
    let parsed = syn::parse_file(text).unwrap_or_else(|e| panic!("{file}: {e}"));
    let mut v = Functions {
        file,
        found: Vec::new(),
        test_mods: Vec::new(),
    };
    v.visit_file(&parsed);
    (v.found, v.test_mods)
}

/// Every non-test function of agent/src.
fn functions() -> Vec<Function> {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let mut test_files: BTreeSet<PathBuf> = BTreeSet::new();
    let mut all = Vec::new();
    for f in &files {
        let rel = f.strip_prefix(src()).unwrap().display().to_string();
        let (fns, test_mods) = functions_of(&rel, &std::fs::read_to_string(f).unwrap());
        // Where `mod name;` of this file lives: next to lib.rs/main.rs/mod.rs,
        // else in the directory named after the file.
        let stem = f.file_stem().unwrap().to_str().unwrap();
        let dir: PathBuf = if matches!(stem, "lib" | "main" | "mod") {
            f.parent().unwrap().to_owned()
        } else {
            f.with_extension("")
        };
        for m in test_mods {
            test_files.insert(dir.join(format!("{m}.rs")));
            test_files.insert(dir.join(&m).join("mod.rs"));
        }
        all.push((f.clone(), fns));
    }
    all.into_iter()
        .filter(|(f, _)| !is_test_file(f, &test_files))
        .flat_map(|(_, fns)| fns)
        .collect()
}

fn is_test_file(f: &Path, test_files: &BTreeSet<PathBuf>) -> bool {
    test_files.contains(f)
        || test_files
            .iter()
            .filter_map(|t| (t.file_name()? == "mod.rs").then(|| t.parent()).flatten())
            .any(|dir| f.starts_with(dir))
}

#[test]
fn no_agent_function_is_longer_than_a_screen() {
    let fns = functions();
    assert!(
        fns.len() > 500,
        "only {} functions: the parser missed them?",
        fns.len()
    );
    let long: Vec<String> = fns
        .iter()
        .filter(|f| f.lines > MAX_FN_LINES)
        .map(|f| format!("{}: {} ({} lines)", f.file, f.name, f.lines))
        .collect();
    assert!(
        long.is_empty(),
        "functions over {MAX_FN_LINES} lines (split them into named steps): {long:#?}"
    );
}

#[test]
fn functions_are_measured_on_code_not_on_strings_comments_or_tests() {
    let text = r##"
fn short() {
    let s = "}}}{";
    let c = '{';
    // }
    /* { /* } */ */
    let r = r"}";
    let h = r#"{"#;
}

fn with_lifetime<'a>(x: &'a str) -> &'a str {
    x
}

fn destructured(S { a, .. }: S) {
    a;
}

trait T {
    fn declared(&self);
    #[cfg(test)]
    fn only_in_tests(&self) {}
}

#[cfg(test)]
mod tests {
    fn inside_tests() {}
}

#[cfg(test)]
mod fixtures;
"##;
    let (fns, test_mods) = functions_of("x.rs", text);
    let got: Vec<(&str, usize)> = fns.iter().map(|f| (f.name.as_str(), f.lines)).collect();
    // A brace in the parameters is no body: the first brace after `fn` is
    // not where it starts.
    assert_eq!(
        got,
        [("short", 8), ("with_lifetime", 3), ("destructured", 3)]
    );
    assert_eq!(test_mods, ["fixtures"]);
}
