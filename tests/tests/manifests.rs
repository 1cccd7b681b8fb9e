//! deploy/: the kustomize base builds, every object validates offline, the
//! DaemonSet is as locked down as it claims, its capabilities are exactly
//! enough, the alerts fire from agent-shaped series, the dashboard and
//! alerts only use metrics the agent exports, and the dashboard tells
//! findings apart by address where the agent leaves the pods' names out.
#![allow(
    clippy::unwrap_used,
    clippy::too_many_lines,
    clippy::items_after_statements,
    reason = "tests unwrap to keep the stack trace; end-to-end scenarios read top to bottom, constants next to their use"
)]

use std::{collections::BTreeSet, path::Path, process::Command, time::Duration};

use ipshadow_tests::{
    HANG,
    agent::AgentProc,
    apiserver::{ApiServer, Res},
    attach_modes, can_run_netns_tests, deploy, figure, ipshadow_bin,
    lab::{Lab, ROUTER},
    netns::attached_programs,
    node::SimNode,
    objects::{cilium_node, pod, subnet, with_pod_cidrs, write_list},
};
use serde_json::Value;

fn temp_dir(tag: &str) -> ipshadow_tests::TempDir {
    ipshadow_tests::TempDir::new(&format!("manifests-{tag}"))
}

fn kind<'a>(objects: &'a [Value], kind: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| o["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind} in deploy/"))
}

/// Validates every core object of `objects` offline for Kubernetes 1.33 and
/// 1.37; returns the prometheus-operator ones.
fn validate_core<'a>(objects: &'a [Value], tag: &str) -> Vec<&'a Value> {
    let d = temp_dir(tag);
    let (crd_based, core): (Vec<&Value>, Vec<&Value>) = objects.iter().partition(|o| {
        o["apiVersion"]
            .as_str()
            .is_some_and(|v| v.starts_with("monitoring.coreos.com/"))
    });
    for (i, o) in core.iter().enumerate() {
        if o["apiVersion"] == "cert-manager.io/v1" {
            continue;
        }
        let f = d.join(format!("{i}.json"));
        for version in ["1.33.0", "1.37.0"] {
            if let Err(e) = ipshadow_tests::deploy::validate(o, &f, version) {
                panic!(
                    "{} {} for Kubernetes {version}: {e}",
                    o["kind"], o["metadata"]["name"]
                );
            }
        }
    }
    crd_based
}

