# syntax=docker/dockerfile:1
# The ipshadow image: one static (musl) binary on an empty base.
#
# Two ways to build it:
# - here, with no registry access: `cargo xtask image` builds the static binary
#   on the host (for arm64 linked by zig) and runs the `image` stage only
#   (`docker build --target image --platform linux/<arch>`, or podman's where
#   no Docker engine runs, with the binary in the context), since FROM scratch
#   needs nothing pulled and nothing runs; `cargo xtask test` builds the amd64
#   one so with podman and runs it (tests/tests/image.rs);
# - anywhere with registry access: `docker build -t ipshadow .` runs both stages.

FROM rust:1.95-bookworm AS build
# LLVM 22 (bookworm-security) for bpf-linker, musl for the static binary.
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      llvm-22-dev libpolly-22-dev zlib1g-dev libzstd-dev musl-tools \
 && rm -rf /var/lib/apt/lists/*
RUN rustup toolchain install nightly --profile minimal --component rust-src \
 && rustup target add x86_64-unknown-linux-musl \
 && LLVM_PREFIX=/usr/lib/llvm-22 cargo install bpf-linker --version 0.13.0 \
      --no-default-features --features llvm-22 --locked
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p ipshadow --target x86_64-unknown-linux-musl \
 && mkdir -p /out && cp target/x86_64-unknown-linux-musl/release/ipshadow /out/ipshadow

FROM scratch AS image
ARG BINARY=ipshadow
COPY ${BINARY} /ipshadow
# Runs as uid 0 with only CAP_BPF, CAP_PERFMON and CAP_NET_ADMIN (see deploy/base/daemonset.yaml).
USER 0
ENTRYPOINT ["/ipshadow"]
CMD ["agent"]

# The default target: the image built from the build stage's binary.
FROM scratch
COPY --from=build /out/ipshadow /ipshadow
USER 0
ENTRYPOINT ["/ipshadow"]
CMD ["agent"]
