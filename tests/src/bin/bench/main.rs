//! `cargo xtask bench ebpf`: what the classifier on `lo` costs (not a test).
//!
//! In a fresh network namespace, side by side in one run and interleaved over
//! rounds so machine noise hits every configuration alike:
//! - iperf3 TCP throughput over `lo` without the program, with it and 1 entry
//!   in SHADOWED, with 10,000 entries (traffic to an address not in the map: the
//!   common case), and with the traffic's own address in the map (every packet
//!   counted: the worst case);
//! - the program's own cost per packet from the kernel's BPF statistics
//!   (run_time / run_count, enabled with BPF_ENABLE_STATS for a separate 1 s
//!   run per configuration: they cost two clock reads per program run, so the
//!   throughput and connection-rate runs have them off, as a real node does).
#![allow(
    clippy::unwrap_used,
    clippy::print_stdout,
    clippy::too_many_lines,
    clippy::cast_precision_loss,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    reason = "a benchmark: counts far below 2^52 turned into f64 figures, each section one story"
)]

mod api;
mod audit;
mod fleet;
mod lists;
mod namespaces;
mod reaction;
mod scale;
mod services;

use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};

/// Heap allocations made by this process, for the allocations-per-reconcile figure.
pub static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

struct Counting;

// SAFETY: forwards to the system allocator, only counting calls.
unsafe impl std::alloc::GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, AtomicOrdering::Relaxed);
        // SAFETY: the caller upholds GlobalAlloc's contract.
        unsafe { std::alloc::System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        // SAFETY: as above.
        unsafe { std::alloc::System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, AtomicOrdering::Relaxed);
        // SAFETY: as above.
        unsafe { std::alloc::System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

use std::{
    collections::BTreeSet,
    net::{IpAddr, Ipv4Addr},
    path::PathBuf,
    process::{Child, Stdio},
    time::Duration,
};

use ipshadow::ebpf::{AttachMode, Floor, Observer, Ownership};
use ipshadow_tests::{agent::AgentProc, netns::NetNs};
use serde_json::{Value, json};

const ROUNDS: usize = 3;
const SECONDS: u32 = 3;
/// The connection rate spreads more from run to run than throughput does.
const CONNECTION_ROUNDS: usize = 9;
const PORT: &str = "5201";
const TARGET: &str = "10.244.4.251";

#[derive(Clone, Copy, Debug, PartialEq)]
enum Config {
    Without,
    Floor,
    OneEntry,
    Thousand,
    TenThousand,
    HundredThousand,
    TargetShadowed,
}

impl Config {
    const ALL: [Self; 7] = [
        Self::Without,
        Self::Floor,
        Self::OneEntry,
        Self::Thousand,
        Self::TenThousand,
        Self::HundredThousand,
        Self::TargetShadowed,
    ];
    fn label(self) -> &'static str {
        match self {
            Self::Without => "without program",
            Self::Floor => "empty classifier (floor)",
            Self::OneEntry => "program, 1 entry (miss)",
            Self::Thousand => "program, 1,000 entries (miss)",
            Self::HundredThousand => "program, 100,000 entries (miss)",
            Self::TenThousand => "program, 10,000 entries (miss)",
            Self::TargetShadowed => "program, 10,000 entries, target shadowed (hit)",
        }
    }
    fn key(self) -> &'static str {
        match self {
            Self::Without => "without",
            Self::Floor => "floor",
            Self::OneEntry => "one_entry",
            Self::Thousand => "thousand_entries",
            Self::HundredThousand => "hundred_thousand_entries",
            Self::TenThousand => "ten_thousand_entries",
            Self::TargetShadowed => "target_shadowed",
        }
    }
}

fn filler(n: u32) -> BTreeSet<IpAddr> {
    (0..n)
        .map(|i| {
            IpAddr::V4(Ipv4Addr::new(
                10,
                128 + (i >> 16) as u8,
                (i >> 8) as u8,
                i as u8,
            ))
        })
        .collect()
}

fn iperf_server(ns: &NetNs) -> Child {
    let child = ns
        .command("iperf3")
        .args(["-s", "-p", PORT, "--bind", TARGET])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    child
}

/// One iperf3 run of `seconds` to TARGET; bits per second received.
fn iperf(ns: &NetNs, seconds: u32) -> f64 {
    let out = ns
        .command("iperf3")
        .args(["-c", TARGET, "-p", PORT, "-t", &seconds.to_string(), "-J"])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "iperf3 output is not JSON ({e}): {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    v["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .unwrap_or_else(|| panic!("no throughput in iperf3 output: {v}"))
}

