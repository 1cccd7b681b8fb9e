//! The ValidatingAdmissionPolicies of deploy/, evaluated offline the way the
//! API server's validating policy plugin does (k8s.io/apiserver
//! pkg/admission/plugin/policy/validating): the request must match the
//! policy's `matchConstraints`; every `matchCondition` must be true, or the
//! policy does not apply; then every validation runs, with the policy's
//! `variables`, and the first that fails is the one the API server reports.
//! An expression that errors counts under `failurePolicy` (Fail: denied).
//!
//! CEL runs on the `cel` crate, with the variables the API server declares:
//! `object` and `oldObject` as untyped JSON (null for CREATE / DELETE) in
//! the shape the API server's conversion of the typed object gives an Event
//! (its struct fields never left out: `typed_form`),
//! `request` as the AdmissionRequest (`userInfo.extra` left out when empty,
//! as the API server's conversion to unstructured does), `params` null,
//! `variables` the policy's variables evaluated in order. Kubernetes
//! evaluates variables lazily; here they are evaluated in order and one that
//! errors is left out, so an expression that reads it errors as it would there.
//!
//! What this does not model is refused when a policy is loaded, never
//! silently ignored: params, `namespaceObject` and `authorizer`, namespace and
//! object selectors, exclude rules, binding-level `matchResources`. Of
//! `matchPolicy: Equivalent` it knows the one pair of equivalent resources the
//! policies need: core v1 `events` and events.k8s.io/v1 `events` (one storage),
//! with the field renames of their conversion.

use std::{collections::BTreeMap, sync::Arc};

use cel::{
    Context, Env, Program,
    objects::{Key, Map},
};
use serde_json::{Value, json};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{policy}: {field} does not parse as CEL: {message}\n    {expression}")]
    Compile {
        policy: String,
        field: String,
        expression: String,
        message: String,
    },
    #[error(
        "{policy}: {what} is not modelled by tests/src/admission.rs; extend it before relying on it"
    )]
    Unsupported { policy: String, what: String },
    #[error("{policy}: {what}")]
    Invalid { policy: String, what: String },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What a policy (through its binding) does with a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// The request is outside `matchConstraints`, or a match condition is false.
    NotApplicable,
    Allowed,
    /// Refused; the messages of every failing validation, in order (the API
    /// server reports the first).
    Denied(Vec<String>),
}

impl Decision {
    /// The message the API server would answer with, if denied.
    pub fn message(&self) -> Option<&str> {
        match self {
            Decision::Denied(m) => m.first().map(String::as_str),
            _ => None,
        }
    }
}

/// One admission request, as the policy sees it.
#[derive(Clone, Debug)]
pub struct Request {
    /// CREATE, UPDATE (also for a PATCH), DELETE, CONNECT.
    pub operation: String,
    pub group: String,
    pub version: String,
    pub resource: String,
    pub sub_resource: String,
    pub kind: String,
    pub namespace: String,
    pub name: String,
    pub username: String,
    pub extra: BTreeMap<String, Vec<String>>,
    pub object: Value,
    pub old_object: Value,
}

impl Request {
    /// `operation` on `group/version` `resource[/sub_resource]` of `kind`, by
    /// `username` with no extra; name and namespace come from the object.
    pub fn new(
        operation: &str,
        (group, version, resource): (&str, &str, &str),
        kind: &str,
        object: Value,
        old_object: Value,
    ) -> Self {
        let (resource, sub_resource) = resource.split_once('/').unwrap_or((resource, ""));
        let meta = if object.is_null() {
            &old_object["metadata"]
        } else {
            &object["metadata"]
        };
        Self {
            operation: operation.to_owned(),
            group: group.to_owned(),
            version: version.to_owned(),
            resource: resource.to_owned(),
            sub_resource: sub_resource.to_owned(),
            kind: kind.to_owned(),
            namespace: meta["namespace"].as_str().unwrap_or_default().to_owned(),
            name: meta["name"].as_str().unwrap_or_default().to_owned(),
            username: String::new(),
            extra: BTreeMap::new(),
            object,
            old_object,
        }
    }

    /// The same request by `username`, whose credentials carry `extra`.
    #[must_use]
    pub fn by(mut self, username: &str, extra: &[(&str, &str)]) -> Self {
        username.clone_into(&mut self.username);
        self.extra.clear();
        for (k, v) in extra {
            self.extra
                .entry((*k).to_owned())
                .or_default()
                .push((*v).to_owned());
        }
        self
    }
}

struct Expr {
    field: String,
    source: String,
    program: Program,
}

struct Validation {
    expression: Expr,
    message: Option<String>,
    message_expression: Option<Expr>,
}