#[test]
fn the_metrics_auth_overlay_validates_and_its_parts_agree() {
    let objects = deploy::manifests_of("metrics-auth");
    let _ = validate_core(&objects, "validate-auth");
    let ds = deploy::object(&objects, "DaemonSet", "ipshadow");
    let pod = &ds["spec"]["template"]["spec"];
    let agent = &pod["containers"][0];
    let env = |k: &str| {
        agent["env"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == k)
            .and_then(|e| e["value"].as_str())
            .unwrap_or_else(|| panic!("{k} not set"))
            .to_owned()
    };
    assert_eq!(env("IPSHADOW_METRICS_AUTH"), "kubernetes");
    // The base's settings survive the patch: metrics on the node's address, probes on loopback.
    assert_eq!(env("IPSHADOW_LISTEN"), "$(HOST_IP):9785");
    assert_eq!(agent["livenessProbe"]["httpGet"]["port"], 9786);
    let mount = agent["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "metrics-tls")
        .unwrap();
    for k in ["IPSHADOW_TLS_CERT_FILE", "IPSHADOW_TLS_KEY_FILE"] {
        let file = env(k);
        assert_eq!(
            Path::new(&file).parent().unwrap().to_str().unwrap(),
            mount["mountPath"].as_str().unwrap(),
            "{k}"
        );
    }
    let volume = pod["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "metrics-tls")
        .unwrap();
    let secret = volume["secret"]["secretName"].as_str().unwrap();
    let cert = deploy::object(&objects, "Certificate", "ipshadow-metrics");
    assert_eq!(cert["spec"]["secretName"], secret);
    let monitor = deploy::object(&objects, "ServiceMonitor", "ipshadow");
    let ep = &monitor["spec"]["endpoints"][0];
    assert_eq!(ep["scheme"], "https");
    assert_eq!(ep["tlsConfig"]["ca"]["secret"]["name"], secret);
    assert_eq!(ep["tlsConfig"]["ca"]["secret"]["key"], "ca.crt");
    let service = deploy::object(&objects, "Service", "ipshadow-metrics");
    let dns = format!(
        "{}.{}.svc",
        service["metadata"]["name"].as_str().unwrap(),
        service["metadata"]["namespace"].as_str().unwrap()
    );
    assert_eq!(ep["tlsConfig"]["serverName"], dns.as_str());
    assert!(
        cert["spec"]["dnsNames"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n == dns.as_str())
    );
    // The agent's review rights are bound to its own service account.
    let binding = deploy::object(&objects, "ClusterRoleBinding", "ipshadow-metrics-auth");
    assert_eq!(binding["subjects"][0]["name"], pod["serviceAccountName"]);
    let reader = deploy::cluster_role_rules(&objects, "ipshadow-metrics-reader");
    assert!(
        reader[0]["nonResourceURLs"]
            .as_array()
            .unwrap()
            .iter()
            .any(|u| u == "/metrics")
    );
}

#[test]
fn every_object_validates_offline_against_the_kubernetes_schemas() {
    let objects = deploy::manifests();
    let kinds: BTreeSet<&str> = objects.iter().filter_map(|o| o["kind"].as_str()).collect();
    for k in [
        "Namespace",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "DaemonSet",
        "Service",
        "ServiceMonitor",
        "PrometheusRule",
        "ConfigMap",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    ] {
        assert!(kinds.contains(k), "{k} missing from deploy/: {kinds:?}");
    }
    let crd_based = validate_core(&objects, "validate");
    // prometheus-operator objects: a structural check of what the operator reads.
    for o in crd_based {
        assert_eq!(o["apiVersion"], "monitoring.coreos.com/v1");
        assert_eq!(o["metadata"]["namespace"], "ipshadow-system");
        match o["kind"].as_str().unwrap() {
            "ServiceMonitor" => {
                let ep = &o["spec"]["endpoints"][0];
                assert_eq!(ep["port"], "metrics");
                assert_eq!(ep["honorLabels"], true);
                assert_eq!(
                    o["spec"]["selector"]["matchLabels"]["app.kubernetes.io/name"],
                    "ipshadow"
                );
            }
            "PrometheusRule" => {
                for r in o["spec"]["groups"][0]["rules"].as_array().unwrap() {
                    assert!(r["alert"].is_string() && r["expr"].is_string(), "{r:#}");
                    for a in ["summary", "description", "runbook_url"] {
                        assert!(r["annotations"][a].is_string(), "{} has no {a}", r["alert"]);
                    }
                    assert!(r["labels"]["severity"].is_string());
                }
            }
            other => panic!("unexpected {other}"),
        }
    }
    // The base alone builds too (clusters without prometheus-operator).
    let out = Command::new("kubectl")
        .arg("kustomize")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/base"))
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(!String::from_utf8_lossy(&out.stdout).contains("monitoring.coreos.com"));
}

#[test]
fn the_daemonset_is_locked_down_and_runs_on_every_node() {
    let objects = deploy::manifests();
    let ds = kind(&objects, "DaemonSet");
    let pod = &ds["spec"]["template"]["spec"];
    let c = &pod["containers"][0];
    let sc = &c["securityContext"];
    assert_eq!(pod["hostNetwork"], true);
    assert_ne!(sc["privileged"], true);
    assert_eq!(sc["allowPrivilegeEscalation"], false);
    assert_eq!(sc["readOnlyRootFilesystem"], true);
    assert_eq!(sc["capabilities"]["drop"], serde_json::json!(["ALL"]));
    assert_eq!(pod["priorityClassName"], "system-node-critical");
    assert!(
        pod["tolerations"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["operator"] == "Exists" && t["key"].is_null())
    );
    assert_eq!(c["livenessProbe"]["httpGet"]["path"], "/healthz");
    assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/readyz");
    let node_name = c["env"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "NODE_NAME")
        .unwrap();
    assert_eq!(
        node_name["valueFrom"]["fieldRef"]["fieldPath"],
        "spec.nodeName"
    );
    assert_eq!(ds["spec"]["updateStrategy"]["type"], "RollingUpdate");
    assert!(ds["spec"]["updateStrategy"]["rollingUpdate"]["maxUnavailable"].is_string());
    assert!(
        c["resources"]["requests"]["memory"].is_string()
            && c["resources"]["limits"]["memory"].is_string()
    );
}

#[test]
fn the_probes_pass_with_the_manifests_listen_settings() {
    if !can_run_netns_tests("the_probes_pass_with_the_manifests_listen_settings") {
        return;
    }
    let objects = deploy::manifests();
    let c = &kind(&objects, "DaemonSet")["spec"]["template"]["spec"]["containers"][0];
    let env = |name: &str| {
        c["env"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == name)
            .unwrap_or_else(|| panic!("no {name} in the DaemonSet's env"))
            .clone()
    };
    assert_eq!(
        env("HOST_IP")["valueFrom"]["fieldRef"]["fieldPath"],
        "status.hostIP"
    );
    // The node's address, as the downward API gives it.
    let sim = SimNode::kube_ovn("mprobe", ROUTER);
    let host_ip = "100.64.0.2";
    let listen = env("IPSHADOW_LISTEN")["value"]
        .as_str()
        .unwrap()
        .replace("$(HOST_IP)", host_ip);
    let health = env("IPSHADOW_HEALTH_LISTEN")["value"]
        .as_str()
        .unwrap()
        .to_owned();
    let d = temp_dir("probe");
    let pods = d.join("pods.json");
    write_list(&pods, vec![pod("t", "pg", "node-a", &[ROUTER])]);
    let agent = AgentProc::spawn_on(
        &sim.node,
        &listen,
        &[],
        &[
            "--node",
            "node-a",
            "--pods",
            pods.to_str().unwrap(),
            "--health-listen",
            &health,
        ],
        &[],
    );
    let _inside = sim.node.enter();
    for probe in ["livenessProbe", "readinessProbe"] {
        let get = &c[probe]["httpGet"];
        let addr = format!("{}:{}", get["host"].as_str().unwrap(), get["port"]);
        let addr: std::net::SocketAddr = addr.parse().unwrap();
        let path = get["path"].as_str().unwrap();
        let passed = ipshadow_tests::lab::poll(HANG, || {
            matches!(ipshadow_tests::http::get(addr, path), Ok((200, _))).then_some(())
        });
        assert!(
            passed.is_some(),
            "{probe} {addr}{path} never passed:\n{}",
            agent.log_text()
        );
    }
    // Metrics on the node's address, and not on every address of the host.
    let metrics: std::net::SocketAddr = listen.parse().unwrap();
    assert!(matches!(
        ipshadow_tests::http::get(metrics, "/metrics"),
        Ok((200, _))
    ));
    assert!(ipshadow_tests::http::get("127.0.0.1:9785".parse().unwrap(), "/metrics").is_err());
}

#[test]
fn the_daemonset_capabilities_are_enough_and_each_is_needed() {
    if !can_run_netns_tests("the_daemonset_capabilities_are_enough_and_each_is_needed") {
        return;
    }
    let objects = deploy::manifests();
    let caps: Vec<String> = kind(&objects, "DaemonSet")["spec"]["template"]["spec"]["containers"]
        [0]["securityContext"]["capabilities"]["add"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap().to_lowercase())
        .collect();
    let sim = SimNode::kube_ovn("mcap", "10.244.4.251");
    let d = temp_dir("caps");
    let pods = d.join("pods.json");
    write_list(&pods, vec![pod("t", "pg", "node-a", &["10.244.4.251"])]);
    // As in the container: uid 0 with only `keep` in the bounding set, eBPF required.
    let run = |keep: &[String]| {
        let bounding = std::iter::once("-all".to_owned())
            .chain(keep.iter().map(|c| format!("+{c}")))
            .collect::<Vec<_>>()
            .join(",");
        sim.node
            .command("setpriv")
            .arg(format!("--bounding-set={bounding}"))
            .arg("--")
            .arg(ipshadow_bin())
            .args([
                "check",
                "--node",
                "node-a",
                "--output",
                "json",
                "--watch-seconds",
                "1",
                "--ebpf",
                "required",
                "--pods",
            ])
            .arg(&pods)
            .output()
            .unwrap()
    };
    let out = run(&caps);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{caps:?} not enough: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["findings"][0]["evidence"].is_object(), "{v:#}");
    for missing in &caps {
        let fewer: Vec<String> = caps.iter().filter(|c| *c != missing).cloned().collect();
        let out = run(&fewer);
        assert_eq!(
            out.status.code(),
            Some(2),
            "works without {missing}: the set is not minimal"
        );
    }
}

/// The capability sets of a running process, as hex masks from /proc.
fn capability_sets(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let mask = |field: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(field))
            .map(|v| u64::from_str_radix(v.trim(), 16).unwrap())
            .unwrap()
    };
    (mask("CapEff:"), mask("CapPrm:"))
}

