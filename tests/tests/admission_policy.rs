//! deploy/base/admission-policy.yaml: the ValidatingAdmissionPolicies that
//! narrow the agent's cluster-wide RBAC to its own Node and its own Events,
//! rendered by kubectl kustomize and their CEL evaluated offline
//! (ipshadow_tests::admission) against requests shaped like the agent's.
#![allow(clippy::unwrap_used, reason = "tests unwrap to keep the stack trace")]

use ipshadow_tests::{
    HANG,
    admission::{Decision, Policy, Request},
    apiserver::{ApiServer, Res},
    can_run_netns_tests, deploy, figure,
    lab::{Lab, ME, OTHER, ROUTER, cozystack, wait_for},
    node::SimNode,
    objects::{pod, subnet},
};
use serde_json::{Value, json};

const NODE_NAME_KEY: &str = "authentication.kubernetes.io/node-name";
const KUBELET: &str = "system:node:node-a";

/// The agent's username, as the API server authenticates its pod's token:
/// from the DaemonSet's ServiceAccount, not from the policy under test.
fn agent_user(objects: &[Value]) -> String {
    let ds = deploy::object(objects, "DaemonSet", "ipshadow");
    format!(
        "system:serviceaccount:{}:{}",
        ds["metadata"]["namespace"].as_str().unwrap(),
        ds["spec"]["template"]["spec"]["serviceAccountName"]
            .as_str()
            .unwrap()
    )
}

struct Fixture {
    user: String,
    node_status: Policy,
    events: Policy,
}

fn fixture() -> Fixture {
    let objects = deploy::manifests();
    let user = agent_user(&objects);
    let mut policies = Policy::all(&objects).unwrap();
    assert_eq!(policies.len(), 2, "one binding per policy");
    let events = policies.remove(
        policies
            .iter()
            .position(|p| p.name == "ipshadow-agent-events")
            .unwrap(),
    );
    let node_status = policies.remove(0);
    assert_eq!(node_status.name, "ipshadow-agent-node-status");
    Fixture {
        user,
        node_status,
        events,
    }
}

/// A Node as kubelet keeps it, with ipshadow's condition when `shadowed` is set.
fn node(name: &str, shadowed: Option<&str>) -> Value {
    let mut conditions = vec![
        json!({"type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory",
               "lastHeartbeatTime": "2025-01-01T10:00:00Z", "lastTransitionTime": "2025-01-01T00:00:00Z"}),
        json!({"type": "Ready", "status": "True", "reason": "KubeletReady",
               "lastHeartbeatTime": "2025-01-01T10:00:00Z", "lastTransitionTime": "2025-01-01T00:00:00Z"}),
    ];
    if let Some(status) = shadowed {
        conditions.push(
            json!({"type": "PodIPsShadowed", "status": status, "reason": "NoFindings",
            "message": "no pod IP is shadowed", "lastHeartbeatTime": "2025-01-01T10:00:00Z",
            "lastTransitionTime": "2025-01-01T09:00:00Z"}),
        );
    }
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": format!("uid-{name}"),
            "resourceVersion": "100",
            "labels": {"kubernetes.io/hostname": name, "node-role.kubernetes.io/worker": ""},
            "annotations": {"node.alpha.kubernetes.io/ttl": "0"},
            "managedFields": [{"manager": "kubelet", "operation": "Update", "subresource": "status"}],
        },
        "spec": {"podCIDR": "10.244.4.0/24", "podCIDRs": ["10.244.4.0/24"]},
        "status": {
            "addresses": [{"type": "InternalIP", "address": "100.64.0.2"}, {"type": "Hostname", "address": name}],
            "allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"},
            "capacity": {"cpu": "4", "memory": "16Gi", "pods": "110"},
            "conditions": conditions,
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {"kubeletVersion": "v1.33.1", "machineID": "m"},
        }
    })
}

/// What the agent's strategic merge patch (agent/src/kube/condition.rs) makes
/// of `old`: its condition set to `status`, appended when new, the other
/// conditions untouched; the API server's bookkeeping moves on.
fn with_condition(old: &Value, status: &str) -> Value {
    let mut new = old.clone();
    let cond = json!({"type": "PodIPsShadowed", "status": status, "reason": "RouterIPCollision",
        "message": "1 pod IP shadowed", "lastHeartbeatTime": "2025-01-01T10:05:00Z",
        "lastTransitionTime": "2025-01-01T10:05:00Z"});
    let conditions = new["status"]["conditions"].as_array_mut().unwrap();
    match conditions
        .iter_mut()
        .find(|c| c["type"] == "PodIPsShadowed")
    {
        Some(c) => *c = cond,
        None => conditions.push(cond),
    }
    new["metadata"]["resourceVersion"] = json!("101");
    new["metadata"]["managedFields"]
        .as_array_mut()
        .unwrap()
        .push(json!({"manager": "ipshadow", "operation": "Update", "subresource": "status"}));
    new
}

