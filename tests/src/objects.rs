//! Kubernetes objects as `kubectl get … -o json` prints them, for `--pods` and
//! `--ciliumnodes` files (and later the test API server).

use serde_json::{Value, json};

/// A running pod on `node` with `ips` in `status.podIPs`.
pub fn pod(namespace: &str, name: &str, node: &str, ips: &[&str]) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "uid": format!("uid-{name}")},
        "spec": {"nodeName": node, "containers": [{"name": "main", "image": "busybox"}]},
        "status": {
            "phase": "Running",
            "podIP": ips.first().copied().unwrap_or_default(),
            "podIPs": ips.iter().map(|ip| json!({"ip": ip})).collect::<Vec<_>>()
        }
    })
}

/// A pod stuck in ContainerCreating: no status IP, only kube-ovn's annotation.
pub fn pending_pod(namespace: &str, name: &str, node: &str, annotated_ip: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name, "namespace": namespace, "uid": format!("uid-{name}"),
            "annotations": {
                "ovn.kubernetes.io/allocated": "true",
                "ovn.kubernetes.io/ip_address": annotated_ip,
                "ovn.kubernetes.io/logical_switch": "ovn-default"
            }
        },
        "spec": {"nodeName": node, "containers": [{"name": "main", "image": "busybox"}]},
        "status": {"phase": "Pending"}
    })
}

/// A CiliumNode with its router (CiliumInternalIP), ingress and health IPv4 addresses.
pub fn cilium_node(name: &str, router: &str, ingress: Option<&str>, health: Option<&str>) -> Value {
    let mut spec = json!({
        "addresses": [
            {"type": "InternalIP", "ip": "192.168.100.10"},
            {"type": "CiliumInternalIP", "ip": router}
        ]
    });
    if let Some(i) = ingress {
        spec["ingress"] = json!({"ipv4": i});
    }
    if let Some(h) = health {
        spec["health"] = json!({"ipv4": h});
    }
    json!({"apiVersion": "cilium.io/v2", "kind": "CiliumNode", "metadata": {"name": name}, "spec": spec})
}

/// A `kind: List` around `items`.
pub fn list(items: impl AsRef<[Value]>) -> Value {
    let items = items.as_ref();
    json!({"apiVersion": "v1", "kind": "List", "items": items})
}

/// A kube-ovn Subnet with `cidr_block` and `exclude_ips` (`ip` or `first..last`).
pub fn subnet(name: &str, cidr_block: &str, exclude_ips: &[&str]) -> Value {
    json!({
        "apiVersion": "kubeovn.io/v1",
        "kind": "Subnet",
        "metadata": {"name": name},
        "spec": {"cidrBlock": cidr_block, "gateway": "10.244.0.1", "excludeIps": exclude_ips, "protocol": "IPv4"}
    })
}

/// `cilium_node` with the allocation range Cilium takes its addresses from.
pub fn with_pod_cidrs(mut cilium_node: Value, cidrs: &[&str]) -> Value {
    cilium_node["spec"]["ipam"] = json!({"podCIDRs": cidrs});
    cilium_node
}

/// A Node with `pod_cidrs` in spec.podCIDRs.
pub fn node(name: &str, pod_cidrs: &[&str]) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name},
        "spec": {"podCIDR": pod_cidrs.first().copied().unwrap_or_default(), "podCIDRs": pod_cidrs}
    })
}

/// Writes `items` to `path` as `kubectl get … -o json` prints a List, atomically
/// (a temporary file renamed over it), as an input file for the agent.
pub fn write_list(path: &std::path::Path, items: impl AsRef<[Value]>) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, serde_json::to_vec(&list(items)).unwrap()).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// kubelet's `FailedCreatePodSandBox` Event about a pod (uid `uid-<pod>`), as the
/// API server stores it (events.k8s.io/v1; core/v1 reads see `involvedObject`,
/// `message` and `count`).
pub fn kubelet_sandbox_event(namespace: &str, pod: &str, message: &str, count: u64) -> Value {
    json!({
        "apiVersion": "events.k8s.io/v1", "kind": "Event",
        "metadata": {"name": format!("{pod}.kubelet"), "namespace": namespace},
        "regarding": {"apiVersion": "v1", "kind": "Pod", "namespace": namespace, "name": pod, "uid": format!("uid-{pod}")},
        "reason": "FailedCreatePodSandBox", "type": "Warning", "note": message,
        "reportingController": "kubelet", "reportingInstance": "node-a",
        "series": {"count": count, "lastObservedTime": "2026-12-03T10:00:00.000000Z"},
        "eventTime": "2026-12-03T09:00:00.000000Z", "action": "CreatePodSandbox"
    })
}

/// A Node with `pod_cidrs` that accepts `pods` pods (`status.allocatable.pods`).
pub fn node_accepting(name: &str, pod_cidrs: &[&str], pods: u32) -> Value {
    let mut n = node(name, pod_cidrs);
    n["metadata"]["uid"] = json!(format!("uid-{name}"));
    n["status"] = json!({"allocatable": {"pods": pods.to_string(), "cpu": "4"}});
    n
}

/// Cilium's `cilium-config` ConfigMap with `ipam` and the cluster-pool IPv4 CIDRs.
pub fn cilium_config(ipam: &str, cluster_pool_v4: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": "cilium-config", "namespace": "kube-system"},
           "data": {"ipam": ipam, "cluster-pool-ipv4-cidr": cluster_pool_v4, "cluster-pool-ipv4-mask-size": "24"}})
}

/// A pod Pending with no address anywhere: Cilium's own IPAM gave it one and refused it.
pub fn waiting_pod(namespace: &str, name: &str, node: &str) -> Value {
    let mut p = pod(namespace, name, node, &[]);
    p["status"] = json!({"phase": "Pending"});
    p
}

/// kube-ovn's record of a pod's allocation (`ips.kubeovn.io`, `<pod>.<namespace>`).
pub fn kube_ovn_ip(namespace: &str, pod: &str, node: &str, ip: &str) -> Value {
    json!({
        "apiVersion": "kubeovn.io/v1", "kind": "IP",
        "metadata": {"name": format!("{pod}.{namespace}")},
        "spec": {"podName": pod, "namespace": namespace, "nodeName": node, "subnet": "ovn-default",
                 "ipAddress": ip, "v4IpAddress": ip, "v6IpAddress": "", "macAddress": "00:00:00:12:34:56"}
    })
}
