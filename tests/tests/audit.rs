//! `ipshadow audit` on a four-node cluster (the addresses of seeds/001): from
//! files, from the test API server (the same findings), and as the kubectl
//! plugin through the real kubectl.
#![allow(clippy::unwrap_used, reason = "tests unwrap to keep the stack trace")]

use std::{
    collections::BTreeSet,
    path::Path,
    process::{Command, Output},
};

use ipshadow_tests::{
    apiserver::{ApiServer, Res},
    figure, ipshadow_bin,
    lab::{INGRESS, ME, OTHER, OTHER_INGRESS, OTHER_ROUTER, ROUTER},
    objects::{
        cilium_node, kubelet_sandbox_event, node, pod, subnet, waiting_pod, with_pod_cidrs,
        write_list,
    },
};
use serde_json::{Value, json};

/// The refusal kubelet reports, for `ip`.
fn in_use(ip: &str) -> String {
    format!(
        "Failed to create pod sandbox: rpc error: code = Unknown desc = failed to setup network for \
         sandbox \"9f1c\": plugin type=\"cilium-cni\" failed (add): unable to create endpoint: \
         [PUT /endpoint/{{id}}][400] putEndpointIdInvalid \"IP ipv4:{ip} is already in use\""
    )
}

/// Filler pods that hold no one's address: enough to need several list pages.
const FILLER: usize = 1_200;

struct Cluster {
    slices: Vec<Value>,
    webhooks: Vec<Value>,
    apiservices: Vec<Value>,
    pods: Vec<Value>,
    nodes: Vec<Value>,
    cilium_nodes: Vec<Value>,
    subnets: Vec<Value>,
    events: Vec<Value>,
}

/// Four nodes: node-a and node-b as in the cozystack report, node-c and node-d
/// with Cilium's own IPAM on 10.96.0.0/16.
fn cluster() -> Cluster {
    let mut pods = vec![
        // seeds/001: virt-operator on node-b holds node-a's router IP.
        pod("kubevirt", "virt-operator-0", OTHER, &[ROUTER]),
        // An Ingress IP handed to a pod on its own node.
        pod("tenant", "gateway-0", ME, &[INGRESS]),
        // node-b's Ingress IP on node-a.
        pod("tenant", "web-0", ME, &[OTHER_INGRESS]),
        // node-c's router IP on node-c.
        pod("tenant", "api-0", "node-c", &["10.96.2.7"]),
        // Two running pods on one address.
        pod("tenant", "cache-0", "node-c", &["10.96.2.60"]),
        pod("tenant", "cache-1", "node-d", &["10.96.2.60"]),
        // Refused as in use: another pod (on node-c) holds it.
        waiting_pod("tenant", "queue-0", "node-d"),
        pod("tenant", "queue-holder", "node-c", &["10.96.2.80"]),
    ];
    pods[4]["metadata"]["creationTimestamp"] = "2026-12-01T00:00:00Z".into();
    pods[5]["metadata"]["creationTimestamp"] = "2026-12-02T00:00:00Z".into();
    for i in 0..FILLER {
        let node = ["node-c", "node-d"][i % 2];
        pods.push(pod(
            "filler",
            &format!("f-{i}"),
            node,
            &[&format!("10.96.{}.{}", 10 + i / 200, i % 200 + 2)],
        ));
    }
    Cluster {
        // virt-operator-0 backs the Service of the validating webhook the kube-apiserver calls
        // (seeds/001); web-0 backs a plain Service; gateway-0 backs nothing.
        slices: vec![
            slice(
                "kubevirt",
                "virt-operator-webhook",
                "virt-operator-0",
                ROUTER,
            ),
            slice("tenant", "web", "web-0", OTHER_INGRESS),
        ],
        webhooks: vec![json!({
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": "virt-operator-validator"},
            "webhooks": [{"name": "virt-operator-validator.kubevirt.io", "admissionReviewVersions": ["v1"],
                          "sideEffects": "None",
                          "clientConfig": {"service": {"namespace": "kubevirt", "name": "virt-operator-webhook",
                                                       "path": "/kubevirt-validate-delete"}}}]
        })],
        apiservices: vec![json!({
            "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
            "metadata": {"name": "v1beta1.metrics.k8s.io"},
            "spec": {"group": "metrics.k8s.io", "version": "v1beta1",
                     "service": {"namespace": "kube-system", "name": "metrics-server"}}
        })],
        pods,
        nodes: vec![
            node(ME, &["10.244.4.0/24"]),
            node(OTHER, &["10.244.1.0/24"]),
            node("node-c", &["10.96.2.0/24"]),
            node("node-d", &["10.96.3.0/24"]),
        ],
        cilium_nodes: vec![
            with_pod_cidrs(
                cilium_node(ME, ROUTER, Some(INGRESS), None),
                &["10.244.4.0/24"],
            ),
            with_pod_cidrs(
                cilium_node(OTHER, OTHER_ROUTER, Some(OTHER_INGRESS), None),
                &["10.244.1.0/24"],
            ),
            with_pod_cidrs(
                cilium_node("node-c", "10.96.2.7", None, None),
                &["10.96.2.0/24"],
            ),
            with_pod_cidrs(
                cilium_node("node-d", "10.96.3.7", None, None),
                &["10.96.3.0/24"],
            ),
        ],
        // kube-ovn's default Subnet over node-a's and node-b's Cilium ranges, nothing excluded.
        subnets: vec![subnet("ovn-default", "10.244.0.0/16", &["10.244.0.1"])],
        events: vec![kubelet_sandbox_event(
            "tenant",
            "queue-0",
            &in_use("10.96.2.80"),
            12,
        )],
    }
}

