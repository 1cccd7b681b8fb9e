//! Per-series traffic totals that survive findings flapping, and the traffic
//! no finding explains yet.
//!
//! The kernel map counts per IP from the moment the IP is added; an IP leaves
//! the map when it is no longer watched and starts at zero when it comes back.
//! The metrics need counters per (ip, namespace, pod) that never go down while
//! the process lives: this book keeps what earlier segments counted and adds
//! the current segment on top. Series of cleared findings are not exposed, and
//! continue where they stopped if the finding returns.
//!
//! The map also holds this node's addresses that a pod elsewhere could be
//! given, before any finding names them. Traffic to one of those that no series
//! claims is *unexplained*: the agent asks the API server once which pod holds
//! the address. When a pod is found, its series starts at the last moment the
//! address was quiet, if the pod existed by then (the traffic that led to the
//! lookup was its), else at once: traffic from before the pod existed is never
//! counted as its.

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    net::IpAddr,
};

use crate::detect::{Cause, Finding, Role};

/// The labels of a traffic series.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SeriesKey {
    /// The shadowed IP.
    pub ip: IpAddr,
    /// The namespace of the pod holding it.
    pub namespace: String,
    /// The pod holding it.
    pub pod: String,
}

/// What the eBPF classifier counted for one IP, decoded from the kernel's
/// per-CPU values (summed) by the `ebpf` adapter.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Packets to the IP.
    pub packets: u64,
    /// Bytes to the IP.
    pub bytes: u64,
    /// TCP connection attempts (SYN without ACK) to the IP.
    pub tcp_syns: u64,
    /// TCP RSTs the local stack sent in the IP's name: refused connections.
    pub refused: u64,
    /// UDP packets to the IP.
    pub udp: u64,
    /// ICMP packets to the IP.
    pub icmp: u64,
    /// Flow samples sent to the ring buffer.
    pub samples_sent: u64,
    /// Flow samples the rate limit (or a full ring buffer) held back.
    pub samples_dropped: u64,
}

impl Counters {
    /// Each counter of `self` and `o` combined by `op`.
    fn each(self, o: Self, op: fn(u64, u64) -> u64) -> Self {
        Self {
            packets: op(self.packets, o.packets),
            bytes: op(self.bytes, o.bytes),
            tcp_syns: op(self.tcp_syns, o.tcp_syns),
            refused: op(self.refused, o.refused),
            udp: op(self.udp, o.udp),
            icmp: op(self.icmp, o.icmp),
            samples_sent: op(self.samples_sent, o.samples_sent),
            samples_dropped: op(self.samples_dropped, o.samples_dropped),
        }
    }

    fn plus(self, o: Self) -> Self {
        self.each(o, |a, b| a + b)
    }

    /// `self - base`, never below zero (a map entry re-created behind our back restarts at 0).
    fn since(self, base: Self) -> Self {
        self.each(base, u64::saturating_sub)
    }
}

/// The traffic series exposed now, with their running totals.
pub type Traffic = Vec<(SeriesKey, Counters)>;

/// Watched IPs with traffic no finding explains, each with a count that grows
/// with every new burst (see [`TrafficBook::unexplained`]).
pub type Unexplained = BTreeMap<IpAddr, u64>;

/// The IPs whose locally delivered traffic is evidence: addresses `node` holds
/// in its kernel (router, health, other local addresses) that a pod has, and
/// the `claimable` ones a pod elsewhere could be given (their traffic is
/// unexplained until a lookup finds the pod). The Ingress IP is not a kernel
/// address, so host traffic to it never crosses `lo`.
pub fn watch_set(
    findings: &[Finding],
    node: &str,
    claimable: &BTreeSet<IpAddr>,
) -> BTreeSet<IpAddr> {
    findings
        .iter()
        // Addresses this node delivers to itself: not the Ingress IP (no
        // device), another pod's or a stale endpoint's, nor a node finding's.
        .filter(|f| {
            f.owner.node == node
                && matches!(f.owner.role, Role::Router | Role::Health | Role::Local)
        })
        // A route to nowhere, what the namespaces hold, a route to another veth a
        // refused pod never had: no local delivery for the classifier on lo.
        .filter(|f| {
            !matches!(
                f.cause,
                Cause::Blackhole { .. } | Cause::Kernel(_) | Cause::Leftover { .. }
            )
        })
        .filter_map(|f| f.ip)
        .chain(claimable.iter().copied())
        .collect()
}

