//! The HTTP endpoints' flags.

use std::net::SocketAddr;

use super::{MetricsAuth, MetricsNames};

/// Where the agent listens by default: a port none of Cilium (4240, 4244, 9234,
/// 9876-9879, 9890-9893, 9962-9965), kube-ovn (8080, 10660-10665), the kubelet and
/// kube-proxy (10248-10256) or node-exporter (9100) use on the host network.
pub const DEFAULT_LISTEN: &str = "0.0.0.0:9785";
/// Where kubelet's probes reach the agent by default: loopback, which in the
/// host network only the node itself reaches.
pub const DEFAULT_HEALTH_LISTEN: &str = "127.0.0.1:9786";

/// The HTTP endpoints' flags.
#[derive(Debug, clap::Args)]
#[group(id = "http")]
pub struct Args {
    /// Address of /metrics (and /healthz, /readyz), `host:port` (an IPv6 address may come
    /// without brackets). The manifest binds the node's own address (status.hostIP).
    #[arg(long, env = "IPSHADOW_LISTEN", default_value = DEFAULT_LISTEN, value_parser = listen_addr)]
    pub listen: SocketAddr,
    /// Address of /healthz and /readyz alone, for kubelet's probes (the same as --listen: one
    /// listener serves all three).
    #[arg(long, env = "IPSHADOW_HEALTH_LISTEN", default_value = DEFAULT_HEALTH_LISTEN,
          value_parser = listen_addr)]
    pub health_listen: SocketAddr,
    /// Connections served at once per listener (1-4096); more are closed as they come.
    #[arg(long, env = "IPSHADOW_HTTP_MAX_CONNECTIONS", default_value_t = 64,
          value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub http_max_connections: u32,
    /// Connections one client address may hold at once on --listen (1-4096), so that no
    /// client takes all of --http-max-connections; its next ones are closed as
    /// they come. The health listener (loopback: one client) has the total only.
    #[arg(long, env = "IPSHADOW_HTTP_MAX_CONNECTIONS_PER_PEER", default_value_t = 8,
          value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub http_max_connections_per_peer: u32,
    /// Seconds a client has to send a request's headers and to finish a TLS handshake;
    /// also how long an idle keep-alive connection stays open (1-300).
    #[arg(long, env = "IPSHADOW_HTTP_HEADER_TIMEOUT_SECONDS", default_value_t = 5,
          value_parser = clap::value_parser!(u64).range(1..=300))]
    pub http_header_timeout_seconds: u64,
    /// Who may read --listen: `off` (whoever reaches it), or `kubernetes` (a bearer
    /// token the API server authenticates, whose user may `get` the path, as
    /// kube-rbac-proxy checks; needs TLS). The health listener stays open: loopback.
    #[arg(long, env = "IPSHADOW_METRICS_AUTH", value_enum, default_value_t = MetricsAuth::Off)]
    pub metrics_auth: MetricsAuth,
    /// Which scrapes of --listen read the names tenants chose (a pod's namespace and name,
    /// the `namespace` and `pod` labels): `authenticated` (only those that passed
    /// --metrics-auth kubernetes; with it off, none), `always` (whoever reaches --listen,
    /// and every pod reaches the node's address: for single-tenant clusters) or `never`.
    /// Without them a series keeps its address, kind and owner.
    #[arg(long, env = "IPSHADOW_METRICS_NAMES", value_enum,
          default_value_t = MetricsNames::Authenticated)]
    pub metrics_names: MetricsNames,
    /// With `--metrics-auth kubernetes`, accept only tokens issued for one of these
    /// audiences (comma-separated, at most 16): the TokenReview asks for them and the
    /// API server must answer with one, as kube-rbac-proxy's --auth-token-audiences.
    /// None: tokens for the API server's own audience, valid against it too.
    #[arg(long, env = "IPSHADOW_METRICS_AUTH_AUDIENCES", value_parser = audiences)]
    pub metrics_auth_audiences: Option<Audiences>,
    /// Serve --listen over TLS with this PEM certificate (chain), read again when it
    /// changes (a mounted Secret rotated by cert-manager).
    #[arg(long, env = "IPSHADOW_TLS_CERT_FILE", requires = "tls_key_file")]
    pub tls_cert_file: Option<std::path::PathBuf>,
    /// The PEM private key of --tls-cert-file.
    #[arg(long, env = "IPSHADOW_TLS_KEY_FILE", requires = "tls_cert_file")]
    pub tls_key_file: Option<std::path::PathBuf>,
}

