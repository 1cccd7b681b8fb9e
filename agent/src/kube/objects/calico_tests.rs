use serde_json::{Value, json};

use super::{whole, whole_calico};
use crate::cni::calico::{ip_pool, ipam_block};
use crate::inventory::{Invalid, IpamBlock, IpamOwner, TunnelKind};

fn block(spec: &Value) -> (Result<IpamBlock, Invalid>, Vec<Invalid>) {
    let mut problems = Vec::new();
    let v = json!({"apiVersion": "crd.projectcalico.org/v1", "kind": "IPAMBlock",
                   "metadata": {"name": "10-1-0-0-30"}, "spec": spec});
    let block = ipam_block(&whole::lean(&v), &mut problems);
    // As the whole object converts.
    let mut whole_problems = Vec::new();
    let whole = whole_calico::ipam_block(&v, &mut whole_problems);
    assert_eq!(format!("{block:?}"), format!("{whole:?}"));
    assert_eq!(problems, whole_problems);
    (block, problems)
}

#[test]
fn each_allocation_is_read_with_its_owner_and_free_ordinals_are_not() {
    let (b, problems) = block(&json!({
        "cidr": "10.1.0.0/30",
        "affinity": "host:node-a",
        "allocations": [null, 0, 1, 2],
        "unallocated": [0],
        "attributes": [
            {"handle_id": "k8s-pod-network.abc", "secondary":
                {"namespace": "ns", "pod": "web", "node": "node-a", "timestamp": "2022-07-23 12:04:45 +0000 UTC"}},
            {"handle_id": "wireguard-tunnel-addr-node-a", "secondary":
                {"node": "node-a", "type": "wireguardTunnelAddress"}},
            {"handle_id": "lb-1", "secondary": null}
        ]
    }));
    let b = b.expect("usable");
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(b.cidr.to_string(), "10.1.0.0/30");
    assert_eq!(b.node.as_deref(), Some("node-a"));
    assert_eq!(
        b.allocated,
        [
            (
                1,
                IpamOwner::Pod {
                    namespace: "ns".into(),
                    name: "web".into()
                }
            ),
            (
                2,
                IpamOwner::Tunnel {
                    node: "node-a".into(),
                    kind: TunnelKind::Wireguard
                }
            ),
            (
                3,
                IpamOwner::Other {
                    handle: Some("lb-1".into())
                }
            ),
        ]
    );
    assert_eq!(b.address(2), Some("10.1.0.2".parse().expect("usable")));
    assert_eq!(b.address(4), None);
}

#[test]
fn a_tunnel_is_known_by_its_handle_where_no_attribute_names_it_and_ip_named_nodes_stay_whole() {
    for (handle, kind, node) in [
        ("ipip-tunnel-addr-node-a", TunnelKind::Ipip, "node-a"),
        (
            "vxlan-tunnel-addr-10.1.154.0",
            TunnelKind::Vxlan,
            "10.1.154.0",
        ),
        ("vxlan-v6-tunnel-addr-n-1", TunnelKind::VxlanV6, "n-1"),
        ("wireguard-v6-tunnel-addr-n", TunnelKind::WireguardV6, "n"),
    ] {
        let (b, _) = block(&json!({
            "cidr": "10.1.0.0/30", "allocations": [0],
            "attributes": [{"handle_id": handle}]
        }));
        assert_eq!(
            b.expect("usable").allocated,
            [(
                0,
                IpamOwner::Tunnel {
                    node: node.into(),
                    kind
                }
            )],
            "{handle}"
        );
    }
    // Look-alikes: a pod handle, a prefix with no node.
    for handle in ["k8s-pod-network.ipip-tunnel-addr-x", "ipip-tunnel-addr-"] {
        let (b, _) = block(&json!({
            "cidr": "10.1.0.0/30", "allocations": [0],
            "attributes": [{"handle_id": handle}]
        }));
        assert!(
            matches!(b.expect("usable").allocated[0].1, IpamOwner::Other { .. }),
            "{handle}"
        );
    }
}

#[test]
fn an_allocation_with_neither_handle_nor_attributes_is_unmarked_and_one_with_either_is_not() {
    for attribute in [
        json!({}),
        json!({"handle_id": null, "secondary": null}),
        json!({"secondary": {}}),
    ] {
        let (b, problems) = block(&json!({
            "cidr": "10.1.0.0/30", "allocations": [0], "attributes": [attribute]
        }));
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(
            b.expect("usable").allocated,
            [(0, IpamOwner::Unmarked)],
            "{attribute}"
        );
    }
    // An empty handle or an attribute, even empty, is something else's to
    // Calico (node/pkg/allocateip: "occupied"), as is a handle alone (a
    // workload's: they always had one).
    for attribute in [json!({"handle_id": ""}), json!({"secondary": {"node": ""}})] {
        let (b, _) = block(&json!({
            "cidr": "10.1.0.0/30", "allocations": [0], "attributes": [attribute]
        }));
        assert!(
            matches!(b.expect("usable").allocated[0].1, IpamOwner::Other { .. }),
            "{attribute}"
        );
    }
    let (b, _) = block(&json!({
        "cidr": "10.1.0.0/30", "allocations": [0],
        "attributes": [{"handle_id": "k8s-pod-network.abc"}]
    }));
    assert_eq!(
        b.expect("usable").allocated,
        [(
            0,
            IpamOwner::Other {
                handle: Some("k8s-pod-network.abc".into())
            }
        )]
    );
}

