//! `--metrics-auth kubernetes` as deploy/metrics-auth sets it up, against the
//! test API server: TLS from files, every scraper's token reviewed
//! (TokenReview + SubjectAccessReview), answers cached, reviews rate-limited,
//! a real Prometheus scraping with the ServiceMonitor's settings, a rotated
//! certificate picked up, the overlay's RBAC exactly what the agent asks, and
//! the pods' names in the scrapes it reviewed (`--metrics-names`).
#![allow(
    clippy::unwrap_used,
    clippy::too_many_lines,
    reason = "tests unwrap to keep the stack trace; end-to-end scenarios read top to bottom"
)]

use std::{
    fmt::Write as _,
    net::SocketAddr,
    path::Path,
    process::{Child, Stdio},
    time::{Duration, Instant},
};

use ipshadow::kube::review::limits::{PEER_REVIEW_BURST, PEER_REVIEWS_PER_MINUTE};

use ipshadow_tests::{
    HANG,
    agent::AgentProc,
    apiserver::{ApiServer, Res},
    can_run_netns_tests, deploy, figure,
    http::{get, sample},
    lab::{Lab, ME, ROUTER, cozystack, wait_for},
    netns::NetNs,
    node::SimNode,
    objects::pod,
};
use serde_json::Value;

const HEALTH: &str = "127.0.0.1:9786";
const PROMETHEUS: &str = "127.0.0.1:9790";

// The clients, each from an address of its own (all of 127/8 is local): the
// agent counts the reviews it asks for per peer.
const PROM: &str = "127.0.0.1";
const PROM_REPLICA: &str = "127.0.0.5";
const TENANT: &str = "127.0.0.3";
const STRANGER: &str = "127.0.0.4";
const FLOODER: &str = "127.0.0.2";

/// The curl options that GET `path` over TLS from `from` as `server` (resolved
/// to the agent's loopback listener), trusting `ca`, with `token`.
fn curl_args(from: &str, server: &str, ca: &Path, token: Option<&str>, path: &str) -> Vec<String> {
    let listen: SocketAddr = AgentProc::addr();
    let mut args = vec![
        "--interface".to_owned(),
        from.to_owned(),
        "--cacert".to_owned(),
        ca.display().to_string(),
        "--resolve".to_owned(),
        format!("{server}:{}:{}", listen.port(), listen.ip()),
    ];
    if let Some(t) = token {
        args.extend(["-H".to_owned(), format!("Authorization: Bearer {t}")]);
    }
    // Last, alone: option and value pairs come before it.
    args.push(format!("https://{server}:{}{path}", listen.port()));
    args
}

/// GET `path` as [`curl_args`] says: the status (0 when no HTTP answer) and body.
fn scrape(
    ns: &NetNs,
    from: &str,
    (server, ca): (&str, &Path),
    token: Option<&str>,
    path: &str,
) -> (u16, String) {
    let out = ns
        .command("curl")
        .args(["-sS", "--max-time", "10", "-w", "\n%{http_code}"])
        .args(curl_args(from, server, ca, token, path))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", &text));
    (code.trim().parse().unwrap_or(0), body.to_owned())
}

/// Made-up tokens from [`FLOODER`], `n` of them at `rate` (curl's `--rate`),
/// one curl on kept-alive connections; `wait` gives each answer's status.
struct Flood(Child);

impl Flood {
    fn start(ns: &NetNs, dir: &Path, (server, ca): (&str, &Path), n: usize, rate: &str) -> Self {
        let mut config = String::new();
        for i in 0..n {
            if i > 0 {
                config.push_str("next\n");
            }
            let args = curl_args(
                FLOODER,
                server,
                ca,
                Some(&format!("forged-{i}")),
                "/metrics",
            );
            for pair in args.chunks(2) {
                // A config file line per option: `name = "value"`, the URL as `url`.
                let (name, value) = match pair {
                    [url] => ("url", url),
                    [flag, value] if flag == "-H" => ("header", value),
                    [flag, value] => (flag.trim_start_matches('-'), value),
                    _ => unreachable!(),
                };
                writeln!(config, "{name} = \"{value}\"").unwrap();
            }
            config.push_str("output = \"/dev/null\"\nwrite-out = \"%{http_code}\\n\"\n");
        }
        let file = dir.join("flood.curl");
        std::fs::write(&file, config).unwrap();
        let child = ns
            .command("curl")
            .args(["-sS", "--rate", rate, "-K"])
            .arg(&file)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        Self(child)
    }

