//! The addresses Services claim: a tenant chooses a Service's external IPs
//! and load-balancer IP (and may ask for a ClusterIP), and kube-proxy in IPVS
//! mode binds every one of them on every node (`kube-ipvs0`), kube-vip on the
//! uplink. Such an address on a node shadows a pod whose IP it equals
//! (CVE-2020-8554's man-in-the-middle is the same move): the finding is real,
//! but the fix is removing the address from the Service, never evicting the pod
//! a tenant pointed at.

use std::{
    collections::{BTreeMap, BTreeSet},
    net::IpAddr,
};

use super::{Invalid, ServiceRef};

/// Where in a Service an address is set.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    strum::IntoStaticStr,
    strum::Display,
    strum::EnumIter,
)]
pub enum ServiceField {
    /// `spec.externalIPs`: any user who may create Services sets them.
    #[strum(serialize = "spec.externalIPs")]
    ExternalIps,
    /// `spec.loadBalancerIP` (deprecated; still honoured by many implementations).
    #[strum(serialize = "spec.loadBalancerIP")]
    LoadBalancerIp,
    /// `status.loadBalancer.ingress[].ip`: the load balancer's, often asked for by the tenant.
    #[strum(serialize = "status.loadBalancer.ingress")]
    LoadBalancerIngress,
    /// `spec.clusterIPs`: allocated, or asked for in `spec.clusterIP`.
    #[strum(serialize = "spec.clusterIPs")]
    ClusterIps,
}

impl ServiceField {
    /// The field, as `kubectl explain` names it.
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// One Service's claim on an address.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ServiceAddress {
    /// The Service.
    pub service: ServiceRef,
    /// Where it sets the address.
    pub field: ServiceField,
}

/// The Services' addresses, as far as they were read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServiceAddresses {
    /// Each address some Service claims, with the Services (in order).
    pub by_ip: BTreeMap<IpAddr, Vec<ServiceAddress>>,
    /// Which addresses the read covers.
    pub covered: Covered,
    /// The Services the read met holding an address that could not be read
    /// (or not shaped as a Service at all), one problem each: any of them may
    /// claim any address, so while there are some the read covers none it
    /// did not find claimed.
    pub unreadable: Vec<Invalid>,
    /// The `default/kubernetes` Service's cluster IPs, whatever `covered`:
    /// the address plan's record of the Service range where no ServiceCIDR
    /// is read, taken from the one list `audit` makes of the Services.
    pub api_service: Vec<IpAddr>,
}

/// Which addresses a read of the Services covers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Covered {
    /// None: the Services were not read.
    #[default]
    Nothing,
    /// Every address: a whole list (a file, `check`).
    All,
    /// These addresses: a lookup for them.
    Only(BTreeSet<IpAddr>),
}

impl ServiceAddresses {
    /// Every address in `claims` (a whole list of Services).
    pub fn whole(claims: impl IntoIterator<Item = (IpAddr, ServiceAddress)>) -> Self {
        let mut out = Self {
            covered: Covered::All,
            ..Self::default()
        };
        for (ip, a) in claims {
            out.add(ip, a);
        }
        out
    }

    /// The same, with these Services unreadable (see [`Self::unreadable`]).
    #[must_use]
    pub fn with_unreadable(mut self, unreadable: Vec<Invalid>) -> Self {
        self.unreadable = unreadable;
        self
    }

    /// Adds a Service's claim on `ip`, once.
    pub fn add(&mut self, ip: IpAddr, a: ServiceAddress) {
        let held = self.by_ip.entry(ip).or_default();
        if !held.contains(&a) {
            held.push(a);
            held.sort();
        }
    }

    /// The Services claiming `ip`: `None` when the read did not cover it or
    /// met a Service it could not read (not known either way), empty when it
    /// did and none does.
    pub fn holders(&self, ip: IpAddr) -> Option<&[ServiceAddress]> {
        let covered = self.unreadable.is_empty()
            && match &self.covered {
                Covered::Nothing => false,
                Covered::All => true,
                Covered::Only(ips) => ips.contains(&ip),
            };
        if let Some(held) = self.by_ip.get(&ip) {
            return Some(held);
        }
        covered.then_some(&[])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(ns: &str, name: &str, field: ServiceField) -> ServiceAddress {
        ServiceAddress {
            service: ServiceRef {
                namespace: ns.into(),
                name: name.into(),
            },
            field,
        }
    }

    #[test]
    fn a_lookup_knows_only_what_it_covered() {
        let ip = |s: &str| s.parse::<IpAddr>().expect("ip");
        let mut s = ServiceAddresses::default();
        assert_eq!(s.holders(ip("10.244.4.12")), None, "nothing read");
        s.covered = Covered::Only([ip("10.244.4.12"), ip("10.244.4.13")].into());
        s.add(
            ip("10.244.4.12"),
            claim("tenant-b", "mitm", ServiceField::ExternalIps),
        );
        assert_eq!(
            s.holders(ip("10.244.4.12")).map(<[_]>::len),
            Some(1),
            "claimed"
        );
        assert_eq!(s.holders(ip("10.244.4.13")), Some(&[][..]), "checked, none");
        assert_eq!(s.holders(ip("10.244.4.14")), None, "not looked up");
        let whole = ServiceAddresses::whole([]);
        assert_eq!(whole.holders(ip("10.244.4.14")), Some(&[][..]));
    }

    #[test]
    fn a_service_that_could_not_be_read_leaves_every_address_it_did_not_find_unknown() {
        let ip = |s: &str| s.parse::<IpAddr>().expect("ip");
        let mut s = ServiceAddresses::whole([(
            ip("10.244.4.12"),
            claim("tenant-b", "mitm", ServiceField::ExternalIps),
        )]);
        s.unreadable.push(Invalid {
            resource: "services",
            object: "tenant-b/odd".into(),
            problem: "spec.externalIPs holds \"10.244.4.1x\"".into(),
        });
        assert_eq!(s.holders(ip("10.244.4.13")), None, "odd may claim it");
        assert_eq!(
            s.holders(ip("10.244.4.12")).map(<[_]>::len),
            Some(1),
            "a claim read stands"
        );
    }
}
