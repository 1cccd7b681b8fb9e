//! The integration tests wait on facts, never on the clock: every wait ends on
//! a counter, an object or a log line, and no test asserts how long something
//! took (that is the benchmark's, `cargo xtask bench`). This scans
//! tests/tests/*.rs and fails on:
//!
//! - an assertion whose condition reads the clock: `elapsed` (the method, or
//!   any name with it), `Instant::now`, or a variable set from `.elapsed()`;
//! - a comparison of `.elapsed()` (or such a variable) outside a `while`
//!   condition: a loop that polls a fact until a generous bound, then fails
//!   with a message, is the one place a test compares times (to end a hang);
//! - a `sleep` outside a loop's body: the straight-line (or once-polled) sleep
//!   that a "nothing happened" assertion follows; polling and pacing a
//!   workload sleep inside loops.
//!
//! It does not judge comparisons of instants the test API server recorded
//! (request arrival order): "the retry came no sooner than Retry-After after
//! the 429" is an order of events, which a slow machine cannot break.
//! No root needed: it reads source files.
#![allow(clippy::unwrap_used, reason = "tests unwrap to keep the stack trace")]

use std::{fmt::Write as _, path::Path};

use proc_macro2::{Delimiter, Span, TokenStream, TokenTree};

/// What a violation is: the file, its line and which rule.
#[derive(Debug, PartialEq, Eq)]
struct Violation {
    line: usize,
    rule: &'static str,
    text: String,
}

/// `src` with comments, string and char literals blanked (spaces, newlines
/// kept) and every other non-ASCII byte a space: byte positions match
/// `src`'s lines, and no message text looks like code. Lexed by proc-macro2,
/// Rust's own tokenizer outside a compiler: what is no token (a comment) stays
/// blank, each token is written back where it stands.
fn code_only(src: &str) -> String {
    let mut out: Vec<u8> = src
        .bytes()
        .map(|b| if b == b'\n' { b'\n' } else { b' ' })
        .collect();
    let tokens: TokenStream = src.parse().expect("the source lexes as Rust");
    write_back(tokens, src, &mut out);
    String::from_utf8(out).expect("ASCII")
}

/// Writes each token of `tokens` back into `out` at its place in `src`: a
/// literal's quotes (and a raw string's hashes) without its text. A doc
/// comment lexes as `#[doc = "…"]` spanning the comment: no token of it is
/// where its text is, so none is written.
fn write_back(tokens: TokenStream, src: &str, out: &mut [u8]) {
    for token in tokens {
        match token {
            TokenTree::Group(g) => {
                let (open, close) = match g.delimiter() {
                    Delimiter::Parenthesis => ("(", ")"),
                    Delimiter::Brace => ("{", "}"),
                    Delimiter::Bracket => ("[", "]"),
                    Delimiter::None => ("", ""),
                };
                // A doc comment's `[…]` spans the comment: nothing of it is code.
                if src.get(g.span_open().byte_range()) != Some(open) {
                    continue;
                }
                put(out, src, g.span_open(), open, |_| true);
                put(out, src, g.span_close(), close, |_| true);
                write_back(g.stream(), src, out);
            }
            TokenTree::Literal(l) => {
                let text = l.to_string();
                let quoted = text.find(['"', '\'']).zip(text.rfind(['"', '\'']));
                put(out, src, l.span(), &text, |k| {
                    quoted.is_none_or(|(q, e)| k <= q || k >= e)
                });
            }
            other => put(out, src, other.span(), &other.to_string(), |_| true),
        }
    }
}

/// `text` written into `out` where `span` stands, the bytes `keep` keeps
/// (ASCII only), if `src` has that text there.
fn put(out: &mut [u8], src: &str, span: Span, text: &str, keep: impl Fn(usize) -> bool) {
    let range = span.byte_range();
    if src.get(range.clone()) != Some(text) {
        return;
    }
    for (k, b) in text.bytes().enumerate() {
        if b.is_ascii() && keep(k) {
            out[range.start + k] = b;
        }
    }
}

fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// Where the statement (or block header) holding `pos` starts: just after the
/// last `;`, `{` or `}` before it outside any (), [] or {} it is not in.
fn statement_start(t: &[u8], pos: usize) -> usize {
    let mut depth = 0usize;
    let mut i = pos;
    while i > 0 {
        i -= 1;
        match t[i] {
            b')' | b']' => depth += 1,
            b'}' if depth > 0 => depth += 1,
            b'(' | b'[' | b'{' if depth > 0 => depth -= 1,
            b'{' | b'}' | b';' => return i + 1,
            _ => {}
        }
    }
    0
}