    fn wait(self) -> Vec<u16> {
        let out = self.0.wait_with_output().unwrap();
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| l.trim().parse().unwrap_or(0))
            .collect()
    }
}

/// The users deploy/metrics-auth lets read the metrics: each ServiceAccount bound
/// to a ClusterRole with nonResourceURLs, granted those URLs in the test API server.
fn grant_readers(api: &ApiServer, objects: &[Value]) -> Vec<String> {
    let mut users = Vec::new();
    for b in objects.iter().filter(|o| o["kind"] == "ClusterRoleBinding") {
        let role = deploy::cluster_role_rules(objects, b["roleRef"]["name"].as_str().unwrap());
        for rule in role.iter().filter(|r| r["nonResourceURLs"].is_array()) {
            for s in b["subjects"].as_array().unwrap() {
                let user = format!(
                    "system:serviceaccount:{}:{}",
                    s["namespace"].as_str().unwrap(),
                    s["name"].as_str().unwrap()
                );
                for url in rule["nonResourceURLs"].as_array().unwrap() {
                    for verb in rule["verbs"].as_array().unwrap() {
                        api.reviews(|r| {
                            r.grant(&user, url.as_str().unwrap(), verb.as_str().unwrap());
                        });
                    }
                }
                users.push(user);
            }
        }
    }
    users
}

/// A Prometheus scraping the agent with the ServiceMonitor endpoint's settings.
struct Prometheus(Child);