/// The series a watched IP's traffic belongs to, and since when.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Claim {
    /// The series.
    pub key: SeriesKey,
    /// When its pod was created (Unix seconds), if known.
    pub since: Option<i64>,
}

/// Which series each watched IP's traffic belongs to: the first finding's pod.
pub fn series_of(findings: &[Finding], watched: &BTreeSet<IpAddr>) -> BTreeMap<IpAddr, Claim> {
    let mut want = BTreeMap::new();
    for (f, ip) in findings
        .iter()
        .filter_map(|f| Some((f, f.ip?)))
        .filter(|(_, ip)| watched.contains(ip))
    {
        want.entry(ip).or_insert_with(|| Claim {
            key: SeriesKey {
                ip,
                namespace: f.pod().map(|p| p.namespace.clone()).unwrap_or_default(),
                pod: f.pod().map(|p| p.name.clone()).unwrap_or_default(),
            },
            since: f.site().and_then(|s| s.created),
        });
    }
    want
}

struct Segment {
    key: SeriesKey,
    baseline: Counters,
    last: Counters,
}

/// A watched IP no series claims.
struct Unclaimed {
    /// The last quiet refresh before its latest burst of traffic (Unix
    /// seconds) …
    quiet_at: i64,
    /// … and its counters then: a pod found by the lookup that burst led to
    /// gets what came since, if it existed by then.
    quiet: Counters,
    /// The last refresh that saw no new traffic, and its counters: the next
    /// burst's `quiet`. (A quiet refresh between a burst and the lookup's
    /// answer must not make the burst count as before the pod.)
    calm: (i64, Counters),
    /// Its counters at the last refresh.
    last: Counters,
    /// How many refreshes saw new traffic to it.
    noisy: u64,
}

impl Unclaimed {
    /// An IP first seen unclaimed at `now` with counters `c`.
    fn new(c: Counters, now: i64) -> Self {
        Self {
            quiet_at: now,
            quiet: c,
            calm: (now, c),
            last: c,
            noisy: 0,
        }
    }

    /// Its counters `c` at refresh `now`, unclaimed.
    fn saw(&mut self, c: Counters, now: i64) {
        if c.packets == self.last.packets {
            self.calm = (now, c);
        } else {
            // A burst starts after a quiet refresh: that is its mark.
            if self.calm.1.packets == self.last.packets {
                (self.quiet_at, self.quiet) = self.calm;
            }
            self.noisy += 1;
        }
        self.last = c;
    }

    /// A series claims it now: keep the noise count (lookups compare it),
    /// restart the marks.
    fn restart(&mut self, c: Counters, now: i64) {
        *self = Self {
            noisy: self.noisy,
            ..Self::new(c, now)
        };
    }
}

/// Now, in Unix seconds: the clock the book's marks and pods' creation times share.
pub fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// Retired series remembered at most.
pub const RETIRED_MAX: usize = 1024;

/// Running totals per series (see the module docs).
#[derive(Default)]
pub struct TrafficBook {
    /// Totals of series no longer counted, with when each was last retired:
    /// kept so a finding that comes back continues its counters, the oldest
    /// forgotten beyond [`RETIRED_MAX`] (a churn of pods must not grow it).
    retired: HashMap<SeriesKey, (Counters, i64)>,
    active: BTreeMap<IpAddr, Segment>,
    unclaimed: BTreeMap<IpAddr, Unclaimed>,
}