/// `host:port`, and an IPv6 address without brackets too: what the manifest's
/// `$(HOST_IP):9785` becomes on an IPv6 node.
fn listen_addr(s: &str) -> Result<SocketAddr, String> {
    if let Ok(a) = s.parse() {
        return Ok(a);
    }
    if let Some((ip, port)) = s.rsplit_once(':')
        && let (Ok(ip), Ok(port)) = (ip.parse::<std::net::Ipv6Addr>(), port.parse::<u16>())
    {
        return Ok(SocketAddr::new(ip.into(), port));
    }
    Err(format!(
        "{s:?} is not an address and port (e.g. 10.0.0.5:9785 or [fd00::5]:9785)"
    ))
}

/// Token audiences, as `--metrics-auth-audiences` lists them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Audiences(pub Vec<String>);

/// At most this many audiences.
const MAX_AUDIENCES: usize = 16;

/// Up to [`MAX_AUDIENCES`] comma-separated audiences, each what a projected
/// ServiceAccount token's `audience` may be: a name or a URL, no spaces. Empty
/// (an env var set to ""): none.
fn audiences(s: &str) -> Result<Audiences, String> {
    if s.trim().is_empty() {
        return Ok(Audiences(Vec::new()));
    }
    let list: Vec<String> = s.split(',').map(|a| a.trim().to_owned()).collect();
    if let Some(bad) = list
        .iter()
        .find(|a| a.is_empty() || a.len() > 256 || a.chars().any(char::is_whitespace))
    {
        return Err(format!(
            "{bad:?} is not a token audience: 1 to 256 characters, no spaces (e.g. ipshadow)"
        ));
    }
    if list.len() > MAX_AUDIENCES {
        return Err(format!("{} audiences: {MAX_AUDIENCES} at most", list.len()));
    }
    Ok(Audiences(list))
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    use super::*;

    #[derive(Debug, clap::Parser)]
    struct Flags {
        #[command(flatten)]
        http: Args,
    }

    #[test]
    fn audiences_are_a_comma_list_of_at_most_16_names_without_spaces() {
        let parse = |list: &str| {
            Flags::try_parse_from(["t", "--metrics-auth-audiences", list])
                .map(|f| f.http.metrics_auth_audiences.map(|a| a.0))
        };
        assert_eq!(
            parse("ipshadow, https://ipshadow.example").expect("two"),
            Some(vec![
                "ipshadow".to_owned(),
                "https://ipshadow.example".to_owned()
            ])
        );
        let many = vec!["a"; 17].join(",");
        assert!(parse(&many).is_err());
        assert!(parse(&many[2..]).is_ok());
        for bad in ["a,,b", "two words", ","] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
        assert_eq!(parse("").expect("none"), Some(vec![]), "an empty env var");
        let none = Flags::try_parse_from(["t"]).expect("defaults");
        assert_eq!(none.http.metrics_auth_audiences, None);
    }

    #[test]
    fn listen_addresses_take_the_hosts_ip_of_either_family() {
        for (given, want) in [
            ("10.0.0.5:9785", "10.0.0.5:9785"),
            ("[fd00::5]:9785", "[fd00::5]:9785"),
            ("fd00::5:9785", "[fd00::5]:9785"),
        ] {
            assert_eq!(
                listen_addr(given),
                Ok(want.parse().expect("addr")),
                "{given}"
            );
        }
        for bad in ["", "10.0.0.5", ":9785", "$(HOST_IP):9785", "10.0.0.5:99999"] {
            assert!(listen_addr(bad).is_err(), "{bad}");
        }
    }
}
