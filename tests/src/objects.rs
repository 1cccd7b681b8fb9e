//! Kubernetes objects as `kubectl get … -o json` prints them, for `--pods` and
//! `--ciliumnodes` files (and later the test API server).

use serde_json::{Value, json};

/// The text of `tests/corpus/realworld/<rel>`.
pub fn realworld_text(rel: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("corpus/realworld")
        .join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The real object in `tests/corpus/realworld/<rel>`: the object, or the
/// first item of a List (calicoctl and kubectl print either).
pub fn realworld(rel: &str) -> Value {
    let v: Value = serde_json::from_str(&realworld_text(rel)).unwrap();
    if v["items"].is_array() {
        v["items"][0].clone()
    } else {
        v
    }
}

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

/// The address-carrying parts of a CiliumNode in ENI or Azure IPAM mode, for
/// [`eni_cilium_node`] and [`azure_cilium_node`]: its name, Cilium's router
/// and health addresses, the addresses pre-allocated to it (its pool) and
/// which of them pods hold (`(ip, "namespace/pod")`).
pub struct CloudNode<'a> {
    pub name: &'a str,
    pub router: &'a str,
    pub health: &'a str,
    pub pool: &'a [String],
    pub used: &'a [(String, String)],
}

/// A number of `name` (FNV-1a), for the IDs that differ per node.
fn hashed(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    })
}

/// Labels a cloud node carries (kubelet's, the cloud's, Karpenter's): the
/// CiliumNode copies its Node's labels.
fn cloud_labels(name: &str, instance_type: &str) -> Value {
    json!({
        "beta.kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "linux",
        "beta.kubernetes.io/instance-type": instance_type,
        "failure-domain.beta.kubernetes.io/region": "eu-west-1",
        "failure-domain.beta.kubernetes.io/zone": "eu-west-1a",
        "kubernetes.io/arch": "amd64", "kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
        "node.kubernetes.io/instance-type": instance_type,
        "topology.kubernetes.io/region": "eu-west-1", "topology.kubernetes.io/zone": "eu-west-1a",
        "karpenter.sh/capacity-type": "on-demand", "karpenter.sh/nodepool": "default",
        "karpenter.k8s.aws/instance-category": "m", "karpenter.k8s.aws/instance-cpu": "4",
        "karpenter.k8s.aws/instance-family": "m5", "karpenter.k8s.aws/instance-generation": "5",
        "karpenter.k8s.aws/instance-hypervisor": "nitro", "karpenter.k8s.aws/instance-memory": "16384",
        "karpenter.k8s.aws/instance-network-bandwidth": "1250", "karpenter.k8s.aws/instance-size": "xlarge",
        "k8s.io/cloud-provider-aws": "0f2f3c4ab1d94b7e8a0c9d8e7f6a5b4c",
    })
}

/// managedFields as the API server records them for the agent (the pool, the
/// addresses) and the operator (the status): one `f:<key>` per map entry, so
/// they grow with the addresses as the fields themselves do.
fn managed_fields(pool: &[String], used: &[(String, String)], status: &str) -> Value {
    let keys = |ips: &mut dyn Iterator<Item = &String>, leaf: Value| -> Value {
        ips.map(|ip| (format!("f:{ip}"), leaf.clone()))
            .collect::<serde_json::Map<_, _>>()
            .into()
    };
    let entry = |manager: &str, fields: Value| {
        json!({"apiVersion": "cilium.io/v2", "fieldsType": "FieldsV1", "fieldsV1": fields,
               "manager": manager, "operation": "Update", "time": "2026-12-01T08:12:44Z"})
    };
    json!([
        entry(
            "cilium-agent",
            json!({"f:metadata": {"f:labels": {".": {}}, "f:ownerReferences": {".": {}}},
            "f:spec": {"f:addresses": {}, "f:health": {".": {}, "f:ipv4": {}}, "f:ipam": {".": {}, "f:pre-allocate": {}}},
            "f:status": {"f:ipam": {"f:used": keys(&mut used.iter().map(|(ip, _)| ip), json!({".": {}, "f:owner": {}, "f:resource": {}}))}}})
        ),
        entry(
            "cilium-operator-generic",
            json!({"f:spec": {"f:ipam": {"f:pool": keys(&mut pool.iter(), json!({".": {}, "f:resource": {}}))}},
            "f:status": {format!("f:{status}"): {".": {}}, "f:ipam": {"f:operator-status": {}}}})
        ),
    ])
}

/// The common frame of a cloud CiliumNode: metadata as the agent writes it,
/// `spec.addresses`, `spec.health`, and `status.ipam.used`.
fn cloud_frame(n: &CloudNode<'_>, instance_type: &str, status: &str) -> Value {
    json!({
        "apiVersion": "cilium.io/v2", "kind": "CiliumNode",
        "metadata": {
            "name": n.name, "uid": format!("5d1c7e2a-4b1e-9c2d-{:012x}", hashed(n.name) >> 16),
            "resourceVersion": "1", "generation": 3, "creationTimestamp": "2026-12-01T08:10:02Z",
            "labels": cloud_labels(n.name, instance_type),
            "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": n.name,
                                 "uid": "0e9f8a7b-6c5d-4e3f-8a1b-2c3d4e5f6a7b"}],
            "managedFields": managed_fields(n.pool, n.used, status),
        },
        "spec": {
            "addresses": [{"type": "InternalIP", "ip": "192.168.100.10"},
                          {"type": "CiliumInternalIP", "ip": n.router}],
            "health": {"ipv4": n.health},
            "encryption": {}, "ipam": {"pre-allocate": 8},
        },
        "status": {"ipam": {"operator-status": {}}},
    })
}

