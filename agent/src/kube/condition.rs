//! Writes the `PodIPsShadowed` condition on this node's Node: a strategic
//! merge patch of `status.conditions` (merge key `type`) on the status
//! subresource, as kubelet and node-problem-detector write theirs, touching no
//! other condition.

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Node;
use kube::{
    Api,
    api::{Patch, PatchParams},
};
use serde_json::json;

use crate::{
    inventory::ConditionSeen,
    report::condition::{CONDITION_TYPE, Condition},
};

/// Whether the Node already shows `want` (then nothing is written).
#[must_use]
pub fn shows(seen: Option<&ConditionSeen>, want: &Condition) -> bool {
    seen.is_some_and(|s| {
        s.status == want.status && s.reason == want.reason && s.message == want.message
    })
}

/// Patches `node`'s condition to `want`; `lastTransitionTime` moves only when
/// the status changes from what the Node shows.
pub async fn write(
    client: &kube::Client,
    node: &str,
    want: &Condition,
    seen: Option<&ConditionSeen>,
) -> Result<(), kube::Error> {
    // Whole seconds, as the API server keeps them.
    let now = Timestamp::from_second(Timestamp::now().as_second())
        .unwrap_or(Timestamp::UNIX_EPOCH)
        .to_string();
    let transition = match seen {
        Some(s) if s.status == want.status => s.last_transition.clone().unwrap_or(now.clone()),
        _ => now.clone(),
    };
    let patch = json!({"status": {"conditions": [{
        "type": CONDITION_TYPE,
        "status": if want.status { "True" } else { "False" },
        "reason": want.reason,
        "message": want.message,
        "lastHeartbeatTime": now,
        "lastTransitionTime": transition,
    }]}});
    Api::<Node>::all(client.clone())
        .patch_status(node, &PatchParams::default(), &Patch::Strategic(patch))
        .await
        .map(|_| ())
}
