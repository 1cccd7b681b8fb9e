"""Helm's engine for the Rust tests and xtask: one JSON request list on stdin,
one JSON answer per request on stdout.

Requests ({"op": ...}):
  render   chart, values, name, namespace[, kube_version, api_versions]
           (either of the last two: as `helm template --kube-version
           --api-versions`; kube_version "" is Helm's default)
           -> objects, hooks (helm.sh/hook), notes
  lint     chart, values, kube_version (strict) -> Helm's lint report
  parse    set: [..], set_string: [..] (--set / --set-string) -> values
  package  chart, destination, version, app_version -> path of the .tgz
  show     chart, format ("readme", "chart", "values") -> text, as `helm show`

A failure of one request is its answer {"error": message, "type": class},
so that a test can assert what Helm said (e.g. the schema's message).
"""

import json
import sys

import yaml

import helm_python as helm
from helm_python import _native


def merge(into, more):
    for key, value in more.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            merge(into[key], value)
        else:
            into[key] = value
    return into


def render_at(chart, req):
    """Renders as `helm template --kube-version --api-versions` does: the
    Capabilities a cluster would give (api_versions are added to Helm's
    default list, as the flag adds them). helm-python-sdk 0.2.2's
    Chart.render does not pass these, while its native helm_render takes them
    (helm-c-sdk's render options kube_version and api_versions)."""
    opts = {
        "name": req.get("name", "ipshadow"),
        "namespace": req.get("namespace", "default"),
        "is_install": True,
        "kube_version": req.get("kube_version", ""),
        "api_versions": req.get("api_versions") or [],
    }
    out = _native.call_string(
        "helm_render",
        chart._raw(),
        json.dumps(req.get("values") or {}),
        json.dumps(opts),
    )
    return json.loads(out)


def render(req):
    with helm.Chart.load(req["chart"]) as chart:
        if "kube_version" in req or "api_versions" in req:
            out = render_at(chart, req)
        else:
            out = chart.render(
                req.get("values") or {},
                name=req.get("name", "ipshadow"),
                namespace=req.get("namespace", "default"),
                is_install=True,
            )
    objects, hooks, notes = [], [], ""
    for path in sorted(out):
        if path.endswith("NOTES.txt"):
            notes = out[path]
            continue
        for doc in yaml.safe_load_all(out[path]):
            if not doc:
                continue
            annotations = (doc.get("metadata") or {}).get("annotations") or {}
            (hooks if "helm.sh/hook" in annotations else objects).append(doc)
    return {"objects": objects, "hooks": hooks, "notes": notes}


def lint(req):
    return helm.lint(
        req["chart"],
        req.get("values") or {},
        strict=True,
        namespace=req.get("namespace", "default"),
        kube_version=req["kube_version"],
    )


def parse(req):
    values = {}
    for expr in req.get("set", []):
        merge(values, helm.parse_set_string(expr))
    for expr in req.get("set_string", []):
        merge(values, helm.parse_set_string_values(expr))
    for text in req.get("files", []):
        merge(values, helm.values_from_yaml(text))
    return {"values": values}


def package(req):
    path = helm.package(
        req["chart"],
        destination=req["destination"],
        version=req["version"],
        app_version=req["app_version"],
    )
    return {"path": path, "digest": helm.digest(path)}


def show(req):
    return {"text": helm.show(str(req["chart"]), output_format=req["format"])}


OPS = {"render": render, "lint": lint, "parse": parse, "package": package, "show": show}


def main():
    answers = []
    for req in json.load(sys.stdin):
        try:
            answers.append(OPS[req["op"]](req))
        except helm.HelmError as e:
            answers.append({"error": str(e), "type": type(e).__name__})
    json.dump(answers, sys.stdout)


if __name__ == "__main__":
    main()
