//! The netlink messages of a peer-namespace read, turned into inventory data.

use netlink_packet_route::{
    address::{AddressAttribute, AddressFlags, AddressHeaderFlags, AddressMessage},
    link::{InfoKind, LinkAttribute, LinkFlags, LinkInfo, LinkLayerType, LinkMessage, State},
};

use crate::inventory::{
    DAD_STUCK_AFTER, HostIface, Lower, NsAddress, NsLink, OperState, link_local,
};

/// A host link whose peer is in another namespace (`IFLA_LINK_NETNSID` and `IFLA_LINK`).
pub fn host_iface(msg: &LinkMessage) -> Option<HostIface> {
    let (mut name, mut nsid, mut peer_index, mut master) = (None, None, None, None);
    let (mut kind, mut state) = (String::new(), OperState::Unknown);
    for attr in &msg.attributes {
        match attr {
            LinkAttribute::IfName(n) => name = Some(crate::inventory::text::cleaned(n)),
            LinkAttribute::LinkNetNsId(id) => nsid = Some(*id),
            LinkAttribute::Link(i) => peer_index = Some(*i),
            LinkAttribute::Controller(i) => master = Some(*i),
            LinkAttribute::OperState(s) => state = oper_state(*s),
            LinkAttribute::LinkInfo(infos) => {
                if let Some(k) = infos.iter().find_map(|i| match i {
                    LinkInfo::Kind(k) => Some(k),
                    _ => None,
                }) {
                    kind = kind_name(k);
                }
            }
            _ => {}
        }
    }
    Some(HostIface {
        index: msg.header.index,
        name: name?,
        kind,
        state,
        admin_up: msg.header.flags.contains(LinkFlags::Up),
        master,
        nsid: nsid.filter(|n| *n >= 0)?,
        peer_index: peer_index.filter(|i| *i > 0)?,
    })
}

fn kind_name(k: &InfoKind) -> String {
    match k {
        InfoKind::Veth => "veth".to_owned(),
        InfoKind::Netkit => "netkit".to_owned(),
        other => crate::inventory::text::cleaned(&other.to_string()),
    }
}

/// A link of a peer namespace; `None` for loopback and unnamed links.
pub fn ns_link(msg: &LinkMessage) -> Option<NsLink> {
    if msg.header.link_layer_type == LinkLayerType::Loopback {
        return None;
    }
    let mut name = None;
    let mut state = OperState::Unknown;
    let (mut nsid, mut link, mut stacked) = (None, None, false);
    for attr in &msg.attributes {
        match attr {
            LinkAttribute::IfName(n) => name = Some(crate::inventory::text::cleaned(n)),
            LinkAttribute::OperState(s) => state = oper_state(*s),
            LinkAttribute::LinkNetNsId(id) => nsid = Some(*id),
            LinkAttribute::Link(i) => link = Some(*i),
            LinkAttribute::LinkInfo(infos) => stacked = infos.iter().any(stacked_kind),
            _ => {}
        }
    }
    // Without a link-netnsid the lower link is in the namespace itself (a
    // VLAN on the pod's own eth0): no tie to any other namespace.
    let lower = match (nsid, link) {
        (Some(nsid), Some(index)) if nsid >= 0 && index > 0 => Some(Lower {
            nsid,
            index,
            stacked,
        }),
        _ => None,
    };
    Some(NsLink {
        index: msg.header.index,
        name: name?,
        state,
        lower,
    })
}

/// Whether a link of this kind shares its parent's network: macvlan, ipvlan
/// (and their tap forms), VLAN.
fn stacked_kind(info: &LinkInfo) -> bool {
    matches!(
        info,
        LinkInfo::Kind(
            InfoKind::MacVlan
                | InfoKind::MacVtap
                | InfoKind::IpVlan
                | InfoKind::IpVtap
                | InfoKind::Vlan
        )
    )
}

