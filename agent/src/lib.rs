//! ipshadow: finds pod IPs shadowed by addresses the node itself holds.
//!
//! Detection ([`detect`]) is pure; [`netlink`], [`kube`] and [`ebpf`] are thin
//! adapters that turn the node and the cluster into an [`inventory::Inventory`].

pub mod check;
pub mod cli;
pub mod daemon;
pub mod detect;
pub mod ebpf;
pub mod evidence;
pub mod inventory;
pub mod kube;
pub mod metrics;
pub mod netlink;
pub mod output;
pub mod privileges;
pub mod reconcile;
pub mod sources;
pub mod watch;
