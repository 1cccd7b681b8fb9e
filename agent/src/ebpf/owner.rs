//! Who owns the classifier on an interface. A legacy tc filter outlives its
//! process, so a new one removes leftovers by name; that must never remove a
//! live process's filter (a `check --watch-seconds` beside the running agent
//! used to). The owner holds an abstract Unix socket named after the interface:
//! abstract names live in the network namespace (the agent's host network is
//! the node's, shared with a `check` run there), only one process can bind one,
//! and the kernel frees it when that process dies, however it dies.

use std::os::{
    linux::net::SocketAddrExt as _,
    unix::net::{SocketAddr, UnixListener},
};

/// Whether a process may share an interface with a live owner.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ownership {
    /// Attach only as the owner (`check`): refuse beside a live one.
    Exclusive,
    /// Attach in any case (the agent), removing leftovers only as the owner.
    Shared,
}

/// The claim on one interface's classifier, released when dropped.
#[derive(Debug)]
pub(crate) struct OwnerLock(#[allow(dead_code, reason = "held, never read")] UnixListener);

impl OwnerLock {
    /// Claims `iface`'s classifier in this network namespace; `None` while a
    /// live ipshadow process holds the claim.
    pub(crate) fn acquire(iface: &str) -> std::io::Result<Option<Self>> {
        let addr = SocketAddr::from_abstract_name(format!("ipshadow/tc/{iface}"))?;
        match UnixListener::bind_addr(&addr) {
            Ok(l) => Ok(Some(Self(l))),
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => Ok(None),
            Err(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_claim_per_interface_until_its_holder_lets_go() {
        let iface = format!("test-{}", std::process::id());
        let first = OwnerLock::acquire(&iface).expect("bind").expect("free");
        assert!(OwnerLock::acquire(&iface).expect("bind").is_none());
        assert!(
            OwnerLock::acquire(&format!("{iface}-other"))
                .expect("bind")
                .is_some()
        );
        drop(first);
        assert!(OwnerLock::acquire(&iface).expect("bind").is_some());
    }
}