/// The addresses of a peer namespace that can carry pod traffic. Whether one
/// has been tentative for long is told by its age, from the kernel's
/// creation stamp against the time since boot, read only when one is tentative.
pub fn ns_addresses(msgs: &[AddressMessage]) -> Vec<NsAddress> {
    let since_boot = msgs
        .iter()
        .any(|m| flagged(m, AddressFlags::Tentative, AddressHeaderFlags::Tentative))
        .then(centis_since_boot)
        .flatten();
    msgs.iter()
        .filter_map(|m| ns_address(m, since_boot))
        .collect()
}

/// An address of a peer namespace that can carry pod traffic; `None` for
/// loopback, IPv6 link-local and multicast addresses. `since_boot`: now, in
/// the kernel's hundredths of a second since boot, where known.
pub fn ns_address(msg: &AddressMessage, since_boot: Option<u32>) -> Option<NsAddress> {
    let ip = crate::netlink::convert::local_ip(msg)?;
    // 169.254/16 too: KubeVirt's bridge binding leaves 169.254.75.10 on the
    // pod's veth when it hands the pod address to the VM.
    let carries = !(ip.is_loopback() || ip.is_multicast() || ip.is_unspecified() || link_local(ip));
    let dad_failed = flagged(msg, AddressFlags::Dadfailed, AddressHeaderFlags::Dadfailed);
    let tentative = flagged(msg, AddressFlags::Tentative, AddressHeaderFlags::Tentative);
    let made = msg.attributes.iter().find_map(|a| match a {
        AddressAttribute::CacheInfo(c) => Some(c.cstamp),
        _ => None,
    });
    let stuck_after = u32::try_from(DAD_STUCK_AFTER.as_millis() / 10).unwrap_or(u32::MAX);
    let dad_stuck = tentative
        && !dad_failed
        && matches!((since_boot, made), (Some(now), Some(made)) if now.wrapping_sub(made) >= stuck_after);
    carries.then_some(NsAddress {
        ip,
        prefix_len: msg.header.prefix_len,
        index: msg.header.index,
        dad_failed,
        dad_stuck,
    })
}

/// Whether the kernel marks the address `dadfailed`: another holder on its
/// link answered for it, and the kernel will not use it.
pub fn dad_failed(msg: &AddressMessage) -> bool {
    flagged(msg, AddressFlags::Dadfailed, AddressHeaderFlags::Dadfailed)
}

/// Whether the kernel sets `flag` on the address: in `IFA_FLAGS` (32 bits)
/// where sent, else in the header's 8 bits (both DAD flags fit).
fn flagged(msg: &AddressMessage, flag: AddressFlags, header: AddressHeaderFlags) -> bool {
    msg.attributes
        .iter()
        .find_map(|a| match a {
            AddressAttribute::Flags(f) => Some(f.contains(flag)),
            _ => None,
        })
        .unwrap_or_else(|| msg.header.flags.contains(header))
}

/// Now in hundredths of a second since boot, as the kernel stamps addresses
/// (`/proc/uptime`); `None` where it cannot be read.
fn centis_since_boot() -> Option<u32> {
    let text = std::fs::read_to_string("/proc/uptime").ok()?;
    let secs: f64 = text.split_whitespace().next()?.parse().ok()?;
    // Truncation is meant: the kernel's stamp is a wrapping u32 of hundredths.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let centis = (secs * 100.0) as u64 as u32;
    Some(centis)
}

/// Whether a link answer says it is about namespace `nsid`.
pub fn link_answers_for(msg: &LinkMessage, nsid: i32) -> bool {
    msg.attributes
        .iter()
        .any(|a| matches!(a, LinkAttribute::IfNetnsId(n) if *n == nsid))
}

/// Whether an address answer says it is about namespace `nsid`.
pub fn address_answers_for(msg: &AddressMessage, nsid: i32) -> bool {
    msg.attributes
        .iter()
        .any(|a| matches!(a, AddressAttribute::TargetNetNsId(n) if *n == nsid))
}

fn oper_state(s: State) -> OperState {
    match s {
        State::Up => OperState::Up,
        State::Down => OperState::Down,
        State::LowerLayerDown => OperState::LowerLayerDown,
        State::Unknown => OperState::Unknown,
        _ => OperState::Other,
    }
}
