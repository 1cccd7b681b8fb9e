//! The Event objects of a series, and the names they go under.

use k8s_openapi::{
    api::events::v1::Event,
    apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta},
    jiff::Timestamp,
};

use crate::report::events::{ACTION, Desired, REPORTING_CONTROLLER};

/// Whether `e` is this node's Event of `d`'s series (written before a restart).
pub(super) fn is_series_of(e: &Event, d: &Desired, node: &str) -> bool {
    let regarding = e.regarding.as_ref();
    e.reporting_controller.as_deref() == Some(REPORTING_CONTROLLER)
        && e.reporting_instance.as_deref() == Some(node)
        && e.reason.as_deref() == Some(d.reason.as_str())
        && regarding.and_then(|r| r.uid.as_ref()) == d.regarding.uid.as_ref()
        && regarding.and_then(|r| r.name.as_ref()) == d.regarding.name.as_ref()
}

/// `d`'s Event object, named `name`.
pub(super) fn event(d: &Desired, name: &str, node: &str) -> Event {
    Event {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(d.namespace.clone()),
            ..Default::default()
        },
        event_time: Some(MicroTime(Timestamp::now())),
        reporting_controller: Some(REPORTING_CONTROLLER.to_owned()),
        reporting_instance: Some(node.to_owned()),
        action: Some(ACTION.to_owned()),
        reason: Some(d.reason.clone()),
        regarding: Some(d.regarding.clone()),
        note: Some(d.note.clone()),
        type_: Some(if d.warning { "Warning" } else { "Normal" }.to_owned()),
        ..Default::default()
    }
}

/// Twelve characters nobody can predict (from the system's CSPRNG, as a DNS
/// label's): what a fresh name ends in. A name is all a tenant would need to
/// take a series' object first.
pub(super) fn unguessable_suffix() -> String {
    use ring::rand::SecureRandom as _;
    let mut bytes = [0u8; 12];
    // The OS's generator does not fail on Linux; the clock's nanoseconds are
    // still better than a fixed suffix if it ever did.
    if ring::rand::SystemRandom::new().fill(&mut bytes).is_err() {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        bytes[..8].copy_from_slice(&nanos.to_le_bytes()[..8]);
    }
    bytes
        .iter()
        .map(|b| char::from(b"abcdefghijklmnopqrstuvwxyz012345"[usize::from(b % 32)]))
        .collect()
}