/// Whether the statement holding `pos` is a `while` loop's header.
fn in_while_condition(t: &[u8], pos: usize) -> bool {
    let head = std::str::from_utf8(&t[statement_start(t, pos)..pos])
        .unwrap()
        .trim_start();
    // A label first: `'outer: while …`.
    let head = match head.strip_prefix('\'') {
        Some(rest) => rest
            .split_once(':')
            .map_or(head, |(_, after)| after.trim_start()),
        None => head,
    };
    head.starts_with("while ") || head.starts_with("while(")
}

/// The kind of block a `{` at `pos` opens, from its header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Block {
    Loop,
    /// A closure or a function: a sleep in it is not in any loop of its caller's.
    Body,
    Other,
}

fn block_kind(t: &[u8], pos: usize) -> Block {
    let head = std::str::from_utf8(&t[statement_start(t, pos)..pos]).unwrap();
    let trimmed = head.trim();
    let unlabeled = match trimmed.strip_prefix('\'') {
        Some(rest) => rest.split_once(':').map_or(trimmed, |(_, a)| a.trim()),
        None => trimmed,
    };
    let word = |w: &str| {
        unlabeled == w
            || unlabeled.starts_with(&format!("{w} "))
            || unlabeled.starts_with(&format!("{w}("))
    };
    // `loop {` also as a value: `let x = loop {`.
    let value_loop = trimmed
        .strip_suffix("loop")
        .is_some_and(|before| before.trim_end().ends_with('='));
    if word("while") || word("loop") || word("for") || value_loop {
        return Block::Loop;
    }
    // `|args| {`, `move || {`, `|x| -> T {`.
    let closure = trimmed.ends_with('|')
        || trimmed
            .rsplit_once("->")
            .is_some_and(|(before, _)| before.trim_end().ends_with('|'));
    let function = trimmed
        .split(|ch: char| !(ch.is_ascii_alphanumeric() || ch == '_'))
        .any(|w| w == "fn");
    if closure || function {
        Block::Body
    } else {
        Block::Other
    }
}

/// Positions of `word` as a whole identifier in `t`.
fn find_word(t: &[u8], word: &str) -> Vec<usize> {
    let w = word.as_bytes();
    (0..t.len().saturating_sub(w.len() - 1))
        .filter(|&i| {
            &t[i..i + w.len()] == w
                && (i == 0 || !is_ident(t[i - 1]))
                && t.get(i + w.len()).is_none_or(|b| !is_ident(*b))
        })
        .collect()
}

/// The end of the balanced group opened at `open`, one past its closer.
fn group_end(t: &[u8], open: usize) -> usize {
    let mut depth = 0usize;
    for (i, b) in t.iter().enumerate().skip(open) {
        match b {
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => {
                depth -= 1;
                if depth == 0 {
                    return i + 1;
                }
            }
            _ => {}
        }
    }
    t.len()
}

/// The top-level arguments of the group `t[open..end]` (without its brackets).
fn arguments(t: &[u8], open: usize, end: usize) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let (mut depth, mut from) = (0usize, open + 1);
    for (i, b) in t.iter().enumerate().take(end - 1).skip(open + 1) {
        match b {
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => depth -= 1,
            b',' if depth == 0 => {
                out.push((from, i));
                from = i + 1;
            }
            _ => {}
        }
    }
    out.push((from, end - 1));
    out
}

/// Names set from an expression that reads `.elapsed()` (`let x = …;` or `x = …;`).
fn timing_variables(t: &[u8]) -> Vec<String> {
    let mut names = Vec::new();
    for at in find_word(t, "elapsed") {
        let start = statement_start(t, at);
        let stmt = std::str::from_utf8(&t[start..at]).unwrap();
        // The first `=` that is an assignment (not `==`, `<=`, `>=`, `!=`, `=>`).
        let b = stmt.as_bytes();
        let assign = (0..b.len()).find(|&k| {
            b[k] == b'='
                && b.get(k + 1).is_none_or(|n| *n != b'=' && *n != b'>')
                && (k == 0 || !b"=<>!+-*/".contains(&b[k - 1]))
        });
        let Some(assign) = assign else { continue };
        let target = stmt[..assign].trim();
        let target = target.strip_prefix("let ").unwrap_or(target).trim();
        let target = target.strip_prefix("mut ").unwrap_or(target).trim();
        let name = target.split(':').next().unwrap_or("").trim();
        if !name.is_empty() && name.bytes().all(is_ident) && !names.iter().any(|n| n == name) {
            names.push(name.to_owned());
        }
    }
    names
}

