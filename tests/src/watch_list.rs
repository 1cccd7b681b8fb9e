//! Streaming lists (`sendInitialEvents`, KEP-3157) as kube-apiserver checks and
//! answers them, for the test API server.
//!
//! Sources (kubernetes/apimachinery and kubernetes/apiserver, the published
//! staging repositories, tags `v0.<minor>.0` = Kubernetes 1.<minor>):
//! - `pkg/apis/meta/internalversion/validation/validation.go`
//!   `validateWatchOptions` (v0.27.0 … v0.36.0 unchanged): `sendInitialEvents`
//!   requires `resourceVersionMatch=NotOlderThan`; it is forbidden unless the
//!   `WatchList` gate is on; `resourceVersionMatch` on a watch is forbidden
//!   without `sendInitialEvents`. v0.26.0: `resourceVersionMatch` is forbidden
//!   for every watch (and `sendInitialEvents` is not a parameter at all).
//! - `pkg/endpoints/handlers/get.go`: errors become
//!   `errors.NewInvalid(GroupKind{meta.k8s.io, ListOptions}, "", errs)`: 422.
//! - `pkg/storage/cacher/cacher.go`: the initial events end in a BOOKMARK
//!   carrying `k8s.io/initial-events-end: "true"` only when
//!   `allowWatchBookmarks=true` (no 422 without it: no end bookmark either).

use std::collections::BTreeMap;

use serde_json::{Value, json};

/// Which kube-apiserver the test server plays, as far as streaming lists go.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum WatchList {
    /// `WatchList` on: 1.32, and 1.34 on (the default).
    #[default]
    On,
    /// The gate off: 1.27 to 1.31 and 1.33 by default, or turned off.
    Off,
    /// Before 1.27: no `sendInitialEvents` (ignored), and `resourceVersionMatch`
    /// forbidden on every watch.
    Absent,
}

/// One field error as `field.ErrorList` prints it, and its cause.
struct FieldError {
    field: &'static str,
    reason: &'static str,
    detail: String,
}

impl FieldError {
    fn forbidden(field: &'static str, detail: &str) -> Self {
        Self {
            field,
            reason: "FieldValueForbidden",
            detail: format!("Forbidden: {detail}"),
        }
    }
}

/// Whether a watch asks for its initial state as events: `Ok(true)` for a
/// streaming list, `Ok(false)` for a plain watch, `Err(status)` with the 422
/// Invalid Status the real server answers.
pub fn initial_events(q: &BTreeMap<String, String>, server: WatchList) -> Result<bool, Value> {
    let send = match server {
        WatchList::Absent => None,
        _ => q.get("sendInitialEvents").map(|v| v == "true"),
    };
    let matching = q.get("resourceVersionMatch").map(String::as_str);
    let mut errs = Vec::new();
    if server == WatchList::Absent {
        if matching.is_some() {
            errs.push(FieldError::forbidden(
                "resourceVersionMatch",
                "resourceVersionMatch is forbidden for watch",
            ));
        }
    } else {
        if send.is_some() {
            if matching != Some("NotOlderThan") {
                errs.push(FieldError::forbidden(
                    "resourceVersionMatch",
                    "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
                ));
            }
            if server == WatchList::Off {
                errs.push(FieldError::forbidden(
                    "sendInitialEvents",
                    "sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled",
                ));
            }
        }
        if let Some(m) = matching {
            if send.is_none() {
                errs.push(FieldError::forbidden(
                    "resourceVersionMatch",
                    "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
                ));
            }
            if m != "NotOlderThan" {
                errs.push(FieldError {
                    field: "resourceVersionMatch",
                    reason: "FieldValueNotSupported",
                    detail: format!("Unsupported value: {m:?}: supported values: \"NotOlderThan\""),
                });
            }
        }
    }
    if errs.is_empty() {
        Ok(send == Some(true))
    } else {
        Err(invalid(&errs))
    }
}

/// `errors.NewInvalid(GroupKind{"meta.k8s.io", "ListOptions"}, "", errs)`.
fn invalid(errs: &[FieldError]) -> Value {
    let each: Vec<String> = errs
        .iter()
        .map(|e| format!("{}: {}", e.field, e.detail))
        .collect();
    // utilerrors.NewAggregate: one error alone, several in brackets.
    let all = if each.len() == 1 {
        each[0].clone()
    } else {
        format!("[{}]", each.join(", "))
    };
    let causes: Vec<Value> = errs
        .iter()
        .map(|e| json!({"reason": e.reason, "message": e.detail, "field": e.field}))
        .collect();
    json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": format!("ListOptions.meta.k8s.io \"\" is invalid: {all}"),
        "reason": "Invalid",
        "details": {"group": "meta.k8s.io", "kind": "ListOptions", "causes": causes},
        "code": 422,
    })
}

/// The BOOKMARK that ends the initial events: an empty object of the kind
/// with the resourceVersion they are consistent at.
pub fn end_bookmark(api_version: &str, kind: &str, rv: u64) -> Value {
    json!({
        "apiVersion": api_version, "kind": kind,
        "metadata": {
            "resourceVersion": rv.to_string(),
            "annotations": {"k8s.io/initial-events-end": "true"},
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    const STREAM: &[(&str, &str)] = &[
        ("watch", "true"),
        ("allowWatchBookmarks", "true"),
        ("sendInitialEvents", "true"),
        ("resourceVersionMatch", "NotOlderThan"),
        ("resourceVersion", "0"),
    ];

    #[test]
    fn a_streaming_list_is_accepted_only_where_the_gate_is_on() {
        assert_eq!(initial_events(&q(STREAM), WatchList::On), Ok(true));
        let off = initial_events(&q(STREAM), WatchList::Off).unwrap_err();
        assert_eq!(off["code"], 422);
        assert_eq!(off["reason"], "Invalid");
        assert_eq!(
            off["message"],
            "ListOptions.meta.k8s.io \"\" is invalid: sendInitialEvents: Forbidden: \
             sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled"
        );
        let old = initial_events(&q(STREAM), WatchList::Absent).unwrap_err();
        assert_eq!(
            old["message"],
            "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: \
             resourceVersionMatch is forbidden for watch"
        );
    }

    #[test]
    fn send_initial_events_without_not_older_than_is_invalid() {
        let e = initial_events(
            &q(&[("watch", "true"), ("sendInitialEvents", "true")]),
            WatchList::On,
        )
        .unwrap_err();
        assert_eq!(e["code"], 422);
        assert_eq!(e["details"]["causes"][0]["field"], "resourceVersionMatch");
        let e = initial_events(
            &q(&[("watch", "true"), ("resourceVersionMatch", "NotOlderThan")]),
            WatchList::On,
        )
        .unwrap_err();
        assert!(
            e["message"]
                .as_str()
                .unwrap()
                .contains("unless sendInitialEvents is provided")
        );
    }

    #[test]
    fn a_plain_watch_passes_on_every_server() {
        for server in [WatchList::On, WatchList::Off, WatchList::Absent] {
            assert_eq!(
                initial_events(&q(&[("watch", "true"), ("resourceVersion", "7")]), server),
                Ok(false)
            );
        }
    }
}