/// Short TCP connections per second to a listener on 127.0.0.1 in `ns`, for `secs`.
fn connects_per_second(ns: &NetNs, secs: f64) -> f64 {
    let _inside = ns.enter();
    let addr: std::net::SocketAddr = "127.0.0.1:7001".parse().unwrap();
    let start = std::time::Instant::now();
    let mut n = 0u64;
    while start.elapsed().as_secs_f64() < secs {
        // Lock-step: wait for the server to close, so the listen backlog never
        // overflows (a dropped SYN costs a 1 s retransmit and swamps the figure).
        if let Ok(mut c) = std::net::TcpStream::connect(addr) {
            abort_on_close(&c);
            let _ = std::io::Read::read(&mut c, &mut [0u8; 1]);
            n += 1;
        }
    }
    n as f64 / start.elapsed().as_secs_f64()
}

/// SO_LINGER 0: close with a RST, so no TIME_WAIT piles up and later runs do
/// not pay for earlier ones (the order of configurations must not matter).
fn abort_on_close(s: &std::net::TcpStream) {
    use std::os::fd::AsRawFd as _;
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: a valid socket fd and a correctly sized option value.
    unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&raw const linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        );
    }
}

/// Connection rate without any classifier, with the empty one (the cost of
/// the hook itself) and with ours (10,000 entries), interleaved.
fn connection_rate(ns: &NetNs) -> serde_json::Value {
    let name = ns.name.clone();
    std::thread::spawn(move || {
        let _inside = ipshadow_tests::netns::enter_named(&name);
        let l = std::net::TcpListener::bind("127.0.0.1:7001").unwrap();
        for c in l.incoming().flatten() {
            abort_on_close(&c);
        }
    });
    std::thread::sleep(Duration::from_millis(200));
    let (mut without, mut floor, mut with) = (Vec::new(), Vec::new(), Vec::new());
    // Warm up, then interleave.
    connects_per_second(ns, 1.0);
    for _ in 0..CONNECTION_ROUNDS {
        without.push(connects_per_second(ns, 2.0));
        let empty = {
            let _inside = ns.enter();
            Floor::attach("lo", AttachMode::Auto).unwrap()
        };
        floor.push(connects_per_second(ns, 2.0));
        drop(empty);
        let observer = {
            let _inside = ns.enter();
            let mut o = Observer::load().unwrap();
            o.attach("lo", AttachMode::Auto, Ownership::Shared).unwrap();
            o.sync(&filler(10_000)).unwrap();
            o
        };
        with.push(connects_per_second(ns, 2.0));
        drop(observer);
    }
    let (a, f, b) = (
        median(&mut without.clone()),
        median(&mut floor.clone()),
        median(&mut with.clone()),
    );
    println!(
        "\nshort TCP connections over lo ({CONNECTION_ROUNDS} rounds x 2 s, medians): {a:.0}/s without, \
         {f:.0}/s with the empty classifier (ratio {:.3}), {b:.0}/s with ipshadow's (10,000 entries): \
         ratio {:.3} to without, {:.3} to the empty one",
        f / a,
        b / a,
        b / f
    );
    json!({
        "without_per_second": a,
        "floor_per_second": f,
        "with_per_second": b,
        "ratio": b / a,
        "floor_ratio": f / a,
        "ratio_to_floor": b / f,
        "without_runs": without,
        "floor_runs": floor,
        "with_runs": with,
    })
}

/// The `p` quantile (0..=1) of `v`, nearest rank.
pub(crate) fn percentile(v: &[f64], p: f64) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    s[((s.len() as f64 - 1.0) * p).round() as usize]
}

