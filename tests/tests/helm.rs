//! deploy/helm/ipshadow through Helm's own engine (helm-python-sdk, Helm v4's
//! Go SDK): strict lint for every supported Kubernetes version; the default
//! render and each overlay's value set are exactly what kustomize renders of
//! deploy/; every `helm install` command docs/helm.md and the README give
//! renders, validates against the Kubernetes schemas and keeps the security
//! properties the manifest tests check; a wrong value is refused with the
//! schema's message; the packaged chart renders the same objects.
//! No root needed (the image and the `helm test` command: tests/tests/image.rs).
#![allow(
    clippy::unwrap_used,
    clippy::too_many_lines,
    reason = "tests unwrap to keep the stack trace; end-to-end scenarios read top to bottom"
)]

use std::{
    collections::{BTreeMap, BTreeSet},
    path::{Path, PathBuf},
};

use ipshadow_tests::{
    deploy, figure,
    helm::{self, Rendered},
};
use serde_json::{Value, json};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The Kubernetes versions the chart supports (Chart.yaml's kubeVersion: 1.26
/// on; the admission policies from 1.30), through the newest schemas here.
const KUBE_VERSIONS: std::ops::RangeInclusive<u32> = 26..=37;

/// A `helm install` command of the docs: where, its arguments, and the
/// kustomize directory its comment says it equals (`kubectl apply -k deploy/…`).
#[derive(Debug)]
struct Documented {
    at: String,
    command: String,
    set: Vec<String>,
    set_string: Vec<String>,
    files: Vec<String>,
    namespace: String,
    /// `--create-namespace`: Helm makes the release's namespace, unlabelled.
    create_namespace: bool,
    kustomize: Option<String>,
}

/// Splits a shell command line into words: whitespace, '…' and "…".
fn words(line: &str) -> Vec<String> {
    let (mut out, mut cur, mut quote, mut any) = (Vec::new(), String::new(), None, false);
    for c in line.chars() {
        match (quote, c) {
            (None, '\'' | '"') => {
                quote = Some(c);
                any = true;
            }
            (Some(q), c) if c == q => quote = None,
            (None, c) if c.is_whitespace() => {
                if any {
                    out.push(std::mem::take(&mut cur));
                    any = false;
                }
            }
            (_, c) => {
                cur.push(c);
                any = true;
            }
        }
    }
    if any {
        out.push(cur);
    }
    out
}

/// Every `helm install` command in the fenced blocks of `file`, continuation
/// lines joined, comments split off.
fn documented_in(file: &str) -> Vec<Documented> {
    let text = std::fs::read_to_string(root().join(file)).unwrap();
    let mut out = Vec::new();
    let (mut fenced, mut pending, mut start) = (false, String::new(), 0);
    for (n, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if !fenced {
            continue;
        }
        if pending.is_empty() {
            start = n + 1;
        }
        let (code, comment) = line.split_once(" # ").unwrap_or((line, ""));
        if let Some(head) = code.trim_end().strip_suffix('\\') {
            pending.push_str(head);
            pending.push(' ');
            continue;
        }
        pending.push_str(code);
        let command = std::mem::take(&mut pending);
        if !command.trim_start().starts_with("helm install ") {
            continue;
        }
        let w = words(&command);
        let mut d = Documented {
            at: format!("{file}:{start}"),
            command: command.split_whitespace().collect::<Vec<_>>().join(" "),
            set: vec![],
            set_string: vec![],
            files: vec![],
            namespace: "default".to_owned(),
            create_namespace: false,
            kustomize: comment
                .split("kubectl apply -k ")
                .nth(1)
                .map(|d| d.split_whitespace().next().unwrap().trim_end_matches('/'))
                .map(|d| {
                    d.trim_start_matches("deploy")
                        .trim_start_matches('/')
                        .to_owned()
                }),
        };
        let mut i = 2;
        while i < w.len() {
            let next = w.get(i + 1).cloned().unwrap_or_default();
            match w[i].as_str() {
                "--set" => d.set.push(next),
                "--set-string" => d.set_string.push(next),
                "-f" | "--values" => d.files.push(next),
                "-n" | "--namespace" => d.namespace = next,
                "--create-namespace" => {
                    d.create_namespace = true;
                    i += 1;
                    continue;
                }
                _ => {
                    i += 1;
                    continue;
                }
            }
            i += 2;
        }
        out.push(d);
    }
    out
}

/// docs/helm.md's commands and the README's.
fn documented() -> Vec<Documented> {
    let mut all = documented_in("docs/helm.md");
    all.extend(documented_in("README.md"));
    assert!(all.len() >= 10, "the parser missed commands: {all:#?}");
    all
}

/// Each documented command's values (parsed by Helm's own --set parser) and
/// render, as on a cluster with prometheus-operator: deploy/ applies its
/// ServiceMonitor and PrometheusRule whole, and the chart renders them only
/// where the cluster serves their API (the test below renders without it).
fn render_documented(docs: &[Documented]) -> Vec<(Value, Rendered)> {
    let parse: Vec<Value> = docs
        .iter()
        .map(|d| {
            let files: Vec<String> = d
                .files
                .iter()
                .map(|f| {
                    std::fs::read_to_string(root().join(f))
                        .unwrap_or_else(|e| panic!("{}: {f}: {e}", d.at))
                })
                .collect();
            json!({"op": "parse", "set": d.set, "set_string": d.set_string, "files": files})
        })
        .collect();
    let values: Vec<Value> = helm::sdk(&parse)
        .into_iter()
        .zip(docs)
        .map(|(a, d)| {
            assert!(a["error"].is_null(), "{}: {}: {a}", d.at, d.command);
            a["values"].clone()
        })
        .collect();
    let renders: Vec<Value> = docs
        .iter()
        .zip(&values)
        .map(|(d, v)| helm::render_request_with_monitoring(&helm::chart_dir(), v, &d.namespace))
        .collect();
    helm::sdk(&renders)
        .iter()
        .zip(docs)
        .zip(values)
        .map(|((a, d), v)| {
            let r = helm::rendered(a).unwrap_or_else(|e| panic!("{}: {}: {e}", d.at, d.command));
            (v, r)
        })
        .collect()
}

fn the<'a>(objects: &'a [Value], kind: &str) -> Vec<&'a Value> {
    objects.iter().filter(|o| o["kind"] == kind).collect()
}

