//! Host interface names a CNI derives from the pod: a cross-check of which pod
//! a namespace is, beside its addresses. Calico names a pod's host veth `cali`
//! followed by the first 11 hex digits of the SHA-1 of `namespace.name`
//! (`VethNameForWorkload` in Calico's CNI plugin).

use std::fmt::Write as _;

use ring::digest::{SHA1_FOR_LEGACY_USE_ONLY, digest};

/// Calico's host veth name for a pod.
pub(super) fn calico_iface(namespace: &str, name: &str) -> String {
    let hash = digest(
        &SHA1_FOR_LEGACY_USE_ONLY,
        format!("{namespace}.{name}").as_bytes(),
    );
    let hex = hash.as_ref().iter().fold(String::new(), |mut h, b| {
        let _ = write!(h, "{b:02x}");
        h
    });
    format!("cali{}", &hex[..11])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calico_names_a_pods_veth_from_the_sha1_of_namespace_and_name() {
        // Computed independently (Python's hashlib).
        assert_eq!(calico_iface("tenant", "a"), "cali31ccef0dc46");
        assert_eq!(calico_iface("tenant", "b"), "calibc08975e859");
    }
}
