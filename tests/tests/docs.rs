//! The documentation agrees with the code: docs/reference.md's flag tables are
//! what the CLI's clap definitions render, every alert's `runbook_url` lands on
//! its own heading of docs/runbooks.md, every relative link between the docs
//! resolves (file and heading), every code path the architecture names exists,
//! and the README gives the two commands CI runs.
//! No root, no eBPF program and no cluster needed.
#![allow(clippy::unwrap_used, reason = "tests unwrap to keep the stack trace")]

use std::{
    collections::{BTreeMap, BTreeSet},
    fmt::Write as _,
    path::{Path, PathBuf},
};

use ipshadow::{
    cli::reference,
    detect::{
        FindingKind,
        kind::{Alert, Count},
    },
};
use ipshadow_tests::deploy;

/// Where the runbooks are published; each alert's anchor follows.
const RUNBOOKS: &str = "https://github.com/ipshadow/ipshadow/blob/main/docs/runbooks.md#";

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("reading {rel}: {e}"))
}

/// The lines of `text` outside fenced code blocks, with their line numbers.
fn prose(text: &str) -> Vec<(usize, &str)> {
    let mut fenced = false;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if !fenced {
            out.push((i + 1, line));
        }
    }
    out
}

/// GitHub's anchor of a heading: lowercase, spaces to '-', every other
/// character but letters, digits, '-' and '_' dropped.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// Every anchor of a Markdown file's headings, repeats numbered as GitHub does.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = BTreeSet::new();
    for (_, line) in prose(text) {
        let Some(heading) = line
            .strip_prefix('#')
            .map(|h| h.trim_start_matches('#'))
            .filter(|h| h.starts_with(' '))
        else {
            continue;
        };
        let a = anchor(heading);
        let n = seen.entry(a.clone()).or_default();
        out.insert(if *n == 0 {
            a.clone()
        } else {
            format!("{a}-{n}")
        });
        *n += 1;
    }
    out
}

