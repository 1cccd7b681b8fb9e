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

/// Every entry of issue 39's corpus: Calico's older route wordings read as
/// its route refusal (the `Dst` its own, no holder named: the `Iface` is the
/// pod's new veth), its IPAM's address assigned and exhaustion as Calico's;
/// AWS VPC CNI's host route and the bridge's address "file exists", the
/// Service allocator's "range is full", kube-ovn's and the kernel's DAD words
/// read as no plugin's refusal, and so never as Calico's or Cilium's.
#[test]
fn calicos_older_route_and_ipam_wordings_are_calicos_and_no_look_alike_is_read() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/corpus/realworld/sandbox/event-messages-issue39.json"
    );
    let v: Value = serde_json::from_slice(&std::fs::read(path).expect("corpus")).expect("json");
    let entries = v.as_array().expect("a list");
    let assigned = |a: &str| Some(AddressAssigned(ip(a)));
    let want = [
        Some(route(Some("10.64.4.8"), None)), // containerd/cri#436: Calico's, relayed
        Some(route(None, None)),              // cni-plugin#352: no route named
        None,                                 // "failed to add route %v": the wrapper alone
        None,                                 // AWS VPC CNI: failed to add host route
        None,                                 // bridge: an address, not a route
        assigned("10.233.110.22"),            // calico#5093
        assigned("172.16.102.20"),            // calico#5337
        assigned("90.0.0.1"),                 // calico#11358: "Address already assigned in block"
        None,                                 // "Failed to assign address %v: %v"
        Some(PoolsExhausted),                 // harvester#7326, combined
        Some(PoolsExhausted),                 // calico#4861
        Some(PoolsExhausted),                 // no more free affine blocks
        Some(PoolsExhausted),                 // limit of %d blocks reached
        Some(PoolsExhausted),                 // No IPs available in pools
        Some(PoolsExhausted),                 // cni-plugin#920
        None,                                 // kube-apiserver: serviceIP range is full
        None,                                 // kube-ovn DAD (4 format strings)
        None,
        None,
        None,
        None, // the kernel's duplicate address
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
    }
}

/// Other plugins' "failed to add route" and a Service allocator's "range is
/// full" are never read: only Calico's shapes of the route refusal are.
#[test]
fn route_and_range_look_alikes_are_no_plugins_refusal() {
    for m in [
        "failed to add route '{10.0.0.0 ffffff00} via 10.1.1.1 dev eth0': file exists",
        "failed to add route to [10.1.0.0/16] on node [a] via tunnel [t]: file exists",
        "failed to add host route: file exists",
        "Internal error occurred: failed to allocate a serviceIP: range is full",
        "resource already exists: IPAMBlock(10-0-0-0-26)",
    ] {
        assert_eq!(sandbox_refusal(m), None, "{m}");
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
