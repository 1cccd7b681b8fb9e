//! The observer subsystem: keeps the eBPF map equal to the IPs of the latest
//! findings and this node's addresses a pod elsewhere could hold, reads its
//! counters (at once when flows are sampled, else on a timer while any IP is
//! watched), publishes traffic series, and the addresses with traffic no
//! finding explains (the cluster source looks up who holds them).

use std::{collections::BTreeMap, net::IpAddr, os::fd::OwnedFd, sync::Arc, time::Duration};

use prometheus_client::metrics::gauge::Gauge;
use tokio::{io::unix::AsyncFd, sync::watch};
use tokio_util::sync::CancellationToken;

use super::Published;
use crate::{
    ebpf::{self, LOOPBACK, Observer, Started},
    privileges,
    report::{
        metrics::Registry,
        traffic::{Counters, Traffic, TrafficBook, Unexplained, series_of, watch_set},
    },
};

/// The observer's flags.
#[derive(Debug, clap::Args)]
#[group(id = "observer")]
pub struct Args {
    /// Whether and how to attach.
    #[command(flatten)]
    pub ebpf: ebpf::Args,
    /// How often to read the eBPF counters while any IP is watched, in seconds
    /// (sampled new flows refresh them at once).
    #[arg(long, env = "IPSHADOW_COUNTERS_SECONDS", default_value_t = 10,
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub counters_seconds: u64,
}

/// The attached observer and what it reads and writes.
pub(crate) struct ObserverTask {
    observer: Box<Observer>,
    /// A second descriptor of the ring buffer, for epoll: readable when samples wait.
    samples: Option<AsyncFd<OwnedFd>>,
    counters_every: Duration,
    node: String,
    /// `ipshadow_ebpf_attached`.
    attached: Gauge,
    findings: watch::Receiver<Published>,
    traffic: watch::Sender<Arc<Traffic>>,
    unexplained: watch::Sender<Arc<Unexplained>>,
    book: TrafficBook,
}

impl privileges::Attached for ObserverTask {
    fn is_legacy(&self) -> bool {
        self.observer.is_legacy()
    }

    fn map_update_works(&mut self) -> bool {
        self.observer.probe_update().is_ok()
    }
}