struct Rule {
    groups: Vec<String>,
    versions: Vec<String>,
    operations: Vec<String>,
    resources: Vec<String>,
}

/// A ValidatingAdmissionPolicy with its binding, compiled.
pub struct Policy {
    pub name: String,
    pub binding: String,
    env: Arc<Env>,
    fail: bool,
    deny: bool,
    equivalent: bool,
    rules: Vec<Rule>,
    match_conditions: Vec<(String, Expr)>,
    variables: Vec<(String, Expr)>,
    validations: Vec<Validation>,
}

/// Resources the API server stores together, so `matchPolicy: Equivalent`
/// matches a request to either: (group, version, resource).
const EQUIVALENT: &[[(&str, &str, &str); 2]] =
    &[[("", "v1", "events"), ("events.k8s.io", "v1", "events")]];

/// Variables the API server may offer that this evaluator does not provide.
const UNMODELLED_VARIABLES: &[&str] = &["namespaceObject", "authorizer"];

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

fn matches(patterns: &[String], value: &str) -> bool {
    patterns.iter().any(|p| p == "*" || p == value)
}

/// A rule's resource pattern as the API server reads it: `nodes` is the Node
/// alone, `nodes/status` its status, `nodes/*` every subresource; `*` every
/// resource but no subresource, `*/*` everything.
fn resource_matches(pattern: &str, resource: &str, sub: &str) -> bool {
    let (p_res, p_sub) = pattern.split_once('/').unwrap_or((pattern, ""));
    (p_res == "*" || p_res == resource) && (p_sub == "*" || p_sub == sub)
}

impl Policy {
    /// Every ValidatingAdmissionPolicy of `objects` with its bindings; a
    /// policy without a binding (it would do nothing) or a binding of a
    /// missing policy is an error.
    pub fn all(objects: &[Value]) -> Result<Vec<Policy>> {
        let of_kind = |k: &str| {
            objects
                .iter()
                .filter(move |o| o["kind"] == k)
                .collect::<Vec<_>>()
        };
        let policies = of_kind("ValidatingAdmissionPolicy");
        let bindings = of_kind("ValidatingAdmissionPolicyBinding");
        for b in &bindings {
            if !policies
                .iter()
                .any(|p| p["metadata"]["name"] == b["spec"]["policyName"])
            {
                return Err(Error::Invalid {
                    policy: b["spec"]["policyName"].to_string(),
                    what: format!(
                        "binding {} names a policy that is not in the manifests",
                        b["metadata"]["name"]
                    ),
                });
            }
        }
        let mut out = Vec::new();
        for p in policies {
            let mine: Vec<_> = bindings
                .iter()
                .filter(|b| b["spec"]["policyName"] == p["metadata"]["name"])
                .collect();
            if mine.is_empty() {
                return Err(Error::Invalid {
                    policy: p["metadata"]["name"].to_string(),
                    what: "no ValidatingAdmissionPolicyBinding: the policy does nothing".to_owned(),
                });
            }
            for b in mine {
                out.push(Policy::load(p, b)?);
            }
        }
        Ok(out)
    }