/// A line diff, enough to show where a generated text drifted.
fn diff(want: &str, have: &str) -> String {
    let (w, h): (Vec<&str>, Vec<&str>) = (want.lines().collect(), have.lines().collect());
    // Longest common subsequence, then walk it.
    let mut lcs = vec![vec![0usize; h.len() + 1]; w.len() + 1];
    for i in (0..w.len()).rev() {
        for j in (0..h.len()).rev() {
            lcs[i][j] = if w[i] == h[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let (mut i, mut j, mut out) = (0, 0, String::new());
    while i < w.len() || j < h.len() {
        if i < w.len() && j < h.len() && w[i] == h[j] {
            i += 1;
            j += 1;
        } else if j < h.len() && (i == w.len() || lcs[i][j + 1] >= lcs[i + 1][j]) {
            let _ = writeln!(out, "- {}", h[j]);
            j += 1;
        } else {
            let _ = writeln!(out, "+ {}", w[i]);
            i += 1;
        }
    }
    out
}

#[test]
fn the_flag_reference_is_what_the_cli_renders() {
    let doc = read("docs/reference.md");
    let want = reference::splice(&doc).unwrap_or_else(|| {
        panic!(
            "docs/reference.md lacks the lines {:?} and {:?} around its flag tables, {:?} \
             and {:?} around its finding kinds, or {:?} and {:?} around the CNIs' devices",
            reference::BEGIN,
            reference::END,
            reference::KINDS_BEGIN,
            reference::KINDS_END,
            reference::CNIS_BEGIN,
            reference::CNIS_END
        )
    });
    assert!(
        want == doc,
        "docs/reference.md's flag tables, finding kinds or CNI devices differ from the clap \
         definitions and the kinds' and CNIs' declarations in agent/src \
         (- in the file, + generated). Run `cargo xtask docs` to regenerate them \
         (or `cargo run -p ipshadow -- docs --write docs/reference.md`):\n{}",
        diff(&want, &doc)
    );
}

#[test]
fn every_runbook_url_lands_on_its_own_heading_of_docs_runbooks() {
    let runbooks = read("docs/runbooks.md");
    let headings = anchors(&runbooks);
    let rules = deploy::yaml_stream(read("deploy/monitoring/prometheusrule.yaml").as_bytes());
    let rules = rules[0]["spec"]["groups"][0]["rules"].as_array().unwrap();
    let mut urls = BTreeMap::new();
    for r in rules {
        let alert = r["alert"].as_str().unwrap();
        let url = r["annotations"]["runbook_url"].as_str().unwrap();
        let target = url
            .strip_prefix(RUNBOOKS)
            .unwrap_or_else(|| panic!("{alert}: runbook_url {url} is not under {RUNBOOKS}"));
        assert!(
            headings.contains(target),
            "{alert}: #{target} is no heading of docs/runbooks.md; its headings: {headings:#?}"
        );
        assert_eq!(
            target,
            anchor(alert),
            "{alert}'s runbook is the heading `## {alert}`"
        );
        urls.insert(alert.to_owned(), url.to_owned());
    }
    assert!(urls.len() >= 15, "{urls:#?}");
    // Every alert's runbook heading, and no runbook for an alert that is gone.
    for (_, line) in prose(&runbooks) {
        if let Some(alert) = line.strip_prefix("## IPShadow") {
            assert!(
                urls.contains_key(&format!("IPShadow{alert}")),
                "docs/runbooks.md has a runbook for IPShadow{alert}, which no rule has"
            );
        }
    }
    // promtool compares the annotations exactly: the test file's must match.
    let tests = deploy::yaml_stream(read("tests/prometheus/alerts_test.yaml").as_bytes());
    let mut checked = 0;
    for t in tests[0]["tests"].as_array().unwrap() {
        for case in t["alert_rule_test"].as_array().unwrap() {
            let alert = case["alertname"].as_str().unwrap();
            for a in case["exp_alerts"].as_array().unwrap_or(&Vec::new()) {
                let url = &a["exp_annotations"]["runbook_url"];
                assert_eq!(
                    url.as_str(),
                    urls.get(alert).map(String::as_str),
                    "tests/prometheus/alerts_test.yaml expects another runbook_url for {alert}"
                );
                checked += 1;
            }
        }
    }
    assert!(checked >= 15, "only {checked} expected alerts");
}

/// The finding kinds a PromQL expression selects by name (`kind="X"`,
/// `kind=~"X|Y"`), and those its family counts alone.
fn kinds_selected(expr: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (at, _) in expr.match_indices("kind=") {
        let rest = expr[at + 5..].trim_start_matches('~');
        if let Some(names) = rest.strip_prefix('"').and_then(|r| r.split_once('"')) {
            out.extend(names.0.split('|').map(str::to_owned));
        }
    }
    // The families that carry no kind label count every kind of their family.
    for (family, count) in [
        ("ipshadow_host_route_blackholes", Count::HostRouteBlackholes),
        ("ipshadow_allocator_overlaps", Count::AllocatorOverlaps),
    ] {
        if expr.contains(family) {
            out.extend(
                FindingKind::all()
                    .filter(|k| k.spec().count == count)
                    .map(|k| k.as_str().to_owned()),
            );
        }
    }
    out
}

/// Each kind's declaration (`Spec::alert`) names an alert the rules hold,
/// whose expression selects the kind and which has a runbook heading; a kind
/// that pages on nothing is in runbooks.md's "Findings that do not page".
#[test]
fn every_finding_kind_pages_or_its_runbook_says_why_not() {
    let rules = deploy::yaml_stream(read("deploy/monitoring/prometheusrule.yaml").as_bytes());
    let mut selects = BTreeMap::<String, BTreeSet<String>>::new();
    for r in rules[0]["spec"]["groups"][0]["rules"].as_array().unwrap() {
        let alert = r["alert"].as_str().unwrap().to_owned();
        selects.insert(alert, kinds_selected(r["expr"].as_str().unwrap()));
    }
    let runbooks = read("docs/runbooks.md");
    let headings = anchors(&runbooks);
    let section = runbooks
        .split("\n## Findings that do not page\n")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .expect("docs/runbooks.md has no section \"Findings that do not page\"");
    let mut unpaged = BTreeSet::new();
    for row in section.lines().filter(|l| l.starts_with("| `")) {
        let first = row.split('|').nth(1).unwrap();
        unpaged.extend(first.split('`').skip(1).step_by(2).map(str::to_owned));
    }
    for k in FindingKind::all() {
        let name = k.as_str().to_owned();
        match k.spec().alert {
            Alert::Named(alert) => {
                assert!(
                    selects.get(alert).is_some_and(|s| s.contains(&name)),
                    "{k} pages on {alert}, which deploy/monitoring/prometheusrule.yaml lacks or \
                     whose expression does not select it: {selects:#?}"
                );
                assert!(
                    headings.contains(&anchor(alert)),
                    "{k} pages on {alert}, which has no heading in docs/runbooks.md"
                );
            }
            Alert::None(_) => {
                assert!(
                    unpaged.contains(&name),
                    "{k} pages on no alert: docs/runbooks.md's \"Findings that do not page\" \
                     must say why"
                );
                let paging: Vec<&String> = selects
                    .iter()
                    .filter(|(_, s)| s.contains(&name))
                    .map(|(a, _)| a)
                    .collect();
                assert!(
                    paging.is_empty(),
                    "{k} declares it pages on no alert, yet {paging:?} select it (a family without \
                     a kind label counts every kind of the family)"
                );
            }
        }
    }
    let kinds: BTreeSet<String> = FindingKind::all().map(|k| k.as_str().to_owned()).collect();
    for (alert, selected) in &selects {
        for kind in selected {
            assert!(
                kinds.contains(kind),
                "{alert} selects {kind:?}, no finding kind"
            );
        }
    }
    for kind in &unpaged {
        assert!(
            kinds.contains(kind),
            "docs/runbooks.md says why {kind} does not page, which is no finding kind"
        );
    }
}

/// `[text](target)` targets on the prose lines of `text`.
fn links(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (n, line) in prose(text) {
        let mut rest = line;
        while let Some(i) = rest.find("](") {
            let tail = &rest[i + 2..];
            let Some(end) = tail.find(')') else { break };
            out.push((n, tail[..end].to_owned()));
            rest = &tail[end..];
        }
    }
    out
}

#[test]
fn every_relative_link_in_the_docs_resolves() {
    let mut files = vec![PathBuf::from("README.md"), PathBuf::from("bench/README.md")];
    for entry in std::fs::read_dir(root().join("docs")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "md") {
            files.push(path.strip_prefix(root()).unwrap().to_owned());
        }
    }
    assert!(files.len() >= 12, "{files:?}");
    let mut bad = Vec::new();
    let mut count = 0;
    for file in &files {
        let text = read(file.to_str().unwrap());
        for (line, target) in links(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            count += 1;
            let (path, fragment) = target.split_once('#').unwrap_or((&target, ""));
            let dest = if path.is_empty() {
                file.clone()
            } else {
                file.parent().unwrap().join(path)
            };
            let at = format!("{}:{line}: ({target})", file.display());
            let full = root().join(&dest);
            if !full.exists() {
                bad.push(format!("{at}: {} does not exist", dest.display()));
                continue;
            }
            if !fragment.is_empty() {
                let Some(md) = std::fs::read_to_string(&full)
                    .ok()
                    .filter(|_| dest.extension().is_some_and(|e| e == "md"))
                else {
                    bad.push(format!("{at}: an anchor into a file that is no Markdown"));
                    continue;
                };
                if !anchors(&md).contains(fragment) {
                    bad.push(format!(
                        "{at}: no heading of {} has #{fragment}",
                        dest.display()
                    ));
                }
            }
        }
    }
    assert!(bad.is_empty(), "broken links:\n{}", bad.join("\n"));
    assert!(
        count > 40,
        "only {count} relative links: the parser missed them?"
    );
}

/// The code paths the architecture names (`` `daemon/impact.rs` ``, `` `report/events/` ``):
/// each under agent/src or the repository's root, so "where to look" stays true
/// when files move.
#[test]
fn every_code_path_the_architecture_names_exists() {
    let text = read("docs/architecture.md");
    let mut named = 0;
    let mut missing = Vec::new();
    for (line, prose_line) in prose(&text) {
        for (i, quoted) in prose_line.split('`').enumerate() {
            // Odd pieces are inside backticks; a path has a slash and ends in .rs or /.
            let is_path = i % 2 == 1
                && quoted.contains('/')
                && (Path::new(quoted)
                    .extension()
                    .is_some_and(|e| e.eq_ignore_ascii_case("rs"))
                    || quoted.ends_with('/'))
                && !quoted.contains(' ');
            if !is_path {
                continue;
            }
            named += 1;
            let at = |base: PathBuf| base.join(quoted).exists();
            if !at(root().join("agent/src")) && !at(root()) {
                missing.push(format!("docs/architecture.md:{line}: {quoted}"));
            }
        }
    }
    assert!(missing.is_empty(), "no such file:\n{}", missing.join("\n"));
    assert!(named > 40, "only {named} paths: the parser missed them?");
}

#[test]
fn the_readme_gives_the_two_commands_and_ci_runs_the_test_one() {
    let readme = read("README.md");
    let quickstart = readme
        .split("## Quickstart")
        .nth(1)
        .unwrap()
        .split("\n## ")
        .next()
        .unwrap();
    assert!(quickstart.contains("\ncargo xtask demo "), "{quickstart}");
    assert!(quickstart.contains("\ncargo xtask test "), "{quickstart}");
    let ci = read(".ci/run");
    let last = ci.lines().rev().find(|l| !l.trim().is_empty()).unwrap();
    assert_eq!(last.trim(), "cargo xtask test");
}

#[test]
fn github_anchors_drop_punctuation_and_number_repeats() {
    assert_eq!(anchor("IPShadowPodIPCollision"), "ipshadowpodipcollision");
    assert_eq!(anchor("`ipshadow check`"), "ipshadow-check");
    assert_eq!(
        anchor("`ipshadow audit` (and `kubectl ipshadow audit`)"),
        "ipshadow-audit-and-kubectl-ipshadow-audit"
    );
    assert_eq!(
        anchor("What the agent's credentials can do"),
        "what-the-agents-credentials-can-do"
    );
    assert_eq!(
        anchor("Packet path (`packet_path`)"),
        "packet-path-packet_path"
    );
    assert_eq!(
        anchors("# A\n```\n# not a heading\n```\n## A\n### B\n"),
        BTreeSet::from(["a".to_owned(), "a-1".to_owned(), "b".to_owned()])
    );
}
