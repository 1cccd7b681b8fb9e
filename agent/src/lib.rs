//! ipshadow: finds pod IPs shadowed by addresses the node itself holds.
//!
//! Layers, with imports in one direction only (docs/architecture.md, "Layers"):
//! [`inventory`] ← [`detect`] ← [`report`] ← adapters ([`netlink`], [`kube`],
//! [`ebpf`], [`privileges`]) ← entry points ([`reconcile`], [`check`],
//! [`daemon`], [`cli`]).

#![warn(missing_docs)]

pub mod audit;
pub mod check;
pub mod cli;
pub mod daemon;
pub mod detect;
pub mod ebpf;
pub mod inventory;
pub mod kube;
pub mod netlink;
pub mod privileges;
pub mod reconcile;
pub mod report;
