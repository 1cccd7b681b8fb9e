//! The objects the watches and the one-shot lists read, each cut to what its
//! converter reads: serde reads one object at a time straight from the
//! response's bytes into a lean struct and skips every other field unparsed,
//! and the converter reads that struct: Nodes ([`node`]), pods ([`pod`]),
//! Events ([`event`]), EndpointSlices and webhook callers ([`routes`]). A
//! CNI's own (CiliumNodes, Subnets, Calico's IPPools, kube-ovn's IP records)
//! are in its folder of `cni`.

mod event;
mod node;
mod node_listed;
mod pod;
mod routes;

// The lean toolkit lives with the CNIs' readers (`cni::read`); the lean types
// here read it by the same paths.
use crate::cni::read::{bounded, cluster_resource, shape};
pub(in crate::kube) use crate::cni::{
    calico::{LeanIpPool, LeanIpamBlock},
    cilium::LeanCiliumNode,
    kube_ovn::{LeanIp, LeanSubnet},
};

pub(in crate::kube) use self::{
    bounded::Text,
    event::LeanEvent,
    node::{LeanNode, LeanNodeMeta},
    node_listed::LeanListedNode,
    pod::LeanPod,
    routes::{LeanCaller, LeanSlice, Service},
    shape::Shape,
};
