use netlink_packet_route::{
    address::{AddressAttribute, AddressMessage},
    link::{InfoKind, LinkAttribute, LinkInfo, LinkLayerType, LinkMessage, State},
};

use super::*;

fn host_veth(index: u32, name: &str, nsid: i32, peer: u32) -> LinkMessage {
    let mut m = LinkMessage::default();
    m.header.index = index;
    m.attributes.push(LinkAttribute::IfName(name.into()));
    m.attributes.push(LinkAttribute::Link(peer));
    m.attributes.push(LinkAttribute::LinkNetNsId(nsid));
    m.attributes.push(LinkAttribute::OperState(State::Up));
    m.attributes
        .push(LinkAttribute::LinkInfo(vec![LinkInfo::Kind(
            InfoKind::Veth,
        )]));
    m
}

#[test]
fn a_host_veth_names_its_peer_namespace_and_ifindex() {
    let i = host_iface(&host_veth(7, "veth1234", 3, 2)).expect("a peer");
    assert_eq!(
        (i.index, i.name.as_str(), i.nsid, i.peer_index),
        (7, "veth1234", 3, 2)
    );
    assert_eq!((i.kind.as_str(), i.state), ("veth", OperState::Up));
}

#[test]
fn links_without_a_peer_namespace_are_not_pod_interfaces() {
    let mut m = host_veth(7, "cilium_host", 3, 2);
    m.attributes
        .retain(|a| !matches!(a, LinkAttribute::LinkNetNsId(_)));
    assert!(host_iface(&m).is_none());
    // The kernel reports a negative nsid for a peer namespace it has no id for.
    assert!(host_iface(&host_veth(8, "veth9", -1, 2)).is_none());
}

#[test]
fn peer_addresses_skip_loopback_and_link_local() {
    let addr = |ip: &str| {
        let mut m = AddressMessage::default();
        m.header.index = 2;
        m.header.prefix_len = 24;
        m.attributes
            .push(AddressAttribute::Address(ip.parse().expect("ip")));
        ns_address(&m, None)
    };
    assert_eq!(addr("10.250.1.2").map(|a| a.index), Some(2));
    assert!(addr("127.0.0.1").is_none());
    assert!(addr("::1").is_none());
    assert!(addr("fe80::1").is_none());
    assert!(addr("169.254.75.10").is_none(), "KubeVirt bridge binding's");
    assert!(addr("fd00::2").is_some());
}

#[test]
fn an_answer_without_the_target_nsid_is_not_taken_for_the_peers() {
    let mut a = AddressMessage::default();
    a.attributes
        .push(AddressAttribute::Address("10.0.0.1".parse().expect("ip")));
    assert!(!address_answers_for(&a, 0), "the host's own answer");
    a.attributes.push(AddressAttribute::TargetNetNsId(0));
    assert!(address_answers_for(&a, 0));
    assert!(!address_answers_for(&a, 1));
    let mut l = LinkMessage::default();
    assert!(!link_answers_for(&l, 4));
    l.attributes.push(LinkAttribute::IfNetnsId(4));
    assert!(link_answers_for(&l, 4));
}

#[test]
fn a_peer_namespaces_loopback_is_left_out() {
    let mut m = LinkMessage::default();
    m.header.index = 1;
    m.header.link_layer_type = LinkLayerType::Loopback;
    m.attributes.push(LinkAttribute::IfName("lo".into()));
    assert!(ns_link(&m).is_none());
    m.header.link_layer_type = LinkLayerType::Ether;
    m.attributes[0] = LinkAttribute::IfName("eth0".into());
    assert_eq!(ns_link(&m).map(|l| l.name), Some("eth0".to_owned()));
}

#[test]
fn a_macvlan_in_a_pod_namespace_names_its_parent_on_the_host_and_a_veth_its_peer() {
    // As the host reads them: both point at the host's own nsid (7).
    let mut mac = host_veth(3, "net1", 7, 4);
    mac.attributes.pop();
    mac.attributes
        .push(LinkAttribute::LinkInfo(vec![LinkInfo::Kind(
            InfoKind::MacVlan,
        )]));
    let lower = ns_link(&mac).and_then(|l| l.lower);
    assert_eq!(
        lower.map(|l| (l.nsid, l.index, l.stacked)),
        Some((7, 4, true))
    );
    let eth0 = ns_link(&host_veth(2, "eth0", 7, 12)).and_then(|l| l.lower);
    assert_eq!(
        eth0.map(|l| (l.nsid, l.index, l.stacked)),
        Some((7, 12, false))
    );
    // A VLAN on the pod's own eth0: its parent is in the namespace itself.
    mac.attributes
        .retain(|a| !matches!(a, LinkAttribute::LinkNetNsId(_)));
    assert_eq!(ns_link(&mac).and_then(|l| l.lower), None);
}