fn env(container: &Value, name: &str) -> Option<String> {
    container["env"].as_array().and_then(|e| {
        e.iter()
            .find(|v| v["name"] == name)
            .and_then(|v| v["value"].as_str().map(str::to_owned))
    })
}

/// The security properties tests/tests/manifests.rs checks of deploy/, and the
/// RBAC the agent uses with the rendered settings: kustomize's rules, the
/// Node condition's grant only when it writes the condition, eviction only
/// with remediation, token and access reviews only with scrape authentication.
fn assert_locked_down(values: &Value, r: &Rendered, at: &str) {
    let base = deploy::manifests();
    let base_ds = deploy::object(&base, "DaemonSet", "ipshadow");
    let ds = the(&r.objects, "DaemonSet");
    assert_eq!(ds.len(), 1, "{at}: DaemonSets {ds:#?}");
    let ds = ds[0];
    let ns = ds["metadata"]["namespace"].as_str().unwrap();
    let pod = &ds["spec"]["template"]["spec"];
    let c = &pod["containers"][0];
    assert_eq!(pod["containers"].as_array().unwrap().len(), 1, "{at}");
    assert!(pod["initContainers"].is_null(), "{at}");
    assert_eq!(pod["hostNetwork"], true, "{at}");
    assert!(pod["hostPID"].is_null() && pod["hostIPC"].is_null(), "{at}");
    assert!(pod["securityContext"].is_null(), "{at}");
    assert_eq!(
        c["securityContext"],
        base_ds["spec"]["template"]["spec"]["containers"][0]["securityContext"],
        "{at}: the container's securityContext differs from deploy/'s"
    );
    assert_eq!(
        c["securityContext"]["capabilities"],
        json!({"drop": ["ALL"], "add": ["BPF", "PERFMON", "NET_ADMIN"]}),
        "{at}"
    );
    for v in pod["volumes"].as_array().unwrap_or(&vec![]) {
        assert!(v["hostPath"].is_null(), "{at}: hostPath volume {v}");
    }
    assert_eq!(pod["serviceAccountName"], "ipshadow", "{at}");
    // Everything namespaced is in the agent's namespace but the monitoring
    // objects, which go where Prometheus and Grafana look (their `namespace`
    // values). If the chart makes the namespace, it admits privileged pods
    // (and nothing else labels it), and Helm keeps it when the release goes
    // or namespace.create flips back (helm.sh/resource-policy: keep).
    let monitoring = |key: &str| {
        values["monitoring"][key]["namespace"]
            .as_str()
            .filter(|n| !n.is_empty())
            .unwrap_or(ns)
            .to_owned()
    };
    for o in &r.objects {
        if let Some(n) = o["metadata"]["namespace"].as_str() {
            let want = match (o["kind"].as_str().unwrap(), o["metadata"]["name"].as_str()) {
                ("ServiceMonitor", _) => monitoring("serviceMonitor"),
                ("PrometheusRule", _) => monitoring("prometheusRule"),
                ("ConfigMap", Some("ipshadow-dashboard")) => monitoring("dashboard"),
                _ => ns.to_owned(),
            };
            assert_eq!(n, want, "{at}: {} {}", o["kind"], o["metadata"]["name"]);
        }
    }
    for n in the(&r.objects, "Namespace") {
        assert_eq!(n["metadata"]["name"], ns, "{at}");
        for mode in ["enforce", "warn", "audit"] {
            assert_eq!(
                n["metadata"]["labels"][format!("pod-security.kubernetes.io/{mode}")],
                "privileged",
                "{at}"
            );
        }
        assert_eq!(
            n["metadata"]["annotations"]["helm.sh/resource-policy"], "keep",
            "{at}: a Namespace Helm would delete on uninstall or when namespace.create flips"
        );
    }
    // Linux nodes only, the agent and the `helm test` pod: every taint is
    // tolerated, Windows nodes' included.
    let test_pod = r.hooks.first().map_or(&Value::Null, |h| &h["spec"]);
    for (what, spec) in [("DaemonSet", pod), ("helm test pod", test_pod)] {
        assert_eq!(
            spec["nodeSelector"]["kubernetes.io/os"], "linux",
            "{at}: the {what} may land on a Windows node"
        );
    }
    // The probes, the listeners and the Service agree on the ports.
    let health = c["readinessProbe"]["httpGet"]["port"].as_u64().unwrap();
    assert_eq!(c["livenessProbe"]["httpGet"]["port"], health, "{at}");
    assert_eq!(c["readinessProbe"]["httpGet"]["host"], "127.0.0.1", "{at}");
    assert_eq!(
        env(c, "IPSHADOW_HEALTH_LISTEN").unwrap(),
        format!("127.0.0.1:{health}"),
        "{at}"
    );
    let metrics = c["ports"][0]["containerPort"].as_u64().unwrap();
    assert_eq!(
        env(c, "IPSHADOW_LISTEN").unwrap(),
        format!("$(HOST_IP):{metrics}"),
        "{at}"
    );
    let svc = &the(&r.objects, "Service")[0];
    assert_eq!(svc["spec"]["ports"][0]["port"], metrics, "{at}");

    // RBAC: what these settings make the agent do, as kustomize grants it.
    let condition = env(c, "IPSHADOW_NODE_CONDITION").as_deref() != Some("false");
    let remediate = env(c, "IPSHADOW_REMEDIATE").is_some_and(|m| m != "off");
    let auth = env(c, "IPSHADOW_METRICS_AUTH").as_deref() == Some("kubernetes");
    let mut want = deploy::granted(&deploy::cluster_role_rules(&base, "ipshadow"));
    if !condition {
        want.remove(&(String::new(), "nodes/status".to_owned(), "patch".to_owned()));
    }
    let rules = |name: &str| deploy::cluster_role_rules(&r.objects, name);
    assert_eq!(
        deploy::granted(&rules("ipshadow")),
        want,
        "{at}: ClusterRole ipshadow"
    );
    let mut role_names: BTreeSet<&str> = BTreeSet::from(["ipshadow"]);
    if remediate {
        let k = deploy::manifests_of("remediation");
        assert_eq!(
            rules("ipshadow-remediation"),
            deploy::cluster_role_rules(&k, "ipshadow-remediation"),
            "{at}"
        );
        role_names.insert("ipshadow-remediation");
    }
    if auth {
        let k = deploy::manifests_of("metrics-auth");
        for name in ["ipshadow-metrics-auth", "ipshadow-metrics-reader"] {
            assert_eq!(
                rules(name),
                deploy::cluster_role_rules(&k, name),
                "{at}: {name}"
            );
            role_names.insert(name);
        }
    }
    let have: BTreeSet<&str> = the(&r.objects, "ClusterRole")
        .iter()
        .map(|o| o["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(have, role_names, "{at}: ClusterRoles");
    assert!(
        the(&r.objects, "Role").is_empty() && the(&r.objects, "RoleBinding").is_empty(),
        "{at}"
    );
    for b in the(&r.objects, "ClusterRoleBinding") {
        let role = b["roleRef"]["name"].as_str().unwrap();
        assert!(role_names.contains(role), "{at}: binding to {role}");
        if role != "ipshadow-metrics-reader" {
            assert_eq!(
                b["subjects"],
                json!([{"kind": "ServiceAccount", "name": "ipshadow", "namespace": ns}]),
                "{at}: {role}"
            );
        }
    }
    // The admission policies name this release's service account, and the
    // node-status one exists exactly while the agent writes the condition.
    let user = format!("system:serviceaccount:{ns}:ipshadow");
    for p in the(&r.objects, "ValidatingAdmissionPolicy") {
        assert_eq!(
            p["spec"]["matchConditions"][0]["expression"],
            format!("request.userInfo.username == '{user}'"),
            "{at}"
        );
    }
    let policies: Vec<&str> = the(&r.objects, "ValidatingAdmissionPolicy")
        .iter()
        .map(|p| p["metadata"]["name"].as_str().unwrap())
        .collect();
    if !policies.is_empty() {
        assert_eq!(
            policies.contains(&"ipshadow-agent-node-status"),
            condition,
            "{at}: {policies:?}"
        );
    }
    // The `helm test` pod: on the host network to reach the node's loopback,
    // and nothing more.
    assert_eq!(r.hooks.len(), 1, "{at}: hooks {:#?}", r.hooks);
    let t = &r.hooks[0];
    assert_eq!(t["metadata"]["annotations"]["helm.sh/hook"], "test", "{at}");
    assert_eq!(t["spec"]["hostNetwork"], true, "{at}");
    assert_eq!(t["spec"]["securityContext"]["runAsNonRoot"], true, "{at}");
    let tc = &t["spec"]["containers"][0];
    assert_eq!(
        tc["securityContext"]["capabilities"]["drop"],
        json!(["ALL"]),
        "{at}"
    );
    assert_eq!(
        tc["securityContext"]["allowPrivilegeEscalation"], false,
        "{at}"
    );
    assert!(
        tc["command"][2]
            .as_str()
            .unwrap()
            .contains(&format!("url=http://127.0.0.1:{health}/readyz")),
        "{at}: {tc:#}"
    );
    assert!(r.notes.contains("helm test ipshadow"), "{at}: {}", r.notes);
    assert!(r.notes.contains(&format!(
        "kubectl -n {ns} rollout status daemonset/ipshadow"
    )));
}

#[test]
fn the_chart_lints_strictly_for_every_supported_kubernetes_version() {
    let chart = helm::chart_dir();
    let docs = documented();
    let mut requests: Vec<Value> = KUBE_VERSIONS
        .map(|m| json!({"op": "lint", "chart": chart, "values": {}, "kube_version": format!("v1.{m}.0")}))
        .collect();
    // The documented values too, for the oldest with the policies and the newest.
    let values = render_documented(&docs);
    for (v, _) in &values {
        for m in [30, *KUBE_VERSIONS.end()] {
            requests.push(json!({"op": "lint", "chart": chart, "values": v, "kube_version": format!("v1.{m}.0")}));
        }
    }
    let answers = helm::sdk(&requests);
    for (req, report) in requests.iter().zip(&answers) {
        assert!(report["error"].is_null(), "{req}: {report}");
        assert_eq!(report["total_charts_linted"], 1, "{report}");
        assert_eq!(report["errors"], json!([]), "{req}: {report:#}");
        // Strict: warnings are failures, and with the icon set not even
        // Helm's info ("icon is recommended") is left.
        assert_eq!(report["messages"], json!([]), "{req}: {report:#}");
    }
    figure(format!(
        "helm lint --strict: {} runs (Kubernetes 1.{}-1.{}, {} documented value sets), clean",
        answers.len(),
        KUBE_VERSIONS.start(),
        KUBE_VERSIONS.end(),
        values.len()
    ));
}

/// A render request as `helm template --kube-version {version}
/// --api-versions …` makes it: `api_versions` added to Helm's own list, which
/// names groups only (`admissionregistration.k8s.io/v1`), where a cluster's
/// discovery also names each kind.
fn render_at(values: &Value, version: &str, api_versions: &[&str]) -> Value {
    let mut r = helm::render_request(&helm::chart_dir(), values, "ipshadow-system");
    r["kube_version"] = json!(version);
    r["api_versions"] = json!(api_versions);
    r
}

/// The admission policies of a render, without Helm's own labels.
fn admission_objects(objects: &[Value]) -> BTreeMap<(String, String), Value> {
    helm::by_kind_and_name(objects)
        .into_iter()
        .filter(|((kind, _), _)| kind.starts_with("ValidatingAdmissionPolicy"))
        .map(|(k, o)| (k, without_helm_metadata(o)))
        .collect()
}

/// Where the cluster cannot take the policies, installing (or `helm
/// template`) fails and names the opt-out; `helm lint` stays clean there, as
/// Helm's `fail` does nothing in lint mode (pkg/engine: "Don't fail when
/// linting"), which the lint test above relies on.
#[test]
fn the_chart_fails_where_the_cluster_cannot_take_the_admission_policies() {
    let policies_off = || json!({"admissionPolicies": {"enabled": false}});
    // What a cluster's discovery adds: kinds. 1.28 and 1.29 serve the policies
    // as v1beta1 only (off by default), which the agent's policies are not.
    let cluster = ["apps/v1/DaemonSet", "v1/Pod"];
    let cluster_1_29 = [
        &cluster[..],
        &["admissionregistration.k8s.io/v1beta1/ValidatingAdmissionPolicy"],
    ]
    .concat();
    let cluster_1_31 = [
        &cluster[..],
        &[
            "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy",
            "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicyBinding",
        ],
    ]
    .concat();
    // (what, version, API list, whether the policies can be installed)
    let cases: [(&str, &str, &[&str], bool); 7] = [
        ("helm template --kube-version 1.26", "v1.26.0", &[], false),
        ("helm template --kube-version 1.29", "v1.29.0", &[], false),
        ("a 1.29 cluster", "v1.29.4", &cluster_1_29, false),
        (
            "a 1.31 cluster with the API turned off",
            "v1.31.2",
            &cluster,
            false,
        ),
        ("helm template --kube-version 1.30", "v1.30.0", &[], true),
        ("helm template --kube-version 1.34", "v1.34.0", &[], true),
        ("a 1.31 cluster", "v1.31.2", &cluster_1_31, true),
    ];
    let mut requests = Vec::new();
    for (_, version, apis, _) in &cases {
        requests.push(render_at(&json!({}), version, apis));
        requests.push(render_at(&policies_off(), version, apis));
    }
    // What they must equal: deploy/'s policies, and the chart's other objects.
    requests.push(render_at(&json!({}), "v1.30.0", &[]));
    let answers = helm::sdk(&requests);
    let reference = helm::rendered(&answers[2 * cases.len()]).unwrap();
    let mut others = helm::by_kind_and_name(&reference.objects);
    others.retain(|(kind, _), _| !kind.starts_with("ValidatingAdmissionPolicy"));
    let want = admission_objects(&deploy::manifests());
    assert_eq!(want.len(), 4, "two policies and their bindings in deploy/");

    for (i, (what, version, _, served)) in cases.iter().enumerate() {
        let default = helm::rendered(&answers[2 * i]);
        let off = helm::rendered(&answers[2 * i + 1])
            .unwrap_or_else(|e| panic!("{what}, opted out: {e}"));
        if *served {
            let r = default.unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!(
                admission_objects(&r.objects),
                want,
                "{what}: the policies as deploy/ has them"
            );
        } else {
            let Err(e) = default else {
                panic!("{what}: rendered without the policies instead of failing")
            };
            for words in [
                &format!(
                    "this cluster (Kubernetes {version}) does not serve admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy"
                ),
                "any Node's status",
                "docs/threat-model.md",
                "set admissionPolicies.enabled=false",
            ] {
                assert!(
                    e.contains(words),
                    "{what}: the failure lacks {words:?}: {e}"
                );
            }
        }
        // Opted out: everything but the policies, and the NOTES say what that leaves open.
        let mut rest = helm::by_kind_and_name(&off.objects);
        assert!(
            admission_objects(&off.objects).is_empty(),
            "{what}: opted out, yet {:?}",
            rest.keys()
        );
        rest.retain(|(kind, _), _| !kind.starts_with("ValidatingAdmissionPolicy"));
        assert_eq!(
            rest, others,
            "{what}: opting out changes more than the policies"
        );
        assert!(
            off.notes.contains("admissionPolicies.enabled=false")
                && off.notes.contains("any Node's status"),
            "{what}: {}",
            off.notes
        );
    }
    figure(format!(
        "helm: policies rendered in {} situations, a loud failure in {}, everything else \
         unchanged with admissionPolicies.enabled=false",
        cases.iter().filter(|c| c.3).count(),
        cases.iter().filter(|c| !c.3).count()
    ));
}

/// Helm's own metadata, which kustomize has no notion of: the recommended
/// labels naming the release and the chart (on every object and the pods),
/// and the policy that keeps the chart's Namespace. Compared without them.
const HELM_ONLY_LABELS: [&str; 4] = [
    "app.kubernetes.io/instance",
    "app.kubernetes.io/version",
    "app.kubernetes.io/managed-by",
    "helm.sh/chart",
];

fn without_helm_metadata(mut o: Value) -> Value {
    for labels in ["/metadata/labels", "/spec/template/metadata/labels"] {
        if let Some(l) = o.pointer_mut(labels).and_then(Value::as_object_mut) {
            for k in HELM_ONLY_LABELS {
                l.remove(k);
            }
        }
    }
    if let Some(a) = o
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
    {
        a.remove("helm.sh/resource-policy");
        if a.is_empty() {
            o["metadata"].as_object_mut().unwrap().remove("annotations");
        }
    }
    o
}

#[test]
fn the_default_render_and_each_overlays_values_equal_kustomize_object_for_object() {
    let docs = documented();
    let rendered = render_documented(&docs);
    let mut compared = BTreeSet::new();
    for (d, (_, r)) in docs.iter().zip(&rendered) {
        let Some(sub) = &d.kustomize else { continue };
        let mut want = helm::by_kind_and_name(&deploy::manifests_of(sub));
        // `helm install --create-namespace` makes the namespace (unlabelled:
        // Helm has no way to label it) where kustomize applies a labelled
        // one; the chart then renders none (it cannot own the release's own
        // namespace), so everything else is compared.
        if d.create_namespace {
            want.retain(|(kind, _), _| kind != "Namespace");
        }
        let have: BTreeMap<_, _> = helm::by_kind_and_name(&r.objects)
            .into_iter()
            .map(|(k, o)| (k, without_helm_metadata(o)))
            .collect();
        let missing: Vec<_> = want.keys().filter(|k| !have.contains_key(*k)).collect();
        let extra: Vec<_> = have.keys().filter(|k| !want.contains_key(*k)).collect();
        assert!(
            missing.is_empty() && extra.is_empty(),
            "{}: {}: not in the chart's render: {missing:?}; only in it: {extra:?}",
            d.at,
            d.command
        );
        for (k, o) in &want {
            assert!(
                &have[k] == o,
                "{}: {}: {k:?} differs from kubectl kustomize deploy/{sub}:\nkustomize: {o:#}\nhelm: {:#}",
                d.at,
                d.command,
                have[k]
            );
        }
        compared.insert(format!("deploy/{sub}"));
    }
    let all: BTreeSet<String> = [
        "deploy/",
        "deploy/base",
        "deploy/metrics-auth",
        "deploy/remediation",
    ]
    .map(str::to_owned)
    .into();
    assert_eq!(
        compared, all,
        "a kustomize directory without its Helm values in docs/helm.md"
    );
    figure(format!(
        "helm render = kubectl kustomize, object for object: {}",
        compared.len()
    ));
}

#[test]
fn every_documented_value_set_renders_validates_and_stays_locked_down() {
    let docs = documented();
    let rendered = render_documented(&docs);
    let mut unique: BTreeMap<String, Value> = BTreeMap::new();
    for (d, (v, r)) in docs.iter().zip(&rendered) {
        let at = format!("{}: {}", d.at, d.command);
        assert_locked_down(v, r, &at);
        for o in r.objects.iter().chain(&r.hooks) {
            let api = o["apiVersion"].as_str().unwrap();
            if api.starts_with("monitoring.coreos.com/") || api.starts_with("cert-manager.io/") {
                continue;
            }
            unique.insert(o.to_string(), o.clone());
        }
    }
    // Each distinct object once, per version, in one run of kubernetes-validate.
    let objects: Vec<&Value> = unique.values().collect();
    let dir = ipshadow_tests::TempDir::new("helm-validate");
    for version in ["1.33.0", "1.37.0"] {
        if let Err(e) = deploy::validate_many(&objects, &dir, version) {
            panic!("Kubernetes {version}: {e}");
        }
    }
    // Values reach the objects they are for.
    let tuned = docs
        .iter()
        .zip(&rendered)
        .find(|(d, _)| d.files.iter().any(|f| f.ends_with("tuned.yaml")))
        .map(|(_, (_, r))| r)
        .unwrap();
    let c = &the(&tuned.objects, "DaemonSet")[0]["spec"]["template"]["spec"]["containers"][0];
    assert!(c["image"].as_str().unwrap().contains("@sha256:"), "{c:#}");
    assert_eq!(c["resources"]["limits"]["memory"], "256Mi");
    assert_eq!(env(c, "IPSHADOW_EVENT_BURST").as_deref(), Some("10"));
    assert_eq!(
        env(c, "IPSHADOW_NODE_CONDITION_INTERVAL_SECONDS").as_deref(),
        Some("120")
    );
    assert_eq!(
        c["args"],
        json!(["agent", "--resync-seconds=600", "--cilium-namespace=cilium"])
    );
    assert!(the(&tuned.objects, "ConfigMap").is_empty(), "dashboard off");
    let names = |r: &Rendered| {
        let c = &the(&r.objects, "DaemonSet")[0]["spec"]["template"]["spec"]["containers"][0];
        env(c, "IPSHADOW_METRICS_NAMES")
    };
    for (d, (_, r)) in docs.iter().zip(&rendered) {
        let want = if d.set.iter().any(|s| s == "metrics.names=always") {
            "always"
        } else {
            "authenticated"
        };
        assert_eq!(names(r).as_deref(), Some(want), "{}: {}", d.at, d.command);
    }
    figure(format!(
        "helm: {} documented value sets rendered and locked down; {} distinct objects valid for Kubernetes 1.33 and 1.37",
        docs.len(),
        objects.len()
    ));
}

#[test]
fn a_wrong_value_is_refused_with_the_schemas_message() {
    let chart = helm::chart_dir();
    // (--set, what the schema says about it)
    let cases = [
        (
            "metrics.port=metrics",
            "at '/metrics/port': got string, want integer",
        ),
        ("resources=big", "at '/resources': got string, want object"),
        (
            "remediation.mode=delete",
            "at '/remediation/mode': value must be one of 'off', 'dry-run', 'evict'",
        ),
        (
            "metrics.names=tenants",
            "at '/metrics/names': value must be one of 'authenticated', 'always', 'never'",
        ),
        (
            "events.burst=0",
            "at '/events/burst': minimum: got 0, want 1",
        ),
        (
            "remediaton.mode=evict",
            "additional properties 'remediaton' not allowed",
        ),
        ("image.digest=latest", "at '/image/digest'"),
    ];
    let mut requests = Vec::new();
    for (set, _) in cases {
        let values = helm::sdk(&[json!({"op": "parse", "set": [set]})])[0]["values"].clone();
        requests.push(helm::render_request(&chart, &values, "default"));
        requests.push(
            json!({"op": "lint", "chart": chart, "values": values, "kube_version": "v1.37.0"}),
        );
    }
    let answers = helm::sdk(&requests);
    for (i, (set, message)) in cases.iter().enumerate() {
        let err = helm::rendered(&answers[2 * i]).map(|_| ()).unwrap_err();
        assert!(
            err.contains("values don't meet the specifications of the schema")
                && err.contains(message),
            "--set {set}: {err}"
        );
        let lint = answers[2 * i + 1]["errors"].to_string();
        assert!(lint.contains(message), "lint --set {set}: {lint}");
    }
    figure(format!(
        "helm: {} wrong values refused by values.schema.json",
        cases.len()
    ));
}

#[test]
fn the_chart_has_the_crates_version_and_its_package_renders_the_same() {
    let chart: Value = deploy::yaml_stream(
        std::fs::read_to_string(helm::chart_dir().join("Chart.yaml"))
            .unwrap()
            .as_bytes(),
    )[0]
    .clone();
    let version = env!("CARGO_PKG_VERSION");
    assert_eq!(chart["version"], version);
    assert_eq!(chart["appVersion"], version);
    let default = helm::render(&json!({})).unwrap();
    let image = the(&default.objects, "DaemonSet")[0]["spec"]["template"]["spec"]["containers"][0]
        ["image"]
        .clone();
    assert_eq!(image, format!("ghcr.io/ipshadow/ipshadow:{version}"));
    let images = deploy::yaml_stream(
        chart["annotations"]["artifacthub.io/images"]
            .as_str()
            .unwrap()
            .as_bytes(),
    );
    assert_eq!(
        images[0][0]["image"], image,
        "Artifact Hub's image annotation"
    );
    for a in [
        "artifacthub.io/license",
        "artifacthub.io/links",
        "artifacthub.io/changes",
    ] {
        assert!(chart["annotations"][a].is_string(), "no {a}");
    }
    // Packaged as `cargo xtask chart` does, then rendered from the archive:
    // the files linked from deploy/ are in it.
    let dir = ipshadow_tests::TempDir::new("helm-package");
    let answer = &helm::sdk(&[json!({"op": "package", "chart": helm::chart_dir(),
        "destination": &*dir, "version": version, "app_version": version})])[0];
    let tgz = PathBuf::from(
        answer["path"]
            .as_str()
            .unwrap_or_else(|| panic!("{answer}")),
    );
    assert_eq!(
        tgz.file_name().unwrap().to_str().unwrap(),
        format!("ipshadow-{version}.tgz")
    );
    let from_archive =
        helm::rendered(&helm::sdk(&[helm::render_request(&tgz, &json!({}), "default")])[0])
            .unwrap();
    assert_eq!(
        helm::by_kind_and_name(&from_archive.objects),
        helm::by_kind_and_name(&default.objects)
    );
    assert_eq!(from_archive.hooks, default.hooks);
    figure(format!(
        "helm package: {} ({} bytes, {}) renders the directory's {} objects",
        tgz.file_name().unwrap().to_str().unwrap(),
        std::fs::metadata(&tgz).unwrap().len(),
        answer["digest"].as_str().unwrap(),
        default.objects.len()
    ));
}

/// The monitoring objects of a render, by kind.
fn monitoring_kinds(r: &Rendered) -> BTreeSet<String> {
    r.objects
        .iter()
        .filter(|o| {
            o["apiVersion"]
                .as_str()
                .is_some_and(|a| a.starts_with("monitoring.coreos.com/"))
        })
        .map(|o| o["kind"].as_str().unwrap().to_owned())
        .collect()
}

/// The monitoring kinds a render has, or the words of its failure.
type Expected = Result<&'static [&'static str], &'static [&'static str]>;