/// Whether a comparison operator sits right before `from` or right after `to`
/// (after a method chain such as `.as_secs()`).
fn compared(t: &[u8], from: usize, to: usize) -> bool {
    // After: `.elapsed()` `.as_secs_f64()` … then `<`, `<=`, `>`, `>=`.
    let mut j = to;
    loop {
        while j < t.len() && t[j] == b' ' {
            j += 1;
        }
        if t.get(j) == Some(&b'(') {
            j = group_end(t, j);
            continue;
        }
        if t.get(j) == Some(&b'.') {
            j += 1;
            while j < t.len() && is_ident(t[j]) {
                j += 1;
            }
            continue;
        }
        break;
    }
    let after = match (t.get(j), t.get(j + 1)) {
        (Some(b'<'), next) => next != Some(&b'<'),
        (Some(b'>'), next) => next != Some(&b'>'),
        _ => false,
    };
    // Before: the operand's start (a path or field chain), then the operator.
    let mut i = from;
    while i > 0 && (is_ident(t[i - 1]) || t[i - 1] == b'.' || t[i - 1] == b':' || t[i - 1] == b'*')
    {
        i -= 1;
    }
    while i > 0 && t[i - 1] == b' ' {
        i -= 1;
    }
    let before = match (
        i.checked_sub(2).map(|k| t[k]),
        i.checked_sub(1).map(|k| t[k]),
    ) {
        (Some(p), Some(b'=')) => p == b'<' || p == b'>',
        (p, Some(b'<')) => p != Some(b'<'),
        (p, Some(b'>')) => !matches!(p, Some(b'-' | b'=' | b'>')),
        _ => false,
    };
    after || before
}

fn line_of(t: &[u8], pos: usize) -> usize {
    std::str::from_utf8(&t[..pos])
        .unwrap()
        .matches('\n')
        .count()
        + 1
}

/// Every violation in the source text `src`.
fn check(src: &str) -> Vec<Violation> {
    let code = code_only(src);
    let t = code.as_bytes();
    let lines: Vec<&str> = src.lines().collect();
    let mut out = Vec::new();
    let mut flag = |pos: usize, rule: &'static str| {
        let line = line_of(t, pos);
        let v = Violation {
            line,
            rule,
            text: lines.get(line - 1).unwrap_or(&"").trim().to_owned(),
        };
        if !out.contains(&v) {
            out.push(v);
        }
    };
    let timing = timing_variables(t);

    // Assertions whose condition reads the clock.
    let macros = [
        ("assert", 1),
        ("assert_eq", 2),
        ("assert_ne", 2),
        ("debug_assert", 1),
        ("debug_assert_eq", 2),
        ("debug_assert_ne", 2),
        ("prop_assert", 1),
        ("prop_assert_eq", 2),
        ("prop_assert_ne", 2),
    ];
    for (name, conditions) in macros {
        for at in find_word(t, name) {
            let mut open = at + name.len();
            if t.get(open) != Some(&b'!') {
                continue;
            }
            open += 1;
            while t.get(open) == Some(&b' ') {
                open += 1;
            }
            if t.get(open) != Some(&b'(') {
                continue;
            }
            let end = group_end(t, open);
            for (from, to) in arguments(t, open, end).into_iter().take(conditions) {
                let cond = &t[from..to];
                let reads_clock = std::str::from_utf8(cond).unwrap().contains("Instant::now")
                    || cond
                        .split(|b| !is_ident(*b))
                        .any(|w| w.windows(7).any(|x| x == b"elapsed"))
                    || timing.iter().any(|v| !find_word(cond, v).is_empty());
                if reads_clock {
                    let first = (from..to).find(|&k| !t[k].is_ascii_whitespace());
                    flag(first.unwrap_or(at), "an assertion on the clock");
                }
            }
        }
    }

    // Comparisons of measured time outside a `while` condition.
    let mut measured: Vec<(usize, usize)> = find_word(t, "elapsed")
        .into_iter()
        .filter(|&at| t.get(at + 7) == Some(&b'('))
        .map(|at| (at, at + 7))
        .collect();
    for v in &timing {
        measured.extend(find_word(t, v).into_iter().map(|at| (at, at + v.len())));
    }
    for (from, to) in measured {
        if compared(t, from, to) && !in_while_condition(t, from) {
            flag(
                from,
                "a comparison of elapsed time outside a while condition",
            );
        }
    }

    // Sleeps outside a loop's body.
    let mut stack: Vec<Block> = Vec::new();
    for (i, b) in t.iter().enumerate() {
        match b {
            b'{' => stack.push(block_kind(t, i)),
            b'}' => {
                stack.pop();
            }
            b's' if t[i..].starts_with(b"sleep(") && (i == 0 || !is_ident(t[i - 1])) => {
                let in_loop = stack
                    .iter()
                    .rev()
                    .find(|k| **k != Block::Other)
                    .is_some_and(|k| *k == Block::Loop);
                if !in_loop {
                    flag(i, "a sleep outside a loop (wait on a fact instead)");
                }
            }
            _ => {}
        }
    }
    out.sort_by_key(|v| v.line);
    out
}