pub(crate) fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("the bench loads eBPF and creates network namespaces: run it as root");
        std::process::exit(2);
    }
    let what = std::env::args().nth(1).unwrap_or_else(|| "all".to_owned());
    let out_path = std::env::args().nth(2).map_or_else(
        || {
            PathBuf::from(if what == "all" {
                "bench/results.json".to_owned()
            } else {
                format!("target/bench/{what}.json")
            })
        },
        PathBuf::from,
    );
    let started = std::time::Instant::now();
    let report = match what.as_str() {
        "all" => {
            let tmp = ipshadow_tests::TempDir::new("bench");
            ebpf(&tmp.join("ebpf.json"));
            let ebpf_json: serde_json::Value =
                serde_json::from_slice(&std::fs::read(tmp.join("ebpf.json")).unwrap()).unwrap();
            json!({
                "packet_path": ebpf_json,
                "reaction": reaction::run(),
                "scale": scale::run(),
                "namespaces": namespaces::run(),
                "api_load": api::run(),
                "fleet": fleet::run(),
                "audit": audit::run(),
                "services": services::run(),
                "lists": lists::run(),
            })
        }
        "ebpf" => {
            ebpf(&out_path);
            return;
        }
        "idle" => {
            idle(&out_path);
            return;
        }
        "reaction" => reaction::run(),
        "scale" => scale::run(),
        "namespaces" => namespaces::run(),
        "api" => api::run(),
        "fleet" => fleet::run(),
        "audit" => audit::run(),
        "services" => services::run(),
        "lists" => lists::run(),
        "connections" => connection_rate(&NetNs::new("bench")),
        other => {
            eprintln!(
                "unknown bench {other:?}: all, ebpf, idle, reaction, scale, namespaces, api, fleet, audit, services, lists or connections"
            );
            std::process::exit(2);
        }
    };
    let report = json!({
        "measured_at": std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs()),
        "kernel": std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default().trim(),
        "cpus": std::thread::available_parallelism().map_or(0, std::num::NonZero::get),
        "seconds_taken": started.elapsed().as_secs(),
        "results": report,
    });
    write_report(&out_path, &report);
}

/// Writes a bench's JSON report and says where.
fn write_report(out_path: &std::path::Path, report: &Value) {
    if let Some(dir) = out_path.parent() {
        std::fs::create_dir_all(dir).unwrap();
    }
    std::fs::write(out_path, serde_json::to_vec_pretty(report).unwrap()).unwrap();
    println!("\nwritten to {}", out_path.display());
}

/// The real agent in `ns` reading these files, left alone for `idle` once
/// ready (and 2 s more to settle): the CPU seconds it used meanwhile and its
/// RSS at the end, in KiB.
pub(crate) fn agent_at_rest(
    ns: &NetNs,
    pods: &std::path::Path,
    cns: &std::path::Path,
    idle: Duration,
) -> (f64, u64) {
    let agent = AgentProc::spawn(
        ns,
        &[
            "--node",
            "node-a",
            "--pods",
            pods.to_str().unwrap(),
            "--ciliumnodes",
            cns.to_str().unwrap(),
            "--log-level",
            "warn",
        ],
    );
    agent.wait_ready(ns);
    std::thread::sleep(Duration::from_secs(2));
    let pid = agent.pid();
    let cpu0 = cpu_seconds(pid);
    eprintln!("agent ready (pid {pid}); idle for {idle:?} …");
    std::thread::sleep(idle);
    (cpu_seconds(pid) - cpu0, rss_kib(pid))
}

/// CPU time (user + system) of `pid` in seconds, from /proc/<pid>/stat.
pub(crate) fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the parenthesised command name; utime and stime are the 14th and 15th.
    let rest = stat.rsplit_once(')').unwrap().1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap();
    // SAFETY: sysconf has no preconditions.
    ticks / unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64
}

pub(crate) fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// The agent on an idle simulated node with 100 pods (veths on the node, as
/// kube-ovn lays them on br-int) and a collision, for 60 s: CPU and memory.
fn idle(out_path: &std::path::Path) {
    use ipshadow_tests::{
        node::SimNode,
        objects::{cilium_node, pod, write_list},
    };
    const PODS: usize = 100;
    const SECONDS: u64 = 60;
    let sim = SimNode::kube_ovn("idle", TARGET);
    let mut pods = Vec::new();
    for i in 0..PODS {
        let host = format!("p{i}h");
        sim.node.add_veth(&host, &format!("p{i}c"));
        sim.node.ip(&["link", "set", &host, "up"]);
        let ip = format!("10.244.{}.{}", 10 + i / 200, 10 + i % 200);
        pods.push(pod("tenant", &format!("pod-{i}"), "node-a", &[ip.as_str()]));
    }
    pods.push(pod("tenant", "postgres-0", "node-a", &[TARGET]));
    let dir = ipshadow_tests::TempDir::new("bench-idle");
    let pods_file = dir.join("pods.json");
    let cns_file = dir.join("cns.json");
    write_list(&pods_file, pods);
    write_list(&cns_file, vec![cilium_node("node-a", TARGET, None, None)]);
    let (cpu, rss) = agent_at_rest(
        &sim.node,
        &pods_file,
        &cns_file,
        Duration::from_secs(SECONDS),
    );
    let percent = cpu / SECONDS as f64 * 100.0;
    println!(
        "
agent idle on a node with {PODS} pods and 1 collision, {SECONDS} s:"
    );
    println!("  CPU  {cpu:.3} s = {percent:.3} % of one core");
    println!("  RSS  {:.1} MiB", rss as f64 / 1024.0);
    let report = json!({
        "bench": "idle",
        "pods": PODS,
        "seconds": SECONDS,
        "cpu_seconds": cpu,
        "cpu_percent_of_one_core": percent,
        "rss_kib": rss,
    });
    write_report(out_path, &report);
}

