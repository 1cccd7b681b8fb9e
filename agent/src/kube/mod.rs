//! Kubernetes adapter: pods, CiliumNodes, kube-ovn Subnets and this node's Node
//! turned into inventory types, from files or from the cluster (watches), and
//! Events written back.

pub mod cache;
pub mod cluster;
pub mod events;
pub mod files;
pub mod objects;

pub use objects::Invalid;