/// `helm install` on an ordinary cluster: without prometheus-operator the
/// chart renders everything but its ServiceMonitor and PrometheusRule and
/// says why; a cluster serving one of the two kinds gets that one; forced on
/// where the API is missing, the render fails naming the value to set.
#[test]
fn the_monitoring_objects_follow_the_api_the_cluster_serves() {
    let chart = helm::chart_dir();
    let set = |s: &str| helm::sdk(&[json!({"op": "parse", "set": [s]})])[0]["values"].clone();
    // What a cluster's discovery gives Helm: kinds, apps/v1/DaemonSet among them.
    let cluster = [
        "apps/v1/DaemonSet",
        "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy",
        "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicyBinding",
    ];
    let only_monitors = [
        &cluster[..],
        &[
            "monitoring.coreos.com/v1",
            "monitoring.coreos.com/v1/ServiceMonitor",
        ],
    ]
    .concat();
    let both = [
        &only_monitors[..],
        &["monitoring.coreos.com/v1/PrometheusRule"],
    ]
    .concat();
    let at = |values: Value, apis: &[&str]| {
        let mut r = helm::render_request(&chart, &values, "ipshadow-system");
        r["api_versions"] = json!(apis);
        r
    };
    // (what, request, the monitoring kinds rendered, or the words of the failure)
    let cases: Vec<(&str, Value, Expected)> = vec![
        ("helm template, defaults", at(json!({}), &[]), Ok(&[])),
        (
            "a cluster without prometheus-operator",
            at(json!({}), &cluster),
            Ok(&[]),
        ),
        (
            "a cluster with the ServiceMonitor CRD alone",
            at(json!({}), &only_monitors),
            Ok(&["ServiceMonitor"]),
        ),
        (
            "a cluster with prometheus-operator",
            at(json!({}), &both),
            Ok(&["PrometheusRule", "ServiceMonitor"]),
        ),
        (
            "helm template --api-versions monitoring.coreos.com/v1",
            at(json!({}), &[helm::MONITORING_API]),
            Ok(&["PrometheusRule", "ServiceMonitor"]),
        ),
        (
            "serviceMonitor forced on where it is served",
            at(set("monitoring.serviceMonitor.enabled=true"), &both),
            Ok(&["PrometheusRule", "ServiceMonitor"]),
        ),
        (
            "both off on a cluster that serves them",
            at(
                set(
                    "monitoring.serviceMonitor.enabled=false,monitoring.prometheusRule.enabled=false",
                ),
                &both,
            ),
            Ok(&[]),
        ),
        (
            "serviceMonitor forced on without prometheus-operator",
            at(set("monitoring.serviceMonitor.enabled=true"), &cluster),
            Err(&[
                "monitoring.serviceMonitor.enabled=true",
                "does not serve monitoring.coreos.com/v1 ServiceMonitor",
                "set monitoring.serviceMonitor.enabled=auto",
                "--api-versions monitoring.coreos.com/v1",
            ]),
        ),
        (
            "prometheusRule forced on where only ServiceMonitors are served",
            at(
                set("monitoring.prometheusRule.enabled=true"),
                &only_monitors,
            ),
            Err(&[
                "monitoring.prometheusRule.enabled=true",
                "does not serve monitoring.coreos.com/v1 PrometheusRule",
                "set monitoring.prometheusRule.enabled=auto",
            ]),
        ),
    ];
    let requests: Vec<Value> = cases.iter().map(|c| c.1.clone()).collect();
    let answers = helm::sdk(&requests);
    // Without the API: exactly deploy/base (but its Namespace, as
    // --create-namespace) and the dashboard, which needs no CRD.
    let mut want = helm::by_kind_and_name(&deploy::manifests_of("base"));
    want.retain(|(kind, _), _| kind != "Namespace");
    let full = helm::by_kind_and_name(&deploy::manifests());
    let dashboard = ("ConfigMap".to_owned(), "ipshadow-dashboard".to_owned());
    want.insert(dashboard.clone(), full[&dashboard].clone());
    for ((what, _, expect), answer) in cases.iter().zip(&answers) {
        let r = helm::rendered(answer);
        match expect {
            Ok(kinds) => {
                let r = r.unwrap_or_else(|e| panic!("{what}: {e}"));
                let have: BTreeSet<String> = kinds.iter().map(|k| (*k).to_owned()).collect();
                assert_eq!(monitoring_kinds(&r), have, "{what}");
                let missing = ["ServiceMonitor", "PrometheusRule"]
                    .iter()
                    .any(|k| !have.contains(*k));
                let auto = !what.contains("off");
                assert_eq!(
                    r.notes.contains(
                        "this cluster does not serve prometheus-operator's monitoring.coreos.com/v1"
                    ),
                    missing && auto,
                    "{what}: {}",
                    r.notes
                );
                if kinds.is_empty() && auto {
                    let objects: BTreeMap<_, _> = helm::by_kind_and_name(&r.objects)
                        .into_iter()
                        .map(|(k, o)| (k, without_helm_metadata(o)))
                        .collect();
                    assert_eq!(objects, want, "{what}: not deploy/base and the dashboard");
                }
            }
            Err(words) => {
                let Err(e) = r else {
                    panic!("{what}: rendered instead of failing")
                };
                for w in *words {
                    assert!(e.contains(w), "{what}: the failure lacks {w:?}: {e}");
                }
            }
        }
    }
    figure(format!(
        "helm: monitoring objects in {} API situations as served, {} forced renders refused naming the value",
        cases.iter().filter(|c| c.2.is_ok()).count(),
        cases.iter().filter(|c| c.2.is_err()).count()
    ));
}

