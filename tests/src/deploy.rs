//! The kustomize base in deploy/, rendered by the real kubectl, as JSON objects.

use std::process::Command;

use serde_json::Value;

/// `kubectl kustomize deploy/`, every object.
pub fn manifests() -> Vec<Value> {
    manifests_of("")
}

/// `kubectl kustomize deploy/<sub>` (e.g. `metrics-auth`), every object.
pub fn manifests_of(sub: &str) -> Vec<Value> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../deploy")
        .join(sub);
    let out = Command::new("kubectl")
        .arg("kustomize")
        .arg(&dir)
        .output()
        .unwrap_or_else(|e| {
            panic!("running kubectl kustomize: {e} (cargo xtask setup checks kubectl is there)")
        });
    assert!(
        out.status.success(),
        "kubectl kustomize failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    yaml_stream(&out.stdout)
}

/// Every document of a YAML stream, as JSON (Debian's python3-yaml converts).
pub fn yaml_stream(yaml: &[u8]) -> Vec<Value> {
    let mut py = Command::new("/usr/bin/python3")
        .args([
            "-c",
            "import sys, yaml, json; json.dump(list(yaml.safe_load_all(sys.stdin)), sys.stdout)",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write as _;
        py.stdin.take().unwrap().write_all(yaml).unwrap();
    }
    let json = py.wait_with_output().unwrap();
    assert!(json.status.success());
    serde_json::from_slice(&json.stdout).unwrap()
}

/// The rules of the ClusterRole named `name`.
pub fn cluster_role_rules(objects: &[Value], name: &str) -> Vec<Value> {
    objects
        .iter()
        .find(|o| o["kind"] == "ClusterRole" && o["metadata"]["name"] == name)
        .and_then(|o| o["rules"].as_array().cloned())
        .unwrap_or_default()
}

/// The object of `kind` named `name`.
pub fn object<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name} in the manifests"))
}

/// Every (apiGroup, resource, verb) `rules` grant.
pub fn granted(rules: &[Value]) -> std::collections::BTreeSet<(String, String, String)> {
    let list = |r: &Value, k: &str| -> Vec<String> {
        r[k].as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut all = std::collections::BTreeSet::new();
    for r in rules {
        for g in list(r, "apiGroups") {
            for res in list(r, "resources") {
                for v in list(r, "verbs") {
                    all.insert((g.clone(), res.clone(), v));
                }
            }
        }
    }
    all
}

pub fn allows(rules: &[Value], group: &str, resource: &str, verb: &str) -> bool {
    let has = |v: &Value, x: &str| {
        v.as_array()
            .is_some_and(|a| a.iter().any(|i| i == x || i == "*"))
    };
    rules.iter().any(|r| {
        has(&r["apiGroups"], group) && has(&r["resources"], resource) && has(&r["verbs"], verb)
    })
}

/// (apiGroup, resource, verb) of an API request as the authorizer sees it.
pub fn authz(method: &str, uri: &str) -> Option<(String, String, String)> {
    let (path, query) = uri.split_once('?').unwrap_or((uri, ""));
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, rest) = match parts.as_slice() {
        ["api", "v1", rest @ ..] => ("", rest),
        ["apis", g, _, rest @ ..] => (*g, rest),
        _ => return None,
    };
    let rest = match rest {
        ["namespaces", _, rest @ ..] if !rest.is_empty() => rest,
        r => r,
    };
    let (resource, named) = match rest {
        [r] => ((*r).to_owned(), false),
        [r, _] => ((*r).to_owned(), true),
        [r, _, sub] => (format!("{r}/{sub}"), true),
        _ => return None,
    };
    let watch = query
        .split('&')
        .any(|kv| kv == "watch=true" || kv == "watch=1");
    let verb = match (method, named, watch) {
        ("GET", false, true) => "watch",
        ("GET", false, false) => "list",
        ("GET", true, _) => "get",
        ("POST", _, _) => "create",
        ("PATCH", _, _) => "patch",
        ("PUT", _, _) => "update",
        ("DELETE", _, _) => "delete",
        _ => return None,
    };
    Some((group.to_owned(), resource, verb.to_owned()))
}

/// Every (apiGroup, resource, verb) of the requests in `log`, each asserted
/// allowed by `rules`.
pub fn used_and_allowed(
    log: &[(String, String)],
    rules: &[Value],
) -> std::collections::BTreeSet<(String, String, String)> {
    let mut used = std::collections::BTreeSet::new();
    for (method, uri) in log {
        let Some((group, resource, verb)) = authz(method, uri) else {
            continue;
        };
        assert!(
            allows(rules, &group, &resource, &verb),
            "RBAC does not allow {verb} {group}/{resource} ({uri})"
        );
        used.insert((group, resource, verb));
    }
    used
}

/// Validates `o` against Kubernetes `version`'s schemas offline (PyPI's
/// kubernetes-validate, strict), written to `file`: what it said when the
/// object is invalid or was not checked at all (no schema for the kind only
/// warns and exits 0, which would pass a kind the version lacks unchecked).
pub fn validate(o: &Value, file: &std::path::Path, version: &str) -> Result<(), String> {
    std::fs::write(file, serde_json::to_vec(o).unwrap()).unwrap();
    kubernetes_validate(&[file.to_owned()], version)
}

/// Like [`validate`], for many objects in one run of kubernetes-validate:
/// each written to `dir` as `<n>-<kind>-<name>.json`, the file names in what it says.
pub fn validate_many(
    objects: &[&Value],
    dir: &std::path::Path,
    version: &str,
) -> Result<(), String> {
    let files: Vec<std::path::PathBuf> = objects
        .iter()
        .enumerate()
        .map(|(i, o)| {
            let f = dir.join(format!(
                "{i}-{}-{}.json",
                o["kind"].as_str().unwrap_or("?"),
                o["metadata"]["name"].as_str().unwrap_or("?")
            ));
            std::fs::write(&f, serde_json::to_vec(o).unwrap()).unwrap();
            f
        })
        .collect();
    kubernetes_validate(&files, version)
}

/// Runs kubernetes-validate (strict) over `files` for `version`.
fn kubernetes_validate(files: &[std::path::PathBuf], version: &str) -> Result<(), String> {
    let out = Command::new("python3")
        .args([
            "-m",
            "kubernetes_validate",
            "--strict",
            "--quiet",
            "-k",
            version,
        ])
        .args(files)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if !out.status.success() {
        return Err(format!("invalid: {text}"));
    }
    if text.contains("Couldn't find schema") {
        return Err(format!("not validated: {text}"));
    }
    Ok(())
}
