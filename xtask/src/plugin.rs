//! `cargo xtask plugin`: the kubectl plugin's krew archives, one per platform
//! built, and the manifest listing exactly those, each with its sha256.

use std::{path::Path, process::Command};

use anyhow::{Context as _, bail};

use crate::{cross, image, run, workspace_root};

/// The placeholder sha256 of deploy/krew/ipshadow.yaml.
const PLACEHOLDER: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// A krew platform and how its binary is built.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Platform {
    /// Static (musl), as the image's.
    #[value(name = "linux/amd64")]
    LinuxAmd64,
    /// Static (musl), linked by zig.
    #[value(name = "linux/arm64")]
    LinuxArm64,
    /// Linked by zig against its bundled mingw-w64.
    #[value(name = "windows/amd64")]
    WindowsAmd64,
}

impl Platform {
    pub(crate) const ALL: [Self; 3] = [Self::LinuxAmd64, Self::LinuxArm64, Self::WindowsAmd64];

    /// The archive's name part, as the template's uris spell it: `linux_amd64`.
    fn suffix(self) -> &'static str {
        match self {
            Self::LinuxAmd64 => "linux_amd64",
            Self::LinuxArm64 => "linux_arm64",
            Self::WindowsAmd64 => "windows_amd64",
        }
    }

    /// The plugin's file name: what kubectl looks for on PATH.
    fn plugin(self) -> &'static str {
        match self {
            Self::WindowsAmd64 => "kubectl-ipshadow.exe",
            Self::LinuxAmd64 | Self::LinuxArm64 => "kubectl-ipshadow",
        }
    }

    /// Builds the release binary, as the image of its architecture has it
    /// (Windows: linked by zig); returns its path.
    fn build(self) -> anyhow::Result<std::path::PathBuf> {
        match self {
            Self::LinuxAmd64 => image::Arch::Amd64.binary(),
            Self::LinuxArm64 => image::Arch::Arm64.binary(),
            Self::WindowsAmd64 => cross::build(cross::WINDOWS, "ipshadow.exe"),
        }
    }
}

/// Builds `platforms` (all when empty), packs each with the LICENSE, and writes
/// target/krew/ipshadow.yaml listing those built.
pub(crate) fn build(platforms: &[Platform]) -> anyhow::Result<()> {
    let platforms = if platforms.is_empty() {
        &Platform::ALL[..]
    } else {
        platforms
    };
    let root = workspace_root();
    let out = root.join("target/krew");
    let mut built = Vec::new();
    for &platform in platforms {
        let binary = platform.build()?;
        let archive = pack(platform, &binary, &out)?;
        let sha = sha256(&archive)?;
        eprintln!("xtask: {} (sha256 {sha})", archive.display());
        built.push((platform.suffix(), sha));
    }
    let template = std::fs::read_to_string(root.join("deploy/krew/ipshadow.yaml"))
        .context("reading deploy/krew/ipshadow.yaml")?;
    let path = out.join("ipshadow.yaml");
    std::fs::write(&path, manifest(&template, &built)?)
        .context("writing target/krew/ipshadow.yaml")?;
    eprintln!(
        "xtask: {} lists {} platform(s)\n  kubectl krew install --manifest={} \
         --archive={}/kubectl-ipshadow_<os>_<arch>.tar.gz",
        path.display(),
        built.len(),
        path.display(),
        out.display()
    );
    Ok(())
}

/// target/krew/kubectl-ipshadow_<os>_<arch>.tar.gz with the binary under the
/// plugin's name and the LICENSE.
fn pack(platform: Platform, binary: &Path, out: &Path) -> anyhow::Result<std::path::PathBuf> {
    let stage = out.join("stage").join(platform.suffix());
    std::fs::create_dir_all(&stage).with_context(|| format!("creating {}", stage.display()))?;
    std::fs::copy(binary, stage.join(platform.plugin()))
        .with_context(|| format!("copying {}", binary.display()))?;
    std::fs::copy(workspace_root().join("LICENSE"), stage.join("LICENSE"))
        .context("copying the LICENSE")?;
    let archive = out.join(format!("kubectl-ipshadow_{}.tar.gz", platform.suffix()));
    run(Command::new("tar")
        .arg("-czf")
        .arg(&archive)
        .arg("-C")
        .arg(&stage)
        .args([platform.plugin(), "LICENSE"]))?;
    Ok(archive)
}