fn status_patch(old: &Value, new: &Value) -> Request {
    Request::new(
        "UPDATE",
        ("", "v1", "nodes/status"),
        "Node",
        new.clone(),
        old.clone(),
    )
}

fn allowed(d: &Decision) -> bool {
    *d == Decision::Allowed
}

fn denied_saying(d: &Decision, words: &[&str]) {
    let m = d.message().unwrap_or_else(|| panic!("not denied: {d:?}"));
    for w in words {
        assert!(m.contains(w), "message lacks {w:?}: {m}");
    }
}

#[test]
fn the_policies_are_rendered_cluster_scoped_bound_to_deny_and_fail_closed() {
    let objects = deploy::manifests();
    let policies = Policy::all(&objects).unwrap();
    let names: Vec<&str> = policies.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(
        names,
        ["ipshadow-agent-events", "ipshadow-agent-node-status"],
        "kustomize sorts by kind then name"
    );
    for p in &policies {
        assert!(
            p.denies(),
            "{}: binding {} does not Deny",
            p.name,
            p.binding
        );
        assert!(p.fails_closed(), "{}: failurePolicy is not Fail", p.name);
        // Every expression parsed (Policy::load) and has something to say.
        assert!(
            p.expressions().len() >= 5,
            "{}: {:?}",
            p.name,
            p.expressions()
        );
    }
    for kind in [
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    ] {
        let of_kind: Vec<&Value> = objects.iter().filter(|o| o["kind"] == kind).collect();
        assert_eq!(of_kind.len(), 2, "{kind}");
        for o in of_kind {
            assert!(
                o["metadata"]["namespace"].is_null(),
                "{kind} {} is cluster-scoped but rendered with a namespace",
                o["metadata"]["name"]
            );
        }
    }
    // Without `namespace:` in the base kustomization, each namespaced object
    // names its namespace itself.
    for o in &objects {
        let cluster_scoped = [
            "Namespace",
            "ClusterRole",
            "ClusterRoleBinding",
            "ValidatingAdmissionPolicy",
            "ValidatingAdmissionPolicyBinding",
        ]
        .contains(&o["kind"].as_str().unwrap());
        if !cluster_scoped {
            assert_eq!(
                o["metadata"]["namespace"], "ipshadow-system",
                "{} {}",
                o["kind"], o["metadata"]["name"]
            );
        }
    }
}

#[test]
fn what_the_evaluator_cannot_parse_or_model_is_refused_not_skipped() {
    let objects = deploy::manifests();
    let policy = deploy::object(
        &objects,
        "ValidatingAdmissionPolicy",
        "ipshadow-agent-events",
    );
    let binding = deploy::object(
        &objects,
        "ValidatingAdmissionPolicyBinding",
        "ipshadow-agent-events",
    );
    let load = |edit: &dyn Fn(&mut Value, &mut Value)| {
        let (mut p, mut b) = (policy.clone(), binding.clone());
        edit(&mut p, &mut b);
        Policy::load(&p, &b).err().map(|e| e.to_string())
    };
    assert_eq!(load(&|_, _| {}), None);
    let e = load(&|p, _| {
        p["spec"]["validations"][1]["expression"] = json!("object.reportingController ==");
    });
    assert!(
        e.as_deref()
            .is_some_and(|e| e.contains("validations[1].expression does not parse")),
        "{e:?}"
    );
    let e = load(&|p, _| p["spec"]["paramKind"] = json!({"apiVersion": "v1", "kind": "ConfigMap"}));
    assert!(
        e.as_deref()
            .is_some_and(|e| e.contains("params is not modelled")),
        "{e:?}"
    );
    let e = load(&|p, _| {
        p["spec"]["validations"][0]["expression"] = json!("namespaceObject.metadata.name != ''");
    });
    assert!(
        e.as_deref().is_some_and(|e| e.contains("namespaceObject")),
        "{e:?}"
    );
    let e = load(&|p, _| {
        p["spec"]["matchConstraints"]["objectSelector"] = json!({"matchLabels": {"a": "b"}});
    });
    assert!(
        e.as_deref().is_some_and(|e| e.contains("objectSelector")),
        "{e:?}"
    );
    let e = load(&|_, b| b["spec"]["validationActions"] = json!([]));
    assert!(
        e.as_deref()
            .is_some_and(|e| e.contains("validationActions")),
        "{e:?}"
    );
    // A policy no binding names does nothing.
    let unbound: Vec<Value> = objects
        .iter()
        .filter(|o| {
            o["kind"] != "ValidatingAdmissionPolicyBinding"
                || o["metadata"]["name"] != "ipshadow-agent-events"
        })
        .cloned()
        .collect();
    let e = Policy::all(&unbound).err().map(|e| e.to_string());
    assert!(
        e.as_deref().is_some_and(|e| e.contains("does nothing")),
        "{e:?}"
    );
}

