use serde_json::{Value, json};

use super::*;

fn lean(v: &Value) -> LeanService {
    LeanService::deserialize(v).expect("a Service")
}

/// (address, field) of every claim, and the problems.
fn read(v: &Value) -> (Vec<(String, ServiceField)>, Vec<Invalid>) {
    let mut problems = Vec::new();
    let got = service_addresses(&lean(v), &mut problems)
        .into_iter()
        .map(|(ip, a)| (ip.to_string(), a.field))
        .collect();
    (got, problems)
}

#[test]
fn every_field_that_binds_an_address_is_read() {
    let svc = json!({
        "metadata": {"namespace": "tenant-b", "name": "mitm"},
        "spec": {"clusterIP": "10.96.7.7", "clusterIPs": ["10.96.7.7", "fd00:96::7"],
                 "externalIPs": ["10.244.4.12", "not-an-ip"], "loadBalancerIP": "10.244.4.13"},
        "status": {"loadBalancer": {"ingress": [{"ip": "10.244.4.14"}, {"hostname": "lb.example"}]}}
    });
    let (got, problems) = read(&svc);
    assert_eq!(
        got,
        [
            ("10.244.4.12".into(), ServiceField::ExternalIps),
            ("10.244.4.13".into(), ServiceField::LoadBalancerIp),
            ("10.244.4.14".into(), ServiceField::LoadBalancerIngress),
            ("10.96.7.7".into(), ServiceField::ClusterIps),
            ("fd00:96::7".into(), ServiceField::ClusterIps),
        ]
    );
    // The value that is no address makes the Service unreadable, named once.
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0].object, "tenant-b/mitm");
    assert!(
        problems[0]
            .problem
            .starts_with("spec.externalIPs holds \"not-an-ip\", not an IP address"),
        "{problems:?}"
    );
    let headless = json!({"metadata": {"namespace": "a", "name": "h"},
                          "spec": {"clusterIP": "None", "clusterIPs": ["None"], "loadBalancerIP": ""}});
    assert_eq!(
        read(&headless),
        (vec![], vec![]),
        "headless, unset: no claim, no problem"
    );
}

#[test]
fn an_address_written_as_kube_proxy_reads_it_is_that_address() {
    let svc = json!({
        "metadata": {"namespace": "t", "name": "s"},
        "spec": {"externalIPs": ["::ffff:10.244.1.20", "010.244.004.050", "::ffff:af4:433"],
                 "loadBalancerIP": "0:0:0:0:0:ffff:10.244.4.52"},
        "status": {"loadBalancer": {"ingress": [{"ip": "010.244.004.053"}]}}
    });
    let (got, problems) = read(&svc);
    let ips: Vec<&str> = got.iter().map(|(ip, _)| ip.as_str()).collect();
    assert_eq!(
        ips,
        [
            "10.244.1.20",
            "10.244.4.50",
            "10.244.4.51",
            "10.244.4.52",
            "10.244.4.53"
        ]
    );
    assert!(problems.is_empty(), "{problems:?}");
}

#[test]
fn no_address_is_left_out_whatever_its_position() {
    let external: Vec<String> = (1..=40).map(|i| format!("10.96.1.{i}")).collect();
    let ingress: Vec<Value> = (1..=40)
        .map(|i| json!({"ip": format!("10.96.2.{i}"), "ports": [{"port": 80, "protocol": "TCP"}]}))
        .collect();
    let svc = json!({"metadata": {"namespace": "t", "name": "many"},
                     "spec": {"externalIPs": external},
                     "status": {"loadBalancer": {"ingress": ingress}}});
    let (got, problems) = read(&svc);
    assert!(problems.is_empty());
    for want in [
        ("10.96.1.17".to_owned(), ServiceField::ExternalIps),
        ("10.96.1.40".to_owned(), ServiceField::ExternalIps),
        ("10.96.2.17".to_owned(), ServiceField::LoadBalancerIngress),
        ("10.96.2.40".to_owned(), ServiceField::LoadBalancerIngress),
    ] {
        assert!(got.contains(&want), "{want:?} missing");
    }
    assert_eq!(got.len(), 80);
}

