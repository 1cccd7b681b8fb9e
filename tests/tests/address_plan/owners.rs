//! The plan's owners the cluster's other objects tell, from real objects:
//! ovn-kubernetes' internal subnets from its Nodes' annotations
//! (tests/corpus/realworld/ovn-kubernetes: a kind interconnect node whose join
//! subnet is derived from its node-id, two OpenShift nodes that publish it),
//! its config file of its README (ovn-kubernetes-config/), and Calico's
//! LoadBalancer pool of its docs (calico/).

use super::*;

/// The healthy plan with ovn-kubernetes' real Nodes beside its nodes, and
/// its config file of its README (the pod network 10.128.0.0/14).
fn ovn_cluster() -> Cluster {
    let mut c = healthy();
    c.config_maps.extend(real(
        "ovn-kubernetes-config/configmap-ovnkube-config-readme-2019-ini-cluster-subnets.json",
    ));
    c.nodes.extend(real(
        "ovn-kubernetes/node-okep5521-kind-ovn-worker-interconnect.json",
    ));
    c.nodes.extend(real(
        "ovn-kubernetes/node-openshift-enhancements-vsphere-bm-lrp-ifaddrs.json",
    ));
    c
}

#[test]
fn a_healthy_ovn_kubernetes_cluster_with_the_usual_pools_gives_nothing() {
    let c = ovn_cluster();
    for (code, v) in [from_api(&c), from_files(&c)] {
        assert_eq!(overlaps(&v), BTreeSet::new(), "{v:#}");
        assert_eq!(v["findings"], 0, "{v:#}");
        assert_eq!(code, Some(0), "{v:#}");
        // The healthy plan's 20, ovn-worker's podCIDR (its node-subnets
        // annotation the same), the OpenShift nodes' node-subnets, the config
        // file's pod network, and ovn-kubernetes' join, transit and
        // masquerade (IPv4 and IPv6) subnets once each, however many Nodes
        // tell them.
        assert_eq!(v["address_plan"]["ranges_checked"], 28, "{v:#}");
    }
}

#[test]
fn a_metallb_pool_over_ovn_kubernetes_join_subnet_is_found_naming_both() {
    let mut c = ovn_cluster();
    let mut cgnat = real("metallb/ipaddresspool-metallb-docs-l2-range-only.json");
    cgnat[0]["metadata"]["name"] = json!("cgnat");
    cgnat[0]["spec"]["addresses"] = json!(["100.64.0.0/24", "10.130.0.0/24"]);
    c.metallb.extend(cgnat);
    // The join subnet named by the first Node that publishes it; the pod
    // network no node holds yet by the config file.
    let want: BTreeSet<[String; 3]> = [
        [
            "IPAddressPool metallb-system/cgnat",
            "Node ngirard-multi-twxnm-bm",
            "100.64.0.0..100.64.0.255",
        ],
        [
            "IPAddressPool metallb-system/cgnat",
            "ConfigMap ovn-kubernetes/ovnkube-config",
            "10.130.0.0..10.130.0.255",
        ],
    ]
    .into_iter()
    .map(|r| r.map(str::to_owned))
    .collect();
    for (code, v) in [from_api(&c), from_files(&c)] {
        assert_eq!(overlaps(&v), want, "{v:#}");
        assert_eq!(code, Some(1));
        let messages: Vec<&str> = v["address_plan"]["overlaps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["message"].as_str().unwrap())
            .collect();
        assert!(
            messages
                .iter()
                .any(|m| m.contains("ovn-kubernetes routes its join subnet")),
            "{messages:#?}"
        );
        for m in messages {
            assert!(
                m.contains("Fix: change IPAddressPool metallb-system/cgnat"),
                "{m}"
            );
        }
    }
}

#[test]
fn a_calico_load_balancer_pool_is_a_load_balancer_range_a_metallb_pool_over_it_is_found() {
    let mut c = healthy();
    let mut lb = real("calico/ippool-calico-docs-loadbalancer-allowed-uses.json");
    // Served as the healthy plan's pool is here (crd.projectcalico.org/v1).
    lb[0]["apiVersion"] = json!("crd.projectcalico.org/v1");
    c.calico_pools.extend(lb);
    for (code, v) in [from_api(&c), from_files(&c)] {
        assert_eq!(overlaps(&v), BTreeSet::new(), "{v:#}");
        assert_eq!(code, Some(0), "{v:#}");
        // Unused, it is a range still: the healthy plan's 20 and it.
        assert_eq!(v["address_plan"]["ranges_checked"], 21, "{v:#}");
    }
    let mut over = real("metallb/ipaddresspool-metallb-docs-l2-range-only.json");
    over[0]["metadata"]["name"] = json!("over-calico-lb");
    over[0]["spec"]["addresses"] = json!(["192.210.4.0/24"]);
    c.metallb.extend(over);
    let want: BTreeSet<[String; 3]> = [[
        "IPPool loadbalancerIPPool",
        "IPAddressPool metallb-system/over-calico-lb",
        "192.210.4.0..192.210.4.255",
    ]
    .map(str::to_owned)]
    .into();
    for (code, v) in [from_api(&c), from_files(&c)] {
        assert_eq!(overlaps(&v), want, "{v:#}");
        assert_eq!(code, Some(1));
        let m = v["address_plan"]["overlaps"][0]["message"]
            .as_str()
            .unwrap();
        assert!(m.contains("two controllers will hand one address"), "{m}");
    }
}