#[test]
fn the_policies_validate_offline_for_every_supported_kubernetes_version() {
    let objects = deploy::manifests();
    let d = ipshadow_tests::TempDir::new("admission-validate");
    // 1.30: the first with admissionregistration.k8s.io/v1 policies.
    for version in ["1.30.0", "1.33.0", "1.37.0"] {
        for (i, o) in objects
            .iter()
            .filter(|o| {
                o["kind"]
                    .as_str()
                    .is_some_and(|k| k.starts_with("ValidatingAdmissionPolicy"))
            })
            .enumerate()
        {
            let f = d.join(format!("{i}.json"));
            if let Err(e) = ipshadow_tests::deploy::validate(o, &f, version) {
                panic!(
                    "{} {} for Kubernetes {version}: {e}",
                    o["kind"], o["metadata"]["name"]
                );
            }
        }
    }
}

#[test]
fn the_agent_may_patch_its_own_nodes_podipsshadowed_condition() {
    let f = fixture();
    // First write (the condition is new), then a change of it.
    let old = node("node-a", None);
    let new = with_condition(&old, "True");
    let req = status_patch(&old, &new).by(&f.user, &[(NODE_NAME_KEY, "node-a")]);
    let d = f.node_status.admit(&req);
    assert!(allowed(&d), "{d:?}");
    let again = with_condition(&new, "False");
    let d = f
        .node_status
        .admit(&status_patch(&new, &again).by(&f.user, &[(NODE_NAME_KEY, "node-a")]));
    assert!(allowed(&d), "{d:?}");
}

#[test]
fn the_admission_policy_refuses_a_patch_of_another_nodes_status() {
    let f = fixture();
    let old = node("node-b", Some("False"));
    let new = with_condition(&old, "True");
    let d = f
        .node_status
        .admit(&status_patch(&old, &new).by(&f.user, &[(NODE_NAME_KEY, "node-a")]));
    denied_saying(&d, &["on node node-a", "own Node only", "Node node-b"]);
}

#[test]
fn the_agent_may_not_change_anything_else_of_its_own_node() {
    let f = fixture();
    let by_agent = |old: &Value, new: &Value| {
        f.node_status
            .admit(&status_patch(old, new).by(&f.user, &[(NODE_NAME_KEY, "node-a")]))
    };
    let old = node("node-a", Some("False"));
    let base = with_condition(&old, "True");

    let mut not_ready = base.clone();
    not_ready["status"]["conditions"][1]["status"] = json!("False");
    denied_saying(&by_agent(&old, &not_ready), &["its condition Ready"]);

    let mut ready_removed = base.clone();
    ready_removed["status"]["conditions"]
        .as_array_mut()
        .unwrap()
        .remove(1);
    denied_saying(&by_agent(&old, &ready_removed), &["its condition Ready"]);

    let mut unavailable = base.clone();
    unavailable["status"]["conditions"]
        .as_array_mut()
        .unwrap()
        .push(json!({"type": "NetworkUnavailable", "status": "True"}));
    denied_saying(
        &by_agent(&old, &unavailable),
        &["its condition NetworkUnavailable"],
    );

    let mut reordered = base.clone();
    reordered["status"]["conditions"]
        .as_array_mut()
        .unwrap()
        .swap(0, 1);
    denied_saying(
        &by_agent(&old, &reordered),
        &["the order of its conditions"],
    );

    let mut addresses = base.clone();
    addresses["status"]["addresses"][0]["address"] = json!("10.0.0.66");
    denied_saying(&by_agent(&old, &addresses), &["status.addresses"]);

    let mut allocatable = base.clone();
    allocatable["status"]["allocatable"]["pods"] = json!("0");
    denied_saying(&by_agent(&old, &allocatable), &["status.allocatable"]);

    let mut capacity = base.clone();
    capacity["status"]["capacity"]
        .as_object_mut()
        .unwrap()
        .remove("memory");
    denied_saying(&by_agent(&old, &capacity), &["status.capacity"]);

    // A status field the old object did not have, and one it loses.
    let mut added = base.clone();
    added["status"]["volumesInUse"] = json!(["kubernetes.io/csi/x"]);
    denied_saying(&by_agent(&old, &added), &["status.volumesInUse"]);
    let mut removed = base.clone();
    removed["status"]
        .as_object_mut()
        .unwrap()
        .remove("nodeInfo");
    denied_saying(&by_agent(&old, &removed), &["status.nodeInfo"]);

    // Metadata (a status write can change labels): refused, but not the API
    // server's own bookkeeping, which with_condition already moved.
    let mut labels = base.clone();
    labels["metadata"]["labels"]["node-role.kubernetes.io/control-plane"] = json!("");
    denied_saying(&by_agent(&old, &labels), &["metadata.labels"]);
    let mut annotations = base;
    annotations["metadata"]["annotations"]
        .as_object_mut()
        .unwrap()
        .remove("node.alpha.kubernetes.io/ttl");
    denied_saying(&by_agent(&old, &annotations), &["metadata.annotations"]);
}

