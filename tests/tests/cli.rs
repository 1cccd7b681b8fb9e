//! The command line as a kubectl user meets it: `-o yaml` and `-o wide`,
//! `--help` with the cluster connection before the input files and with
//! examples, and an error's cause printed once. The binary runs `audit` from
//! files: no root, no cluster.
#![allow(clippy::unwrap_used, reason = "tests unwrap to keep the stack trace")]

use std::process::{Command, Output};

use ipshadow_tests::{
    TempDir, ipshadow_bin,
    lab::{ME, OTHER, ROUTER},
    objects::{cilium_node, pod, write_list},
};
use serde_json::Value;

fn ipshadow(args: &[&str]) -> Output {
    Command::new(ipshadow_bin()).args(args).output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// An audit from files of node-a's router IP held by a pod on node-b.
fn audit(dir: &TempDir, output: &str) -> Output {
    let pods = dir.join("pods.json");
    write_list(
        &pods,
        [pod("kubevirt", "virt-operator-0", OTHER, &[ROUTER])],
    );
    let cns = dir.join("ciliumnodes.json");
    write_list(&cns, [cilium_node(ME, ROUTER, None, None)]);
    let (pods, cns) = (pods.to_str().unwrap(), cns.to_str().unwrap());
    ipshadow(&["audit", "--pods", pods, "--ciliumnodes", cns, "-o", output])
}

#[test]
fn yaml_is_the_json_document_and_wide_adds_columns() {
    let dir = TempDir::new("cli-output");
    let json = audit(&dir, "json");
    assert_eq!(json.status.code(), Some(1), "{}", text(&json.stderr));
    let json: Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(json["findings"], 1, "{json:#}");
    let yaml = audit(&dir, "yaml");
    assert_eq!(yaml.status.code(), Some(1), "{}", text(&yaml.stderr));
    let yaml: Value = serde_norway::from_slice(&yaml.stdout).unwrap();
    assert_eq!(yaml, json);

    let header = |out: &Output| {
        let out = text(&out.stdout);
        out.lines()
            .find(|l| l.starts_with("KIND"))
            .unwrap()
            .to_owned()
    };
    let (narrow, wide) = (header(&audit(&dir, "text")), header(&audit(&dir, "wide")));
    assert!(narrow.ends_with("TRUST"), "{narrow}");
    assert!(!narrow.contains("SEVERITY"), "{narrow}");
    assert!(wide.starts_with(&narrow), "{wide}");
    assert!(
        wide.contains("SEVERITY") && wide.contains("IP SOURCE"),
        "{wide}"
    );
}

#[test]
fn help_puts_the_cluster_connection_first_the_files_last_and_gives_examples() {
    for (sub, example) in [
        ("audit", "ipshadow audit --kubeconfig"),
        ("check", "ipshadow check -o json"),
    ] {
        let help = text(&ipshadow(&[sub, "--help"]).stdout);
        let at = |s: &str| {
            help.find(s)
                .unwrap_or_else(|| panic!("{s:?} missing:\n{help}"))
        };
        assert!(at("Cluster connection:") < at("--kubeconfig"), "{help}");
        assert!(at("--kubeconfig") < at("Inputs from files"), "{help}");
        assert!(at("Inputs from files") < at("--pods <PODS>"), "{help}");
        // The headings in order: the cluster's right after the general options,
        // the files' last before the examples.
        let headings: Vec<&str> = help
            .lines()
            .filter(|l| l.ends_with(':') && !l.starts_with(' '))
            .collect();
        assert_eq!(headings[..2], ["Options:", "Cluster connection:"], "{help}");
        assert_eq!(
            headings[headings.len() - 2..],
            ["Inputs from files (instead of the cluster):", "Examples:"],
            "{help}"
        );
        assert!(at("Examples:") < at(example), "{help}");
    }
}

#[test]
fn an_unreadable_input_file_names_its_cause_once() {
    let dir = TempDir::new("cli-errors");
    let missing = dir.join("missing.json");
    // A directory: opened, but not readable as a file, even by root.
    let directory = dir.join("a-directory");
    std::fs::create_dir(&directory).unwrap();
    for (path, cause) in [
        (missing, "No such file or directory"),
        (directory, "Is a directory"),
    ] {
        let path = path.to_str().unwrap();
        let out = ipshadow(&["audit", "--pods", path]);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(
            stderr.contains(&format!("reading {path}: {cause}")),
            "{stderr}"
        );
        assert_eq!(
            stderr.matches(cause).count(),
            1,
            "the cause twice: {stderr}"
        );
    }
}
