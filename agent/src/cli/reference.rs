//! The flag reference of docs/reference.md, rendered from the clap
//! definitions themselves (long and short name, env, default, possible values,
//! the doc comment), so the documentation cannot drift from the binary.
//! `cargo xtask docs` rewrites the file's generated part through the hidden
//! `ipshadow docs --write`; a test fails while the file differs.

use std::fmt::Write as _;

use clap::{Arg, CommandFactory as _};

use super::Cli;
use crate::detect::{
    FindingKind,
    kind::{About, Alert, Count, Spec},
};

/// The line before the generated part of docs/reference.md.
pub const BEGIN: &str = "<!-- BEGIN generated flag reference: `cargo xtask docs` rewrites it from the clap definitions -->";
/// The line after it.
pub const END: &str = "<!-- END generated flag reference -->";

/// The line before the generated finding-kind catalogue.
pub const KINDS_BEGIN: &str = "<!-- BEGIN generated finding kinds: `cargo xtask docs` rewrites it from each kind's declaration -->";
/// The line after it.
pub const KINDS_END: &str = "<!-- END generated finding kinds -->";

/// The line before the generated table of the devices each CNI declares.
pub const CNIS_BEGIN: &str = "<!-- BEGIN generated CNI devices: `cargo xtask docs` rewrites it from each CNI's declaration (agent/src/cni/) -->";
/// The line after it.
pub const CNIS_END: &str = "<!-- END generated CNI devices -->";

/// `ipshadow docs` (hidden): the flag reference for docs/reference.md.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Rewrite the generated part of this Markdown file (between its BEGIN and END
    /// markers) in place; without it, print the reference.
    #[arg(long)]
    pub write: Option<std::path::PathBuf>,
}

/// The flag reference: the global flags, then one table per visible subcommand.
pub fn markdown() -> String {
    let mut cli = Cli::command();
    cli.build();
    let mut out = String::new();
    let globals: Vec<&Arg> = cli
        .get_arguments()
        .filter(|a| a.is_global_set() && visible(a))
        .collect();
    out.push_str("### Every command\n\n");
    table(&mut out, &globals);
    // `help` is clap's own, added by `build`.
    for sub in cli
        .get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
    {
        let _ = write!(out, "\n### `ipshadow {}`\n\n", sub.get_name());
        if let Some(about) = sub.get_long_about().or_else(|| sub.get_about()) {
            let _ = writeln!(out, "{}\n", one_line(&about.to_string()));
        }
        let own: Vec<&Arg> = sub
            .get_arguments()
            .filter(|a| !a.is_global_set() && visible(a))
            .collect();
        table(&mut out, &own);
    }
    out
}

/// The catalogue of finding kinds, from their declarations ([`Spec`]).
pub fn kinds_markdown() -> String {
    let mut out = String::from(
        "| kind | about | counted in | alert | `--remediate evict` | `audit` | what |\n\
         |---|---|---|---|---|---|---|\n",
    );
    for k in FindingKind::all() {
        let s: &Spec = k.spec();
        let about = if s.about == About::Node {
            "Node"
        } else {
            "Pod"
        };
        let count = match s.count {
            Count::Collisions => "`ipshadow_collisions`",
            Count::HostRouteBlackholes => "`ipshadow_host_route_blackholes`",
            Count::AllocatorOverlaps => "`ipshadow_allocator_overlaps`",
            Count::IpamProblems => "`ipshadow_ipam_problems`",
            Count::KernelTruth => "`ipshadow_kernel_truth_problems`",
            Count::InfoOnly => "`ipshadow_collision_info` only",
        };
        let alert = match s.alert {
            Alert::Named(a) => format!("`{a}`"),
            Alert::None(why) => format!("none: {why}"),
        };
        let evict = if s.remediable { "yes" } else { "no" };
        let audit = s
            .unseen_by_audit
            .map_or("yes".to_owned(), |w| format!("no: {w}"));
        let _ = writeln!(
            out,
            "| `{}` | {about} | {count} | {} | {evict} | {} | {} |",
            s.name,
            cell(&alert),
            cell(&audit),
            cell(s.what)
        );
    }
    out
}

/// `doc` with its generated parts replaced by [`markdown`],
/// [`kinds_markdown`] and `cni::markdown`; `None` without the three pairs of
/// markers, each in order.
pub fn splice(doc: &str) -> Option<String> {
    let doc = replace_between(doc, (BEGIN, END), &markdown())?;
    let doc = replace_between(&doc, (KINDS_BEGIN, KINDS_END), &kinds_markdown())?;
    replace_between(&doc, (CNIS_BEGIN, CNIS_END), &crate::cni::markdown())
}