#[test]
fn without_the_node_name_claim_the_agent_may_write_no_node_status() {
    let f = fixture();
    let old = node("node-a", Some("False"));
    let new = with_condition(&old, "True");
    for extra in [
        vec![],
        // A token bound to the pod but issued without the node (feature off).
        vec![("authentication.kubernetes.io/pod-name", "ipshadow-x")],
        // Two values: not a node name to trust.
        vec![(NODE_NAME_KEY, "node-a"), (NODE_NAME_KEY, "node-b")],
    ] {
        let d = f
            .node_status
            .admit(&status_patch(&old, &new).by(&f.user, &extra));
        denied_saying(&d, &["token names no node", NODE_NAME_KEY, "1.30"]);
    }
}

#[test]
fn the_node_status_policy_leaves_other_users_and_requests_alone() {
    let f = fixture();
    let old = node("node-a", Some("False"));
    let mut not_ready = with_condition(&old, "True");
    not_ready["status"]["conditions"][1]["status"] = json!("False");
    // kubelet writes Ready; another service account of the same name elsewhere is not the agent.
    for user in [
        KUBELET,
        "system:serviceaccount:kube-system:node-problem-detector",
        "system:serviceaccount:other:ipshadow",
    ] {
        let d = f
            .node_status
            .admit(&status_patch(&old, &not_ready).by(user, &[(NODE_NAME_KEY, "node-a")]));
        assert_eq!(d, Decision::NotApplicable, "{user}");
    }
    // The Node itself (not its status), and an eviction, are outside its match.
    let spec = Request::new(
        "UPDATE",
        ("", "v1", "nodes"),
        "Node",
        old.clone(),
        old.clone(),
    )
    .by(&f.user, &[(NODE_NAME_KEY, "node-b")]);
    assert_eq!(f.node_status.admit(&spec), Decision::NotApplicable);
    let eviction = Request::new(
        "CREATE",
        ("", "v1", "pods/eviction"),
        "Eviction",
        json!({"apiVersion": "policy/v1", "kind": "Eviction",
               "metadata": {"name": "pg", "namespace": "t"}}),
        Value::Null,
    )
    .by(&f.user, &[(NODE_NAME_KEY, "node-a")]);
    assert_eq!(f.node_status.admit(&eviction), Decision::NotApplicable);
    assert_eq!(f.events.admit(&eviction), Decision::NotApplicable);
}

/// An Event as agent/src/kube/recorder.rs creates it, reported by `instance`:
/// in the namespace of the Pod it is about, a Node's in `default`
/// (agent/src/report/events).
fn event(controller: &str, instance: &str, regarding: &Value) -> Value {
    let namespace = regarding["namespace"].as_str().unwrap_or("default");
    json!({
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": "pg.ipshadow.0123456789abcdef", "namespace": namespace},
        "eventTime": "2025-01-01T10:00:00.000000Z",
        "reportingController": controller,
        "reportingInstance": instance,
        "action": "Detect",
        "reason": "RouterIPCollision",
        "regarding": regarding,
        "note": "Pod t/pg has IP 10.244.4.251, which Cilium on node node-a holds as its router IP.",
        "type": "Warning",
    })
}

fn pod_ref() -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "namespace": "t", "name": "pg", "uid": "u1"})
}

fn node_ref(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Node", "name": name})
}

fn create_event(ev: &Value) -> Request {
    Request::new(
        "CREATE",
        ("events.k8s.io", "v1", "events"),
        "Event",
        ev.clone(),
        Value::Null,
    )
}

