//! bench/README.md's tables of figures, rendered from bench/results.json:
//! `cargo xtask bench` writes them after a run (`--record` for one section),
//! `cargo xtask bench-readme` alone; a test fails when the README's tables are
//! not what results.json renders, so no figure in them is typed by hand.

use std::fmt::Write as _;

use anyhow::{Context as _, bail};
use serde_json::Value;

/// Renders one generated block from results.json.
type Render = fn(&Value) -> String;

/// The README's generated blocks: between `<!-- generated:NAME -->` and
/// `<!-- /generated:NAME -->`, each rendered by its function.
const BLOCKS: [(&str, Render); 2] = [("summary", summary), ("namespaces", namespaces)];

/// `readme` with every generated block rendered from `results` (bench/results.json).
pub(crate) fn update(readme: &str, results: &Value) -> anyhow::Result<String> {
    let mut out = readme.to_owned();
    for (name, render) in BLOCKS {
        let (open, close) = (
            format!("<!-- generated:{name} -->\n"),
            format!("<!-- /generated:{name} -->"),
        );
        let start = out
            .find(&open)
            .with_context(|| format!("bench/README.md has no {open:?} marker"))?
            + open.len();
        let Some(len) = out[start..].find(&close) else {
            bail!("bench/README.md has no {close:?} after {open:?}");
        };
        out.replace_range(start..start + len, &render(results));
    }
    Ok(out)
}

/// The number at `pointer` (a JSON pointer into `results`).
fn num(v: &Value, pointer: &str) -> Option<f64> {
    v.pointer(pointer).and_then(Value::as_f64)
}

/// `x` with `decimals`, or `—` when the run did not measure it.
fn fmt(x: Option<f64>, decimals: usize) -> String {
    x.map_or_else(|| "—".to_owned(), |x| format!("{x:.decimals$}"))
}

/// A whole number with thousands separators: `29,543`.
fn count(x: Option<f64>) -> String {
    let Some(x) = x else {
        return "—".to_owned();
    };
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "figures far below 2^52, rounded for the table"
    )]
    let n = x.round().max(0.0) as u64;
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The smallest and largest of `xs` (those measured).
fn spread(xs: &[Option<f64>]) -> Option<(f64, f64)> {
    let xs: Vec<f64> = xs.iter().flatten().copied().collect();
    let min = xs.iter().copied().reduce(f64::min)?;
    let max = xs.iter().copied().reduce(f64::max)?;
    Some((min, max))
}

fn row(out: &mut String, figure: &str, measured: &str, target: &str) {
    let _ = writeln!(out, "| {figure} | {measured} | {target} |");
}

/// The summary table of the last run of each section.
fn summary(v: &Value) -> String {
    let mut t = String::from("| figure | measured | target |\n| --- | --- | --- |\n");
    packet_path(&mut t, v);
    reaction(&mut t, v);
    scale(&mut t, v);
    api_and_fleet(&mut t, v);
    memory(&mut t, v);
    t
}

fn packet_path(t: &mut String, v: &Value) {
    let ns = |k: &str| {
        num(
            v,
            &format!("/results/packet_path/results/{k}/ns_per_packet_median"),
        )
    };
    let misses = [
        "one_entry",
        "thousand_entries",
        "ten_thousand_entries",
        "hundred_thousand_entries",
    ];
    let floor = ns("floor");
    let costs: Vec<Option<f64>> = misses.iter().map(|k| ns(k)).collect();
    let ratios: Vec<Option<f64>> = costs.iter().map(|c| Some(c.as_ref()? / floor?)).collect();
    let ratio = spread(&ratios).map_or_else(|| "—".to_owned(), |(a, b)| format!("{a:.2}-{b:.2}×"));
    let costs: Vec<String> = costs.iter().map(|c| fmt(*c, 1)).collect();
    row(
        t,
        "classifier cost per packet, 1 / 1,000 / 10,000 / 100,000 entries (miss)",
        &format!(
            "{} ns, floor {} ns: {ratio}",
            costs.join(" / "),
            fmt(floor, 1)
        ),
        "≤ 1.3× floor",
    );
    row(
        t,
        "classifier cost per packet to a shadowed IP (hit)",
        &format!("{} ns", fmt(ns("target_shadowed"), 0)),
        "—",
    );
    let through = |k: &str| {
        num(
            v,
            &format!("/results/packet_path/results/{k}/throughput_ratio_to_without"),
        )
    };
    let all: Vec<Option<f64>> = misses
        .iter()
        .chain(["target_shadowed"].iter())
        .map(|k| through(k))
        .collect();
    let range = spread(&all).map_or_else(|| "—".to_owned(), |(a, b)| format!("{a:.2}-{b:.2}"));
    row(
        t,
        "iperf3 throughput with the classifier / without",
        &format!(
            "{range} (the empty classifier {})",
            fmt(through("floor"), 2)
        ),
        "≥ 0.98",
    );
    let rate = |k: &str| num(v, &format!("/results/packet_path/connection_rate/{k}"));
    row(
        t,
        "short-connection rate with / without",
        &format!(
            "{} (the empty classifier alone: {})",
            fmt(rate("ratio"), 3),
            fmt(rate("floor_ratio"), 3)
        ),
        "≥ 0.95",
    );
}

