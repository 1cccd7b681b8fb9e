//! `cargo xtask image`: the static binary on `FROM scratch` (the Dockerfile's
//! `image` stage; the binary is built here, so nothing is pulled and nothing
//! runs under emulation), for amd64 and arm64.

use std::{path::PathBuf, process::Command};

use anyhow::{Context as _, bail};

use crate::{cargo, cross, run, target_dir, workspace_root};

pub(crate) const MUSL: &str = "x86_64-unknown-linux-musl";

/// The image `cargo xtask test` builds with podman and tests/tests/image.rs runs.
pub(crate) const TEST_IMAGE: &str = concat!("localhost/ipshadow:", env!("CARGO_PKG_VERSION"));

#[derive(Clone, Copy, Debug)]
pub(crate) enum Engine {
    Docker,
    Podman,
}

/// An image's architecture.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Arch {
    /// x86_64, tagged as asked.
    Amd64,
    /// aarch64, the tag with `-arm64` appended.
    Arm64,
}

impl Arch {
    /// Builds the static release binary; returns its path.
    pub(crate) fn binary(self) -> anyhow::Result<PathBuf> {
        match self {
            Self::Amd64 => {
                cargo(&[
                    "build",
                    "--release",
                    "--locked",
                    "-p",
                    "ipshadow",
                    "--target",
                    MUSL,
                ])?;
                Ok(target_dir().join(format!("{MUSL}/release/ipshadow")))
            }
            Self::Arm64 => cross::build(cross::LINUX_ARM64, "ipshadow"),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::Amd64 => "amd64",
            Self::Arm64 => "arm64",
        }
    }
}

/// Docker when an engine answers, else podman (Debian's, with runc: see
/// tests/podman/containers.conf), else an error that says what to install.
pub(crate) fn engine() -> anyhow::Result<Engine> {
    let answers = |program: &str| {
        Command::new(program)
            .arg("info")
            .env("CONTAINERS_CONF", containers_conf())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if answers("docker") {
        Ok(Engine::Docker)
    } else if answers("podman") {
        Ok(Engine::Podman)
    } else {
        bail!(
            "neither a Docker engine nor podman answers here (`docker info`, `podman info`): \
             `cargo xtask setup` installs Debian's podman and runc"
        )
    }
}

/// Podman's settings for this kind of machine, in the repository.
pub(crate) fn containers_conf() -> PathBuf {
    workspace_root().join("tests/podman/containers.conf")
}

/// The image of each of `arches` (both when empty): amd64 tagged `tag`,
/// arm64 `tag`-arm64, each recording its platform.
pub(crate) fn build(tag: &str, arches: &[Arch], engine: Engine) -> anyhow::Result<()> {
    let arches = if arches.is_empty() {
        &[Arch::Amd64, Arch::Arm64][..]
    } else {
        arches
    };
    for &arch in arches {
        let tag = match arch {
            Arch::Amd64 => tag.to_owned(),
            Arch::Arm64 => format!("{tag}-arm64"),
        };
        one(&tag, arch, engine)?;
        eprintln!("xtask: image {tag} (linux/{})", arch.name());
    }
    Ok(())
}

fn one(tag: &str, arch: Arch, engine: Engine) -> anyhow::Result<()> {
    let binary = arch.binary()?;
    let context = target_dir().join(format!("image/{}", arch.name()));
    std::fs::create_dir_all(&context).context("creating the image's context directory")?;
    std::fs::copy(&binary, context.join("ipshadow"))
        .with_context(|| format!("copying {}", binary.display()))?;
    std::fs::copy(
        workspace_root().join("Dockerfile"),
        context.join("Dockerfile"),
    )
    .context("copying the Dockerfile")?;
    let mut cmd = match engine {
        Engine::Docker => Command::new("docker"),
        Engine::Podman => {
            let mut c = Command::new("podman");
            c.env("CONTAINERS_CONF", containers_conf());
            c
        }
    };
    run(cmd
        .args(["build", "--target", "image", "--platform"])
        .arg(format!("linux/{}", arch.name()))
        .args(["-t", tag])
        .arg(&context))
}
