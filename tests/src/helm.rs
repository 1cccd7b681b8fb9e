//! The chart in deploy/helm/ipshadow through Helm's own engine: PyPI's
//! helm-python-sdk (Helm v4's Go SDK; no helm binary), pinned in
//! tests/helm/requirements.txt and installed by `cargo xtask setup` into a venv,
//! driven by tests/helm/helm_sdk.py (one JSON request list in, one answer each out).

use std::{
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use serde_json::{Value, json};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// deploy/helm/ipshadow.
pub fn chart_dir() -> PathBuf {
    root().join("deploy/helm/ipshadow")
}

/// The venv: `$IPSHADOW_HELM_VENV`, else where `cargo xtask setup` puts it
/// (xtask/src/setup.rs, `helm_venv`).
pub fn venv() -> PathBuf {
    if let Some(dir) = std::env::var_os("IPSHADOW_HELM_VENV") {
        return dir.into();
    }
    let home = std::env::var_os("HOME").unwrap_or_else(|| "/root".into());
    Path::new(&home).join(".cache/ipshadow/helm-venv")
}

/// Runs the requests through tests/helm/helm_sdk.py; one answer per request
/// (`{"error": …}` where Helm refused it).
pub fn sdk(requests: &[Value]) -> Vec<Value> {
    use std::io::Write as _;
    let python = venv().join("bin/python");
    let reqs = std::fs::read_to_string(root().join("tests/helm/requirements.txt")).unwrap();
    let marker = std::fs::read_to_string(venv().join("ipshadow-requirements.txt"));
    assert!(
        python.exists() && marker.is_ok_and(|m| m == reqs),
        "no venv with tests/helm/requirements.txt at {}: run `cargo xtask setup` (or point \
         IPSHADOW_HELM_VENV at one)",
        venv().display()
    );
    let mut child = Command::new(&python)
        .arg(root().join("tests/helm/helm_sdk.py"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("running {}: {e}", python.display()));
    child
        .stdin
        .take()
        .unwrap()
        .write_all(&serde_json::to_vec(requests).unwrap())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "tests/helm/helm_sdk.py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let answers: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(answers.len(), requests.len());
    answers
}

/// A render's objects: what `helm install` applies, its hooks (the `helm
/// test` pod) and NOTES.txt.
#[derive(Debug, Clone)]
pub struct Rendered {
    pub objects: Vec<Value>,
    pub hooks: Vec<Value>,
    pub notes: String,
}

/// A render request of `chart` (a directory or .tgz) with `values`, as
/// release `ipshadow` in `namespace`.
pub fn render_request(chart: &Path, values: &Value, namespace: &str) -> Value {
    json!({"op": "render", "chart": chart, "values": values, "name": "ipshadow", "namespace": namespace})
}

/// What a cluster with prometheus-operator adds to Helm's API list, as
/// `helm template --api-versions monitoring.coreos.com/v1` adds it offline.
pub const MONITORING_API: &str = "monitoring.coreos.com/v1";

/// A render request as [`render_request`] makes it, on a cluster that serves
/// prometheus-operator's API (the chart renders its ServiceMonitor and
/// PrometheusRule only there, by default).
pub fn render_request_with_monitoring(chart: &Path, values: &Value, namespace: &str) -> Value {
    let mut r = render_request(chart, values, namespace);
    r["api_versions"] = json!([MONITORING_API]);
    r
}

/// The answer to a render request, or Helm's error message.
pub fn rendered(answer: &Value) -> Result<Rendered, String> {
    if let Some(e) = answer["error"].as_str() {
        return Err(e.to_owned());
    }
    let list = |k: &str| answer[k].as_array().cloned().unwrap_or_default();
    Ok(Rendered {
        objects: list("objects"),
        hooks: list("hooks"),
        notes: answer["notes"].as_str().unwrap_or_default().to_owned(),
    })
}

/// deploy/helm/ipshadow rendered with `values` (release namespace `default`).
pub fn render(values: &Value) -> Result<Rendered, String> {
    rendered(&sdk(&[render_request(&chart_dir(), values, "default")])[0])
}

/// Objects keyed by (kind, name), for comparing two renders object for object.
pub fn by_kind_and_name(objects: &[Value]) -> std::collections::BTreeMap<(String, String), Value> {
    objects
        .iter()
        .map(|o| {
            (
                (
                    o["kind"].as_str().unwrap_or_default().to_owned(),
                    o["metadata"]["name"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned(),
                ),
                o.clone(),
            )
        })
        .collect()
}