#[test]
fn no_test_waits_on_the_clock_or_asserts_a_timing() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        .collect();
    files.sort();
    let (mut report, mut asserts) = (String::new(), 0);
    for file in &files {
        let src = std::fs::read_to_string(file).unwrap();
        asserts += find_word(code_only(&src).as_bytes(), "assert").len();
        for v in check(&src) {
            writeln!(
                report,
                "{}:{}: {}: {}",
                file.file_name().unwrap().to_string_lossy(),
                v.line,
                v.rule,
                v.text
            )
            .unwrap();
        }
    }
    // The scan saw the tests (a wrong path would pass on nothing).
    assert!(files.len() >= 10, "{files:?}");
    assert!(asserts >= 100, "{asserts} assertions found");
    assert!(report.is_empty(), "tests that wait on the clock:\n{report}");
}

/// The rules catch what they are for: each snippet is one the tests had.
#[test]
fn the_scan_flags_timing_assertions_and_bare_sleeps() {
    let rules = |src: &str| check(src).into_iter().map(|v| v.rule).collect::<Vec<_>>();
    let clock = "an assertion on the clock";
    let compare = "a comparison of elapsed time outside a while condition";
    let sleep = "a sleep outside a loop (wait on a fact instead)";
    // A hang bound written as an assertion.
    assert_eq!(
        rules(
            r#"fn f() { loop { if done() { break; }
                assert!(start.elapsed() < HANG, "no Events");
                std::thread::sleep(Duration::from_millis(50)); } }"#
        ),
        [clock, compare]
    );
    // A count against the time it took.
    assert_eq!(
        rules(
            r#"fn f() { let elapsed = start.elapsed();
                assert!(asked <= 5 + elapsed.as_secs() / 5 + 1, "{asked} in {elapsed:?}"); }"#
        ),
        [clock]
    );
    // A latency, through a variable.
    assert_eq!(
        rules(
            r#"fn f() { let mut slowest = Duration::ZERO;
                loop { let asked = Instant::now(); get(); slowest = slowest.max(asked.elapsed()); break; }
                assert!(slowest < Duration::from_secs(3), "/healthz took {slowest:?}"); }"#
        ),
        [clock, compare]
    );
    // A timing that fails the test without an assert.
    assert_eq!(
        rules(r#"fn f() { if start.elapsed() > HANG { panic!("hang"); } }"#),
        [compare]
    );
    // Sleeps a "nothing happened" follows: straight-line, and inside a polled closure.
    assert_eq!(
        rules(
            r"fn f() { apply();
                std::thread::sleep(Duration::from_secs(1));
                assert_eq!(reconciles(), before); }"
        ),
        [sleep]
    );
    assert_eq!(
        rules(
            r#"fn f() { for r in 0..3 { wait_for("quiet", HANG, || {
                let a = counts(); std::thread::sleep(Duration::from_millis(500));
                (counts() == a).then_some(a) }); } }"#
        ),
        [sleep]
    );
    // A value loop is a loop: its poll's sleep is no violation, its hang
    // bound written as an assertion is.
    assert_eq!(
        rules(
            r#"fn f() { let e = loop { if let Some(e) = event() { break e; }
                assert!(started.elapsed() < HANG * 2, "no Event");
                std::thread::sleep(Duration::from_millis(50)); }; }"#
        ),
        [clock, compare]
    );
    // What stays allowed: a while-bounded poll, pacing in a loop, timings in
    // messages and figures, and words in strings and comments.
    assert!(
        check(
            r#"fn f() {
                while !open.is_empty() && start.elapsed() < HANG {
                    std::thread::sleep(Duration::from_millis(100));
                }
                let closed_in = start.elapsed();
                assert!(open.is_empty(), "still open after {closed_in:?}");
                for _ in 0..20 { std::thread::sleep(after); kill(); }
                figure(format!("read in {:?}", start.elapsed()));
                assert!(ok, "elapsed() < 3 s; sleep(1)"); // assert!(t.elapsed() < X)
                let c = '{';
                assert!(w[1] - w[0] >= floor, "{:?}", w[1] - w[0]);
            }"#
        )
        .is_empty()
    );
}

#[test]
fn comments_and_literal_text_are_blanked_and_code_kept_in_place() {
    let src = "/// see [`x`]\nfn f() { let s = \"{(\"; let c = '}'; g(r#\"]\"#) } // [\n";
    let want = "             \nfn f() { let s = \"  \"; let c = ' '; g(r#\" \"#) }     \n";
    assert_eq!(code_only(src), want);
}
