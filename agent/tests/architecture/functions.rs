//! No non-test function of the agent over [`MAX_FN_LINES`] lines, none excepted.

use std::{
    collections::BTreeSet,
    path::{Path, PathBuf},
};

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

/// `text` with comments and the contents of string and char literals blanked
/// (newlines kept, so line numbers stay), so braces in them count for nothing.
fn code_only(text: &str) -> Vec<char> {
    let c: Vec<char> = text.chars().collect();
    let mut out = c.clone();
    let blank = |out: &mut Vec<char>, from: usize, to: usize| {
        for ch in &mut out[from..to.min(c.len())] {
            if *ch != '\n' {
                *ch = ' ';
            }
        }
    };
    let mut i = 0;
    while i < c.len() {
        let next = c.get(i + 1).copied();
        let ident_before = i > 0 && (c[i - 1].is_alphanumeric() || c[i - 1] == '_');
        if c[i] == '/' && next == Some('/') {
            let end = c[i..]
                .iter()
                .position(|&x| x == '\n')
                .map_or(c.len(), |p| i + p);
            blank(&mut out, i, end);
            i = end;
        } else if c[i] == '/' && next == Some('*') {
            // Block comments nest in Rust.
            let (mut depth, mut j) = (0, i);
            while j < c.len() {
                if c[j] == '/' && c.get(j + 1) == Some(&'*') {
                    depth += 1;
                    j += 2;
                } else if c[j] == '*' && c.get(j + 1) == Some(&'/') {
                    depth -= 1;
                    j += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    j += 1;
                }
            }
            blank(&mut out, i, j);
            i = j;
        } else if c[i] == 'r' && !ident_before && matches!(next, Some('#' | '"')) {
            // A raw string: r"…", r#"…"#, …
            let hashes = c[i + 1..].iter().take_while(|&&x| x == '#').count();
            if c.get(i + 1 + hashes) != Some(&'"') {
                i += 1;
                continue;
            }
            let mut j = i + 2 + hashes;
            while j < c.len() {
                if c[j] == '"'
                    && c[j + 1..]
                        .iter()
                        .take(hashes)
                        .filter(|&&x| x == '#')
                        .count()
                        == hashes
                {
                    break;
                }
                j += 1;
            }
            blank(&mut out, i + 2 + hashes, j);
            i = j + 1 + hashes;
        } else if c[i] == '"' {
            let mut j = i + 1;
            while j < c.len() && c[j] != '"' {
                j += if c[j] == '\\' { 2 } else { 1 };
            }
            blank(&mut out, i + 1, j);
            i = j + 1;
        } else if c[i] == '\'' {
            // A char literal ('x', '\n', '\u{7f}'), else a lifetime ('a).
            let end = if next == Some('\\') {
                c[i + 2..]
                    .iter()
                    .position(|&x| x == '\'')
                    .map(|p| i + 2 + p)
            } else if c.get(i + 2) == Some(&'\'') {
                Some(i + 2)
            } else {
                None
            };
            if let Some(end) = end {
                blank(&mut out, i + 1, end);
                i = end + 1;
            } else {
                i += 1;
            }
        } else {
            i += 1;
        }
    }
    out
}

/// The index of the brace closing the one at `open`.
fn closing(code: &[char], open: usize) -> usize {
    let mut depth = 0;
    for (i, &ch) in code.iter().enumerate().skip(open) {
        match ch {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return i;
                }
            }
            _ => {}
        }
    }
    code.len()
}

/// Where the item starting at `from` ends: its closing brace, or its `;`.
fn item_end(code: &[char], from: usize) -> usize {
    match code[from..].iter().position(|&x| x == '{' || x == ';') {
        Some(p) if code[from + p] == '{' => closing(code, from + p),
        Some(p) => from + p,
        None => code.len(),
    }
}

fn line_of(code: &[char], i: usize) -> usize {
    code[..i.min(code.len())]
        .iter()
        .filter(|&&x| x == '\n')
        .count()
}

fn is_word(code: &[char], i: usize, word: &str) -> bool {
    let w: Vec<char> = word.chars().collect();
    let ident = |x: &char| x.is_alphanumeric() || *x == '_';
    code.get(i..i + w.len()) == Some(&w[..])
        && (i == 0 || !ident(&code[i - 1]))
        && !code.get(i + w.len()).is_some_and(ident)
}

/// The functions of one file outside `#[cfg(test)]` items, and the modules it
/// declares `#[cfg(test)] mod name;` (test-only files).
fn functions_of(file: &str, text: &str) -> (Vec<Function>, Vec<String>) {
    let code = code_only(text);
    let flat: String = code.iter().collect();
    // The spans of #[cfg(test)] items, and the test-only module files.
    let mut test_spans = Vec::new();
    let mut test_mods = Vec::new();
    for (at, _) in flat.match_indices("#[cfg(test)]") {
        let start = at + "#[cfg(test)]".len();
        let end = item_end(&code, start);
        let item: String = code[start..end.min(code.len())].iter().collect();
        let words: Vec<&str> = item.split_whitespace().collect();
        if let Some(p) = words.iter().position(|w| *w == "mod")
            && code.get(end) == Some(&';')
            && let Some(name) = words.get(p + 1)
        {
            test_mods.push(name.trim_end_matches(';').to_owned());
        }
        test_spans.push(start..end);
    }
    let mut out = Vec::new();
    for i in 0..code.len() {
        if !is_word(&code, i, "fn") || test_spans.iter().any(|s| s.contains(&i)) {
            continue;
        }
        let name: String = code[i + 2..]
            .iter()
            .skip_while(|x| x.is_whitespace())
            .take_while(|x| x.is_alphanumeric() || **x == '_')
            .collect();
        // `fn(u8) -> u8` types and `Fn` bounds are no items.
        if name.is_empty() {
            continue;
        }
        let end = item_end(&code, i);
        if code.get(end) != Some(&'}') {
            continue; // a declaration without a body
        }
        out.push(Function {
            file: file.to_owned(),
            name,
            lines: line_of(&code, end) - line_of(&code, i) + 1,
        });
    }
    (out, test_mods)
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

trait T {
    fn declared(&self);
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
    assert_eq!(got, [("short", 8), ("with_lifetime", 3)]);
    assert_eq!(test_mods, ["fixtures"]);
}
