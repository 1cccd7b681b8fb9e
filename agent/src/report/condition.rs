//! The Node condition `PodIPsShadowed`: True, with the worst finding's kind as
//! reason and the findings named, while the node reports findings; False when
//! it has none — a condition that clears, unlike the ones node-problem-detector
//! is most often blamed for.

use std::fmt::Write as _;

use super::events::reported_here;
use crate::detect::{Finding, audit::rank};

/// The condition type on the Node.
pub const CONDITION_TYPE: &str = "PodIPsShadowed";
/// The reason while the node has no findings.
pub const REASON_CLEAR: &str = "NoShadowedPodIPs";
/// Findings a message names; the rest are counted.
const NAMED: usize = 5;

/// The condition a node's findings call for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Condition {
    /// True while the node has findings.
    pub status: bool,
    /// The worst finding's kind, or [`REASON_CLEAR`].
    pub reason: String,
    /// What they are, and where to read more.
    pub message: String,
}

/// The condition `node` shows for `findings` (pure).
#[must_use]
pub fn desired(findings: &[Finding], node: &str) -> Condition {
    // Hints (what a tenant can write: an Event, an annotation) never speak for the node.
    let mut mine: Vec<&Finding> = findings
        .iter()
        .filter(|f| reported_here(f, node) && f.trust.speaks_for_node())
        .collect();
    if mine.is_empty() {
        return Condition {
            status: false,
            reason: REASON_CLEAR.to_owned(),
            message: "ipshadow finds no pod IP on this node shadowed by a node's address, no \
                      blackholed pod route and no pod IP allocation problem"
                .to_owned(),
        };
    }
    mine.sort_by(|a, b| (rank(a), a.sort_key()).cmp(&(rank(b), b.sort_key())));
    let n = mine.len();
    let named = mine
        .iter()
        .take(NAMED)
        .map(|f| match (f.pod(), f.ip) {
            (Some(p), Some(ip)) => format!("{} {p} ({ip})", f.kind),
            (None, Some(ip)) => format!("{} {ip}", f.kind),
            _ => f.kind.to_string(),
        })
        .collect::<Vec<_>>()
        .join("; ");
    let mut message = format!("{n} finding{} on this node: {named}", super::plural(n));
    if n > NAMED {
        let _ = write!(message, "; and {} more", n - NAMED);
    }
    message.push_str(
        ". The pods' Events say why and how to fix it (kubectl describe pod); ipshadow's metrics \
         count them.",
    );
    Condition {
        status: true,
        reason: mine[0].kind.to_string(),
        message: crate::inventory::text::cleaned(&message),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        detect::detect,
        inventory::fixtures::{ME, OTHER, inventory, pod},
    };

    #[test]
    fn the_condition_is_true_for_this_nodes_findings_and_false_without() {
        let inv = inventory(vec![
            pod("postgres-0", ME, &["10.244.4.251"]),
            pod("gateway-0", ME, &["10.244.4.12"]),
        ]);
        let c = desired(&detect(&inv), ME);
        assert!(c.status);
        // The running pod its node cannot reach is the worst.
        assert_eq!(c.reason, "RouterIPCollision");
        assert!(
            c.message
                .starts_with("2 findings on this node: RouterIPCollision tenant/postgres-0"),
            "{}",
            c.message
        );
        // Another node's view of the same findings: not its condition.
        assert!(!desired(&detect(&inv), OTHER).status);
        let clear = desired(&[], ME);
        assert_eq!((clear.status, clear.reason.as_str()), (false, REASON_CLEAR));
    }

    #[test]
    fn a_thousand_findings_make_a_bounded_message() {
        let pods = (0..1000)
            .map(|i| pod(&format!("p-{i}"), ME, &["10.244.4.251"]))
            .collect();
        let c = desired(&detect(&inventory(pods)), ME);
        assert!(c.message.contains("and 995 more"), "{}", c.message);
        assert!(c.message.len() < 1024, "{}", c.message.len());
    }
}