#[test]
fn the_agent_may_write_the_events_it_reports_for_its_own_node() {
    let f = fixture();
    let claim = [(NODE_NAME_KEY, "node-a")];
    for regarding in [pod_ref(), node_ref("node-a")] {
        let ev = event("ipshadow.io/agent", "node-a", &regarding);
        let d = f.events.admit(&create_event(&ev).by(&f.user, &claim));
        assert!(allowed(&d), "{d:?}");
        // The series' count PATCH (recorder.rs bump): series and note change.
        let mut bumped = ev.clone();
        bumped["series"] = json!({"count": 2, "lastObservedTime": "2025-01-01T10:30:00.000000Z"});
        bumped["note"] = json!("still shadowed");
        let update = Request::new(
            "UPDATE",
            ("events.k8s.io", "v1", "events"),
            "Event",
            bumped,
            ev,
        )
        .by(&f.user, &claim);
        let d = f.events.admit(&update);
        assert!(allowed(&d), "{d:?}");
    }
}

#[test]
fn the_agent_may_not_write_events_in_another_name() {
    let f = fixture();
    let claim = [(NODE_NAME_KEY, "node-a")];
    let admit = |ev: &Value| f.events.admit(&create_event(ev).by(&f.user, &claim));

    let kubelet_like = event("kubelet", "node-a", &pod_ref());
    denied_saying(
        &admit(&kubelet_like),
        &["reportingController ipshadow.io/agent", "'kubelet'"],
    );
    let mut no_controller = event("x", "node-a", &pod_ref());
    no_controller
        .as_object_mut()
        .unwrap()
        .remove("reportingController");
    denied_saying(&admit(&no_controller), &["reportingController ''"]);

    let other_node = event("ipshadow.io/agent", "node-b", &pod_ref());
    denied_saying(
        &admit(&other_node),
        &["on node node-a", "reportingInstance 'node-b'"],
    );

    let about_other_node = event("ipshadow.io/agent", "node-a", &node_ref("node-b"));
    denied_saying(
        &admit(&about_other_node),
        &["Pods and its own Node only", "Node node-b"],
    );
    let about_a_secret = event(
        "ipshadow.io/agent",
        "node-a",
        &json!({"kind": "Secret", "namespace": "t", "name": "s"}),
    );
    denied_saying(&admit(&about_a_secret), &["Secret s"]);

    // Taking over another node's series: the result names node-a, the original node-b.
    let theirs = event("ipshadow.io/agent", "node-b", &pod_ref());
    let mut taken = theirs.clone();
    taken["reportingInstance"] = json!("node-a");
    let update = Request::new(
        "UPDATE",
        ("events.k8s.io", "v1", "events"),
        "Event",
        taken,
        theirs,
    )
    .by(&f.user, &claim);
    denied_saying(
        &f.events.admit(&update),
        &["update only Events it reported itself"],
    );

    // No node-name claim: nothing to compare reportingInstance with.
    let ours = event("ipshadow.io/agent", "node-a", &pod_ref());
    let d = f.events.admit(&create_event(&ours).by(&f.user, &[]));
    denied_saying(&d, &["token names no node"]);
}

#[test]
fn events_through_the_core_api_are_checked_as_their_events_k8s_io_equivalent() {
    let f = fixture();
    let claim = [(NODE_NAME_KEY, "node-a")];
    let core = |component: &str, instance: &str| {
        let ev = json!({
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": "pg.17f", "namespace": "t"},
            "involvedObject": pod_ref(),
            "reason": "RouterIPCollision",
            "message": "m",
            "type": "Warning",
            "eventTime": "2025-01-01T10:00:00.000000Z",
            "reportingComponent": component,
            "reportingInstance": instance,
        });
        Request::new("CREATE", ("", "v1", "events"), "Event", ev, Value::Null).by(&f.user, &claim)
    };
    assert!(allowed(
        &f.events.admit(&core("ipshadow.io/agent", "node-a"))
    ));
    denied_saying(
        &f.events.admit(&core("ipshadow.io/agent", "node-b")),
        &["reportingInstance 'node-b'"],
    );
    denied_saying(&f.events.admit(&core("kubelet", "node-a")), &["'kubelet'"]);
}

