//! ipshadow: finds pod IPs shadowed by addresses the node itself holds.
//!
//! Layers, with imports in one direction only (docs/architecture.md, "Layers"):
//! [`inventory`] ← [`detect`] ← [`report`] ← adapters ([`netlink`], [`kube`],
//! [`ebpf`], [`privileges`]) ← entry points ([`reconcile`], [`check`],
//! [`daemon`], [`cli`]).

#![warn(missing_docs)]

pub mod audit;
#[cfg(target_os = "linux")]
pub mod check;
pub mod cli;
pub mod cni;
#[cfg(target_os = "linux")]
pub mod daemon;
pub mod detect;
#[cfg(target_os = "linux")]
pub mod ebpf;
pub mod inventory;
pub mod kube;
#[cfg(target_os = "linux")]
pub mod netlink;
#[cfg(target_os = "linux")]
pub mod privileges;
#[cfg(target_os = "linux")]
pub mod reconcile;
pub mod report;
