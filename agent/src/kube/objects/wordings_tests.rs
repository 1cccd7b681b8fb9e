use std::net::IpAddr;

use proptest::prelude::*;
use serde_json::Value;

use crate::{
    inventory::{
        SandboxCni,
        SandboxRefusal::{self, *},
    },
    kube::objects::sandbox_refusal,
};

fn ip(s: &str) -> IpAddr {
    s.parse().expect("ip")
}

fn range(a: &str, b: &str) -> SandboxRefusal {
    RangeSetFull(Some((ip(a), ip(b))))
}

fn route(dst: Option<&str>, holder: Option<&str>) -> SandboxRefusal {
    HostRouteTaken {
        dst: dst.map(ip),
        holder: holder.map(str::to_owned),
    }
}

fn bridge(name: Option<&str>, gateway: Option<&str>) -> SandboxRefusal {
    BridgeAddressDiffers {
        bridge: name.map(str::to_owned),
        gateway: gateway.map(|g| g.parse().expect("cidr")),
    }
}

/// The corpus's `cni` as the plugin a refusal is attributed to.
fn attributed(cni: &str) -> Option<SandboxCni> {
    match cni {
        "cilium" => Some(SandboxCni::Cilium),
        "host-local" => Some(SandboxCni::HostLocal),
        "calico" => Some(SandboxCni::Calico),
        "bridge" => Some(SandboxCni::Bridge),
        _ => None,
    }
}

/// Every entry of the other CNIs' corpus, with what it must give: each real
/// wording its refusal and its plugin; the wrappers, other refusals of the
/// same plugins and every look-alike none.
#[test]
fn every_cnis_wording_is_read_as_its_own_and_no_look_alike_as_ciliums() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/corpus/realworld/sandbox/event-messages-other-cnis.json"
    );
    let v: Value = serde_json::from_slice(&std::fs::read(path).expect("corpus")).expect("json");
    let entries = v.as_array().expect("a list");
    let want = [
        Some(route(Some("172.25.136.1"), Some("calif6cb5368383"))), // calico#8180
        Some(route(Some("10.244.56.68"), Some("calibe6f82e5309"))), // calico#10723, CRI-O
        Some(route(Some("10.203.131.144"), None)), // calico#1253, %!!(MISSING)s, no second route
        Some(route(None, None)),                   // its format string
        None,                                      // Calico's wrapper alone
        Some(bridge(Some("cni0"), Some("10.244.0.1/24"))), // minikube#9046
        Some(bridge(Some("cni-podman1"), Some("10.25.31.1/24"))), // podman#12306
        Some(bridge(None, None)),                  // %q … %v
        None,                                      // the bridge's wrapper alone
        Some(range("10.244.1.1", "10.244.1.254")), // aks-engine#4435, flannel
        Some(range("100.96.17.1", "100.96.17.254")), // testground#569, CNI-Genie
        Some(range("135.111.37.1", "135.111.37.1")), // multus#373, secondary ipvlan
        Some(RangeSetFull(None)),                  // its format string
        None,                                      // a requested address: not exhaustion
        None,                                      // duplicate allocation (format)
        None,                                      // host-local's wrapper alone
        Some(NoAddressLeft),                       // cilium PR#42369: "No more IPs available"
        Some(NoAddressLeft),                       // cilium#46598: all CIDR ranges are exhausted
        Some(NoAddressLeft),                       // cilium#47910
        Some(NoAddressLeft),                       // all pod CIDR ranges are exhausted
        Some(NoAddressLeft), // "%w: … once Cilium Operator allocates more IPs"
        Some(NoAddressLeft), // no IPs currently available on the node
        Some(NoAddressLeft), // No more IPs available
        None,                // crd.go's explicit request: no address named
        None,                // IP %s is not available
        None,                // unknown pool
        None,                // DANM: "requested IP address:… is already in use"
        None,                // Whereabouts
        None,                // Whereabouts under the aggregator
        None,                // Spiderpool's postIpamIpFailure
        None,                // docker hostPort: "bind: address already in use"
        None,                // coil
    ];
    assert_eq!(
        entries.len(),
        want.len(),
        "an entry without its expectation"
    );
    for (e, want) in entries.iter().zip(want) {
        let m = e["message"].as_str().expect("message");
        let cni = e["cni"].as_str().expect("cni");
        let got = sandbox_refusal(m);
        assert_eq!(got, want, "{cni}: {m}");
        if let Some(r) = &got {
            assert_eq!(Some(r.cni()), attributed(cni), "{cni}: {m}");
        }
        if e["kind"] == "real-event" && attributed(cni).is_some() {
            assert!(got.is_some(), "a real {cni} wording unread: {m}");
        }
    }
}

/// Cilium's wordings of an address in use or none left; what of them the
/// other corpus's plugins share.
fn fragment() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "Failed to create pod sandbox: rpc error: code = Unknown desc =",
        "failed to setup network for sandbox \"0123\":",
        "plugin type=\"multus\" name=\"multus-cni-network\" failed (add):",
        "plugin type=\"calico\" failed (add):",
        "IP 10.0.0.1 is already in use",
        "IP ipv4:10.244.4.12 is already in use",
        "requested IP address:2001:11:194:101::113 is already in use",
        "listen tcp4 0.0.0.0:32732: bind: address already in use",
        "[POST /ipam/ip][500] postIpamIpFailure",
        "[PUT /endpoint/{id}][500]",
        "failed to allocate for range 0: no IP addresses available in range set: 10.244.1.1-10.244.1.254",
        "Could not allocate IP in range",
        "\"cni0\" already has an IP address different from 10.244.0.1/24",
        "(combined from similar events):",
        "cilium",
        "IP",
    ])
    .prop_map(str::to_owned)
}

proptest! {
    /// No message without Cilium's own words is read as a Cilium refusal.
    #[test]
    fn no_message_without_ciliums_words_is_ciliums(
        parts in prop::collection::vec(fragment(), 0..8),
        noise in "[a-z0-9 .:/\"-]{0,40}",
    ) {
        let m = format!("{} {noise}", parts.join(" "));
        prop_assume!(!["cilium-cni", "putendpointid", "postipamfailure", "local cilium agent",
            "cilium operator", "range is full", "no more ips", "cidr ranges are exhausted",
            "no ips currently available"].iter().any(|w| m.to_ascii_lowercase().contains(w)));
        let got = sandbox_refusal(&m);
        prop_assert!(got.as_ref().is_none_or(|r| r.cni() != SandboxCni::Cilium), "{m}: {got:?}");
    }

    #[test]
    fn any_range_set_is_read_back(a in any::<[u8; 4]>(), b in any::<[u8; 4]>(), more in any::<bool>()) {
        let (a, b) = (IpAddr::from(a), IpAddr::from(b));
        let tail = if more { ",10.0.0.1-10.0.0.9" } else { "" };
        let m = format!("failed to allocate for range 0: no IP addresses available in range set: {a}-{b}{tail}");
        prop_assert_eq!(sandbox_refusal(&m), Some(RangeSetFull(Some((a, b)))));
    }
}