#[test]
fn the_agent_gives_up_what_it_no_longer_needs_once_attached() {
    if !can_run_netns_tests("the_agent_gives_up_what_it_no_longer_needs_once_attached") {
        return;
    }
    const NET_ADMIN: u64 = 1 << 12;
    const BPF: u64 = 1 << 39;
    let caps = kind(&deploy::manifests(), "DaemonSet")["spec"]["template"]["spec"]["containers"][0]
        ["securityContext"]["capabilities"]["add"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| format!("+{}", c.as_str().unwrap().to_lowercase()))
        .collect::<Vec<_>>()
        .join(",");
    let bounding = format!("--bounding-set=-all,{caps}");
    let mut report = Vec::new();
    for mode in attach_modes("the_agent_gives_up_what_it_no_longer_needs_once_attached") {
        let sim = SimNode::kube_ovn(&format!("mdrop{}", &mode[..1]), ROUTER);
        let d = temp_dir(&format!("drop-{mode}"));
        let pods = d.join("pods.json");
        write_list(&pods, vec![pod("t", "pg", "node-a", &[ROUTER])]);
        let agent = AgentProc::spawn_wrapped(
            &sim.node,
            &["setpriv", &bounding, "--"],
            &[
                "--node",
                "node-a",
                "--pods",
                pods.to_str().unwrap(),
                "--ebpf",
                "required",
                "--tc-attach",
                mode,
            ],
            &[],
        );
        agent.wait_ready(&sim.node);
        let (eff, prm) = capability_sets(agent.pid());
        // NET_ADMIN stays to read the pods' namespaces (checked at every dump by
        // target nsid; legacy tc also needs it to take its filter off lo at exit).
        // CAP_BPF stays only on kernels that gate every bpf() call on it (< 6.5).
        let allowed = NET_ADMIN | BPF;
        assert_eq!(eff, prm, "{mode}: effective {eff:#x} != permitted {prm:#x}");
        assert_eq!(
            eff & !allowed,
            0,
            "{mode}: kept {eff:#x}; log:\n{}",
            agent.log_text()
        );
        assert_ne!(
            eff & NET_ADMIN,
            0,
            "{mode}: NET_ADMIN dropped but needed to read the pods' namespaces"
        );
        report.push(format!("{mode}: CapEff {eff:#x}"));
        // Still works without them: traffic is counted, and a map update (the
        // pod goes, its IP leaves the watched set) succeeds.
        {
            let _inside = sim.node.enter();
            for _ in 0..2 {
                let _ = std::net::TcpStream::connect_timeout(
                    &format!("{ROUTER}:5432").parse().unwrap(),
                    Duration::from_secs(1),
                );
            }
        }
        let counted = AgentProc::wait_metrics(&sim.node, HANG, |m| {
            m.contains("ipshadow_refused_connections_total{") && m.contains("\"pg\"} 2")
        });
        assert!(counted.is_some(), "{mode}: log:\n{}", agent.log_text());
        write_list(&pods, vec![]);
        let cleared =
            AgentProc::wait_metrics(&sim.node, HANG, |m| !m.contains("ipshadow_collision_info{"));
        assert!(cleared.is_some(), "{mode}: log:\n{}", agent.log_text());
        let log = agent.log_text();
        assert!(
            !log.contains("failed") && !log.contains("ERROR"),
            "{mode}: {log}"
        );
        let (status, _) = agent.terminate();
        assert!(status.success(), "{mode}: {status:?}");
        assert_eq!(
            attached_programs(&sim.node, "lo", "ipshadow_lo"),
            0,
            "{mode}: program left on lo"
        );
    }
    figure(format!("capabilities after attach: {}", report.join("; ")));
}

