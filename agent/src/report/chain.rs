//! How an error's cause is printed, one rule for every error type here: an
//! error's `Display` is the whole message — what failed, on what input, the
//! cause, what to do — so a log line (`error = %e`) or an Event note holds
//! all of it. The cause is therefore never also returned from `source()` (no
//! `#[source]`, `#[from]` or field named `source` where the message prints
//! it): `anyhow`'s `{:#}` would print it a second time. `#[error(transparent)]`
//! passes one of our errors through unchanged.

use std::{error::Error, fmt};

/// `cause` and every error under it, each once: a library error that prints
/// its own source too (kube's `ServiceError: client error (Connect)` over
/// `client error (Connect)`) does not repeat it.
pub struct Chain<'a>(pub &'a dyn Error);

impl fmt::Display for Chain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut said = self.0.to_string();
        f.write_str(&said)?;
        let mut next = self.0.source();
        while let Some(e) = next {
            let text = e.to_string();
            if !said.contains(&text) {
                write!(f, ": {text}")?;
                said.push_str(&text);
            }
            next = e.source();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("ServiceError: {0}")]
    struct Outer(#[source] Middle);

    #[derive(Debug, thiserror::Error)]
    #[error("client error (Connect)")]
    struct Middle(#[source] std::io::Error);

    #[test]
    fn each_cause_is_printed_once_down_to_the_last() {
        let e = Outer(Middle(std::io::Error::other("Connection refused")));
        assert_eq!(
            Chain(&e).to_string(),
            "ServiceError: client error (Connect): Connection refused"
        );
    }
}