fn audit(args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(ipshadow_bin())
        .arg("audit")
        .args(args)
        .envs(env.iter().copied())
        .output()
        .unwrap()
}

/// (node, kind, scope, pod) of every finding.
fn rows(v: &Value) -> BTreeSet<(String, String, String, String)> {
    let mut out = BTreeSet::new();
    for n in v["nodes"].as_array().unwrap() {
        for f in n["findings"].as_array().unwrap() {
            out.insert((
                n["node"].as_str().unwrap().to_owned(),
                f["kind"].as_str().unwrap().to_owned(),
                f["scope"].as_str().unwrap().to_owned(),
                f["pod"]["name"].as_str().unwrap_or("-").to_owned(),
            ));
        }
    }
    out
}

fn row(node: &str, kind: &str, scope: &str, pod: &str) -> (String, String, String, String) {
    (node.into(), kind.into(), scope.into(), pod.into())
}

fn write_files(dir: &Path, c: &Cluster) -> Vec<String> {
    let mut args = Vec::new();
    for (flag, name, items) in [
        ("--endpointslices", "endpointslices.json", &c.slices),
        ("--webhooks", "webhooks.json", &c.webhooks),
        ("--apiservices", "apiservices.json", &c.apiservices),
        ("--pods", "pods.json", &c.pods),
        ("--nodes", "nodes.json", &c.nodes),
        ("--ciliumnodes", "ciliumnodes.json", &c.cilium_nodes),
        ("--subnets", "subnets.json", &c.subnets),
        ("--events", "events.json", &c.events),
    ] {
        let path = dir.join(name);
        write_list(&path, items);
        args.push(flag.to_owned());
        args.push(path.to_str().unwrap().to_owned());
    }
    args
}

/// An EndpointSlice of Service `namespace/service` with one endpoint, `pod` at `ip`.
fn slice(namespace: &str, service: &str, pod: &str, ip: &str) -> Value {
    json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": format!("{service}-x7k2p"), "namespace": namespace,
                     "labels": {"kubernetes.io/service-name": service}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": [ip], "conditions": {"ready": true},
                       "targetRef": {"kind": "Pod", "namespace": namespace, "name": pod}}],
        "ports": [{"name": "https", "port": 8443, "protocol": "TCP"}]
    })
}

/// The finding about `pod` in the audit's JSON.
fn finding_of<'a>(v: &'a Value, pod: &str) -> &'a Value {
    v["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|n| n["findings"].as_array().unwrap())
        .find(|f| f["pod"]["name"] == pod)
        .unwrap_or_else(|| panic!("no finding about {pod}"))
}

