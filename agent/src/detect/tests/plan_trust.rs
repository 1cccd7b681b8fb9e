//! How far an overlap of the address plan is trusted: as far as the least
//! trusted object it rests on.

use super::tests::{planned, state};
use super::*;

#[test]
fn an_overlap_with_a_range_a_tenant_declared_is_trusted_as_a_tenants_address() {
    let nad = |name: &str, text: &str, tenant: bool| {
        let mut p = planned(
            "whereabouts",
            "NetworkAttachmentDefinition",
            name,
            Purpose::Secondary,
            text,
        );
        p.owner.tenant = tenant;
        p.domain = Some("eth1".into());
        p
    };
    let trust = |plan: Vec<Planned>| -> Vec<Trust> {
        let found = plan_overlaps(&state(plan, Vec::new())).0;
        found.iter().map(|f| f.trust).collect()
    };
    let tenants = vec![
        nad("ns/a", "192.168.2.0/24", false),
        nad("ns/b", "192.168.2.128/25", true),
    ];
    assert_eq!(trust(tenants), [Trust::TenantAddress]);
    let admins = vec![
        nad("ns/a", "192.168.2.0/24", false),
        nad("ns/b", "192.168.2.128/25", false),
    ];
    assert_eq!(trust(admins), [Trust::Cluster]);
}
