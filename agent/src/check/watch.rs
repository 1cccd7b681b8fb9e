//! Watching host traffic to the shadowed IPs of a report for a while, and
//! joining what the eBPF classifier saw to the report as evidence.

use std::{
    collections::{BTreeMap, BTreeSet},
    net::IpAddr,
    time::{Duration, Instant},
};

use crate::{
    ebpf::{self, LOOPBACK, Started},
    report::{
        Report,
        evidence::{Evidence, Sample},
        traffic::watch_set,
    },
};

/// How often the ring buffer is drained while watching.
const DRAIN_EVERY: Duration = Duration::from_millis(200);

/// What became of the eBPF observer.
#[derive(Debug)]
pub enum Outcome {
    /// Attached and watched `ips` IPs; `stale` leftover tc filters were removed first.
    Watched {
        /// IPs watched.
        ips: usize,
        /// Legacy filters of an earlier ipshadow removed first.
        stale: usize,
    },
    /// `--ebpf=off`.
    Off,
    /// `--ebpf=auto` and it could not be used: the reason, for one log line.
    Unavailable(ebpf::Error),
}

/// Watches the IPs of `report`'s findings that its node holds for `window`,
/// then adds what was seen to `report.evidence`.
pub async fn watch(
    report: &mut Report,
    window: Duration,
    args: &ebpf::Args,
) -> Result<Outcome, ebpf::Error> {
    let (mut observer, stale) = match ebpf::start(args, ebpf::Ownership::Exclusive)? {
        Started::Attached { observer, stale } => (observer, stale),
        Started::Off => return Ok(Outcome::Off),
        Started::Unavailable(e) => return Ok(Outcome::Unavailable(e)),
    };
    if stale > 0 {
        tracing::warn!(
            removed = stale,
            interface = LOOPBACK,
            "removed tc filters an earlier ipshadow left behind"
        );
    }
    let ips = watch_set(&report.findings, &report.node, &BTreeSet::new());
    observer.sync(&ips)?;
    // The kernel may be short of memory for a burst of new entries: try again
    // after a growing wait (1+2+…+50 ms at most), not a busy loop.
    for wait in 1..=50 {
        if *observer.watched() == ips {
            break;
        }
        tokio::time::sleep(Duration::from_millis(wait)).await;
        observer.sync(&ips)?;
    }
    tracing::info!(
        ips = ips.len(),
        interface = LOOPBACK,
        "eBPF observer attached, watching"
    );
    let started = Instant::now();
    let mut samples: Vec<Sample> = Vec::new();
    while started.elapsed() < window {
        let left = window.saturating_sub(started.elapsed());
        tokio::time::sleep(left.min(DRAIN_EVERY)).await;
        samples.extend(observer.drain_samples().0);
    }
    let elapsed = started.elapsed();
    let mut by_ip: BTreeMap<IpAddr, Vec<Sample>> = BTreeMap::new();
    for s in samples {
        by_ip.entry(s.dst).or_default().push(s);
    }
    for ip in &ips {
        let Some(c) = observer.counters(*ip)? else {
            continue;
        };
        let seen = by_ip.get(ip).map_or(&[][..], Vec::as_slice);
        report
            .evidence
            .insert(*ip, Evidence::new(&c, seen, elapsed));
    }
    Ok(Outcome::Watched {
        ips: ips.len(),
        stale,
    })
}