impl TrafficBook {
    /// Brings the book up to date at `now` (Unix seconds).
    /// - `want`: which series each watched IP's traffic belongs to now;
    /// - `current`: the map's counters of the IPs still in it;
    /// - `removed`: the last counters of IPs just removed from the map.
    pub fn update(
        &mut self,
        want: &BTreeMap<IpAddr, Claim>,
        current: &BTreeMap<IpAddr, Counters>,
        removed: &BTreeMap<IpAddr, Counters>,
        now: i64,
    ) {
        self.close_segments(want, current, removed, now);
        // An IP out of the map is forgotten; a claimed one keeps its noise count.
        self.unclaimed.retain(|ip, _| current.contains_key(ip));
        self.open_segments(want, current);
        for (ip, c) in current {
            if want.contains_key(ip) {
                if let Some(u) = self.unclaimed.get_mut(ip) {
                    u.restart(*c, now);
                }
            } else {
                self.unclaimed
                    .entry(*ip)
                    .or_insert_with(|| Unclaimed::new(*c, now))
                    .saw(*c, now);
            }
        }
    }

    /// Takes each active segment's last counters, and retires those whose IP
    /// left the map or now belongs to another series.
    fn close_segments(
        &mut self,
        want: &BTreeMap<IpAddr, Claim>,
        current: &BTreeMap<IpAddr, Counters>,
        removed: &BTreeMap<IpAddr, Counters>,
        now: i64,
    ) {
        let closed: Vec<Segment> = self
            .active
            .extract_if(.., |ip, seg| {
                let still_mapped = current.get(ip);
                if let Some(c) = still_mapped.or_else(|| removed.get(ip)) {
                    seg.last = *c;
                }
                still_mapped.is_none() || want.get(ip).map(|c| &c.key) != Some(&seg.key)
            })
            .map(|(_, seg)| seg)
            .collect();
        for seg in closed {
            self.retire(seg, now);
        }
    }

    /// Adds what `seg` counted to its series' retired total, forgetting the
    /// longest-retired series beyond [`RETIRED_MAX`].
    fn retire(&mut self, seg: Segment, now: i64) {
        let done = seg.last.since(seg.baseline);
        let r = self.retired.entry(seg.key).or_default();
        *r = (r.0.plus(done), now);
        if self.retired.len() > RETIRED_MAX
            && let Some(oldest) = self
                .retired
                .iter()
                .min_by_key(|(_, (_, at))| *at)
                .map(|(k, _)| k.clone())
        {
            self.retired.remove(&oldest);
        }
    }

    /// Starts a segment for each claimed IP without one.
    fn open_segments(
        &mut self,
        want: &BTreeMap<IpAddr, Claim>,
        current: &BTreeMap<IpAddr, Counters>,
    ) {
        for (ip, claim) in want {
            if self.active.contains_key(ip) {
                continue;
            }
            let now_counters = current.get(ip).copied().unwrap_or_default();
            // The pod existed when the address was last quiet: what came since is its.
            let baseline = match self.unclaimed.get(ip) {
                Some(u) if claim.since.is_some_and(|s| s <= u.quiet_at) => u.quiet,
                _ => now_counters,
            };
            self.active.insert(
                *ip,
                Segment {
                    key: claim.key.clone(),
                    baseline,
                    last: now_counters,
                },
            );
        }
    }

    /// The watched IPs with traffic no series claims: for each, how many
    /// refreshes saw new traffic to it (grows with every new burst).
    pub fn unexplained(&self, claimed: &BTreeMap<IpAddr, Claim>) -> Unexplained {
        self.unclaimed
            .iter()
            .filter(|(ip, u)| u.noisy > 0 && !claimed.contains_key(ip))
            .map(|(ip, u)| (*ip, u.noisy))
            .collect()
    }

    /// The series to expose now, with their running totals.
    pub fn exposed(&self) -> Traffic {
        self.active
            .values()
            .map(|s| {
                let before = self.retired.get(&s.key).map(|r| r.0).unwrap_or_default();
                (s.key.clone(), before.plus(s.last.since(s.baseline)))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests;
