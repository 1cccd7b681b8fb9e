//! Events as the refusal readers hold them: what
//! [`objects::sandbox_failure`] reads, each string kept to a bounded prefix.
//!
//! A core/v1 Event written without `eventTime` has no length limit on its
//! message but the API server's object size (kube-apiserver's
//! `legacyValidateEvent` checks `NoteLengthLimit` only for Events with
//! `eventTime`), and anyone who may create Events in a namespace may write
//! one about their own pod: 50 of 1.4 MB each are 70 MB in one list. Here an
//! Event's message is kept to [`MESSAGE_READ_MAX`] bytes (kubelet's real
//! refusals are under 500: the corpus' longest is 424) and everything
//! ipshadow does not read (`managedFields`, `source`, timestamps, `related`)
//! is skipped unparsed.
//!
//! [`objects::sandbox_failure`]: crate::kube::objects::sandbox_failure

use serde::Deserialize;

use super::{
    bounded::{Count, Text},
    shape::Shape,
};
use crate::{
    inventory::{Invalid, SandboxFailure},
    kube::objects,
};

/// The bytes of an Event's message read: past them a refusal's wording is
/// not looked for (every wording ipshadow knows sits in kubelet's first few
/// hundred bytes).
pub(in crate::kube) const MESSAGE_READ_MAX: usize = 16 * 1024;
/// Longest name, namespace, uid or kind kept (the API allows 253 for names).
pub(in crate::kube) const NAME_MAX: usize = 256;

/// An Event (core/v1 or events.k8s.io/v1) cut to what the converter reads.
#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct LeanEvent {
    pub(in crate::kube) metadata: Shape<Meta>,
    pub(in crate::kube) reason: Option<Text<NAME_MAX>>,
    pub(in crate::kube) involved_object: Shape<Reference>,
    pub(in crate::kube) regarding: Shape<Reference>,
    pub(in crate::kube) message: Option<Text<MESSAGE_READ_MAX>>,
    pub(in crate::kube) note: Option<Text<MESSAGE_READ_MAX>>,
    pub(in crate::kube) count: Count,
    pub(in crate::kube) series: Shape<Series>,
}

/// A namespace and name: an Event's metadata, the Service a webhook calls.
#[derive(Debug, Default, Deserialize)]
pub(in crate::kube) struct Meta {
    pub(in crate::kube) namespace: Option<Text<NAME_MAX>>,
    pub(in crate::kube) name: Option<Text<NAME_MAX>>,
}

/// `involvedObject` / `regarding`: which object the Event is about.
#[derive(Debug, Default, Deserialize)]
pub(in crate::kube) struct Reference {
    pub(in crate::kube) kind: Option<Text<NAME_MAX>>,
    pub(in crate::kube) namespace: Option<Text<NAME_MAX>>,
    pub(in crate::kube) name: Option<Text<NAME_MAX>>,
    pub(in crate::kube) uid: Option<Text<NAME_MAX>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(in crate::kube) struct Series {
    pub(in crate::kube) count: Count,
}

impl LeanEvent {
    /// Whether its message (or note) ran past [`MESSAGE_READ_MAX`].
    pub(in crate::kube) fn message_cut(&self) -> bool {
        [&self.message, &self.note]
            .into_iter()
            .flatten()
            .any(Text::cut)
    }

    /// The refusal it reports, if it is one ipshadow diagnoses; a message
    /// read only to its prefix is named in `invalid`.
    pub(in crate::kube) fn refusal(&self, invalid: &mut Vec<Invalid>) -> Option<SandboxFailure> {
        if self.message_cut() {
            invalid.push(Invalid {
                resource: "events",
                object: self.object(),
                problem: format!(
                    "message longer than {MESSAGE_READ_MAX} bytes, read to there: a refusal \
                     worded past it is not seen"
                ),
            });
        }
        objects::sandbox_failure(self)
    }