impl ObserverTask {
    /// Loads and attaches the program as `args` say: `None` when it is off or
    /// unavailable (netlink-only), `Err` only when it is required. It publishes
    /// host traffic to shadowed pods on `traffic`, and on `unexplained` the
    /// addresses of this node with traffic no finding explains.
    pub(crate) fn new(
        args: &Args,
        node: &str,
        registry: &mut Registry,
        findings: watch::Receiver<Published>,
        traffic: watch::Sender<Arc<Traffic>>,
        unexplained: watch::Sender<Arc<Unexplained>>,
    ) -> ebpf::Result<Option<Self>> {
        // Registered whatever happens: netlink-only agents export 0.
        let attached = Gauge::default();
        registry.register(
            "ipshadow_ebpf_attached",
            "1 when the eBPF classifier is attached to lo, 0 when the agent runs netlink-only",
            attached.clone(),
        );
        let observer = match ebpf::start(&args.ebpf, ebpf::Ownership::Shared)? {
            Started::Attached { observer, stale } => {
                if stale > 0 {
                    tracing::warn!(
                        removed = stale,
                        "removed tc filters an earlier ipshadow left on lo"
                    );
                }
                tracing::info!(interface = LOOPBACK, "eBPF observer attached");
                observer
            }
            Started::Unavailable(e) => {
                tracing::warn!(reason = %e, "eBPF unavailable, running netlink-only");
                return Ok(None);
            }
            Started::Off => {
                tracing::info!("eBPF is off (--ebpf=off), running netlink-only");
                return Ok(None);
            }
        };
        let samples = observer
            .samples_fd()
            .try_clone_to_owned()
            .and_then(|fd| {
                // SAFETY: `fd` is an open descriptor owned by the AsyncFd for its whole life.
                unsafe { AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE) }
                    .map_err(std::io::Error::from)
            })
            .inspect_err(|e| tracing::warn!(error = %e, "cannot poll the eBPF ring buffer; counters refresh on a timer only"))
            .ok();
        attached.set(1);
        Ok(Some(Self {
            observer,
            samples,
            counters_every: Duration::from_secs(args.counters_seconds),
            node: node.to_owned(),
            attached,
            findings,
            traffic,
            unexplained,
            book: TrafficBook::default(),
        }))
    }

    /// Follows the findings until `token` is cancelled, then detaches.
    pub(crate) async fn run(mut self, token: CancellationToken) {
        let mut next_counters = tokio::time::Instant::now() + self.counters_every;
        let mut publisher_gone = false;
        let samples = self.samples.take();
        // While the kernel refused a new entry (ENOMEM), the sync is tried again
        // after a wait that doubles from 1 ms to 1 s: never a sleep on the runtime.
        let mut retry: Option<(tokio::time::Instant, Duration)> = None;
        loop {
            let watching = !self.observer.watched().is_empty();
            tokio::select! {
                () = token.cancelled() => break,
                changed = self.findings.changed(), if !publisher_gone => {
                    publisher_gone = changed.is_err();
                    let (removed, short) = self.sync();
                    retry = short.then(|| Self::later(None));
                    self.refresh(&removed);
                }
                () = tokio::time::sleep_until(retry.map_or_else(tokio::time::Instant::now, |r| r.0)), if retry.is_some() => {
                    let (removed, short) = self.sync();
                    retry = short.then(|| Self::later(retry.map(|r| r.1)));
                    self.refresh(&removed);
                }
                r = readable(samples.as_ref()) => {
                    if let Ok(mut guard) = r {
                        self.drain_samples();
                        guard.clear_ready();
                        self.refresh(&BTreeMap::new());
                    }
                }
                () = tokio::time::sleep_until(next_counters), if watching => {
                    next_counters = tokio::time::Instant::now() + self.counters_every;
                    self.refresh(&BTreeMap::new());
                }
            }
        }
        // Dropping the observer detaches the program: it must not outlive the agent.
        drop(samples);
        drop(self.observer);
        self.attached.set(0);
    }

    /// Makes the kernel's SHADOWED map equal to the IPs of the current findings
    /// and the addresses a pod elsewhere could hold; the last counters of the IPs
    /// removed, and whether some are still to add (the kernel was short of memory).
    fn sync(&mut self) -> (BTreeMap<IpAddr, Counters>, bool) {
        let want = {
            let p = self.findings.borrow();
            watch_set(&p.findings, &self.node, &p.claimable)
        };
        match self.observer.sync(&want) {
            Ok(removed) => (removed, *self.observer.watched() != want),
            Err(e) => {
                tracing::warn!(error = %e, "updating the eBPF map failed");
                (BTreeMap::new(), false)
            }
        }
    }

    /// When to try a short sync again, after `last` wait.
    fn later(last: Option<Duration>) -> (tokio::time::Instant, Duration) {
        let wait = last.map_or(Duration::from_millis(1), |w| {
            (w * 2).min(Duration::from_secs(1))
        });
        (tokio::time::Instant::now() + wait, wait)
    }

    fn drain_samples(&mut self) {
        let (samples, bad) = self.observer.drain_samples();
        if bad > 0 {
            tracing::warn!(
                records = bad,
                "ring buffer records of an unexpected size skipped"
            );
        }
        for s in samples {
            tracing::debug!(src = %s.src, dst = %s.dst, protocol = s.protocol, dport = s.dport, flags = %s.tcp_flags, "host traffic to a shadowed IP");
        }
    }

    /// Reads the per-IP counters and publishes the traffic series.
    fn refresh(&mut self, removed: &BTreeMap<IpAddr, Counters>) {
        let watched = self.observer.watched().clone();
        let mut current = BTreeMap::new();
        for ip in &watched {
            match self.observer.counters(*ip) {
                Ok(c) => current.extend(c.map(|c| (*ip, c))),
                Err(e) => tracing::warn!(error = %e, "reading eBPF counters failed"),
            }
        }
        let want = series_of(&self.findings.borrow().findings, &watched);
        self.book
            .update(&want, &current, removed, crate::report::traffic::unix_now());
        replace_if_new(&self.unexplained, self.book.unexplained(&want));
        // New traffic can open a HostTrafficBlackholed series; the writer acts only on news.
        replace_if_new(&self.traffic, self.book.exposed());
    }
}

/// Publishes `new` on `tx` unless it equals what `tx` holds: receivers wake on news only.
fn replace_if_new<T: PartialEq>(tx: &watch::Sender<Arc<T>>, new: T) {
    tx.send_if_modified(|old| {
        let changed = **old != new;
        if changed {
            *old = Arc::new(new);
        }
        changed
    });
}

async fn readable(
    fd: Option<&AsyncFd<OwnedFd>>,
) -> std::io::Result<tokio::io::unix::AsyncFdReadyGuard<'_, OwnedFd>> {
    match fd {
        Some(fd) => fd.readable().await,
        None => std::future::pending().await,
    }
}
