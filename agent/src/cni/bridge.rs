//! The bridge plugin's bridges (flannel's `cni0`, kubenet's `cbr0`): the
//! bridge holds the pods' gateway, the first address of the node's podCIDR.

use super::{Cni, Device, Holds, Name};
use crate::inventory::{SandboxRefusal, ip_text::parse_cidr};

/// The bridge plugin, as flannel and kubenet configure it.
pub const BRIDGE: Cni = Cni {
    name: "bridge plugin (flannel, kubenet)",
    devices: &[
        Device {
            name: Name::Is("cni0"),
            holds: Holds::Gateway,
            marks: false,
            fix: None,
            about: "the bridge plugin's default bridge (flannel's)",
        },
        Device {
            name: Name::Is("cbr0"),
            holds: Holds::Gateway,
            marks: false,
            fix: None,
            about: "kubenet's bridge",
        },
    ],
};

/// The bridge plugin's (`bridge.go`: "%q already has an IP address different from %v").
const REFUSAL: &str = " already has an ip address different from ";

/// A bridge that holds another address than the one asked, in the plugin's
/// words (`lower`: `text` lowercased).
pub(super) fn refusal(text: &str, lower: &str) -> Option<SandboxRefusal> {
    let at = lower.find(REFUSAL)?;
    let bridge = text[..at]
        .rsplit(' ')
        .next()
        .map(|w| w.trim_matches(['"', '\'']))
        .filter(|w| super::is_interface_name(w))
        .map(str::to_owned);
    let gateway = text[at + REFUSAL.len()..]
        .split(' ')
        .next()
        .and_then(|w| parse_cidr(w.trim_end_matches([',', '.', ';', '"'])))
        .and_then(|c| c.ifaddr());
    Some(SandboxRefusal::BridgeAddressDiffers { bridge, gateway })
}