#[test]
fn alerts_fire_from_series_shaped_like_the_agent_output() {
    let objects = deploy::manifests();
    let rule = kind(&objects, "PrometheusRule");
    let d = temp_dir("rules");
    std::fs::write(
        d.join("rules.yaml"),
        serde_json::to_vec(&rule["spec"]).unwrap(),
    )
    .unwrap();
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("prometheus/alerts_test.yaml"),
        d.join("alerts_test.yaml"),
    )
    .unwrap();
    let check = Command::new("promtool")
        .arg("check")
        .arg("rules")
        .arg(d.join("rules.yaml"))
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stdout)
    );
    let test = Command::new("promtool")
        .args(["test", "rules", "alerts_test.yaml"])
        .current_dir(&d)
        .output()
        .unwrap();
    assert!(
        test.status.success(),
        "{}{}",
        String::from_utf8_lossy(&test.stdout),
        String::from_utf8_lossy(&test.stderr)
    );
    // Every alert is exercised by the unit tests.
    let tests = std::fs::read_to_string(d.join("alerts_test.yaml")).unwrap();
    for r in rule["spec"]["groups"][0]["rules"].as_array().unwrap() {
        let name = r["alert"].as_str().unwrap();
        assert!(
            tests.contains(&format!("alertname: {name}")),
            "no promtool test for {name}"
        );
    }
}