/// A CiliumNode as Cilium's ENI IPAM writes it (1.14–1.19): every
/// pre-allocated address in `spec.ipam.pool` as `{"resource": "eni-…"}`, again
/// under `status.eni.enis.<id>.addresses` (with the interface's subnet, VPC,
/// security groups and tags), and `status.ipam.used` with its owners.
pub fn eni_cilium_node(n: &CloudNode<'_>, enis: usize) -> Value {
    let enis = enis.max(1);
    let eni_id = |e: usize| format!("eni-0{:016x}", hashed(n.name).wrapping_add(e as u64));
    let of = |k: usize| eni_id(k % enis);
    let mut c = cloud_frame(n, "m5.xlarge", "eni");
    c["spec"]["eni"] = json!({
        "instance-id": "i-06a4e5af6e589b2f5", "instance-type": "m5.xlarge",
        "availability-zone": "eu-west-1a", "vpc-id": "vpc-0f1e2d3c4b5a69788",
        "first-interface-index": 1, "use-primary-address": false, "disable-prefix-delegation": true,
        "security-groups": ["sg-0a1b2c3d4e5f60718"], "subnet-tags": {"kubernetes.io/role/cni": "1"},
        "node-subnet-id": "subnet-0123456789abcdef0",
    });
    c["spec"]["ipam"]["pool"] = n
        .pool
        .iter()
        .enumerate()
        .map(|(k, ip)| (ip.clone(), json!({"resource": of(k)})))
        .collect::<serde_json::Map<_, _>>()
        .into();
    let eni = |e: usize| {
        let addresses: Vec<&String> = n.pool.iter().skip(e).step_by(enis).collect();
        json!({
            "id": eni_id(e), "ip": format!("192.168.{}.{}", 100 + e, hashed(n.name) % 250 + 2),
            "mac": format!("0e:e5:c4:9e:d2:{e:02x}"), "number": e + 1,
            "description": "Cilium-CNI (i-06a4e5af6e589b2f5)", "addresses": addresses,
            "security-groups": ["sg-0a1b2c3d4e5f60718"],
            "subnet": {"cidr": "10.128.0.0/10", "id": "subnet-0123456789abcdef0"},
            "vpc": {"id": "vpc-0f1e2d3c4b5a69788", "primary-cidr": "192.168.0.0/16",
                    "cidrs": ["192.168.0.0/16", "10.128.0.0/10"]},
            "tags": {"io.cilium/cilium-managed": "true", "io.cilium/cluster-name": "fleet",
                     "kubernetes.io/cluster/fleet": "owned"},
        })
    };
    c["status"]["eni"] =
        json!({"enis": (0..enis).map(|e| (eni_id(e), eni(e))).collect::<serde_json::Map<_, _>>()});
    c["status"]["ipam"]["used"] = used_of(n.used, |ip| {
        n.pool
            .iter()
            .position(|p| p == ip)
            .map_or_else(|| of(0), of)
    });
    c
}

/// A CiliumNode as Cilium's Azure IPAM writes it: every pre-allocated address
/// in `spec.ipam.pool` with its interface's ARM resource ID, and again under
/// `status.azure.interfaces[].addresses` with its subnet's (~170 bytes each,
/// as in `tests/corpus/realworld/cilium-large/`), and `status.ipam.used`.
pub fn azure_cilium_node(n: &CloudNode<'_>) -> Value {
    const SUB: &str = "/subscriptions/4e2b8c1a-7d3f-4a6b-9e5c-1f0a2b3c4d5e/resourceGroups/MC_fleet-rg_fleet_westeurope";
    let nic = format!(
        "{SUB}/providers/Microsoft.Compute/virtualMachineScaleSets/aks-nodepool1-12345678-vmss/virtualMachines/{}/networkInterfaces/aks-nodepool1-12345678-vmss",
        hashed(n.name) % 100_000
    );
    let subnet = format!(
        "{SUB}/providers/Microsoft.Network/virtualNetworks/aks-vnet-12345678/subnets/aks-subnet"
    );
    let mut c = cloud_frame(n, "Standard_D4s_v3", "azure");
    c["spec"]["azure"] = json!({"interface-name": "eth0"});
    c["spec"]["ipam"]["pool"] = n
        .pool
        .iter()
        .map(|ip| (ip.clone(), json!({"resource": nic})))
        .collect::<serde_json::Map<_, _>>()
        .into();
    let addresses: Vec<Value> = n
        .pool
        .iter()
        .map(|ip| json!({"ip": ip, "state": "succeeded", "subnet": subnet}))
        .collect();
    c["status"]["azure"] = json!({"interfaces": [{
        "id": nic, "name": "aks-nodepool1-12345678-vmss", "mac": "00-0D-3A-2B-4C-5D", "state": "succeeded",
        "security-group": format!("{SUB}/providers/Microsoft.Network/networkSecurityGroups/aks-agentpool-12345678-nsg"),
        "addresses": addresses,
    }]});
    c["status"]["ipam"]["used"] = used_of(n.used, |_| nic.clone());
    c
}

/// `status.ipam.used`: each held address with its owner and resource.
fn used_of(used: &[(String, String)], resource: impl Fn(&str) -> String) -> Value {
    used.iter()
        .map(|(ip, owner)| {
            (
                ip.clone(),
                json!({"owner": owner, "resource": resource(ip)}),
            )
        })
        .collect::<serde_json::Map<_, _>>()
        .into()
}