/// A core v1 Event (the API a forger would use: the API server checks the
/// deprecated fields itself only on events.k8s.io/v1) as the agent on
/// node-a would report it about pg, with `extra` fields added.
fn core_event(extra: &Value) -> Request {
    let mut ev = json!({
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "pg.17f", "namespace": "t"},
        "involvedObject": pod_ref(),
        "reason": "RouterIPCollision",
        "message": "m",
        "type": "Warning",
        "action": "Detect",
        "eventTime": "2025-01-01T10:00:00.000000Z",
        "reportingComponent": "ipshadow.io/agent",
        "reportingInstance": "node-a",
    });
    for (k, v) in extra.as_object().unwrap() {
        ev[k] = v.clone();
    }
    Request::new("CREATE", ("", "v1", "events"), "Event", ev, Value::Null)
}

#[test]
fn the_admission_policy_refuses_an_event_that_shows_another_sender() {
    let f = fixture();
    let claim = [(NODE_NAME_KEY, "node-a")];
    let admit = |r: Request| f.events.admit(&r.by(&f.user, &claim));
    // What `kubectl describe` would print as "From: kubelet, node-b".
    let mut forged = event("ipshadow.io/agent", "node-a", &pod_ref());
    forged["deprecatedSource"] = json!({"component": "kubelet", "host": "node-b"});
    denied_saying(
        &admit(create_event(&forged)),
        &[
            "on node node-a",
            "may not set deprecatedSource",
            "as From",
            "refused Event t/pg.ipshadow.0123456789abcdef",
            "component 'kubelet', host 'node-b'",
        ],
    );
    // The host alone, and the same through the core API's `source`.
    forged["deprecatedSource"] = json!({"host": "node-b"});
    denied_saying(
        &admit(create_event(&forged)),
        &["component '', host 'node-b'"],
    );
    let core = core_event(&json!({"source": {"component": "kubelet", "host": "node-b"}}));
    denied_saying(
        &admit(core),
        &["deprecatedSource", "Event t/pg.17f", "component 'kubelet'"],
    );
    // An empty source (what a core v1 client may send) is no source.
    assert_eq!(admit(core_event(&json!({"source": {}}))), Decision::Allowed);
    assert_eq!(
        admit(core_event(&json!({"source": {"component": ""}}))),
        Decision::Allowed
    );
}

#[test]
fn the_admission_policy_refuses_an_event_with_related() {
    let f = fixture();
    let claim = [(NODE_NAME_KEY, "node-a")];
    let mut ev = event("ipshadow.io/agent", "node-a", &pod_ref());
    ev["related"] =
        json!({"apiVersion": "v1", "kind": "Pod", "namespace": "other", "name": "victim"});
    denied_saying(
        &f.events.admit(&create_event(&ev).by(&f.user, &claim)),
        &[
            "may not set related",
            "refused Event t/pg.ipshadow.0123456789abcdef",
            "related to Pod other/victim",
        ],
    );
    let core = core_event(&json!({"related": {"kind": "Node", "name": "node-b"}}));
    denied_saying(
        &f.events.admit(&core.by(&f.user, &claim)),
        &["related to Node node-b"],
    );
}

#[test]
fn the_admission_policy_refuses_an_event_about_a_pod_of_another_namespace() {
    let f = fixture();
    let claim = [(NODE_NAME_KEY, "node-a")];
    let admit = |ev: &Value| f.events.admit(&create_event(ev).by(&f.user, &claim));
    let words = "may write an Event only where what it is about lives";
    // About pod t/pg, written where tenant `other` reads it.
    let mut elsewhere = event("ipshadow.io/agent", "node-a", &pod_ref());
    elsewhere["metadata"]["namespace"] = json!("other");
    denied_saying(
        &admit(&elsewhere),
        &[
            words,
            "refused Event other/pg.ipshadow.0123456789abcdef",
            "about Pod t/pg",
        ],
    );
    // A Pod without a namespace.
    let mut no_namespace = pod_ref();
    no_namespace.as_object_mut().unwrap().remove("namespace");
    let mut ev = event("ipshadow.io/agent", "node-a", &no_namespace);
    ev["metadata"]["namespace"] = json!("t");
    denied_saying(&admit(&ev), &[words, "about Pod pg"]);
    // Its own Node's Event in a tenant's namespace, or naming a namespace.
    let mut node_in_tenant = event("ipshadow.io/agent", "node-a", &node_ref("node-a"));
    node_in_tenant["metadata"]["namespace"] = json!("t");
    denied_saying(
        &admit(&node_in_tenant),
        &[
            words,
            "Event t/pg.ipshadow.0123456789abcdef about Node node-a",
        ],
    );
    let mut namespaced_node = node_ref("node-a");
    namespaced_node["namespace"] = json!("default");
    denied_saying(
        &admit(&event("ipshadow.io/agent", "node-a", &namespaced_node)),
        &[words, "about Node default/node-a"],
    );
    // The same through the core API's involvedObject.
    let core = core_event(&json!({"metadata": {"name": "pg.17f", "namespace": "other"}}));
    denied_saying(
        &f.events.admit(&core.by(&f.user, &claim)),
        &[words, "Event other/pg.17f about Pod t/pg"],
    );
}