#[test]
fn a_namespace_reached_through_two_interfaces_is_one_namespace_and_changes_with_either() {
    let a = host_iface(&host_veth(10, "veth-a", 3, 2)).expect("a host veth");
    let b = host_iface(&host_veth(11, "net1-host", 3, 4)).expect("a host veth");
    let c = host_iface(&host_veth(12, "veth-c", 5, 2)).expect("a host veth");
    let before = namespaces_of(&[a.clone(), b.clone(), c.clone()]);
    assert_eq!(before.keys().copied().collect::<Vec<_>>(), [3, 5]);
    assert_eq!(before[&3].len(), 2, "{before:?}");
    // The second interface's peer went down: namespace 3 is to be read again, 5 is not.
    let mut b_down = b;
    b_down.state = OperState::LowerLayerDown;
    let after = namespaces_of(&[a, b_down, c]);
    assert_ne!(after[&3], before[&3]);
    assert_eq!(after[&5], before[&5]);
}

#[test]
fn a_resync_rereads_a_slice_per_pass_and_new_namespaces_always() {
    let n = i32::try_from(STALE_PER_PASS).expect("small") + 2;
    let ifaces: Vec<HostIface> = (0..n)
        .map(|i| {
            let index = u32::try_from(i).expect("small") + 100;
            host_iface(&host_veth(index, &format!("veth{i}"), i, 2)).expect("a host veth")
        })
        .collect();
    let kept = |stale: bool| -> BTreeMap<i32, Kept> {
        namespaces_of(&ifaces)
            .into_iter()
            .map(|(nsid, through)| {
                let ns = std::sync::Arc::new(PeerNamespace::default());
                (nsid, Kept { through, ns, stale })
            })
            .collect()
    };
    // Nothing marked: all kept, none read.
    let (now, wanted, left) = plan(kept(false), &ifaces);
    assert_eq!((now.len(), wanted.len(), left), (ifaces.len(), 0, 0));
    // All marked by a resync: a slice read, the rest kept for the next passes.
    let (now, wanted, left) = plan(kept(true), &ifaces);
    assert_eq!((wanted.len(), now.len(), left), (STALE_PER_PASS, 2, 2));
    // A new namespace is read on top of the slice.
    let mut more = ifaces.clone();
    more.push(host_iface(&host_veth(9999, "veth-new", 9999, 2)).expect("a host veth"));
    let (_, wanted, _) = plan(kept(true), &more);
    assert_eq!(wanted.len(), STALE_PER_PASS + 1);
}

#[test]
fn the_kernels_dadfailed_flag_is_read_from_ifa_flags_else_the_header() {
    use netlink_packet_route::address::{AddressFlags, AddressHeaderFlags};
    let v6 = |attr: Option<AddressFlags>, header: AddressHeaderFlags| {
        let mut m = AddressMessage::default();
        m.header.index = 2;
        m.header.prefix_len = 64;
        m.header.flags = header;
        m.attributes
            .push(AddressAttribute::Address("fd00::2".parse().expect("ip")));
        m.attributes.extend(attr.map(AddressAttribute::Flags));
        ns_address(&m, None).expect("a pod address")
    };
    let failed = AddressFlags::Dadfailed | AddressFlags::Tentative;
    assert!(v6(Some(failed), AddressHeaderFlags::empty()).dad_failed);
    assert!(v6(None, AddressHeaderFlags::Dadfailed).dad_failed);
    assert!(!v6(Some(AddressFlags::Tentative), AddressHeaderFlags::empty()).dad_failed);
    // IFA_FLAGS, where sent, is the whole truth (the header keeps 8 bits).
    assert!(!v6(Some(AddressFlags::Permanent), AddressHeaderFlags::Dadfailed).dad_failed);
    assert!(!v6(None, AddressHeaderFlags::empty()).dad_failed);
}

#[test]
fn an_address_tentative_for_long_is_told_by_its_kernel_stamp() {
    use netlink_packet_route::address::{AddressFlags, CacheInfo};
    let v6 = |flags: AddressFlags, made: Option<u32>, now: Option<u32>| {
        let mut m = AddressMessage::default();
        m.header.index = 2;
        m.header.prefix_len = 64;
        m.attributes
            .push(AddressAttribute::Address("fd00::2".parse().expect("ip")));
        m.attributes.push(AddressAttribute::Flags(flags));
        m.attributes.extend(made.map(|cstamp| {
            let mut info = CacheInfo::default();
            info.cstamp = cstamp;
            info.tstamp = cstamp;
            AddressAttribute::CacheInfo(info)
        }));
        ns_address(&m, now).expect("a pod address").dad_stuck
    };
    let t = AddressFlags::Tentative;
    // Ten seconds (1,000 hundredths) after the kernel made it, not before.
    assert!(v6(t, Some(500), Some(1_500)));
    assert!(!v6(t, Some(500), Some(1_499)));
    // The kernel's stamp wraps.
    assert!(v6(t, Some(u32::MAX - 10), Some(995)));
    // Not tentative, failed rather than unfinished, or of unknown age: not stuck.
    assert!(!v6(AddressFlags::Permanent, Some(500), Some(9_000)));
    assert!(!v6(t | AddressFlags::Dadfailed, Some(500), Some(9_000)));
    assert!(!v6(t, None, Some(9_000)));
    assert!(!v6(t, Some(500), None));
}
