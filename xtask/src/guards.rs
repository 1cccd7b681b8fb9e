//! The root-only tests' guards (`ipshadow_tests::guard`): each appends a line
//! `ipshadow-guard\tran|skipped\t<test>\t<why>` to the file `$IPSHADOW_GUARDS`
//! names. A skipped root-only test passes in `cargo test`'s eyes; here it is
//! counted, printed, and under `CI=true` fails the run. A test whose feature
//! this kernel was *built without* (`absent`: a `CONFIG_…` off, proven by the
//! kernel refusing the feature, not guessed from a version) is reported by name
//! and reason but fails nothing: no machine setup can give it to this kernel.

use std::{collections::BTreeMap, path::Path};

use anyhow::bail;

/// What the guards recorded: each test by name, skipped (with why) or ran.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Guards {
    /// Tests whose guard let them run and none skipped them.
    pub ran: usize,
    /// Test -> why it (or a part of it) was skipped.
    pub skipped: BTreeMap<String, String>,
    /// Test -> the feature this kernel was built without.
    pub absent: BTreeMap<String, String>,
}

impl Guards {
    pub(crate) fn read(path: &Path) -> Self {
        Self::parse(&std::fs::read_to_string(path).unwrap_or_default())
    }

    fn parse(log: &str) -> Self {
        let mut ran = std::collections::BTreeSet::new();
        let mut skipped = BTreeMap::new();
        let mut absent = BTreeMap::new();
        for line in log.lines() {
            let mut fields = line.splitn(4, '\t');
            match (fields.next(), fields.next(), fields.next(), fields.next()) {
                (Some("ipshadow-guard"), Some("ran"), Some(name), _) => {
                    ran.insert(name.to_owned());
                }
                (Some("ipshadow-guard"), Some("skipped"), Some(name), why) => {
                    skipped.insert(name.to_owned(), why.unwrap_or("").to_owned());
                }
                (Some("ipshadow-guard"), Some("absent"), Some(name), why) => {
                    absent.insert(name.to_owned(), why.unwrap_or("").to_owned());
                }
                _ => {}
            }
        }
        ran.retain(|t| !skipped.contains_key(t) && !absent.contains_key(t));
        Self {
            ran: ran.len(),
            skipped,
            absent,
        }
    }

    /// The summary lines `cargo xtask test` prints.
    pub(crate) fn report(&self) -> Vec<String> {
        let mut out = vec![format!(
            "root-only tests: {} ran, {} skipped",
            self.ran,
            self.skipped.len()
        )];
        out.extend(
            self.skipped
                .iter()
                .map(|(test, why)| format!("  skipped {test}: {why}")),
        );
        if !self.absent.is_empty() {
            out.push(format!(
                "not built into this kernel: {} test(s)",
                self.absent.len()
            ));
            out.extend(
                self.absent
                    .iter()
                    .map(|(test, why)| format!("  absent {test}: {why}")),
            );
        }
        out
    }

    /// Under CI every root-only test must have run.
    pub(crate) fn check(&self, ci: bool) -> anyhow::Result<()> {
        if ci && !self.skipped.is_empty() {
            bail!(
                "{} root-only test(s) skipped under CI=true: a skipped test checks nothing (run as root on a kernel that has the features)",
                self.skipped.len()
            );
        }
        Ok(())
    }
}

/// Whether the run is CI's (`CI=true`, as GitHub Actions and most CIs set it).
pub(crate) fn ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v.eq_ignore_ascii_case("true") || v == "1")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_skip_is_counted_once_and_wins_over_a_run_of_the_same_test() {
        let g = Guards::parse(
            "ipshadow-guard\tran\ta\t\n\
             ipshadow-guard\tran\tb\t\n\
             ipshadow-guard\tran\tb\t\n\
             ipshadow-guard\tskipped\tc\tneeds root\n\
             ipshadow-guard\tran\td\t\n\
             ipshadow-guard\tskipped\td (TCX half)\tTCX needs kernel 6.6\n\
             ipshadow-guard\tskipped\ta\tTCX needs kernel 6.6\n\
             noise\n",
        );
        assert_eq!(g.ran, 2, "{g:?}");
        assert_eq!(
            g.skipped.keys().map(String::as_str).collect::<Vec<_>>(),
            ["a", "c", "d (TCX half)"]
        );
        assert_eq!(g.report()[0], "root-only tests: 2 ran, 3 skipped");
    }

    #[test]
    fn a_feature_this_kernel_was_built_without_is_reported_and_fails_nothing() {
        let g = Guards::parse(
            "ipshadow-guard\tran\ta\t\n\
             ipshadow-guard\tabsent\tnk\tCONFIG_NETKIT is off\n",
        );
        assert_eq!((g.ran, g.skipped.len(), g.absent.len()), (1, 0, 1));
        assert!(g.check(true).is_ok());
        let report = g.report();
        assert_eq!(report[1], "not built into this kernel: 1 test(s)");
        assert_eq!(report[2], "  absent nk: CONFIG_NETKIT is off");
    }

    #[test]
    fn ci_fails_on_a_skip_and_a_local_run_only_reports_it() {
        let g = Guards::parse("ipshadow-guard\tskipped\tc\tneeds root\n");
        assert!(g.check(true).is_err());
        assert!(g.check(false).is_ok());
        assert!(
            Guards::parse("ipshadow-guard\tran\tc\t\n")
                .check(true)
                .is_ok()
        );
    }
}