fn ebpf(out_path: &std::path::Path) {
    let ns = NetNs::new("bench");
    ns.add_router_device(TARGET);
    let mut server = iperf_server(&ns);
    let target: IpAddr = TARGET.parse().unwrap();

    let mut throughput: Vec<Vec<f64>> = vec![Vec::new(); Config::ALL.len()];
    let mut ns_per_packet: Vec<Vec<f64>> = vec![Vec::new(); Config::ALL.len()];
    for round in 0..ROUNDS {
        for (i, config) in Config::ALL.into_iter().enumerate() {
            let mut probe: Option<Box<dyn FnMut() -> (u64, Duration)>> = match config {
                Config::Without => None,
                Config::Floor => {
                    let _inside = ns.enter();
                    let mut f = Floor::attach("lo", AttachMode::Auto).unwrap();
                    Some(Box::new(move || {
                        let st = f.program_stats().unwrap();
                        (st.run_count, st.run_time)
                    }))
                }
                _ => {
                    let _inside = ns.enter();
                    let mut o = Observer::load().unwrap();
                    o.attach("lo", AttachMode::Auto, Ownership::Shared).unwrap();
                    let mut want = match config {
                        Config::OneEntry => filler(1),
                        Config::Thousand => filler(1_000),
                        Config::HundredThousand => filler(100_000),
                        _ => filler(10_000),
                    };
                    if config == Config::TargetShadowed {
                        want.insert(target);
                    }
                    o.sync(&want).unwrap();
                    Some(Box::new(move || {
                        let st = o.program_stats().unwrap();
                        (st.run_count, st.run_time)
                    }))
                }
            };
            // Throughput as on a real node: the kernel's run-time statistics off.
            let bps = iperf(&ns, SECONDS);
            // Then the cost per packet, which needs them (two clock reads per
            // program run, so they are on for this shorter run only).
            if let Some(p) = probe.as_mut() {
                let stats = aya::sys::enable_stats(aya::sys::Stats::RunTime).unwrap();
                let (cnt0, t0) = p();
                iperf(&ns, 1);
                let (cnt1, t1) = p();
                drop(stats);
                let runs = cnt1.saturating_sub(cnt0).max(1);
                ns_per_packet[i].push((t1.saturating_sub(t0)).as_nanos() as f64 / runs as f64);
            }
            // Detaches.
            drop(probe);
            throughput[i].push(bps);
            eprintln!(
                "round {}/{ROUNDS}: {:<48} {:>8.2} Gbit/s",
                round + 1,
                config.label(),
                bps / 1e9
            );
        }
    }
    let _ = server.kill();
    let _ = server.wait();
    let conn = connection_rate(&ns);

    let base = median(&mut throughput[0].clone());
    println!("\neBPF classifier on lo: iperf3 TCP over lo, {ROUNDS} rounds × {SECONDS} s, medians");
    println!(
        "{:<48} {:>12} {:>10} {:>14}",
        "configuration", "Gbit/s", "ratio", "ns/packet"
    );
    let mut results = serde_json::Map::new();
    for (i, config) in Config::ALL.into_iter().enumerate() {
        let bps = median(&mut throughput[i].clone());
        let cost = (!ns_per_packet[i].is_empty()).then(|| median(&mut ns_per_packet[i].clone()));
        println!(
            "{:<48} {:>12.2} {:>10.3} {:>14}",
            config.label(),
            bps / 1e9,
            bps / base,
            cost.map_or_else(|| "-".to_owned(), |c| format!("{c:.1}"))
        );
        results.insert(
            config.key().to_owned(),
            json!({
                "label": config.label(),
                "throughput_bits_per_second_median": bps,
                "throughput_ratio_to_without": bps / base,
                "ns_per_packet_median": cost,
                "throughput_bits_per_second_runs": throughput[i],
                "ns_per_packet_runs": ns_per_packet[i],
            }),
        );
    }
    let report = json!({
        "bench": "ebpf",
        "rounds": ROUNDS,
        "seconds_per_run": SECONDS,
        "kernel": std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default().trim(),
        "cpus": std::thread::available_parallelism().map_or(0, std::num::NonZero::get),
        "results": results,
        "connection_rate": conn,
    });
    write_report(out_path, &report);
}
