//! kubelet's `FailedCreatePodSandBox` messages: what the CNI refused, when it
//! is something ipshadow can diagnose.
//!
//! The wording varies with the kubelet, the runtime, the CNI and Cilium's
//! version, and with how the text travelled (see
//! `tests/corpus/realworld/event-messages-sandbox-failures.json`): the reason
//! quoted or not, the address with Cilium's endpoint-id prefix (`ipv4:`) or
//! without, typographic quotes, line wraps, the event aggregator's
//! `(combined from similar events): ` prefix. Look-alikes — another endpoint
//! failure (`putEndpointIdFailed`), kube-ovn's RPC errors naming addresses, a
//! garbage "address" — are never read as an address in use. Which plugin's
//! words a refusal is in, and so whose it is: [`crate::cni::refusal`].

use crate::{
    cni::read::bounded,
    inventory::{SandboxFailure, SandboxRefusal, text::cleaned},
    kube::cluster::lean::{LeanEvent, Shape, Text},
};

/// The reason kubelet gives the Event.
const REASON: &str = "FailedCreatePodSandBox";

/// A `FailedCreatePodSandBox` Event about a pod (core/v1 as `kubectl get events
/// -o json` prints it, or events.k8s.io/v1) as a [`SandboxFailure`]; `None` for
/// any other Event, or a refusal ipshadow does not diagnose.
pub fn sandbox_failure(event: &LeanEvent) -> Option<SandboxFailure> {
    if text(event.reason.as_ref()) != Some(REASON) {
        return None;
    }
    let ((Shape::Map(about), _) | (Shape::Absent, Shape::Map(about))) =
        (&event.involved_object, &event.regarding)
    else {
        return None;
    };
    if text(about.kind.as_ref()) != Some("Pod") {
        return None;
    }
    // core/v1 lets an Event name a pod of another namespace than its own (when
    // eventTime is unset); kubelet writes a pod's Events in the pod's
    // namespace. One that differs was written by someone about a pod of
    // another tenant: never counted.
    let own = (event.metadata.as_map()).and_then(|m| text(m.namespace.as_ref()));
    if own.is_some_and(|ns| Some(ns) != text(about.namespace.as_ref())) {
        return None;
    }
    let message = event.message.as_ref().or(event.note.as_ref());
    let message = message.and_then(Text::as_str)?;
    let refusal = sandbox_refusal(message)?;
    let series = event.series.as_map().and_then(|s| s.count.get());
    let count = event.count.get().or(series);
    let shown = |t: &Option<Text<_>>| cleaned(text(t.as_ref()).unwrap_or_default());
    Some(SandboxFailure {
        namespace: shown(&about.namespace),
        pod: shown(&about.name),
        uid: shown(&about.uid),
        refusal,
        count: count.and_then(|n| u64::try_from(n).ok()).unwrap_or(1),
        message: bounded(&cleaned(&normalize(message)), SandboxFailure::MESSAGE_MAX),
    })
}

/// The text of a string field, if a string was there.
fn text<const N: usize>(t: Option<&Text<N>>) -> Option<&str> {
    t.and_then(Text::as_str)
}

/// The prefix Kubernetes' event aggregation puts before a message it combined.
const COMBINED: &str = "(combined from similar events): ";

/// What a `FailedCreatePodSandBox` message says the CNI refused, attributed to
/// the plugin whose wording it is ([`SandboxRefusal::cni`]); `None` for
/// anything else.
pub fn sandbox_refusal(message: &str) -> Option<SandboxRefusal> {
    let text = normalize(message);
    crate::cni::refusal(text.strip_prefix(COMBINED).unwrap_or(&text))
}

