//! The standard `process_*` metrics of the agent itself, read from
//! /proc/self at each scrape as every Prometheus client library's process
//! collector names them (client_golang, the prometheus crate): what the
//! agent's memory limit, its restarts and its fds are checked against.

use procfs::{WithCurrentSystemInfo as _, process::LimitValue};
use prometheus_client::{
    collector::Collector,
    encoding::{DescriptorEncoder, EncodeMetric as _},
    metrics::{MetricType, counter::ConstCounter, gauge::ConstGauge},
};

use crate::report::metrics::Registry;

/// Registers the process collector in `registry`.
pub(crate) fn register(registry: &mut Registry) {
    registry.register_collector(Box::new(ProcessCollector));
}

#[derive(Debug)]
struct ProcessCollector;

/// One reading of /proc/self: what each family shows.
struct Reading {
    cpu_seconds: f64,
    resident_bytes: u64,
    virtual_bytes: u64,
    start_time_seconds: f64,
    open_fds: Option<u64>,
    max_fds: Option<u64>,
}

/// /proc/self now; None where procfs is not mounted (a test without it):
/// the families are then left out of the scrape, never written as zeros.
fn read() -> Option<Reading> {
    let me = procfs::process::Process::myself().ok()?;
    let stat = me.stat().ok()?;
    #[expect(
        clippy::cast_precision_loss,
        reason = "clock ticks: far below 2^52 for any process lifetime"
    )]
    let ticks = |t: u64| t as f64 / procfs::ticks_per_second() as f64;
    let boot = procfs::boot_time_secs().ok()?;
    let max_fds = me
        .limits()
        .ok()
        .and_then(|l| match l.max_open_files.soft_limit {
            LimitValue::Value(v) => Some(v),
            LimitValue::Unlimited => None,
        });
    #[expect(
        clippy::cast_precision_loss,
        reason = "seconds since 1970: exact in an f64"
    )]
    let boot = boot as f64;
    Some(Reading {
        cpu_seconds: ticks(stat.utime + stat.stime),
        resident_bytes: stat.rss_bytes().get(),
        virtual_bytes: stat.vsize,
        start_time_seconds: boot + ticks(stat.starttime),
        open_fds: me.fd_count().ok().and_then(|n| u64::try_from(n).ok()),
        max_fds,
    })
}

fn gauge<N: prometheus_client::encoding::EncodeGaugeValue>(
    encoder: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    value: N,
) -> Result<(), std::fmt::Error> {
    let m = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
    ConstGauge::new(value).encode(m)
}

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let Some(r) = read() else { return Ok(()) };
        let m = encoder.encode_descriptor(
            "process_cpu_seconds",
            "Total user and system CPU time spent in seconds",
            None,
            MetricType::Counter,
        )?;
        ConstCounter::new(r.cpu_seconds).encode(m)?;
        let e = &mut encoder;
        gauge(
            e,
            "process_resident_memory_bytes",
            "Resident memory size in bytes",
            r.resident_bytes,
        )?;
        gauge(
            e,
            "process_virtual_memory_bytes",
            "Virtual memory size in bytes",
            r.virtual_bytes,
        )?;
        gauge(
            e,
            "process_start_time_seconds",
            "Start time of the process since unix epoch in seconds",
            r.start_time_seconds,
        )?;
        if let Some(n) = r.open_fds {
            gauge(e, "process_open_fds", "Number of open file descriptors", n)?;
        }
        if let Some(n) = r.max_fds {
            gauge(
                e,
                "process_max_fds",
                "Maximum number of open file descriptors",
                n,
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The value of the sample `name` in `text` (Prometheus or OpenMetrics).
    fn sample(text: &str, name: &str) -> f64 {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
            .unwrap_or_else(|| panic!("no {name} in:\n{text}"))
    }

    #[test]
    fn the_process_families_describe_this_process() {
        let mut registry = Registry::default();
        register(&mut registry);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).expect("encodes");
        let rss = sample(&text, "process_resident_memory_bytes");
        // This test process: at least a MiB resident, at most its virtual size.
        assert!(rss > 1_048_576.0, "{text}");
        assert!(
            rss <= sample(&text, "process_virtual_memory_bytes"),
            "{text}"
        );
        assert!(sample(&text, "process_cpu_seconds_total") >= 0.0, "{text}");
        // Started after the boot and not in the future (a day's slack for clocks).
        let start = sample(&text, "process_start_time_seconds");
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("after 1970")
            .as_secs_f64();
        assert!(start > 1.6e9 && start <= now + 86_400.0, "{start} vs {now}");
        let open = sample(&text, "process_open_fds");
        assert!(
            open >= 3.0 && open <= sample(&text, "process_max_fds"),
            "{text}"
        );
        assert!(
            text.contains("# TYPE process_cpu_seconds counter"),
            "{text}"
        );
    }
}