#[test]
fn the_admission_policy_refuses_the_old_apis_timestamps_and_count() {
    let f = fixture();
    let claim = [(NODE_NAME_KEY, "node-a")];
    let admit = |extra: Value| f.events.admit(&core_event(&extra).by(&f.user, &claim));
    // An Event that passes for one of kubelet's from last week, seen 500 times.
    let old = json!({"firstTimestamp": "2024-12-25T10:00:00Z",
        "lastTimestamp": "2025-01-01T10:00:00Z", "count": 500});
    denied_saying(
        &admit(old),
        &[
            "may not set deprecatedFirstTimestamp, deprecatedLastTimestamp, deprecatedCount",
            "FIRST SEEN, LAST SEEN and COUNT",
            "refused Event t/pg.17f",
        ],
    );
    for (field, deprecated, value) in [
        (
            "firstTimestamp",
            "deprecatedFirstTimestamp",
            json!("2024-12-25T10:00:00Z"),
        ),
        (
            "lastTimestamp",
            "deprecatedLastTimestamp",
            json!("2025-01-01T10:00:00Z"),
        ),
        ("count", "deprecatedCount", json!(2)),
    ] {
        let m = admit(json!({field: value}));
        denied_saying(&m, &[&format!("may not set {deprecated} (")]);
    }
    // Unset the way a core v1 client sends them: null times, no count.
    assert_eq!(
        admit(json!({"firstTimestamp": null, "lastTimestamp": null, "count": 0})),
        Decision::Allowed
    );
}

#[test]
fn the_admission_policy_refuses_an_event_type_other_than_normal_or_warning() {
    let f = fixture();
    let claim = [(NODE_NAME_KEY, "node-a")];
    for (ty, shown) in [
        (json!("Critical"), "'Critical'"),
        (json!("warning"), "'warning'"),
    ] {
        let d = f
            .events
            .admit(&core_event(&json!({"type": ty})).by(&f.user, &claim));
        denied_saying(
            &d,
            &[
                "only Events of type Normal or Warning",
                "refused Event t/pg.17f",
                shown,
            ],
        );
    }
    let mut untyped = core_event(&json!({}));
    untyped.object.as_object_mut().unwrap().remove("type");
    denied_saying(
        &f.events.admit(&untyped.by(&f.user, &claim)),
        &["of type ''"],
    );
}

#[test]
fn the_agents_remediation_events_pass() {
    // agent/src/kube/evict.rs records through kube-runtime's Recorder: a Normal
    // Event named after the pod and a timestamp, in the pod's namespace, and a
    // repeat as a merge patch of the whole Event with a series.
    let f = fixture();
    let claim = [(NODE_NAME_KEY, "node-a")];
    let ev = json!({
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": "pg.1814d1e0a3c7b2f0", "namespace": "t"},
        "eventTime": "2025-01-01T10:00:00.000000Z",
        "reportingController": "ipshadow.io/agent",
        "reportingInstance": "node-a",
        "action": "Remediate",
        "reason": "IPShadowWouldEvict",
        "regarding": pod_ref(),
        "note": "dry-run: would evict pod t/pg",
        "type": "Normal",
    });
    let d = f.events.admit(&create_event(&ev).by(&f.user, &claim));
    assert_eq!(d, Decision::Allowed);
    let mut again = ev.clone();
    again["series"] = json!({"count": 2, "lastObservedTime": "2025-01-01T10:05:00.000000Z"});
    let update = Request::new(
        "UPDATE",
        ("events.k8s.io", "v1", "events"),
        "Event",
        again,
        ev,
    );
    assert_eq!(
        f.events.admit(&update.by(&f.user, &claim)),
        Decision::Allowed
    );
}