/// kube-prometheus-stack's Prometheus selects by `release: <name>`: the label
/// (and the rest of what its users set) reaches both monitoring objects, the
/// chart's node relabeling stays first, and Helm's recommended labels are on
/// every object.
#[test]
fn the_monitoring_objects_take_their_labels_namespace_and_scrape_settings() {
    let values = helm::sdk(&[json!({"op": "parse", "set": [
        "monitoring.serviceMonitor.labels.release=kube-prometheus-stack",
        "monitoring.prometheusRule.labels.release=kube-prometheus-stack",
        "monitoring.serviceMonitor.annotations.team=net,monitoring.prometheusRule.annotations.team=net",
        "monitoring.serviceMonitor.namespace=monitoring,monitoring.prometheusRule.namespace=monitoring",
        "monitoring.serviceMonitor.scrapeTimeout=20s",
        "monitoring.serviceMonitor.relabelings[0].targetLabel=cluster,monitoring.serviceMonitor.relabelings[0].replacement=prod",
        "monitoring.serviceMonitor.metricRelabelings[0].action=drop,monitoring.serviceMonitor.metricRelabelings[0].sourceLabels={__name__},monitoring.serviceMonitor.metricRelabelings[0].regex=ipshadow_http_.*",
        "monitoring.dashboard.namespace=grafana,monitoring.dashboard.labels.folder=network",
    ]})])[0]["values"]
        .clone();
    let r = helm::rendered(
        &helm::sdk(&[helm::render_request_with_monitoring(
            &helm::chart_dir(),
            &values,
            "ipshadow-system",
        )])[0],
    )
    .unwrap();
    let sm = the(&r.objects, "ServiceMonitor")[0];
    let pr = the(&r.objects, "PrometheusRule")[0];
    for o in [sm, pr] {
        let what = o["kind"].as_str().unwrap();
        assert_eq!(
            o["metadata"]["labels"]["release"], "kube-prometheus-stack",
            "{what}"
        );
        assert_eq!(o["metadata"]["annotations"]["team"], "net", "{what}");
        assert_eq!(o["metadata"]["namespace"], "monitoring", "{what}");
    }
    // It still scrapes the agents where they run.
    assert_eq!(
        sm["spec"]["namespaceSelector"]["matchNames"],
        json!(["ipshadow-system"])
    );
    let ep = &sm["spec"]["endpoints"][0];
    assert_eq!(ep["scrapeTimeout"], "20s");
    assert_eq!(ep["interval"], "30s");
    assert_eq!(
        ep["relabelings"][0]["targetLabel"], "node",
        "the chart's own first"
    );
    assert_eq!(
        ep["relabelings"][1],
        json!({"targetLabel": "cluster", "replacement": "prod"})
    );
    assert_eq!(ep["metricRelabelings"][0]["action"], "drop");
    let dashboard = the(&r.objects, "ConfigMap")[0];
    assert_eq!(dashboard["metadata"]["namespace"], "grafana");
    assert_eq!(dashboard["metadata"]["labels"]["folder"], "network");
    assert_eq!(dashboard["metadata"]["labels"]["grafana_dashboard"], "1");
    // The defaults set none of it.
    let plain = helm::rendered(
        &helm::sdk(&[helm::render_request_with_monitoring(
            &helm::chart_dir(),
            &json!({}),
            "ipshadow-system",
        )])[0],
    )
    .unwrap();
    let sm = the(&plain.objects, "ServiceMonitor")[0];
    assert!(sm["metadata"]["annotations"].is_null());
    assert!(sm["spec"]["endpoints"][0]["scrapeTimeout"].is_null());
    assert!(sm["spec"]["endpoints"][0]["metricRelabelings"].is_null());
    // Helm's recommended labels on every object, the pods named by release too.
    let version = env!("CARGO_PKG_VERSION");
    for o in plain.objects.iter().chain(&plain.hooks) {
        let l = &o["metadata"]["labels"];
        for (k, v) in [
            ("app.kubernetes.io/name", "ipshadow".to_owned()),
            ("app.kubernetes.io/instance", "ipshadow".to_owned()),
            ("app.kubernetes.io/version", version.to_owned()),
            ("app.kubernetes.io/managed-by", "Helm".to_owned()),
            ("helm.sh/chart", format!("ipshadow-{version}")),
        ] {
            assert_eq!(
                l[k],
                v.as_str(),
                "{} {}: {k}",
                o["kind"],
                o["metadata"]["name"]
            );
        }
    }
    let ds = the(&plain.objects, "DaemonSet")[0];
    assert_eq!(
        ds["spec"]["selector"]["matchLabels"],
        json!({"app.kubernetes.io/name": "ipshadow"}),
        "a DaemonSet's selector cannot change on upgrade"
    );
    assert_eq!(
        ds["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/instance"],
        "ipshadow"
    );
}