    /// Compiles `policy` as bound by `binding`.
    pub fn load(policy: &Value, binding: &Value) -> Result<Policy> {
        let name = policy["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let invalid = |what: String| Error::Invalid {
            policy: name.clone(),
            what,
        };
        let unsupported = |what: &str| Error::Unsupported {
            policy: name.clone(),
            what: what.to_owned(),
        };
        for (o, kind) in [
            (policy, "ValidatingAdmissionPolicy"),
            (binding, "ValidatingAdmissionPolicyBinding"),
        ] {
            if o["apiVersion"] != "admissionregistration.k8s.io/v1" || o["kind"] != kind {
                return Err(invalid(format!(
                    "{} {} is not an admissionregistration.k8s.io/v1 {kind}",
                    o["apiVersion"], o["kind"]
                )));
            }
        }
        let spec = &policy["spec"];
        let bspec = &binding["spec"];
        if bspec["policyName"] != name.as_str() {
            return Err(invalid(format!(
                "binding {} is for policy {}",
                binding["metadata"]["name"], bspec["policyName"]
            )));
        }
        let fail = match spec["failurePolicy"].as_str() {
            None | Some("Fail") => true,
            Some("Ignore") => false,
            Some(other) => return Err(invalid(format!("failurePolicy {other}"))),
        };
        let actions = strings(&bspec["validationActions"]);
        if actions.is_empty()
            || actions
                .iter()
                .any(|a| !matches!(a.as_str(), "Deny" | "Warn" | "Audit"))
        {
            return Err(invalid(format!("validationActions {actions:?}")));
        }
        if !spec["paramKind"].is_null() || !bspec["paramRef"].is_null() {
            return Err(unsupported("params"));
        }
        if !bspec["matchResources"].is_null() {
            return Err(unsupported("the binding's matchResources"));
        }
        let mc = &spec["matchConstraints"];
        for field in [
            "namespaceSelector",
            "objectSelector",
            "excludeResourceRules",
        ] {
            let v = &mc[field];
            let empty = v.is_null()
                || v.as_object().is_some_and(serde_json::Map::is_empty)
                || v.as_array().is_some_and(Vec::is_empty);
            if !empty {
                return Err(unsupported(&format!("matchConstraints.{field}")));
            }
        }
        let equivalent = match mc["matchPolicy"].as_str() {
            None | Some("Equivalent") => true,
            Some("Exact") => false,
            Some(other) => return Err(invalid(format!("matchPolicy {other}"))),
        };
        let mut rules = Vec::new();
        for r in mc["resourceRules"].as_array().into_iter().flatten() {
            if !(r["resourceNames"].is_null()
                || r["resourceNames"].as_array().is_some_and(Vec::is_empty))
            {
                return Err(unsupported("resourceRules[].resourceNames"));
            }
            if !matches!(r["scope"].as_str(), None | Some("*")) {
                return Err(unsupported("resourceRules[].scope"));
            }
            rules.push(Rule {
                groups: strings(&r["apiGroups"]),
                versions: strings(&r["apiVersions"]),
                operations: strings(&r["operations"]),
                resources: strings(&r["resources"]),
            });
        }
        if rules.is_empty() {
            return Err(invalid("no matchConstraints.resourceRules".to_owned()));
        }

        let mut env = Env::stdlib();
        // Kubernetes' CEL has the strings extension (join, split, ...).
        env.add_extension(cel::extensions::strings)
            .map_err(|e| invalid(format!("the cel crate's strings extension: {e}")))?;
        let env = Arc::new(env);
        let compile = |field: String, source: &Value| -> Result<Expr> {
            let source = source
                .as_str()
                .ok_or_else(|| invalid(format!("{field} is not a string")))?
                .to_owned();
            let program = env.compile(&source).map_err(|e| Error::Compile {
                policy: name.clone(),
                field: field.clone(),
                expression: source.clone(),
                message: e.to_string(),
            })?;
            let refs = program.references();
            if let Some(v) = UNMODELLED_VARIABLES.iter().find(|v| refs.has_variable(v)) {
                return Err(unsupported(&format!("the variable {v} (in {field})")));
            }
            Ok(Expr {
                field,
                source,
                program,
            })
        };
        let named = |list: &str| -> Result<Vec<(String, Expr)>> {
            spec[list]
                .as_array()
                .into_iter()
                .flatten()
                .enumerate()
                .map(|(i, c)| {
                    let n = c["name"]
                        .as_str()
                        .ok_or_else(|| invalid(format!("{list}[{i}] has no name")))?;
                    Ok((
                        n.to_owned(),
                        compile(format!("{list}[{i}] ({n})"), &c["expression"])?,
                    ))
                })
                .collect()
        };
        let match_conditions = named("matchConditions")?;
        let variables = named("variables")?;
        let mut validations = Vec::new();
        for (i, v) in spec["validations"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            validations.push(Validation {
                expression: compile(format!("validations[{i}].expression"), &v["expression"])?,
                message: v["message"].as_str().map(str::to_owned),
                message_expression: v["messageExpression"]
                    .is_string()
                    .then(|| {
                        compile(
                            format!("validations[{i}].messageExpression"),
                            &v["messageExpression"],
                        )
                    })
                    .transpose()?,
            });
        }
        if validations.is_empty() {
            return Err(invalid("no validations".to_owned()));
        }
        Ok(Policy {
            name: name.clone(),
            binding: binding["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            env,
            fail,
            deny: actions.iter().any(|a| a == "Deny"),
            equivalent,
            rules,
            match_conditions,
            variables,
            validations,
        })
    }

    /// Whether the binding denies what fails (rather than only warning or auditing).
    pub fn denies(&self) -> bool {
        self.deny
    }

    /// Whether an expression that errors denies the request.
    pub fn fails_closed(&self) -> bool {
        self.fail
    }

    /// The resource `req` is matched as, if any: its own, or an equivalent one
    /// (with `matchPolicy: Equivalent`).
    fn matched_as(&self, req: &Request) -> Option<(String, String, String)> {
        let own = (
            req.group.as_str(),
            req.version.as_str(),
            req.resource.as_str(),
        );
        let mut candidates = vec![own];
        if self.equivalent {
            for pair in EQUIVALENT {
                if pair.contains(&own) {
                    candidates.extend(pair.iter().copied().filter(|c| *c != own));
                }
            }
        }
        candidates.into_iter().find_map(|(g, v, r)| {
            self.rules
                .iter()
                .any(|rule| {
                    matches(&rule.groups, g)
                        && matches(&rule.versions, v)
                        && matches(&rule.operations, &req.operation)
                        && rule
                            .resources
                            .iter()
                            .any(|p| resource_matches(p, r, &req.sub_resource))
                })
                .then(|| (g.to_owned(), v.to_owned(), r.to_owned()))
        })
    }

    /// What the API server would decide about `req` with this policy and binding.
    pub fn admit(&self, req: &Request) -> Decision {
        let Some((group, version, resource)) = self.matched_as(req) else {
            return Decision::NotApplicable;
        };
        let from = (req.group.as_str(), req.version.as_str());
        let to = (group.as_str(), version.as_str());
        // The one pair of equivalents known here is of one kind, Event.
        let kind = &req.kind;
        let object = typed_form(kind, to, &convert(kind, from, to, &req.object));
        let old_object = typed_form(kind, to, &convert(kind, from, to, &req.old_object));
        let mut user_info = json!({"username": req.username, "groups": []});
        if !req.extra.is_empty() {
            user_info["extra"] = json!(req.extra);
        }
        let request = json!({
            "kind": {"group": group, "version": version, "kind": kind},
            "resource": {"group": group, "version": version, "resource": resource},
            "subResource": req.sub_resource,
            "requestKind": {"group": req.group, "version": req.version, "kind": req.kind},
            "requestResource": {"group": req.group, "version": req.version, "resource": req.resource},
            "requestSubResource": req.sub_resource,
            "name": req.name,
            "namespace": req.namespace,
            "operation": req.operation,
            "userInfo": user_info,
            "dryRun": false,
        });
        let mut ctx = Context::with_env(Arc::clone(&self.env));
        ctx.add_variable_from_value("object", to_cel(&object));
        ctx.add_variable_from_value("oldObject", to_cel(&old_object));
        ctx.add_variable_from_value("request", to_cel(&request));
        ctx.add_variable_from_value("params", cel::Value::Null);
        let mut vars: std::collections::HashMap<Key, cel::Value> = std::collections::HashMap::new();
        ctx.add_variable_from_value("variables", cel::Value::Map(Map::from(vars.clone())));

        // Match conditions: any false skips the policy; else any error fails.
        let mut errors = Vec::new();
        for (name, expr) in &self.match_conditions {
            match eval_bool(expr, &ctx) {
                Ok(true) => {}
                Ok(false) => return Decision::NotApplicable,
                Err(e) => errors.push(format!("match condition {name}: {e}")),
            }
        }
        if !errors.is_empty() {
            return if self.fail && self.deny {
                Decision::Denied(errors)
            } else {
                Decision::Allowed
            };
        }
        for (name, expr) in &self.variables {
            if let Ok(v) = expr.program.execute(&ctx) {
                vars.insert(Key::from(name.clone()), v);
                ctx.add_variable_from_value("variables", cel::Value::Map(Map::from(vars.clone())));
            }
        }
        let mut denied = Vec::new();
        for v in &self.validations {
            match eval_bool(&v.expression, &ctx) {
                Ok(false) => denied.push(message(v, &ctx)),
                Err(e) if self.fail => denied.push(format!(
                    "expression '{}' resulted in error: {e}",
                    v.expression.source
                )),
                // Passed, or an error under failurePolicy Ignore.
                Ok(true) | Err(_) => {}
            }
        }
        if denied.is_empty() || !self.deny {
            Decision::Allowed
        } else {
            Decision::Denied(denied)
        }
    }

    /// Every expression of the policy, as (field, source).
    pub fn expressions(&self) -> Vec<(&str, &str)> {
        self.match_conditions
            .iter()
            .chain(&self.variables)
            .map(|(_, e)| e)
            .chain(
                self.validations
                    .iter()
                    .flat_map(|v| std::iter::once(&v.expression).chain(&v.message_expression)),
            )
            .map(|e| (e.field.as_str(), e.source.as_str()))
            .collect()
    }
}

fn eval_bool(expr: &Expr, ctx: &Context<'_, '_>) -> Result<bool, String> {
    match expr.program.execute(ctx) {
        Ok(cel::Value::Bool(b)) => Ok(b),
        Ok(other) => Err(format!("{} is not a bool: {other:?}", expr.field)),
        Err(e) => Err(e.to_string()),
    }
}

/// A failed validation's message: its messageExpression when that gives a
/// non-empty string, else its message, else the API server's default.
fn message(v: &Validation, ctx: &Context<'_, '_>) -> String {
    if let Some(e) = &v.message_expression
        && let Ok(cel::Value::String(s)) = e.program.execute(ctx)
        && !s.trim().is_empty()
    {
        return s.to_string();
    }
    v.message
        .clone()
        .unwrap_or_else(|| format!("failed expression: {}", v.expression.source))
}

/// JSON as CEL sees unstructured objects: integers as int, other numbers as double.
fn to_cel(v: &Value) -> cel::Value {
    match v {
        Value::Null => cel::Value::Null,
        Value::Bool(b) => cel::Value::Bool(*b),
        Value::Number(n) => n.as_i64().map_or_else(
            || cel::Value::Float(n.as_f64().unwrap_or(f64::NAN)),
            cel::Value::Int,
        ),
        Value::String(s) => cel::Value::String(Arc::new(s.clone())),
        Value::Array(a) => cel::Value::List(Arc::new(a.iter().map(to_cel).collect())),
        Value::Object(o) => {
            let map: std::collections::HashMap<Key, cel::Value> = o
                .iter()
                .map(|(k, v)| (Key::from(k.clone()), to_cel(v)))
                .collect();
            cel::Value::Map(Map::from(map))
        }
    }
}

/// `object` as the API server gives it to a policy: its typed Go struct
/// turned into a map by runtime.DefaultUnstructuredConverter, which, like
/// encoding/json, leaves out an `omitempty` field when it is an empty string,
/// a zero number, a nil pointer or an empty list or map, but never a struct:
/// an events.k8s.io/v1 Event always carries `regarding` and `deprecatedSource`
/// (`{}` when unset) and `eventTime`, `deprecatedFirstTimestamp` and
/// `deprecatedLastTimestamp` (null when unset). A policy that tests those for
/// presence refuses every Event, the agent's too; this puts them where the
/// API server does. Other kinds are taken as sent: the Node policy compares
/// old and new objects field by field, where the same defaults on both sides
/// change nothing.
fn typed_form(kind: &str, (group, version): (&str, &str), object: &Value) -> Value {
    let mut out = object.clone();
    let Some(o) = out.as_object_mut() else {
        return out;
    };
    if kind != "Event" || (group, version) != ("events.k8s.io", "v1") {
        return out;
    }
    for (field, unset) in [
        ("regarding", json!({})),
        ("deprecatedSource", json!({})),
        ("eventTime", Value::Null),
        ("deprecatedFirstTimestamp", Value::Null),
        ("deprecatedLastTimestamp", Value::Null),
    ] {
        o.entry(field).or_insert(unset);
    }
    // Empty strings and zero counts are left out (omitempty), as in the
    // EventSource and ObjectReference structs.
    for reference in ["regarding", "deprecatedSource", "related"] {
        if let Some(r) = o.get_mut(reference).and_then(Value::as_object_mut) {
            r.retain(|_, v| v.as_str() != Some(""));
        }
    }
    if o.get("deprecatedCount").and_then(Value::as_i64) == Some(0) {
        o.remove("deprecatedCount");
    }
    out
}

/// `object` of `kind` from `from` (group, version) to the equivalent `to`:
/// the conversion between core v1 and events.k8s.io/v1 Events
/// (k8s.io/kubernetes pkg/apis/events/v1/conversion.go); unchanged otherwise.
fn convert(kind: &str, from: (&str, &str), to: (&str, &str), object: &Value) -> Value {
    if from == to || object.is_null() {
        return object.clone();
    }
    assert!(
        kind == "Event" && from == ("", "v1") && to == ("events.k8s.io", "v1"),
        "no conversion of {kind} from {from:?} to {to:?} in tests/src/admission.rs"
    );
    let renames = [
        ("involvedObject", "regarding"),
        ("message", "note"),
        ("reportingComponent", "reportingController"),
        ("source", "deprecatedSource"),
        ("firstTimestamp", "deprecatedFirstTimestamp"),
        ("lastTimestamp", "deprecatedLastTimestamp"),
        ("count", "deprecatedCount"),
    ];
    let mut out = serde_json::Map::new();
    for (k, v) in object.as_object().into_iter().flatten() {
        let k = renames
            .iter()
            .find(|(old, _)| old == k)
            .map_or(k.as_str(), |(_, new)| new);
        out.insert(k.to_owned(), v.clone());
    }
    out.insert("apiVersion".to_owned(), json!("events.k8s.io/v1"));
    Value::Object(out)
}