/// `ipshadow_…` metric names in a PromQL expression.
fn metric_names(expr: &str) -> Vec<String> {
    let mut out = Vec::new();
    let b = expr.as_bytes();
    let mut i = 0;
    while let Some(pos) = expr[i..].find("ipshadow_") {
        let start = i + pos;
        let mut end = start;
        while end < b.len() && (b[end].is_ascii_alphanumeric() || b[end] == b'_') {
            end += 1;
        }
        out.push(expr[start..end].to_owned());
        i = end;
    }
    out
}

#[test]
fn the_dashboard_and_alerts_use_only_metrics_the_agent_exports() {
    if !can_run_netns_tests("the_dashboard_and_alerts_use_only_metrics_the_agent_exports") {
        return;
    }
    // An agent as deployed (against the API server: every subsystem of cluster
    // mode registers its metrics) with every kind of series: a collision with
    // traffic, a blackhole, an overlap.
    let sim = SimNode::kube_ovn("mdash", "10.244.4.251");
    sim.node
        .ip(&["route", "add", "blackhole", "10.244.0.99/32"]);
    let api = ApiServer::start(Some(&sim.node));
    api.apply(Res::Pods, pod("t", "pg", "node-a", &["10.244.4.251"]));
    api.apply(Res::Pods, pod("t", "lost", "node-a", &["10.244.0.99"]));
    api.apply(
        Res::CiliumNodes,
        with_pod_cidrs(
            cilium_node("node-a", "10.244.4.251", None, None),
            &["10.244.4.0/24"],
        ),
    );
    api.set_crd(Res::Subnets, true);
    api.apply(Res::Subnets, subnet("ovn-default", "10.244.0.0/16", &[]));
    let lab = Lab::new("dash", &api);
    let agent = lab.agent(&sim.node, "node-a");
    agent.wait_ready(&sim.node);
    {
        let _inside = sim.node.enter();
        let _ = std::net::TcpStream::connect_timeout(
            &"10.244.4.251:5432".parse().unwrap(),
            Duration::from_secs(1),
        );
    }
    let body = AgentProc::wait_metrics(&sim.node, HANG, |m| {
        m.contains("ipshadow_refused_connections_total{")
    })
    .and_then(|_| AgentProc::get(&sim.node, "/metrics").ok())
    .map_or_else(
        || panic!("no traffic series; log:\n{}", agent.log_text()),
        |(_, b)| b,
    );
    // Sample names, and the families the agent declares (a family can be empty,
    // e.g. no malformed object seen yet); histograms have their three series.
    let mut exported: BTreeSet<String> = body
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| l.split(['{', ' ']).next().map(str::to_owned))
        .collect();
    for l in body.lines().filter_map(|l| l.strip_prefix("# TYPE ")) {
        let mut parts = l.split_whitespace();
        let (Some(name), Some(kind)) = (parts.next(), parts.next()) else {
            continue;
        };
        if kind == "histogram" {
            exported.extend(["_bucket", "_sum", "_count"].map(|s| format!("{name}{s}")));
        } else {
            exported.insert(name.to_owned());
        }
    }

    let objects = deploy::manifests();
    let dashboard: Value = serde_json::from_str(
        kind(&objects, "ConfigMap")["data"]["ipshadow.json"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    let mut used = Vec::new();
    for p in dashboard["panels"].as_array().unwrap() {
        for t in p["targets"].as_array().unwrap() {
            used.extend(metric_names(t["expr"].as_str().unwrap()));
        }
    }
    for v in dashboard["templating"]["list"].as_array().unwrap() {
        used.extend(metric_names(
            &v["definition"]
                .as_str()
                .map(str::to_owned)
                .unwrap_or_default(),
        ));
    }
    for r in kind(&objects, "PrometheusRule")["spec"]["groups"][0]["rules"]
        .as_array()
        .unwrap()
    {
        used.extend(metric_names(r["expr"].as_str().unwrap()));
    }
    assert!(used.len() > 15, "{used:?}");
    for name in &used {
        assert!(
            exported.contains(name),
            "{name} is used but the agent exports no such series:\n{exported:#?}"
        );
    }
}

/// The selectors (`{…}`) of each `ipshadow_collision_info` in a PromQL expression.
fn info_selectors(expr: &str) -> Vec<&str> {
    expr.match_indices("ipshadow_collision_info")
        .map(|(at, name)| {
            let rest = &expr[at + name.len()..];
            rest.strip_prefix('{')
                .and_then(|r| r.split_once('}'))
                .map_or("", |(sel, _)| sel)
        })
        .collect()
}

#[test]
fn the_dashboard_and_the_alerts_leave_out_the_same_findings() {
    // A finding that rests on what a tenant can write is `trust="hint"` and
    // never pages; the dashboard must count what the alerts count, so both
    // filter on `trust`, never on how the address was read (`ip_source`: a
    // kubelet Event is as forgeable as an annotation, and a hint can rest on
    // a pod's own namespace whatever its ip_source).
    let objects = deploy::manifests();
    let dashboard: Value = serde_json::from_str(
        kind(&objects, "ConfigMap")["data"]["ipshadow.json"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    let mut exprs: Vec<(String, String)> = Vec::new();
    for p in dashboard["panels"].as_array().unwrap() {
        for t in p["targets"].as_array().unwrap() {
            exprs.push((
                format!("panel {}", p["title"]),
                t["expr"].as_str().unwrap().to_owned(),
            ));
        }
    }
    for r in kind(&objects, "PrometheusRule")["spec"]["groups"][0]["rules"]
        .as_array()
        .unwrap()
    {
        exprs.push((
            format!("alert {}", r["alert"]),
            r["expr"].as_str().unwrap().to_owned(),
        ));
    }
    let mut checked = 0;
    for (at, expr) in &exprs {
        assert!(
            !expr.contains("ip_source"),
            "{at} filters on ip_source: {expr}"
        );
        for sel in info_selectors(expr) {
            assert!(
                sel.split(',').any(|m| m.trim() == "trust!=\"hint\""),
                "{at} reads ipshadow_collision_info without trust!=\"hint\": {expr}"
            );
            checked += 1;
        }
    }
    assert!(
        checked >= 8,
        "only {checked} selectors of ipshadow_collision_info"
    );
    figure(format!(
        "dashboard and alerts: {checked} selectors of ipshadow_collision_info, each without hints"
    ));
}

/// The labels of each `by (…)` grouping in a PromQL expression.
fn groupings(expr: &str) -> Vec<BTreeSet<String>> {
    expr.split("by (")
        .skip(1)
        .filter_map(|rest| rest.split_once(')'))
        .map(|(labels, _)| labels.split(',').map(|l| l.trim().to_owned()).collect())
        .collect()
}

#[test]
fn the_dashboard_tells_findings_apart_by_address_without_the_pods_names() {
    // An agent that leaves names out (--metrics-names) exports empty namespace
    // and pod labels: a panel that groups or names series by pod must do so
    // by address too, or every pod's series becomes one line named "/".
    let objects = deploy::manifests();
    let dashboard: Value = serde_json::from_str(
        kind(&objects, "ConfigMap")["data"]["ipshadow.json"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    let mut by_pod = 0;
    for p in dashboard["panels"].as_array().unwrap() {
        for t in p["targets"].as_array().unwrap() {
            let expr = t["expr"].as_str().unwrap();
            let legend = t["legendFormat"].as_str().unwrap_or_default();
            for g in groupings(expr) {
                if g.contains("pod") || g.contains("namespace") {
                    by_pod += 1;
                    assert!(
                        g.contains("ip"),
                        "{}: {expr} groups by pod, not by ip",
                        p["title"]
                    );
                }
            }
            if legend.contains("{{pod}}") || legend.contains("{{namespace}}") {
                assert!(
                    legend.contains("{{ip}}") && !legend.contains("{{namespace}}/{{pod}}"),
                    "{}: legend {legend:?} without the address, or a bare \"/\" without names",
                    p["title"]
                );
            }
        }
    }
    assert!(by_pod >= 4, "the traffic panels were not found");
}

#[test]
fn the_remediation_overlay_validates_and_starts_in_dry_run() {
    let objects = deploy::manifests_of("remediation");
    let _ = validate_core(&objects, "validate-remediation");
    let ds = deploy::object(&objects, "DaemonSet", "ipshadow");
    let env = ds["spec"]["template"]["spec"]["containers"][0]["env"]
        .as_array()
        .unwrap();
    let value = |k: &str| {
        env.iter()
            .find(|e| e["name"] == k)
            .and_then(|e| e["value"].as_str())
            .unwrap_or_default()
    };
    assert_eq!(value("IPSHADOW_REMEDIATE"), "dry-run");
    assert_eq!(value("IPSHADOW_LISTEN"), "$(HOST_IP):9785");
    // The base alone cannot evict.
    let base = deploy::cluster_role_rules(&deploy::manifests(), "ipshadow");
    assert!(!deploy::allows(&base, "", "pods/eviction", "create"));
    let extra = deploy::cluster_role_rules(&objects, "ipshadow-remediation");
    assert!(deploy::allows(&extra, "", "pods/eviction", "create"));
}
