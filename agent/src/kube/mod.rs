//! Kubernetes adapter: pods, CiliumNodes (and later kube-ovn Subnets) turned
//! into inventory types, from files or from the cluster.

pub mod files;
pub mod objects;

pub use objects::Invalid;
