//! `cargo xtask plugin`: the kubectl plugin's krew archive for this machine's
//! architecture, and the manifest with its sha256 filled in.

use std::process::Command;

use anyhow::{Context as _, bail};

use crate::{cargo, run, target_dir, workspace_root};

/// The placeholder sha256 of deploy/krew/ipshadow.yaml.
const PLACEHOLDER: &str = "0000000000000000000000000000000000000000000000000000000000000000";

pub(crate) fn build() -> anyhow::Result<()> {
    cargo(&["build", "--release", "--locked", "-p", "ipshadow"])?;
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => bail!("no krew platform for architecture {other}"),
    };
    let root = workspace_root();
    let out = root.join("target/krew");
    let stage = out.join("stage");
    std::fs::create_dir_all(&stage).context("creating target/krew/stage")?;
    std::fs::copy(
        target_dir().join("release/ipshadow"),
        stage.join("kubectl-ipshadow"),
    )
    .context("copying the release binary")?;
    let archive = out.join(format!("kubectl-ipshadow_linux_{arch}.tar.gz"));
    run(Command::new("tar")
        .arg("-czf")
        .arg(&archive)
        .arg("-C")
        .arg(&stage)
        .arg("kubectl-ipshadow"))?;
    let sum = Command::new("sha256sum")
        .arg(&archive)
        .output()
        .context("running sha256sum")?;
    let text = String::from_utf8_lossy(&sum.stdout);
    let Some(sha) = text.split_whitespace().next().filter(|s| s.len() == 64) else {
        bail!("sha256sum printed no digest: {text}");
    };
    // The placeholder of this architecture's platform (the one whose uri names it).
    let template = std::fs::read_to_string(root.join("deploy/krew/ipshadow.yaml"))
        .context("reading deploy/krew/ipshadow.yaml")?;
    let mut manifest = String::new();
    let mut ours = false;
    for line in template.lines() {
        if line.trim_start().starts_with("uri:") {
            ours = line.contains(&format!("_linux_{arch}.tar.gz"));
        }
        if ours && line.contains(PLACEHOLDER) {
            manifest.push_str(&line.replace(PLACEHOLDER, sha));
        } else {
            manifest.push_str(line);
        }
        manifest.push('\n');
    }
    let path = out.join("ipshadow.yaml");
    std::fs::write(&path, manifest).context("writing target/krew/ipshadow.yaml")?;
    eprintln!(
        "xtask: {} (sha256 {sha})\n  kubectl krew install --manifest={} --archive={}",
        archive.display(),
        path.display(),
        archive.display()
    );
    Ok(())
}