#[test]
fn every_value_that_is_no_address_is_counted_in_one_problem() {
    let svc = json!({"metadata": {"namespace": "t", "name": "odd"},
                     "spec": {"clusterIP": "10.96.0.9", "externalIPs": [" 10.244.4.50", "10.244.4.51"],
                              "loadBalancerIP": "10.244.4.1x"},
                     "status": {"loadBalancer": {"ingress": [{"ip": "[10.244.4.53]"}]}}});
    let (got, problems) = read(&svc);
    assert_eq!(got.len(), 2, "{got:?}");
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0]
            .problem
            .starts_with("spec.externalIPs holds \" 10.244.4.50\" and 2 more,"),
        "{problems:?}"
    );
}

/// A Service as the API server sends it, with what a tenant may make large
/// (annotations, labels, ports) and what nobody reads: the lean read keeps
/// the same addresses as a read of the whole object.
#[test]
fn a_full_service_reads_as_its_address_fields_alone() {
    let full = json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"namespace": "tenant", "name": "lb", "uid": "u", "resourceVersion": "9",
                     "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "x".repeat(4096),
                                     "metallb.universe.tf/ip-allocated-from-pool": "default"},
                     "labels": {"app": "web"},
                     "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}]},
        "spec": {"type": "LoadBalancer", "clusterIP": "10.96.0.78", "clusterIPs": ["10.96.0.78"],
                 "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack",
                 "ports": [{"name": "http", "port": 80, "targetPort": 8080, "nodePort": 30080}],
                 "selector": {"app": "web"}, "externalTrafficPolicy": "Cluster",
                 "externalIPs": ["192.0.2.10"]},
        "status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.11", "ipMode": "VIP",
                                                 "ports": [{"port": 80, "protocol": "TCP"}]}]}}
    });
    let bytes = serde_json::to_vec(&full).expect("bytes");
    let from_bytes: LeanService = serde_json::from_slice(&bytes).expect("lean");
    let mut problems = Vec::new();
    let got: Vec<String> = service_addresses(&from_bytes, &mut problems)
        .into_iter()
        .map(|(ip, a)| format!("{ip} {}", a.field))
        .collect();
    assert_eq!(
        got,
        [
            "192.0.2.10 spec.externalIPs",
            "192.0.2.11 status.loadBalancer.ingress",
            "10.96.0.78 spec.clusterIPs"
        ]
    );
    assert!(problems.is_empty());
    assert_eq!(
        from_bytes.service_ref(),
        ServiceRef {
            namespace: "tenant".into(),
            name: "lb".into()
        }
    );
}

#[test]
fn an_object_not_shaped_as_a_service_is_refused_whole() {
    for bad in [
        json!({"metadata": {"namespace": "t", "name": "s"}, "spec": {"externalIPs": "10.0.0.1"}}),
        json!({"metadata": {"namespace": "t", "name": "s"}, "spec": {"externalIPs": [7]}}),
        json!({"metadata": {"namespace": "t", "name": "s"},
               "status": {"loadBalancer": {"ingress": ["10.0.0.1"]}}}),
    ] {
        let mut problems = Vec::new();
        let got = service_json(&bad, &mut problems);
        assert!(got.is_empty());
        assert_eq!(problems.len(), 1, "{bad}");
        assert_eq!(problems[0].object, "t/s");
        assert!(
            problems[0].problem.starts_with("is not a valid Service"),
            "{problems:?}"
        );
    }
    // Nulls are what the API server writes for unset fields.
    let nulls = json!({"metadata": null, "spec": {"externalIPs": null}, "status": null});
    assert_eq!(read(&nulls), (vec![], vec![]));
}
