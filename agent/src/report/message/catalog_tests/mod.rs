//! Every message of every kind, for every reader, read by a test: Event notes
//! within their bounds, one `Fix:` each, no doubled whitespace, no advice for
//! a CNI or feature the case does not have; the long messages clean as well.
mod calico_ipam;
mod cases;
mod cni_cases;
mod kernel;
mod modes;
mod plan;
mod vip;

use cases::{Mode, carve, catalog, collision};

use super::*;
use crate::{
    detect::{FindingKind, Role, Scope},
    inventory::Caller,
};

/// The readers of Events: the Node's, and the pod's namespace (the cases'
/// pods are in `tenant`; what they name of `other` and `kube-system` it may not see).
fn readers() -> [Reader<'static>; 2] {
    [Reader::Node, Reader::Namespace("tenant")]
}

/// Words that name what a case's cluster may not run.
fn foreign_words(mode: Mode, f: &Finding) -> Vec<&'static str> {
    let mut words = vec![];
    if mode != Mode::KubeOvn {
        words.extend(["kube-ovn", "Subnet", "excludeIps", "ovn0"]);
    }
    if matches!(mode, Mode::Calico | Mode::OvnOrBridge) {
        words.extend(["Cilium", "cilium"]);
    }
    if mode == Mode::OvnOrBridge {
        words.extend(["Calico", "calicoctl"]);
    }
    // Gateway API matters only where an Ingress IP is involved.
    if f.owner.role != Role::Ingress && f.kind != FindingKind::IngressIpNotMasqueraded {
        words.push("Gateway API");
    }
    words
}

fn assert_clean(text: &str, what: &str) {
    assert!(!text.contains("  "), "doubled space in {what}: {text:?}");
    assert!(
        !text.contains(['\n', '\t']),
        "line break or tab in {what}: {text:?}"
    );
    assert!(
        !text.contains(" ,") && !text.contains(" ."),
        "space before punctuation in {what}: {text:?}"
    );
}

#[test]
fn every_kind_is_in_the_catalog() {
    let all = catalog();
    for kind in FindingKind::all() {
        assert!(
            all.iter().any(|(_, f)| f.kind == kind),
            "{kind} has no case"
        );
    }
}

#[test]
fn every_event_note_is_short_clean_and_fits_the_cluster() {
    for (mode, f) in catalog() {
        for reader in readers() {
            let n = note(&f, reader, None);
            let what = format!("{} for {reader:?}", f.kind);
            assert_clean(&n, &what);
            assert_eq!(n.matches("Fix:").count(), 1, "{what}: {n}");
            let (prose, fix) = n
                .split_once(" Fix: ")
                .unwrap_or_else(|| panic!("{what}: {n}"));
            assert!(
                prose.len() <= PROSE_MAX,
                "{what}: prose of {} bytes: {prose}",
                prose.len()
            );
            assert!(
                fix.len() + 5 <= FIX_MAX,
                "{what}: fix of {} bytes: {fix}",
                fix.len()
            );
            assert!(prose.ends_with('.') && fix.ends_with('.'), "{what}: {n}");
            // At most two sentences of prose (a sentence ends in ". ").
            assert!(prose.matches(". ").count() <= 1, "{what}: {prose}");
            for word in foreign_words(mode, &f) {
                assert!(!n.contains(word), "{what}: {word:?} in {n}");
            }
            // kubelet's words (a tenant can forge them) never reach an Event note.
            assert!(!n.contains("putEndpointIdInvalid"), "{what}: {n}");
            if reader == Reader::Namespace("tenant") {
                assert!(
                    !n.contains("kube-system/") && !n.contains("other/"),
                    "{what}: {n}"
                );
            }
        }
    }
}

#[test]
fn every_long_message_is_clean_and_names_the_fix() {
    for (mode, f) in catalog() {
        for reader in [Reader::Operator, Reader::Node, Reader::Namespace("tenant")] {
            let m = render_for(&f, reader);
            let what = format!("{} for {reader:?}", f.kind);
            assert_clean(&m, &what);
            assert!(m.contains("Fix"), "{what}: {m}");
            if mode == Mode::CiliumOnly {
                assert!(!m.contains("kube-ovn"), "{what}: {m}");
            }
        }
    }
}

#[test]
fn the_impact_leads_a_short_note_and_stays_clean() {
    let impact = Impact {
        services: vec![crate::inventory::ServiceRef {
            namespace: "kubevirt".into(),
            name: "virt-operator-webhook".into(),
        }],
        callers: vec![
            Caller::ValidatingWebhook(
                "virt-operator-validator".into(),
                "virt-operator-validator.kubevirt.io".into(),
            ),
            Caller::ApiService("v1.subresources.kubevirt.io".into()),
        ],
    };
    let f = collision(Role::Router, Scope::SameNode, carve());
    let n = note(&f, Reader::Namespace("tenant"), Some(&impact));
    let lead = "Critical: the kube-apiserver calls through this pod \
                (ValidatingWebhookConfiguration virt-operator-validator and 1 more). ";
    assert!(n.starts_with(lead), "{n}");
    assert!(lead.len() <= IMPACT_MAX, "{lead}");
    let prose = n.split_once(" Fix: ").map(|(p, _)| p).unwrap_or_default();
    assert!(prose.len() <= PROSE_MAX + IMPACT_MAX, "{n}");
    assert_clean(&n, "the note with its impact");
    let long = impact_sentence(&impact).unwrap_or_default();
    assert_clean(&long, "the impact sentence");
}

#[test]
fn words_cut_at_a_word_boundary() {
    assert_eq!(words("short", 10), "short");
    let cut = words("allocator not configured for the requested CIDR", 20);
    assert_eq!(cut, "allocator not…");
    assert!(cut.len() <= 20);
}