/// Objects of `old` that Helm deletes when an upgrade renders `new`: those
/// gone from the render, unless `helm.sh/resource-policy: keep` (Helm's
/// pkg/action: "resource policy keep").
fn deleted_on_upgrade(old: &Rendered, new: &Rendered) -> Vec<(String, String)> {
    let after = helm::by_kind_and_name(&new.objects);
    helm::by_kind_and_name(&old.objects)
        .into_iter()
        .filter(|(k, o)| {
            !after.contains_key(k)
                && o["metadata"]["annotations"]["helm.sh/resource-policy"] != "keep"
        })
        .map(|(k, _)| k)
        .collect()
}

/// The namespace: the release's by default, the chart's own only when asked
/// (never the release's own, which Helm needs first) and then kept by Helm;
/// GKE's quota for system-node-critical on request.
#[test]
fn the_namespace_and_the_priority_quota_render_as_asked() {
    let chart = helm::chart_dir();
    let set = |s: &[&str]| helm::sdk(&[json!({"op": "parse", "set": s})])[0]["values"].clone();
    let requests = [
        helm::render_request(&chart, &json!({}), "ipshadow-system"),
        helm::render_request(&chart, &set(&["namespace.create=true"]), "ipshadow-system"),
        helm::render_request(
            &chart,
            &set(&["namespace.create=true,namespace.name=ipshadow-system"]),
            "default",
        ),
        helm::render_request(
            &chart,
            &set(&["namespace.create=false,namespace.name=ipshadow-system"]),
            "default",
        ),
        helm::render_request(
            &chart,
            &set(&["priorityClassQuota.enabled=true"]),
            "ipshadow-system",
        ),
        helm::render_request(
            &chart,
            &set(&[
                "priorityClassQuota.enabled=true,priorityClassQuota.pods=500,priorityClassName=platform-node-critical",
            ]),
            "ipshadow-system",
        ),
        helm::render_request(
            &chart,
            &set(&["priorityClassQuota.enabled=true,priorityClassName="]),
            "ipshadow-system",
        ),
    ];
    let answers = helm::sdk(&requests);
    let r: Vec<Result<Rendered, String>> = answers.iter().map(helm::rendered).collect();

    // Default: everything in the release's namespace, no Namespace, no quota.
    let default = r[0].as_ref().unwrap();
    assert!(the(&default.objects, "Namespace").is_empty());
    assert!(the(&default.objects, "ResourceQuota").is_empty());
    for o in &default.objects {
        if let Some(n) = o["metadata"]["namespace"].as_str() {
            assert_eq!(
                n, "ipshadow-system",
                "{} {}",
                o["kind"], o["metadata"]["name"]
            );
        }
    }
    // The release's own namespace cannot be the chart's: a failure naming the way out.
    let e = r[1].as_ref().unwrap_err();
    for w in [
        "namespace.create=true would make the chart own Namespace ipshadow-system, the release's own namespace",
        "Set namespace.name to another namespace",
        "namespace.create=false",
        "pod-security.kubernetes.io/enforce=privileged",
    ] {
        assert!(e.contains(w), "the failure lacks {w:?}: {e}");
    }
    // Another namespace: labelled, kept; flipping create off deletes nothing
    // of it, and everything else stays where it was.
    let created = r[2].as_ref().unwrap();
    let ns = the(&created.objects, "Namespace");
    assert_eq!(ns.len(), 1);
    assert_eq!(ns[0]["metadata"]["name"], "ipshadow-system");
    assert_eq!(
        ns[0]["metadata"]["labels"]["pod-security.kubernetes.io/enforce"],
        "privileged"
    );
    let flipped = r[3].as_ref().unwrap();
    assert!(the(&flipped.objects, "Namespace").is_empty());
    assert_eq!(
        deleted_on_upgrade(created, flipped),
        Vec::<(String, String)>::new(),
        "namespace.create=false would delete the namespace and all in it"
    );
    let uninstall = Rendered {
        objects: vec![],
        ..created.clone()
    };
    let gone = deleted_on_upgrade(created, &uninstall);
    assert!(
        !gone.iter().any(|(kind, _)| kind == "Namespace")
            && gone.len() + 1 == created.objects.len(),
        "helm uninstall should delete all but the Namespace: {gone:?}"
    );

    // The quota: scoped to the agent's class, in its namespace.
    for (i, class, pods) in [
        (4, "system-node-critical", "10k"),
        (5, "platform-node-critical", "500"),
    ] {
        let rendered = r[i].as_ref().unwrap();
        let q = the(&rendered.objects, "ResourceQuota");
        assert_eq!(q.len(), 1, "{class}");
        assert_eq!(q[0]["metadata"]["namespace"], "ipshadow-system");
        assert_eq!(q[0]["spec"]["hard"]["pods"], pods);
        assert_eq!(
            q[0]["spec"]["scopeSelector"]["matchExpressions"],
            json!([{"scopeName": "PriorityClass", "operator": "In", "values": [class]}])
        );
        assert_eq!(
            the(&rendered.objects, "DaemonSet")[0]["spec"]["template"]["spec"]["priorityClassName"],
            class
        );
    }
    let e = r[6].as_ref().unwrap_err();
    assert!(e.contains("priorityClassName is empty"), "{e}");
    // Every object of these renders is valid Kubernetes.
    let dir = ipshadow_tests::TempDir::new("helm-namespace");
    let objects: Vec<&Value> = [created, r[4].as_ref().unwrap()]
        .iter()
        .flat_map(|x| x.objects.iter())
        .filter(|o| matches!(o["kind"].as_str(), Some("Namespace" | "ResourceQuota")))
        .collect();
    deploy::validate_many(&objects, &dir, "1.37.0").unwrap_or_else(|e| panic!("{e}"));
}