fn assert_four_node_findings(v: &Value) {
    // What breaks behind each: the webhook's backend is critical and named.
    let critical = finding_of(v, "virt-operator-0");
    assert_eq!(critical["severity"], "critical", "{critical:#}");
    assert_eq!(
        critical["impact"]["callers"][0]["name"],
        "virt-operator-validator"
    );
    assert!(
        critical["message"]
            .as_str()
            .unwrap()
            .contains("ValidatingWebhookConfiguration virt-operator-validator"),
        "{critical:#}"
    );
    assert_eq!(finding_of(v, "web-0")["severity"], "high");
    assert_eq!(finding_of(v, "gateway-0")["severity"], "warning");
    // The node of the critical finding comes first.
    assert_eq!(v["nodes"][0]["node"], OTHER, "{v:#}");
    let found = rows(v);
    for want in [
        row(OTHER, "RouterIPCollision", "cross-node", "virt-operator-0"),
        row(ME, "IngressIPCollision", "same-node", "gateway-0"),
        row(ME, "IngressIPCollision", "cross-node", "web-0"),
        row("node-c", "RouterIPCollision", "same-node", "api-0"),
        row("node-d", "DuplicatePodIP", "cross-node", "cache-1"),
        row("node-d", "DuplicatePodIP", "cross-node", "queue-0"),
        row(ME, "AllocatorOverlap", "same-node", "-"),
        row(OTHER, "AllocatorOverlap", "same-node", "-"),
    ] {
        assert!(found.contains(&want), "{want:?} not in {found:#?}");
    }
    // Each pod once, under its own node; nothing about the filler.
    let pods: Vec<&str> = found
        .iter()
        .map(|r| r.3.as_str())
        .filter(|p| *p != "-")
        .collect();
    let distinct: BTreeSet<&str> = pods.iter().copied().collect();
    assert_eq!(pods.len(), distinct.len(), "{found:#?}");
    assert!(!found.iter().any(|r| r.3.starts_with("f-")), "{found:#?}");
    assert_eq!(v["nodes_checked"], 4);
    let not_checked: Vec<&str> = v["not_checked"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["kind"].as_str().unwrap())
        .collect();
    assert!(
        not_checked.contains(&"LocalAddressCollision")
            && not_checked.contains(&"HostRouteBlackhole")
    );
}

