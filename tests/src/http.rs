//! A minimal HTTP/1.1 GET over std, for talking to the agent's endpoints from
//! inside a test namespace without another client crate.

use std::{
    io::{Read as _, Write as _},
    net::{SocketAddr, TcpStream},
    time::Duration,
};

/// `GET path` on `addr`: the status code and the body, or the error text.
pub fn get(addr: SocketAddr, path: &str) -> Result<(u16, String), String> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2))
        .map_err(|e| format!("connect {addr}: {e}"))?;
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .map_err(|e| e.to_string())?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .map_err(|e| e.to_string())?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)
        .map_err(|e| format!("read from {addr}: {e}"))?;
    let text = String::from_utf8_lossy(&raw);
    let (head, body) = text.split_once("\r\n\r\n").ok_or("no HTTP header end")?;
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| format!("no status in {head:?}"))?;
    let chunked = head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked");
    Ok((
        status,
        if chunked {
            dechunk(body)
        } else {
            body.to_owned()
        },
    ))
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        body = rest[n..].trim_start_matches("\r\n");
    }
    out
}

/// The value of the first sample of `metric` whose labels contain every `labels` pair.
pub fn sample(metrics: &str, metric: &str, labels: &[(&str, &str)]) -> Option<f64> {
    metrics.lines().find_map(|l| {
        let rest = l.strip_prefix(metric)?;
        if !(rest.starts_with('{') || rest.starts_with(' ')) {
            return None;
        }
        let all = labels
            .iter()
            .all(|(k, v)| rest.contains(&format!("{k}=\"{v}\"")));
        all.then(|| l.rsplit(' ').next()?.parse().ok()).flatten()
    })
}