/// `helm show readme` prints the chart's README, which names every top-level
/// value; the icon is a URL Helm accepts that names the repository's SVG.
#[test]
fn the_chart_has_a_readme_naming_every_value_and_an_icon() {
    let chart = helm::chart_dir();
    let answers = helm::sdk(&[
        json!({"op": "show", "chart": chart, "format": "readme"}),
        json!({"op": "show", "chart": chart, "format": "chart"}),
    ]);
    let readme = answers[0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("{}", answers[0]));
    // `helm show readme` ends what it prints with one more newline.
    assert_eq!(
        readme.trim_end(),
        std::fs::read_to_string(chart.join("README.md"))
            .unwrap()
            .trim_end()
    );
    let values = deploy::yaml_stream(
        std::fs::read_to_string(chart.join("values.yaml"))
            .unwrap()
            .as_bytes(),
    )[0]
    .clone();
    for key in values.as_object().unwrap().keys() {
        assert!(
            readme.contains(&format!("`{key}`")),
            "the chart's README does not name the value {key}"
        );
    }
    let meta = deploy::yaml_stream(answers[1]["text"].as_str().unwrap().as_bytes())[0].clone();
    let icon = meta["icon"].as_str().unwrap();
    let path = icon
        .strip_prefix("https://raw.githubusercontent.com/ipshadow/ipshadow/main/")
        .unwrap_or_else(|| panic!("icon {icon} is not a file of the repository"));
    let svg = std::fs::read_to_string(root().join(path)).unwrap();
    assert!(
        svg.starts_with("<svg ") && svg.contains("viewBox"),
        "{path}"
    );
}