#[test]
fn an_audit_from_files_finds_every_cilium_address_collision_on_every_node() {
    let dir = ipshadow_tests::TempDir::new("audit-files");
    let args = write_files(&dir, &cluster());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = audit(&[&args[..], &["-o", "json"]].concat(), &[]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_four_node_findings(&ipshadow_tests::json_stdout(&out));

    // The table: grouped by node, the most severe first, and what it could not see.
    let out = audit(&args, &[]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.starts_with("audited 4 nodes and 1208 pods: "),
        "{text}"
    );
    let first = text.lines().find(|l| l.starts_with("node ")).unwrap();
    // The kube-apiserver's webhook backend first.
    assert!(first.starts_with("node node-b:"), "{text}");
    assert!(
        text.contains("Not checked without the node's kernel"),
        "{text}"
    );

    // A healthy cluster: exit 0.
    let healthy = Cluster {
        pods: vec![pod("tenant", "ok-0", "node-c", &["10.96.2.9"])],
        subnets: vec![],
        events: vec![],
        ..cluster()
    };
    let args = write_files(&dir, &healthy);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = audit(&args, &[]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn an_audit_of_the_api_server_finds_what_the_files_show_in_pages() {
    let c = cluster();
    let api = ApiServer::start(None);
    api.set_crd(Res::Subnets, true);
    api.apply_all(&[
        (Res::EndpointSlices, &c.slices[..]),
        (Res::ValidatingWebhooks, &c.webhooks[..]),
        (Res::ApiServices, &c.apiservices[..]),
        (Res::Pods, &c.pods[..]),
        (Res::Nodes, &c.nodes[..]),
        (Res::CiliumNodes, &c.cilium_nodes[..]),
        (Res::Subnets, &c.subnets[..]),
        (Res::Events, &c.events[..]),
    ]);
    let dir = ipshadow_tests::TempDir::new("audit-api");
    let kubeconfig = dir.join("kubeconfig");
    api.write_kubeconfig(&kubeconfig);
    let out = audit(
        &["--kubeconfig", kubeconfig.to_str().unwrap(), "-o", "json"],
        &[],
    );
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let from_api = ipshadow_tests::json_stdout(&out);
    assert_four_node_findings(&from_api);
    let files = write_files(&dir, &c);
    let files: Vec<&str> = files.iter().map(String::as_str).collect();
    let from_files =
        ipshadow_tests::json_stdout(&audit(&[&files[..], &["-o", "json"]].concat(), &[]));
    assert_eq!(rows(&from_api), rows(&from_files));

    // Lists only, in pages; kubelet's refusals by reason; nothing watched.
    let log = api.counts().log;
    let pod_pages = log
        .iter()
        .filter(|(m, u)| m == "GET" && u.starts_with("/api/v1/pods?"))
        .count();
    assert_eq!(pod_pages, c.pods.len().div_ceil(500));
    assert!(log.iter().all(|(_, u)| !u.contains("watch=")), "{log:#?}");
    assert!(
        log.iter()
            .any(|(_, u)| u.starts_with("/api/v1/events?") && u.contains("FailedCreatePodSandBox")),
        "{log:#?}"
    );
    figure(format!(
        "audit of 4 nodes, {} pods from the test API server: {} requests, {pod_pages} pages of pods",
        c.pods.len(),
        log.len()
    ));
}

#[test]
fn kubectl_runs_the_binary_as_its_ipshadow_plugin() {
    let dir = ipshadow_tests::TempDir::new("audit-plugin");
    let bin = dir.join("bin");
    std::fs::create_dir(&bin).unwrap();
    std::os::unix::fs::symlink(ipshadow_bin(), bin.join("kubectl-ipshadow")).unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let files = write_files(&dir, &cluster());
    let kubectl = |args: &[&str]| {
        Command::new("kubectl")
            .args(args)
            .env("PATH", &path)
            .output()
            .unwrap()
    };
    let listed = kubectl(&["plugin", "list"]);
    assert!(
        String::from_utf8_lossy(&listed.stdout).contains("kubectl-ipshadow"),
        "{}{}",
        String::from_utf8_lossy(&listed.stdout),
        String::from_utf8_lossy(&listed.stderr)
    );
    let help = kubectl(&["ipshadow", "audit", "--help"]);
    assert!(String::from_utf8_lossy(&help.stdout).contains("kubectl ipshadow audit"));
    let mut args = vec!["ipshadow", "audit", "-o", "json"];
    args.extend(files.iter().map(String::as_str));
    let out = kubectl(&args);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_four_node_findings(&ipshadow_tests::json_stdout(&out));
}

#[test]
fn the_krew_manifest_installs_the_binary_as_the_plugin_kubectl_looks_for() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/krew/ipshadow.yaml");
    let m = ipshadow_tests::deploy::yaml_stream(&std::fs::read(&path).unwrap()).remove(0);
    assert_eq!(
        m["apiVersion"],
        "krew.googlecontainertools.github.com/v1alpha2"
    );
    assert_eq!(m["kind"], "Plugin");
    // krew names the plugin after the binary's suffix: kubectl-<name>.
    assert_eq!(m["metadata"]["name"], "ipshadow");
    let version = m["spec"]["version"].as_str().unwrap();
    assert_eq!(version, format!("v{}", env!("CARGO_PKG_VERSION")));
    assert!(m["spec"]["shortDescription"].as_str().unwrap().len() <= 50);
    let platforms = m["spec"]["platforms"].as_array().unwrap();
    let label = |p: &Value, k: &str| p["selector"]["matchLabels"][k].as_str().unwrap().to_owned();
    let listed: BTreeSet<(String, String)> = platforms
        .iter()
        .map(|p| (label(p, "os"), label(p, "arch")))
        .collect();
    // What `cargo xtask plugin` builds (macOS needs Apple's SDK to link).
    let expected = [("linux", "amd64"), ("linux", "arm64"), ("windows", "amd64")];
    assert_eq!(
        listed,
        expected.map(|(o, a)| (o.to_owned(), a.to_owned())).into()
    );
    for p in platforms {
        let (os, arch) = (label(p, "os"), label(p, "arch"));
        // kubectl finds a plugin on Windows only as an .exe.
        let bin = if os == "windows" {
            "kubectl-ipshadow.exe"
        } else {
            "kubectl-ipshadow"
        };
        assert_eq!(p["bin"], bin);
        let files: Vec<&str> = p["files"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["from"].as_str().unwrap())
            .collect();
        // krew-index wants the license in the archive.
        assert!(
            files.contains(&bin) && files.contains(&"LICENSE"),
            "{files:?}"
        );
        let uri = p["uri"].as_str().unwrap();
        assert!(
            uri.contains(version) && uri.ends_with(&format!("_{os}_{arch}.tar.gz")),
            "{uri}"
        );
        let sha = p["sha256"].as_str().unwrap();
        assert!(
            sha.len() == 64 && sha.bytes().all(|b| b.is_ascii_hexdigit()),
            "{sha}"
        );
    }
}