impl Prometheus {
    fn start(ns: &NetNs, dir: &Path, endpoint: &Value, ca: &Path, token_file: &Path) -> Self {
        let config = dir.join("prometheus.yml");
        let listen = AgentProc::addr();
        std::fs::write(
            &config,
            format!(
                "global: {{scrape_interval: 1s, scrape_timeout: 1s}}\n\
                 scrape_configs:\n\
                 - job_name: ipshadow\n  scheme: {scheme}\n  bearer_token_file: {token}\n  \
                 tls_config: {{ca_file: {ca}, server_name: {server}}}\n  \
                 static_configs: [{{targets: ['{listen}']}}]\n",
                scheme = endpoint["scheme"].as_str().unwrap(),
                token = token_file.display(),
                ca = ca.display(),
                server = endpoint["tlsConfig"]["serverName"].as_str().unwrap(),
            ),
        )
        .unwrap();
        let child = ns
            .command("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("tsdb").display()
            ))
            .arg(format!("--web.listen-address={PROMETHEUS}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        Self(child)
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn scrapes_are_served_only_to_users_the_api_server_allows() {
    if !can_run_netns_tests("scrapes_are_served_only_to_users_the_api_server_allows") {
        return;
    }
    let objects = deploy::manifests_of("metrics-auth");
    let monitor = deploy::object(&objects, "ServiceMonitor", "ipshadow");
    let endpoint = &monitor["spec"]["endpoints"][0];
    assert_eq!(endpoint["scheme"], "https");
    let server = endpoint["tlsConfig"]["serverName"]
        .as_str()
        .unwrap()
        .to_owned();
    let certificate = deploy::object(&objects, "Certificate", "ipshadow-metrics");
    assert!(
        certificate["spec"]["dnsNames"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n == server.as_str()),
        "the certificate does not name the ServiceMonitor's serverName {server}"
    );

    let sim = SimNode::kube_ovn("mauth", ROUTER);
    let api = ApiServer::start(Some(&sim.node));
    cozystack(&api);
    let readers = grant_readers(&api, &objects);
    assert_eq!(readers, ["system:serviceaccount:monitoring:prometheus-k8s"]);
    let prometheus_user = &readers[0];
    api.reviews(|r| {
        r.token(
            "prom",
            prometheus_user,
            &["system:serviceaccounts", "system:authenticated"],
        );
        for replica in ["prom-2", "prom-3"] {
            r.token(
                replica,
                prometheus_user,
                &["system:serviceaccounts", "system:authenticated"],
            );
        }
        r.token(
            "nosy",
            "system:serviceaccount:tenant:default",
            &["system:serviceaccounts"],
        );
    });
    let lab = Lab::new("mauth", &api);
    let (cert, key) = ipshadow_tests::lab::self_signed(&lab.dir, "first", &server);
    // Where the DaemonSet patch mounts the Secret, in this test's directory.
    let daemonset = deploy::object(&objects, "DaemonSet", "ipshadow");
    let env = daemonset["spec"]["template"]["spec"]["containers"][0]["env"]
        .as_array()
        .unwrap();
    let env_of = |k: &str| {
        env.iter()
            .find(|e| e["name"] == k)
            .and_then(|e| e["value"].as_str())
            .unwrap_or_else(|| panic!("{k} not set by deploy/metrics-auth"))
    };
    assert_eq!(env_of("IPSHADOW_METRICS_AUTH"), "kubernetes");
    assert!(env_of("IPSHADOW_TLS_CERT_FILE").ends_with("tls.crt"));
    let agent = lab.agent_with(
        &sim.node,
        ME,
        &[
            "--health-listen",
            HEALTH,
            "--metrics-auth",
            "kubernetes",
            "--tls-cert-file",
            cert.to_str().unwrap(),
            "--tls-key-file",
            key.to_str().unwrap(),
        ],
    );
    wait_for("the agent ready on its health listener", HANG, || {
        let _inside = sim.node.enter();
        matches!(get(HEALTH.parse().unwrap(), "/readyz"), Ok((200, _))).then_some(())
    });
    let reviews = || api.counts().reviews;

    let tls = (server.as_str(), cert.as_path());
    let as_ = |from: &str, token: Option<&str>| scrape(&sim.node, from, tls, token, "/metrics");

    // No token: refused without asking the API server.
    let (code, body) = as_(STRANGER, None);
    assert_eq!(code, 401, "{body}\n{}", agent.log_text());
    assert_eq!(reviews(), 0);
    // Plain HTTP on the TLS port gets no answer.
    {
        let _inside = sim.node.enter();
        assert!(!matches!(get(AgentProc::addr(), "/metrics"), Ok((200, _))));
    }
    // A user the API server knows, without the grant: 403 naming the user and the fix.
    let (code, body) = as_(TENANT, Some("nosy"));
    assert_eq!(code, 403, "{body}");
    assert!(
        body.contains("system:serviceaccount:tenant:default") && body.contains("nonResourceURLs"),
        "{body}"
    );
    assert_eq!(reviews(), 2, "one TokenReview and one SubjectAccessReview");
    // Prometheus's service account: served; the next scrapes cost the API server nothing.
    let (code, body) = as_(PROM, Some("prom"));
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("ipshadow_collisions"), "{body}");
    let after_first = reviews();
    assert_eq!(after_first, 4);
    for _ in 0..5 {
        assert_eq!(as_(PROM, Some("prom")).0, 200);
    }
    // A made-up token: rejected, and rejected again from the cache; the API
    // server's reason is not told.
    let (code, body) = as_(STRANGER, Some("made-up"));
    assert_eq!(code, 401);
    assert!(!body.contains("invalid bearer token"), "{body}");
    assert_eq!(as_(STRANGER, Some("made-up")).0, 401);
    assert_eq!(reviews(), after_first + 1);
    // The probes' loopback listener stays plain and open.
    {
        let _inside = sim.node.enter();
        assert_eq!(get(HEALTH.parse().unwrap(), "/healthz").unwrap().0, 200);
    }

    // The API server fails: the cached scraper is still served, a new token is 503, not 200.
    api.fail_next(1_000, 500);
    assert_eq!(as_(PROM, Some("prom")).0, 200);
    let (code, body) = as_(PROM_REPLICA, Some("prom-2"));
    assert_eq!((code, body.as_str()), (503, "authentication unavailable\n"));
    // The detail goes to the agent's log.
    let log = agent.log_text();
    assert!(
        log.contains("cannot review a scrape's token") && log.contains("injected fault"),
        "{log}"
    );
    api.fail_next(0, 500);
    assert_eq!(as_(PROM_REPLICA, Some("prom-2")).0, 200);

    // Made-up tokens from one peer, 20 a second: the agent asks the API server
    // at most that peer's burst and rate, answers the rest 429, and the other
    // peers' reviews stay theirs — a new token of the second Prometheus replica
    // is reviewed and served in the middle of the flood.
    // Before any of the flood's requests: no review of it can come sooner.
    let began = Instant::now();
    let flood = Flood::start(&sim.node, &lab.dir, tls, 200, "20/s");
    let throttled = |metrics: &str| {
        sample(
            metrics,
            "ipshadow_http_auth_total",
            &[("result", "throttled")],
        )
        .unwrap_or(0.0)
    };
    wait_for("the flood refused past its peer's budget", HANG, || {
        let (code, metrics) = as_(PROM, Some("prom"));
        (code == 200 && throttled(&metrics) >= 40.0).then_some(())
    });
    let (code, body) = as_(PROM_REPLICA, Some("prom-3"));
    assert_eq!(code, 200, "a new token during the flood: {body}");
    let codes = flood.wait();
    let flood_took = began.elapsed();
    let refused = codes.iter().filter(|c| **c == 429).count();
    assert_eq!(codes.len(), 200);
    assert!(codes.iter().all(|c| *c == 401 || *c == 429), "{codes:?}");
    // The peer's budget, counted where the reviews land: its burst at once,
    // then one more per refill period. So the n-th review of a forged token
    // reached the API server no sooner than n - burst periods after the flood
    // began (both instants the test's: `began` before the first request, the
    // server's on each review's arrival, after the agent chose to ask). A slow
    // machine only spreads the reviews further apart; only an agent that asks
    // beyond the budget brings one sooner.
    let forged: Vec<Instant> = api
        .counts()
        .token_reviews
        .iter()
        .filter(|(_, token)| token.starts_with("forged-"))
        .map(|(at, _)| *at)
        .collect();
    let asked = forged.len();
    assert!(
        asked > 0,
        "no forged token was reviewed (each is 401 first)"
    );
    let burst = PEER_REVIEW_BURST as usize;
    let period = Duration::from_mins(1) / PEER_REVIEWS_PER_MINUTE;
    for (i, at) in forged.iter().enumerate().skip(burst) {
        let periods = u32::try_from(i + 1 - burst).unwrap();
        assert!(
            *at >= began + period * periods,
            "review {} of a forged token came {:?} after the flood began: \
             past a budget of {burst} then one per {period:?}",
            i + 1,
            at.duration_since(began)
        );
    }
    figure(format!(
        "200 forged tokens from one peer in {:.1} s: {asked} TokenReviews, {refused} answered \
         429; a new token from another peer served during the flood",
        flood_took.as_secs_f64()
    ));

    // A real Prometheus with the ServiceMonitor's settings scrapes it.
    let token_file = lab.dir.join("token");
    std::fs::write(&token_file, "prom").unwrap();
    let prometheus = Prometheus::start(&sim.node, &lab.dir, endpoint, &cert, &token_file);
    let targets = wait_for("Prometheus's target up", HANG, || {
        let _inside = sim.node.enter();
        let (code, body) = get(PROMETHEUS.parse().unwrap(), "/api/v1/targets").ok()?;
        (code == 200 && body.contains("\"health\":\"up\"")).then_some(body)
    });
    assert!(targets.contains("https://"), "{targets}");
    drop(prometheus);

    // cert-manager rotates the Secret: new connections get the new certificate.
    let (new_cert, new_key) = ipshadow_tests::lab::self_signed(&lab.dir, "second", &server);
    let swap = |from: &Path, to: &Path| {
        let tmp = to.with_extension("tmp");
        std::fs::copy(from, &tmp).unwrap();
        std::fs::rename(&tmp, to).unwrap();
    };
    let original_ca = lab.dir.join("first-ca.crt");
    std::fs::copy(&cert, &original_ca).unwrap();
    swap(&new_key, &key);
    swap(&new_cert, &cert);
    let rotated = Instant::now();
    wait_for("the rotated certificate served", HANG, || {
        let tls = (server.as_str(), new_cert.as_path());
        (scrape(&sim.node, PROM, tls, Some("prom"), "/metrics").0 == 200).then_some(())
    });
    assert_eq!(
        scrape(
            &sim.node,
            PROM,
            (&server, &original_ca),
            Some("prom"),
            "/metrics"
        )
        .0,
        0
    );
    figure(format!(
        "rotated certificate served after {:.1} s",
        rotated.elapsed().as_secs_f64()
    ));

    let (_, metrics) = scrape(
        &sim.node,
        PROM,
        (&server, &new_cert),
        Some("prom"),
        "/metrics",
    );
    for (result, at_least) in [
        ("allowed", 9.0),
        ("unauthenticated", 3.0),
        ("forbidden", 1.0),
        ("unavailable", 1.0),
        ("throttled", 1.0),
    ] {
        let n = sample(&metrics, "ipshadow_http_auth_total", &[("result", result)]).unwrap_or(0.0);
        assert!(n >= at_least, "{result}: {n}");
    }

    // The overlay's RBAC: every request allowed, and its two review rules used.
    let mut rules = deploy::cluster_role_rules(&objects, "ipshadow");
    let auth_rules = deploy::cluster_role_rules(&objects, "ipshadow-metrics-auth");
    rules.extend(auth_rules.iter().cloned());
    let used = deploy::used_and_allowed(&api.counts().log, &rules);
    let unused: Vec<_> = deploy::granted(&auth_rules)
        .difference(&used)
        .cloned()
        .collect();
    assert!(unused.is_empty(), "granted but never used: {unused:?}");
}

#[test]
fn with_audiences_only_tokens_issued_for_them_are_served() {
    if !can_run_netns_tests("with_audiences_only_tokens_issued_for_them_are_served") {
        return;
    }
    let sim = SimNode::kube_ovn("maud", ROUTER);
    let api = ApiServer::start(Some(&sim.node));
    cozystack(&api);
    let user = "system:serviceaccount:monitoring:prometheus-k8s";
    let groups = ["system:serviceaccounts", "system:authenticated"];
    api.reviews(|r| {
        r.grant(user, "/metrics", "get");
        // A projected token with `audience: ipshadow`, and the pod's default one.
        r.token_for("scoped", user, &groups, &["ipshadow"]);
        r.token("api-token", user, &groups);
    });
    let lab = Lab::new("maud", &api);
    let server = "ipshadow-metrics.ipshadow-system.svc";
    let (cert, key) = ipshadow_tests::lab::self_signed(&lab.dir, "aud", server);
    let agent = lab.agent_with(
        &sim.node,
        ME,
        &[
            "--health-listen",
            HEALTH,
            "--metrics-auth",
            "kubernetes",
            "--metrics-auth-audiences",
            "ipshadow,https://ipshadow.example",
            "--tls-cert-file",
            cert.to_str().unwrap(),
            "--tls-key-file",
            key.to_str().unwrap(),
        ],
    );
    wait_for("the agent ready on its health listener", HANG, || {
        let _inside = sim.node.enter();
        matches!(get(HEALTH.parse().unwrap(), "/readyz"), Ok((200, _))).then_some(())
    });
    let tls = (server, cert.as_path());
    let (code, body) = scrape(&sim.node, PROM, tls, Some("scoped"), "/metrics");
    assert_eq!(code, 200, "{body}\n{}", agent.log_text());
    // The token the API server takes too is refused: an agent (or whoever
    // reaches its port) cannot replay what it is sent against the API server.
    let (code, body) = scrape(&sim.node, PROM, tls, Some("api-token"), "/metrics");
    assert_eq!(
        (code, body.as_str()),
        (401, "Unauthorized: the token was not accepted\n")
    );
    assert_eq!(
        api.counts().reviews,
        3,
        "two TokenReviews, one SubjectAccessReview"
    );
}

#[test]
fn metrics_auth_refuses_to_start_without_tls_or_with_a_bad_certificate() {
    if !can_run_netns_tests("metrics_auth_refuses_to_start_without_tls_or_with_a_bad_certificate") {
        return;
    }
    let sim = SimNode::kube_ovn("mauthbad", ROUTER);
    let api = ApiServer::start(Some(&sim.node));
    cozystack(&api);
    let lab = Lab::new("mauthbad", &api);
    let garbage = lab.dir.join("garbage.crt");
    std::fs::write(&garbage, "not a certificate\n").unwrap();
    let (_, key) =
        ipshadow_tests::lab::self_signed(&lab.dir, "ok", "ipshadow-metrics.ipshadow-system.svc");
    for (args, says) in [
        (
            vec!["--metrics-auth", "kubernetes"],
            vec!["needs TLS", "--tls-cert-file"],
        ),
        (
            vec![
                "--tls-cert-file",
                garbage.to_str().unwrap(),
                "--tls-key-file",
                key.to_str().unwrap(),
            ],
            vec![garbage.to_str().unwrap(), "--tls-cert-file"],
        ),
        (
            vec!["--metrics-auth-audiences", "ipshadow"],
            vec!["--metrics-auth-audiences", "--metrics-auth kubernetes"],
        ),
    ] {
        let mut all = vec!["--health-listen", HEALTH];
        all.extend(args.iter().copied());
        let mut agent = lab.agent_with(&sim.node, ME, &all);
        let status = agent.exited_within(HANG).unwrap_or_else(|| {
            panic!(
                "the agent kept running with {args:?}:\n{}",
                agent.log_text()
            )
        });
        assert!(!status.success());
        let log = agent.log_text();
        for s in says {
            assert!(log.contains(s), "{args:?}: {s:?} not in\n{log}");
        }
    }
}

#[test]
fn reviewed_scrapes_read_the_pods_names_by_default_and_never_with_never() {
    if !can_run_netns_tests("reviewed_scrapes_read_the_pods_names_by_default_and_never_with_never")
    {
        return;
    }
    let sim = SimNode::kube_ovn("mnamed", ROUTER);
    let api = ApiServer::start(Some(&sim.node));
    cozystack(&api);
    api.apply(Res::Pods, pod("tenant", "postgres-0", ME, &[ROUTER]));
    let user = "system:serviceaccount:monitoring:prometheus-k8s";
    api.reviews(|r| {
        r.grant(user, "/metrics", "get");
        r.token(
            "prom",
            user,
            &["system:serviceaccounts", "system:authenticated"],
        );
    });
    let lab = Lab::new("mnamed", &api);
    let server = "ipshadow-metrics.ipshadow-system.svc";
    let (cert, key) = ipshadow_tests::lab::self_signed(&lab.dir, "named", server);
    let tls = (server, cert.as_path());
    let kubeconfig = lab.kubeconfig.to_str().unwrap().to_owned();
    let mut args = vec![
        "--node",
        ME,
        "--health-listen",
        HEALTH,
        "--metrics-auth",
        "kubernetes",
        "--tls-cert-file",
        cert.to_str().unwrap(),
        "--tls-key-file",
        key.to_str().unwrap(),
    ];
    // The agent as shipped (no --metrics-names), then with `never`.
    for (extra, named) in [(None, true), (Some("never"), false)] {
        if let Some(names) = extra {
            args.extend(["--metrics-names", names]);
        }
        let agent =
            AgentProc::spawn_as_shipped(&sim.node, &args, &[("KUBECONFIG", kubeconfig.as_str())]);
        let body = wait_for("the finding in a reviewed scrape", HANG, || {
            let (code, body) = scrape(&sim.node, PROM, tls, Some("prom"), "/metrics");
            (code == 200 && body.contains(&format!("ip=\"{ROUTER}\""))).then_some(body)
        });
        let finding = sample(
            &body,
            "ipshadow_collision_info",
            &[("kind", "RouterIPCollision"), ("ip", ROUTER)],
        );
        assert_eq!(finding, Some(1.0), "{extra:?}: {body}");
        let names = sample(
            &body,
            "ipshadow_collision_info",
            &[("namespace", "tenant"), ("pod", "postgres-0")],
        );
        assert_eq!(
            names.is_some(),
            named,
            "--metrics-names {extra:?}: {body}\n{}",
            agent.log_text()
        );
        let (status, _) = agent.terminate();
        assert!(status.success());
    }
}
