use super::*;

#[test]
fn ovn_kubernetes_old_management_port_is_named_for_its_own_node_only() {
    let cases = [
        // (device, node, role)
        ("ovn-k8s-mp0", "worker-1", Role::ManagementPort),
        ("k8s-worker-1", "worker-1", Role::ManagementPort),
        ("k8s-worker-1", "Worker-1", Role::ManagementPort),
        // ovn-kubernetes#698's node, cut to 11 bytes.
        (
            "k8s-ip-10-0-0-1",
            "ip-10-0-0-100.ec2.internal",
            Role::ManagementPort,
        ),
        ("k8s-worker-2", "worker-1", Role::Local),
        ("k8s-", "worker-1", Role::Local),
        ("k8s-worker-1x", "worker-1", Role::Local),
        (
            "k8s-ip-10-0-0-100",
            "ip-10-0-0-100.ec2.internal",
            Role::Local,
        ),
        ("tunl0", "worker-1", Role::Tunnel),
        ("cni0", "worker-1", Role::Gateway),
        ("cilium_host", "worker-1", Role::Router),
        ("eth0", "worker-1", Role::Local),
    ];
    for (device, node, role) in cases {
        assert_eq!(
            Role::of_device(device, "cilium_host", node),
            role,
            "{device} on {node}"
        );
    }
}

#[test]
fn calico_runs_where_its_tunnel_or_a_veth_named_as_it_names_them_is() {
    let calico = &calico::CALICO;
    // BGP mode: only pods' veths (a real one, from the corpus's
    // sandbox/event-messages-other-cnis.json).
    assert!(calico.runs_on(["eth0", "cali05ad595351c"].into_iter()));
    assert!(calico.runs_on(["eth0", "vxlan.calico"].into_iter()));
    assert!(calico.runs_on(["tunl0"].into_iter()));
    for other in [
        &["eth0", "cilium_host", "lxc1234567890a"][..],
        &["calico"],
        &["cali1c5b2b6e4a9x"],
        &["caliXYZ5b2b6e4a"],
        &["cni0", "veth1c5b2b6e"],
    ] {
        assert!(!calico.runs_on(other.iter().copied()), "{other:?}");
    }
}

#[test]
fn every_device_is_declared_once_and_the_docs_table_lists_it() {
    let table = markdown();
    let mut seen = std::collections::BTreeSet::new();
    for c in ALL {
        for d in c.devices {
            let shown = d.name.shown();
            assert!(seen.insert(shown.clone()), "{shown} declared twice");
            assert!(
                table
                    .lines()
                    .any(|l| l.starts_with(&format!("| {} | {shown} |", c.name))),
                "{shown} of {} missing from the table",
                c.name
            );
        }
    }
}

#[test]
fn a_prefix_needs_a_suffix_and_a_hash_its_length() {
    assert!(Name::Prefix("antrea-ext.").matches("antrea-ext.100", ""));
    assert!(!Name::Prefix("antrea-ext.").matches("antrea-ext.", ""));
    assert!(Name::Hashed("cali", 11).matches("cali05ad595351c", ""));
    assert!(!Name::Hashed("cali", 11).matches("cali05ad595351", ""));
}

#[test]
fn antreas_gateway_egress_ips_and_tunnel_are_read_as_antrea_names_them() {
    // The names antrea-agent gives them (antrea-io/antrea@fc70f2bb:
    // cmd/antrea-agent/options.go `defaultHostGateway`, pkg/agent/agent.go
    // `defaultTunInterfaceName`, egress_controller.go `egressDummyDevice`,
    // ipassigner's `vlanInterfacePrefix` and a VLAN id).
    let of = |d: &str| device(d, "worker-1").map(|(c, d)| (c.name, d.holds));
    assert_eq!(of("antrea-gw0"), Some(("Antrea", Holds::Gateway)));
    assert_eq!(of("antrea-tun0"), Some(("Antrea", Holds::NoAddress)));
    assert_eq!(of("antrea-egress0"), Some(("Antrea", Holds::Assigned)));
    assert_eq!(of("antrea-ext.100"), Some(("Antrea", Holds::Assigned)));
    assert_eq!(of("antrea-ext."), None);
    for egress in ["antrea-egress0", "antrea-ext.100"] {
        assert!(
            fix(egress).is_some_and(|f| f.contains("ExternalIPPool")),
            "{egress}"
        );
    }
    assert_eq!(fix("antrea-gw0"), None);
    assert!(holds("antrea-gw0", Holds::Gateway));
    let antrea = &antrea::ANTREA;
    assert!(antrea.runs_on(["eth0", "antrea-gw0", "antrea-tun0"].into_iter()));
    assert!(!antrea.runs_on(["eth0", "antrea-egress0", "cni0"].into_iter()));
}

#[test]
fn calico_names_a_pods_veth_from_the_sha1_of_namespace_and_name() {
    // Computed independently (Python's hashlib).
    assert_eq!(calico::pod_veth("tenant", "a"), "cali31ccef0dc46");
    assert_eq!(calico::pod_veth("tenant", "b"), "calibc08975e859");
    assert!(calico::POD_VETH.matches(&calico::pod_veth("tenant", "a"), "node"));
}