/// One line, ASCII quotes, single spaces.
pub(super) fn normalize(message: &str) -> String {
    message
        .chars()
        .map(|c| match c {
            '\u{201c}' | '\u{201d}' | '\u{201e}' | '\u{2033}' => '"',
            '\u{2018}' | '\u{2019}' => '\'',
            c => c,
        })
        .collect::<String>()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use std::net::IpAddr;

    use proptest::prelude::*;
    use serde_json::Value;

    use super::*;
    use crate::inventory::SandboxRefusal::{AddressInUse, NoAddressLeft};
    use crate::inventory::{IpSource, Pod, PodIp, with_refused_addresses};

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("ip")
    }

    /// Every message of the real-world corpus, with what it must give.
    #[test]
    fn every_real_wording_gives_its_refusal_and_no_look_alike_gives_one() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/corpus/realworld/event-messages-sandbox-failures.json"
        );
        let v: Value = serde_json::from_slice(&std::fs::read(path).expect("corpus")).expect("json");
        let got: Vec<Option<SandboxRefusal>> = v["messages"]
            .as_array()
            .expect("messages")
            .iter()
            .map(|m| sandbox_refusal(m["message"].as_str().expect("message")))
            .collect();
        assert_eq!(
            got,
            [
                Some(AddressInUse(ip("10.244.1.12"))), // cozystack#3736: quoted, ipv4:, wrapped
                Some(AddressInUse(ip("10.17.239.250"))), // cilium#38313: unquoted, two spaces
                Some(NoAddressLeft),                   // kops ENI: "No more IPs availabl"
                Some(NoAddressLeft),                   // cilium#9793: range is full
                Some(NoAddressLeft),                   // cilium#10627
                Some(NoAddressLeft),                   // cilium-cli#189: typographic quotes
                None,                                  // putEndpointIdFailed: not an address
                None,                                  // "Invalid IPv4 address: ?1262000012e1"
                None,                                  // kube-ovn: configure nic failed <ip>
                None,                                  // kube-ovn: no address allocated
                None,                                  // kube-ovn: no address allocated
            ]
        );
    }

    #[test]
    fn kubelets_whole_message_is_kept_up_to_the_safety_cap() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/corpus/realworld/event-messages-sandbox-failures.json"
        );
        let v: Value = serde_json::from_slice(&std::fs::read(path).expect("corpus")).expect("json");
        for m in v["messages"].as_array().expect("messages") {
            let m = m["message"].as_str().expect("message");
            let event = serde_json::json!({
                "reason": "FailedCreatePodSandBox",
                "involvedObject": {"kind": "Pod", "namespace": "t", "name": "p"},
                "message": m,
            });
            if let Some(f) = sandbox_failure(&crate::kube::objects::whole::lean(&event)) {
                // cilium#9793 and cilium-cli#189 run past 400 bytes, to "range is full".
                assert_eq!(f.message, normalize(m), "{m}");
            }
        }
        let huge = format!(
            "putEndpointIdInvalid IP 10.0.0.1 is already in use {}",
            "word ".repeat(2000)
        );
        let event = serde_json::json!({
            "reason": "FailedCreatePodSandBox",
            "involvedObject": {"kind": "Pod", "namespace": "t", "name": "p"},
            "message": huge,
        });
        let f = sandbox_failure(&crate::kube::objects::whole::lean(&event)).expect("a failure");
        assert!(f.message.len() <= SandboxFailure::MESSAGE_MAX + '…'.len_utf8());
        assert!(
            f.message
                .starts_with("putEndpointIdInvalid IP 10.0.0.1 is already in use")
        );
    }

    #[test]
    fn variants_of_the_in_use_wording() {
        for (m, want) in [
            (
                "(combined from similar events): plugin type=\"cilium-cni\" failed (add): unable to create endpoint: [PUT /endpoint/{id}][400] putEndpointIdInvalid \"IP ipv4:10.244.4.12 is already in use\"",
                "10.244.4.12",
            ),
            (
                "putEndpointIdInvalid \u{201c}IP ipv6:fd00::12 is already in use\u{201d}",
                "fd00::12",
            ),
            (
                "putEndpointIdInvalid IP 10.0.0.1 is already in use",
                "10.0.0.1",
            ),
            (
                "putEndpointIdInvalid  IP [fd00::1] is already\nin use",
                "fd00::1",
            ),
        ] {
            assert_eq!(
                sandbox_refusal(m),
                Some(SandboxRefusal::AddressInUse(ip(want))),
                "{m}"
            );
        }
        for m in [
            "IP ipv4:?1262000012e1 is already in use",
            "address 10.0.0.1 is already in use",
            "is already in use",
            "",
            "(combined from similar events): ",
        ] {
            assert_eq!(sandbox_refusal(m), None, "{m:?}");
        }
    }

    #[test]
    fn an_event_becomes_a_failure_and_a_pod_without_an_address_takes_the_refused_one() {
        let event = serde_json::json!({
            "reason": "FailedCreatePodSandBox", "count": 85,
            "involvedObject": {"kind": "Pod", "namespace": "t", "name": "gw", "uid": "u1"},
            "message": "putEndpointIdInvalid \"IP ipv4:10.244.4.12 is already in use\""
        });
        let f = sandbox_failure(&crate::kube::objects::whole::lean(&event)).expect("a failure");
        assert_eq!((f.pod.as_str(), f.uid.as_str(), f.count), ("gw", "u1", 85));
        // events.k8s.io/v1's names for the same fields.
        let v1 = serde_json::json!({
            "reason": "FailedCreatePodSandBox", "series": {"count": 3},
            "regarding": {"kind": "Pod", "namespace": "t", "name": "gw"},
            "note": "putEndpointIdInvalid IP 10.244.4.12 is already in use"
        });
        assert_eq!(
            sandbox_failure(&crate::kube::objects::whole::lean(&v1)).map(|f| f.count),
            Some(3)
        );
        for other in [
            // Written in tenant-a about tenant-b's pod: the API server allows it, we do not.
            serde_json::json!({"reason": "FailedCreatePodSandBox", "metadata": {"namespace": "tenant-a"},
                               "involvedObject": {"kind": "Pod", "namespace": "tenant-b", "name": "db"},
                               "message": "IP 10.0.0.1 is already in use"}),
            serde_json::json!({"reason": "BackOff", "involvedObject": {"kind": "Pod"}, "message": "IP 10.0.0.1 is already in use"}),
            serde_json::json!({"reason": "FailedCreatePodSandBox", "involvedObject": {"kind": "Node"}, "message": "IP 10.0.0.1 is already in use"}),
            serde_json::json!({"reason": "FailedCreatePodSandBox", "involvedObject": {"kind": "Pod"}}),
        ] {
            assert_eq!(
                sandbox_failure(&crate::kube::objects::whole::lean(&other)),
                None,
                "{other}"
            );
        }
        let pod = |name: &str, uid: &str, ips: Vec<PodIp>| Pod {
            namespace: "t".into(),
            name: name.into(),
            uid: uid.into(),
            ips,
            ..Pod::default()
        };
        let own = PodIp {
            ip: ip("10.244.4.40"),
            source: IpSource::Status,
        };
        let pods = [
            pod("gw", "u1", vec![]),
            pod("gw", "u2", vec![]), // a later pod of the same name: not this refusal
            pod("web", "u3", vec![own.clone()]),
        ];
        let mut web = f.clone();
        web.pod = "web".into();
        web.uid = "u3".into();
        let out = with_refused_addresses(&pods, &[f, web]);
        assert_eq!(
            out[0].ips,
            [PodIp {
                ip: ip("10.244.4.12"),
                source: IpSource::Event
            }]
        );
        assert!(out[1].ips.is_empty());
        assert_eq!(
            out[2].ips,
            [own],
            "a pod with its own address keeps it alone"
        );
    }

    proptest! {
        #[test]
        fn any_text_is_survived(s in ".{0,300}") {
            let _ = sandbox_refusal(&s);
        }

        #[test]
        fn any_address_in_any_wording_is_read_back(
            a in any::<[u8; 4]>(),
            v6 in any::<[u16; 8]>(),
            use_v6 in any::<bool>(),
            quoted in any::<bool>(),
            prefixed in any::<bool>(),
            combined in any::<bool>(),
        ) {
            let addr = if use_v6 { IpAddr::from(v6) } else { IpAddr::from(a) };
            let family = if use_v6 { "ipv6:" } else { "ipv4:" };
            let inner = format!("IP {}{addr} is already in use", if prefixed { family } else { "" });
            let reason = if quoted { format!("\"{inner}\"") } else { format!(" {inner}") };
            let m = format!(
                "{}Failed to create pod sandbox: rpc error: code = Unknown desc = failed to setup network for sandbox \"0123\": plugin type=\"cilium-cni\" failed (add): unable to create endpoint: [PUT /endpoint/{{id}}][400] putEndpointIdInvalid {reason}",
                if combined { COMBINED } else { "" }
            );
            prop_assert_eq!(sandbox_refusal(&m), Some(SandboxRefusal::AddressInUse(addr)));
        }
    }
}