#[test]
fn broken_blocks_are_named_and_skipped_or_kept_with_what_is_known() {
    let (b, _) = block(&json!({"cidr": "not-a-cidr"}));
    assert!(
        b.expect_err("unusable")
            .problem
            .contains("spec.cidr \"not-a-cidr\"")
    );
    let (b, _) = block(&json!({"cidr": "10.1.0.0/30", "allocations": "all"}));
    assert!(
        b.expect_err("unusable")
            .problem
            .starts_with("not a valid ipamblocks object")
    );
    let (b, problems) = block(&json!({"cidr": "10.1.0.0/30", "allocations": [7]}));
    assert_eq!(
        b.expect("usable").allocated,
        [(0, IpamOwner::Other { handle: None })]
    );
    assert!(
        problems[0]
            .problem
            .starts_with("1 of spec.allocations (the first at ordinal 0) point at no entry"),
        "{problems:?}"
    );
    let (b, problems) =
        block(&json!({"cidr": "10.1.0.0/30", "allocations": null, "attributes": null}));
    assert!(b.expect("usable").allocated.is_empty() && problems.is_empty());
    let mut problems = Vec::new();
    let unnamed = ipam_block(
        &whole::lean(&json!({"spec": {"cidr": "10.1.0.0/30"}})),
        &mut problems,
    );
    assert_eq!(unnamed.expect_err("unusable").object, "(unnamed)");
}

#[test]
fn pools_keep_cidr_block_size_disabled_and_whether_pods_get_addresses_from_them() {
    let mut problems = Vec::new();
    let v = json!({"metadata": {"name": "p"}, "spec": {"cidr": "fd00::/48", "blockSize": 122,
                   "disabled": true, "vxlanMode": "Always"}});
    let p = ip_pool(&whole::lean(&v), &mut problems).expect("usable");
    assert_eq!(
        (p.cidr.to_string(), p.block_size, p.disabled),
        ("fd00::/48".to_owned(), Some(122), true)
    );
    assert!(
        p.workloads,
        "no allowedUses: Calico's default, Workload and Tunnel"
    );
    for (uses, workloads, load_balancer) in [
        (json!([]), true, false),
        (json!(null), true, false),
        (json!(["Workload", "Tunnel"]), true, false),
        (json!(["Tunnel"]), false, false),
        (json!(["LoadBalancer"]), false, true),
    ] {
        let v = json!({"metadata": {"name": "p"},
                       "spec": {"cidr": "10.0.0.0/16", "allowedUses": uses}});
        let p = ip_pool(&whole::lean(&v), &mut problems).expect("usable");
        assert_eq!(p.workloads, workloads, "{uses}");
        assert_eq!(p.load_balancer, load_balancer, "{uses}");
    }
    let v = json!({"metadata": {"name": "p"}, "spec": {"cidr": "10.0.0.0/16", "blockSize": 8}});
    assert_eq!(
        ip_pool(&whole::lean(&v), &mut problems)
            .expect("usable")
            .block_size,
        None
    );
    assert!(
        problems[0].problem.contains("spec.blockSize 8"),
        "{problems:?}"
    );
}

/// `spec.allocations` absent, null or empty: the block lists nothing, and
/// so is unknown (never all free); a list of nulls is a listed, free block.
#[test]
fn a_block_without_its_allocations_list_is_read_as_unlisted() {
    for spec in [
        json!({"cidr": "10.1.0.0/30"}),
        json!({"cidr": "10.1.0.0/30", "allocations": null}),
        json!({"cidr": "10.1.0.0/30", "allocations": []}),
    ] {
        let (b, _) = block(&spec);
        assert!(!b.expect("usable").listed, "{spec}");
    }
    let (b, _) = block(&json!({"cidr": "10.1.0.0/30", "allocations": [null, null, null, null]}));
    assert!(b.expect("usable").listed);
    // A real block (zhongmingmao's, 64 entries) is listed.
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/corpus/realworld/calico/ipamblock-zhongmingmao-blog-vxlan-mac-k8s-before-nginx.json"
    );
    let v: Value = serde_json::from_slice(&std::fs::read(path).expect("corpus")).expect("json");
    let mut problems = Vec::new();
    let real = ipam_block(&whole::lean(&v["items"][0]), &mut problems).expect("usable");
    assert!(real.listed && !real.allocated.is_empty());
}