fn reaction(t: &mut String, v: &Value) {
    let p99 = |k: &str| fmt(num(v, &format!("/results/reaction/{k}/p99_ms")), 1);
    row(
        t,
        "notification → finding in `/metrics`, p99 of 100",
        &format!(
            "{} ms",
            p99("address_added/finding_in_metrics_after_the_notification")
        ),
        "≤ 50 ms",
    );
    row(
        t,
        "pod in the API → finding / → Event, p99",
        &format!(
            "{} ms / {} ms",
            p99("pod_added_to_api/finding_in_metrics"),
            p99("pod_added_to_api/event_at_api_server")
        ),
        "—",
    );
}

fn scale(t: &mut String, v: &Value) {
    let s = |k: &str| num(v, &format!("/results/scale/{k}"));
    row(
        t,
        &format!(
            "reconcile, {} pods + {} CiliumNodes",
            count(s("pods")),
            count(s("cilium_nodes"))
        ),
        &format!(
            "median {} ms, p99 {} ms",
            fmt(s("reconcile_ms_median"), 1),
            fmt(s("reconcile_ms_p99"), 1)
        ),
        "≤ 20 ms",
    );
    let n = |size: &str, k: &str| num(v, &format!("/results/namespaces/nodes/{size}/{k}"));
    let pair = |k: &str| format!("{} / {} ms", fmt(n("110", k), 2), fmt(n("1000", k), 2));
    row(
        t,
        "pod namespaces, 110 / 1,000: full read at start; most a reconcile reads (a resync pass); a reconcile with nothing changed; one host address dump",
        &format!(
            "{}; {}; {}; {}",
            pair("full_read_ms"),
            pair("resync_pass_ms"),
            pair("unchanged_read_ms"),
            pair("host_address_dump_ms")
        ),
        "≤ 20 ms per reconcile",
    );
    row(
        t,
        &format!("{} FIB lookups, batched / `ip route get`", count(s("pods"))),
        &format!(
            "{} ms / {} ms (×{})",
            fmt(s("fib_lookups_batched_ms"), 1),
            count(s("fib_lookups_ip_route_get_processes_ms")),
            count(s("fib_speedup"))
        ),
        "—",
    );
    row(
        t,
        "agent RSS, same node",
        &format!("{} MiB", fmt(s("agent_rss_kib").map(|k| k / 1024.0), 1)),
        "≤ 30 MiB",
    );
    row(
        t,
        "idle CPU over 60 s",
        &format!(
            "{} % of a core",
            fmt(s("agent_idle_cpu_percent_of_one_core"), 3)
        ),
        "< 0.5 %",
    );
    row(
        t,
        "heap allocations per reconcile (unchanged)",
        &count(s("allocations_per_reconcile")),
        "≤ 5,000 (issue 41)",
    );
}

fn api_and_fleet(t: &mut String, v: &Value) {
    let a = |size: &str, k: &str| count(num(v, &format!("/results/api_load/{size}/{k}")));
    let both = |k: &str| format!("{} and {}", a("small", k), a("large", k));
    row(
        t,
        "API, a 10-node and a 1,000-node cluster: watches at start / requests in 5 min idle / during a 1,000-op churn",
        &format!(
            "{} / {} / {}",
            both("watches_opened_to_start"),
            both("requests_while_idle"),
            both("requests_during_churn")
        ),
        "constant in cluster size",
    );
    let f = |k: &str| num(v, &format!("/results/fleet/{k}"));
    let rss = |k: &str| {
        format!(
            "{} MiB (max {})",
            fmt(f(&format!("rss_mib/{k}/median")), 1),
            fmt(f(&format!("rss_mib/{k}/max")), 1)
        )
    };
    row(
        t,
        &format!(
            "fleet: {} agents, {}-node cluster ({} CiliumNodes of {} B): RSS per agent, peak of the initial sync / steady",
            count(f("agents")),
            count(f("cluster/nodes")),
            v.pointer("/results/fleet/cluster/ipam")
                .and_then(Value::as_str)
                .unwrap_or("—"),
            count(f("cluster/ciliumnode_bytes"))
        ),
        &format!("{} / {}", rss("peak_initial_sync"), rss("steady_idle")),
        "peak ≤ 64 MiB",
    );
    let by_kind = |phase: &str, kind: &str| {
        v.pointer(&format!(
            "/results/fleet/{phase}/requests_per_agent_by_kind"
        ))
        .map(|k| k.get(kind).and_then(Value::as_f64).unwrap_or(0.0))
    };
    row(
        t,
        "fleet: requests per agent per minute idle / under churn; of them Node writes (`PATCH nodes/status`) per agent in the idle phase",
        &format!(
            "{} / {}; {}",
            fmt(f("idle/requests_per_agent_per_minute"), 2),
            fmt(f("churn/requests_per_agent_per_minute"), 2),
            fmt(by_kind("idle", "PATCH nodes/status"), 2)
        ),
        "no Node write without news: 0 idle",
    );
}