#[test]
fn the_evaluator_gives_a_policy_an_event_in_its_typed_form() {
    // What the API server's conversion gives CEL of the agent's Event: the
    // struct fields present ({} or null), the empty ones of pointers and
    // numbers left out. A policy testing presence would refuse the agent.
    let objects = deploy::manifests();
    let policy = deploy::object(
        &objects,
        "ValidatingAdmissionPolicy",
        "ipshadow-agent-events",
    );
    let binding = deploy::object(
        &objects,
        "ValidatingAdmissionPolicyBinding",
        "ipshadow-agent-events",
    );
    let with = |expression: &str| {
        let mut p = policy.clone();
        p["spec"]["validations"] = json!([{"expression": expression, "message": "typed form"}]);
        Policy::load(&p, binding).unwrap()
    };
    let f = fixture();
    let claim = [(NODE_NAME_KEY, "node-a")];
    let ours = create_event(&event("ipshadow.io/agent", "node-a", &pod_ref())).by(&f.user, &claim);
    let shape = "object.deprecatedSource == {} && object.deprecatedFirstTimestamp == null && \
                 object.deprecatedLastTimestamp == null && !has(object.deprecatedCount) && \
                 !has(object.related) && !has(object.series)";
    assert_eq!(with(shape).admit(&ours), Decision::Allowed);
    assert!(matches!(
        with("!has(object.deprecatedSource)").admit(&ours),
        Decision::Denied(_)
    ));
}

#[test]
fn the_events_policy_leaves_other_users_alone() {
    let f = fixture();
    let ev = event("kubelet", "node-b", &node_ref("node-b"));
    let d = f
        .events
        .admit(&create_event(&ev).by(KUBELET, &[(NODE_NAME_KEY, "node-a")]));
    assert_eq!(d, Decision::NotApplicable);
}

/// What the writes of the test API server's log are: (Pod Events created,
/// Node Events created, Event updates, Node status updates).
fn write_kinds(writes: &[Request]) -> (usize, usize, usize, usize) {
    let regarding = |w: &Request, kind: &str| w.object["regarding"]["kind"] == kind;
    let count = |f: &dyn Fn(&Request) -> bool| writes.iter().filter(|w| f(w)).count();
    (
        count(&|w| w.operation == "CREATE" && regarding(w, "Pod")),
        count(&|w| w.operation == "CREATE" && regarding(w, "Node")),
        count(&|w| w.operation == "UPDATE" && w.resource == "events"),
        count(&|w| w.sub_resource == "status"),
    )
}

#[test]
fn the_policies_admit_every_write_of_the_real_agent_for_its_own_node_only() {
    if !can_run_netns_tests(
        "the_policies_admit_every_write_of_the_real_agent_for_its_own_node_only",
    ) {
        return;
    }
    let f = fixture();
    // A Pod on the router IP (a Pod Event), Cilium's range inside a kube-ovn
    // Subnet (AllocatorOverlap, on the Node), the Node condition, and series
    // written back every second (the Event PATCH).
    let sim = SimNode::kube_ovn("kvap", ROUTER);
    let api = ApiServer::start(Some(&sim.node));
    cozystack(&api);
    api.set_crd(Res::Subnets, true);
    api.apply(
        Res::Subnets,
        subnet("ovn-default", "10.244.0.0/16", &["10.244.0.1"]),
    );
    api.apply(Res::Pods, pod("tenant", "postgres-0", ME, &[ROUTER]));
    let lab = Lab::new("vap", &api);
    let agent = lab.agent_with(
        &sim.node,
        ME,
        &[
            "--node-condition-interval-seconds",
            "1",
            "--event-refresh-seconds",
            "1",
        ],
    );
    let writes = wait_for(
        "a Pod Event, a Node Event, a series written back and the Node condition",
        HANG,
        || {
            let w = api.counts().writes;
            let (pods, nodes, updates, status) = write_kinds(&w);
            (pods > 0 && nodes > 0 && updates > 0 && status > 0).then_some(w)
        },
    );
    let (status, _) = agent.terminate();
    assert!(status.success());

    let own = [(NODE_NAME_KEY, ME)];
    let elsewhere = [(NODE_NAME_KEY, OTHER)];
    for w in &writes {
        let p = if w.resource == "events" {
            &f.events
        } else {
            &f.node_status
        };
        let d = p.admit(&w.clone().by(&f.user, &own));
        assert_eq!(
            d,
            Decision::Allowed,
            "{} refuses the agent's own {} {}/{}: {:#}",
            p.name,
            w.operation,
            w.resource,
            w.sub_resource,
            w.object
        );
        // The same write from an agent whose token names another node.
        let d = p.admit(&w.clone().by(&f.user, &elsewhere));
        assert!(
            matches!(d, Decision::Denied(_)),
            "{} lets node {OTHER}'s agent make node {ME}'s {} {}: {d:?}",
            p.name,
            w.operation,
            w.resource
        );
    }
    let (pods, nodes, updates, status) = write_kinds(&writes);
    figure(format!(
        "admission policies: {} writes of the real agent admitted for its node, refused for another \
         ({pods} Pod Events, {nodes} Node Events, {updates} Event updates, {status} Node status patches)",
        writes.len()
    ));
}
