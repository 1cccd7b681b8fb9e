//! Watching host traffic to the shadowed IPs of a set of findings for a while,
//! and attaching what the eBPF classifier saw to each of them.

use std::{
    collections::BTreeMap,
    net::IpAddr,
    time::{Duration, Instant},
};

use crate::{
    cli::{EbpfArgs, EbpfMode},
    detect::Finding,
    ebpf::{self, Observer, watch_set},
    evidence::{Evidence, Sample},
};

/// How often the ring buffer is drained while watching.
const DRAIN_EVERY: Duration = Duration::from_millis(200);
/// The interface every locally delivered packet crosses.
pub const LOOPBACK: &str = "lo";

/// What became of the eBPF observer.
#[derive(Debug)]
pub enum Outcome {
    /// Attached and watched `ips` IPs; `stale` leftover tc filters were removed first.
    Watched { ips: usize, stale: usize },
    /// `--ebpf=off`.
    Off,
    /// `--ebpf=auto` and it could not be used: the reason, for one log line.
    Unavailable(ebpf::Error),
}

/// The observer, attached, or why there is none.
pub enum Started {
    /// Attached; `stale` leftover tc filters were removed first.
    Attached {
        observer: Box<Observer>,
        stale: usize,
    },
    /// Off, or unavailable in `auto` mode.
    Not(Outcome),
}

/// Loads and attaches the observer as `args` say. `Err` only in `required` mode.
pub fn start(args: &EbpfArgs) -> Result<Started, ebpf::Error> {
    if args.mode == EbpfMode::Off {
        return Ok(Started::Not(Outcome::Off));
    }
    let attached = Observer::load().and_then(|mut observer| {
        let stale = observer.attach(LOOPBACK, args.tc_attach)?;
        Ok(Started::Attached {
            observer: Box::new(observer),
            stale,
        })
    });
    match (attached, args.mode) {
        (Ok(started), _) => Ok(started),
        (Err(e), EbpfMode::Required) => Err(e),
        (Err(e), _) => Ok(Started::Not(Outcome::Unavailable(e))),
    }
}

/// Watches the IPs of `findings` owned by `node` for `window`, then adds the
/// evidence to those findings (and a sentence to their messages).
pub async fn watch(
    findings: &mut [Finding],
    node: &str,
    window: Duration,
    args: &EbpfArgs,
) -> Result<Outcome, ebpf::Error> {
    let (mut observer, stale) = match start(args)? {
        Started::Attached { observer, stale } => (observer, stale),
        Started::Not(outcome) => return Ok(outcome),
    };
    if stale > 0 {
        tracing::warn!(
            removed = stale,
            interface = LOOPBACK,
            "removed tc filters an earlier ipshadow left behind"
        );
    }
    let ips = watch_set(findings, node);
    observer.sync(&ips)?;
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
    for f in findings.iter_mut().filter(|f| ips.contains(&f.ip)) {
        let Some(c) = observer.counters(f.ip)? else {
            continue;
        };
        let e = Evidence::new(&c, by_ip.get(&f.ip).map_or(&[][..], Vec::as_slice), elapsed);
        f.message.push(' ');
        f.message.push_str(&e.sentence(f.ip, node));
        f.evidence = Some(e);
    }
    Ok(Outcome::Watched {
        ips: ips.len(),
        stale,
    })
}