fn memory(t: &mut String, v: &Value) {
    let audit = |k: &str| num(v, &format!("/results/audit/{k}"));
    let mib = |x: Option<f64>| fmt(x.map(|k| k / 1024.0), 1);
    row(
        t,
        &format!(
            "audit: {} nodes, {} pods from files",
            count(audit("nodes")),
            count(audit("pods"))
        ),
        &format!(
            "{} s, peak RSS {} MiB; `check` of one node on the same files {} s ({}×)",
            fmt(audit("audit_median_seconds"), 2),
            mib(audit("peak_rss_kib")),
            fmt(audit("check_one_node_seconds"), 2),
            fmt(audit("audit_to_check_ratio"), 1)
        ),
        "in seconds, bounded memory",
    );
    let peak = |k: &str| mib(num(v, &format!("/results/services/peaks/{k}/median_kib")));
    row(
        t,
        "`check` / the agent listing 300 Services with a 256 KiB annotation each, peak RSS: before → after",
        &format!(
            "{} → {} MiB / {} → {} MiB (without the annotation: {} → {} / {} → {} MiB)",
            peak("check_before_annotated"),
            peak("check_after_annotated"),
            peak("agent_before_annotated"),
            peak("agent_after_annotated"),
            peak("check_before_plain"),
            peak("check_after_plain"),
            peak("agent_before_plain"),
            peak("agent_after_plain")
        ),
        "≤ 64 MiB (issue 38)",
    );
    let l = |case: &str, bin: &str, k: &str| {
        mib(num(
            v,
            &format!("/results/lists/{case}/by_binary/{bin}/{k}"),
        ))
    };
    let arrow = |case: &str, k: &str| format!("{} → {}", l(case, "before", k), l(case, "after", k));
    row(
        t,
        "lists: a pod waiting for an address with 50 sandbox Events of 1.4 MB, peak RSS of `check` / of the agent, before → after",
        &format!(
            "{} / {} MiB (with one 400-byte Event instead: {} / {} MiB)",
            arrow("huge_events", "check_peak_rss_kib"),
            arrow("huge_events", "agent_peak_rss_kib"),
            arrow("one_small_event", "check_peak_rss_kib"),
            arrow("one_small_event", "agent_peak_rss_kib")
        ),
        "peak ≤ 64 MiB (issue 38)",
    );
}

/// The pod namespaces section's table.
fn namespaces(v: &Value) -> String {
    let mut t = String::from(
        "| namespaces | full read (start) | one resync pass | nothing changed | one host address dump |\n\
         | --- | --- | --- | --- | --- |\n",
    );
    for size in ["110", "1000"] {
        let n = |k: &str| num(v, &format!("/results/namespaces/nodes/{size}/{k}"));
        let _ = writeln!(
            t,
            "| {} | {} ms ({}×) | {} ms ({} of them) | {} ms | {} ms |",
            count(n("namespaces")),
            fmt(n("full_read_ms"), 2),
            fmt(n("full_to_dump_ratio"), 0),
            fmt(n("resync_pass_ms"), 2),
            count(n("resync_pass_namespaces")),
            fmt(n("unchanged_read_ms"), 2),
            fmt(n("host_address_dump_ms"), 2)
        );
    }
    t
}

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "tests unwrap to keep the stack trace")]
mod tests {
    use super::*;

    #[test]
    fn the_readme_tables_are_what_results_json_renders() {
        let root = crate::workspace_root();
        let readme = std::fs::read_to_string(root.join("bench/README.md")).unwrap();
        let results: Value =
            serde_json::from_slice(&std::fs::read(root.join("bench/results.json")).unwrap())
                .unwrap();
        let rendered = update(&readme, &results).unwrap();
        assert!(
            rendered == readme,
            "bench/README.md's tables differ from bench/results.json: run `cargo xtask bench-readme`"
        );
    }

    #[test]
    fn a_figure_the_run_did_not_measure_is_a_dash_and_counts_are_grouped() {
        let v = serde_json::json!({"results": {"scale": {"allocations_per_reconcile": 29543.4}}});
        let t = summary(&v);
        assert!(
            t.contains("| heap allocations per reconcile (unchanged) | 29,543 |"),
            "{t}"
        );
        assert!(t.contains("median — ms"), "{t}");
        assert_eq!(count(Some(999.0)), "999");
        assert_eq!(count(Some(1_000.0)), "1,000");
    }

    #[test]
    fn a_block_without_its_end_marker_is_an_error() {
        let e = update("<!-- generated:summary -->\n| old |\n", &Value::Null).unwrap_err();
        assert!(e.to_string().contains("/generated:summary"), "{e}");
    }
}