fn replace_between(doc: &str, (begin, end): (&str, &str), with: &str) -> Option<String> {
    let (before, rest) = doc.split_once(begin)?;
    let (_, after) = rest.split_once(end)?;
    Some(format!("{before}{begin}\n\n{with}\n{end}{after}"))
}

/// Flags a user can set: not `--help`/`--version`, not hidden, not positional.
fn visible(a: &Arg) -> bool {
    let builtin = matches!(
        a.get_action(),
        clap::ArgAction::Help
            | clap::ArgAction::HelpShort
            | clap::ArgAction::HelpLong
            | clap::ArgAction::Version
    );
    !builtin && !a.is_hide_set() && !a.is_positional()
}

fn table(out: &mut String, args: &[&Arg]) {
    out.push_str("| flag | env | default | values | meaning |\n|---|---|---|---|---|\n");
    for a in args {
        let mut flag = a.get_long().map(|l| format!("`--{l}`")).unwrap_or_default();
        if let Some(s) = a.get_short() {
            let _ = write!(flag, ", `-{s}`");
        }
        let code = |s: String| format!("`{s}`");
        let env = a
            .get_env()
            .map(|e| code(e.to_string_lossy().into_owned()))
            .unwrap_or_default();
        let default = a
            .get_default_values()
            .iter()
            .map(|v| code(v.to_string_lossy().into_owned()))
            .collect::<Vec<_>>()
            .join(", ");
        let values: Vec<String> = a
            .get_possible_values()
            .iter()
            .filter(|v| !v.is_hide_set())
            .map(|v| code(v.get_name().to_owned()))
            .collect();
        let help = a
            .get_long_help()
            .or_else(|| a.get_help())
            .map(|h| one_line(&h.to_string()))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "| {flag} | {env} | {} | {} | {} |",
            if default.is_empty() { "—" } else { &default },
            values.join(", "),
            cell(&help)
        );
    }
}

/// A doc comment as one line: its line breaks are only where the source wrapped.
fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Text safe in a Markdown table cell.
fn cell(s: &str) -> String {
    s.replace('|', "\\|")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_command_has_a_table_and_every_row_an_env_and_a_meaning() {
        let md = markdown();
        for heading in [
            "### Every command",
            "### `ipshadow check`",
            "### `ipshadow audit`",
            "### `ipshadow agent`",
        ] {
            assert!(md.contains(heading), "{heading} missing:\n{md}");
        }
        assert!(
            !md.contains("ipshadow docs"),
            "the hidden command is listed"
        );
        assert!(!md.contains("ipshadow help"), "clap's own help is listed");
        let rows: Vec<&str> = md.lines().filter(|l| l.starts_with("| `--")).collect();
        assert!(rows.len() > 50, "{md}");
        for row in rows {
            let cells: Vec<&str> = row.split(" | ").collect();
            assert_eq!(cells.len(), 5, "{row}");
            assert!(cells[1].starts_with('`'), "no env: {row}");
            assert!(cells[4].len() > 3, "no meaning: {row}");
        }
        assert!(md.contains(
            "| `--output`, `-o` | `IPSHADOW_OUTPUT` | `text` | `text`, `json`, `yaml`, `wide` |"
        ));
    }

    #[test]
    fn only_the_generated_part_is_replaced() {
        let doc = format!(
            "# Title\n\nhand-written\n\n{BEGIN}\nold\n{END}\n\nmore\n\n\
             {KINDS_BEGIN}\nstale\n{KINDS_END}\n\n{CNIS_BEGIN}\ngone\n{CNIS_END}\n\nend\n"
        );
        let new = splice(&doc).expect("markers found");
        assert!(new.starts_with("# Title\n\nhand-written\n\n"));
        assert!(new.contains(&format!("\n{END}\n\nmore\n\n{KINDS_BEGIN}\n")));
        assert!(new.contains(&format!("\n{KINDS_END}\n\n{CNIS_BEGIN}\n")));
        assert!(new.ends_with(&format!("\n{CNIS_END}\n\nend\n")));
        assert!(
            !new.contains("\nold\n") && !new.contains("\nstale\n") && !new.contains("\ngone\n")
        );
        assert!(new.contains("| Calico | `tunl0` | tunnel address"));
        assert!(new.contains("| `PodRouteTaken` | Pod | `ipshadow_ipam_problems` |"));
        assert_eq!(
            splice(&new).as_deref(),
            Some(new.as_str()),
            "not idempotent"
        );
        assert_eq!(splice("no markers"), None);
        assert_eq!(
            splice(&format!("{BEGIN}\n{END}\n")),
            None,
            "no kinds markers"
        );
        assert_eq!(
            splice(&format!("{BEGIN}\n{END}\n{KINDS_BEGIN}\n{KINDS_END}\n")),
            None,
            "no CNI markers"
        );
    }
}