fn sha256(path: &Path) -> anyhow::Result<String> {
    let sum = Command::new("sha256sum")
        .arg(path)
        .output()
        .context("running sha256sum")?;
    let text = String::from_utf8_lossy(&sum.stdout);
    match text.split_whitespace().next().filter(|s| s.len() == 64) {
        Some(sha) => Ok(sha.to_owned()),
        None => bail!("sha256sum printed no digest for {}: {text}", path.display()),
    }
}

/// The template with only the platforms `built` (archive suffix, sha256), each
/// with its digest in place of the placeholder. A platform is the list item
/// that starts at `- selector:`; its `uri` names its suffix.
fn manifest(template: &str, built: &[(&str, String)]) -> anyhow::Result<String> {
    let mut head = String::new();
    let mut items: Vec<String> = Vec::new();
    for line in template.lines() {
        if line.trim_start().starts_with("- selector:") {
            items.push(String::new());
        }
        let into = items.last_mut().unwrap_or(&mut head);
        into.push_str(line);
        into.push('\n');
    }
    let mut manifest = head;
    for (suffix, sha) in built {
        let wanted = format!("_{suffix}.tar.gz");
        let Some(item) = items.iter().find(|i| {
            i.lines()
                .any(|l| l.trim_start().starts_with("uri:") && l.trim_end().ends_with(&wanted))
        }) else {
            bail!("deploy/krew/ipshadow.yaml has no platform whose uri ends with {wanted}");
        };
        if !item.contains(PLACEHOLDER) {
            bail!("deploy/krew/ipshadow.yaml's {suffix} platform has no placeholder sha256");
        }
        manifest.push_str(&item.replace(PLACEHOLDER, sha));
    }
    Ok(manifest)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "tests unwrap to keep the stack trace")]
mod tests {
    use super::*;

    fn template() -> String {
        std::fs::read_to_string(workspace_root().join("deploy/krew/ipshadow.yaml")).unwrap()
    }

    #[test]
    fn the_manifest_lists_only_the_platforms_built_each_with_its_digest() {
        let a = "a".repeat(64);
        let b = "b".repeat(64);
        let m = manifest(
            &template(),
            &[("linux_amd64", a.clone()), ("windows_amd64", b.clone())],
        )
        .unwrap();
        assert!(!m.contains(PLACEHOLDER), "{m}");
        assert_eq!(m.matches("- selector:").count(), 2, "{m}");
        assert!(!m.contains("linux_arm64"), "{m}");
        let linux = m.find("_linux_amd64.tar.gz").unwrap();
        let windows = m.find("_windows_amd64.tar.gz").unwrap();
        assert!(m[linux..windows].contains(&a), "{m}");
        assert!(
            m[windows..].contains(&b) && !m[windows..].contains(&a),
            "{m}"
        );
        assert!(m[windows..].contains("kubectl-ipshadow.exe"), "{m}");
        // What precedes the platforms is kept.
        assert!(m.starts_with(template().split("  platforms:").next().unwrap()));
    }

    #[test]
    fn every_platform_has_its_item_in_the_template() {
        let all: Vec<(&str, String)> = Platform::ALL
            .iter()
            .map(|p| (p.suffix(), "c".repeat(64)))
            .collect();
        let m = manifest(&template(), &all).unwrap();
        assert_eq!(m.matches("- selector:").count(), 3, "{m}");
    }

    #[test]
    fn a_platform_the_template_lacks_is_an_error() {
        let err = manifest(&template(), &[("plan9_amd64", "d".repeat(64))]).unwrap_err();
        assert!(err.to_string().contains("_plan9_amd64.tar.gz"), "{err}");
    }
}