    /// `namespace/name`, made safe to show.
    fn object(&self) -> String {
        let Some(m) = self.metadata.as_map() else {
            return "(unnamed)".to_owned();
        };
        let text = |t: &Option<Text<NAME_MAX>>| {
            crate::inventory::text::cleaned(t.as_ref().and_then(Text::as_str).unwrap_or_default())
        };
        format!("{}/{}", text(&m.namespace), text(&m.name))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::kube::objects::{sandbox_failure, sandbox_refusal, whole, whole::lean};

    fn real_messages() -> Vec<String> {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/corpus/realworld");
        let mut out = Vec::new();
        for file in [
            "event-messages-sandbox-failures.json",
            "sandbox/event-messages-other-cnis.json",
        ] {
            let v: Value =
                serde_json::from_slice(&std::fs::read(format!("{dir}/{file}")).expect("corpus"))
                    .expect("json");
            let messages = v["messages"].as_array().cloned().unwrap_or_default();
            let all = v.as_array().cloned().unwrap_or(messages);
            out.extend(
                all.iter()
                    .filter_map(|m| m["message"].as_str().map(str::to_owned)),
            );
        }
        out
    }

    #[test]
    fn every_real_wording_fits_the_prefix_many_times_over() {
        let messages = real_messages();
        assert!(messages.len() >= 15, "only {} messages", messages.len());
        for m in &messages {
            assert!(m.len() * 8 < MESSAGE_READ_MAX, "{} bytes: {m}", m.len());
            let event = json!({"reason": "FailedCreatePodSandBox", "count": 3,
                "metadata": {"namespace": "t", "managedFields": [{"manager": "kubelet"}]},
                "involvedObject": {"kind": "Pod", "namespace": "t", "name": "p", "uid": "u"},
                "message": m, "source": {"component": "kubelet"}});
            let l: LeanEvent = lean(&event);
            assert!(!l.message_cut());
            assert_eq!(sandbox_failure(&l), whole::sandbox_failure(&event), "{m}");
        }
    }

    #[test]
    fn a_huge_message_is_read_to_its_prefix_and_its_refusal_found_there() {
        let refusal = "putEndpointIdInvalid \"IP ipv4:10.244.4.12 is already in use\"";
        let padding = "x".repeat(1_400_000);
        let event = |message: String| {
            json!({"reason": "FailedCreatePodSandBox", "series": {"count": 4},
                "metadata": {"namespace": "t"},
                "regarding": {"kind": "Pod", "namespace": "t", "name": "p", "uid": "u"},
                "note": message})
        };
        let first: LeanEvent = lean(&event(format!("{refusal} {padding}")));
        assert!(first.message_cut());
        let note = first.note.as_ref().and_then(Text::as_str);
        assert!(note.is_some_and(|n| n.len() == MESSAGE_READ_MAX));
        let found = sandbox_failure(&first).expect("the refusal at the start");
        assert_eq!((found.uid.as_str(), found.count), ("u", 4));
        // Past the prefix a wording is not read: the Event is no refusal.
        let last: LeanEvent = lean(&event(format!("{padding} {refusal}")));
        assert!(last.message_cut());
        assert_eq!(sandbox_failure(&last), None);
        assert!(sandbox_refusal(&format!("{padding} {refusal}")).is_some());
    }

    #[test]
    fn fields_of_the_wrong_type_read_as_missing_never_fail_the_list() {
        for junk in [
            json!({"reason": 5, "involvedObject": "x", "message": {"a": 1}, "count": "9"}),
            json!({"metadata": [1], "regarding": {"kind": ["Pod"]}, "series": 3, "note": false}),
            json!({"count": -4, "involvedObject": {"kind": "Pod", "name": {"n": 1}}}),
        ] {
            let l: LeanEvent = lean(&junk);
            assert_eq!(sandbox_failure(&l), None, "{junk}");
        }
    }
}
