#!/usr/bin/env bash
# Runs every check and test of Stevedore: formatting, lints, generated-file drift, unit
# tests, and the integration suites against the local cluster (started when not running).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# Cargo's registry and build output live in the home directory, never in the clone.
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/stevedore/cargo-target}
export CARGO_TERM_COLOR=never

step() { printf '\n==> %s\n' "$*"; }

step "rustfmt"
cargo fmt --all -- --check

step "clippy"
cargo clippy --workspace --all-targets --locked -- -D warnings

step "generated CRDs match deploy/crds"
crd_tmp=$(mktemp -d)
trap 'rm -rf "$crd_tmp"' EXIT
cargo run --quiet --locked -p stevedore-controlplane --bin crdgen -- "$crd_tmp"
if ! diff -ru deploy/crds "$crd_tmp"; then
  echo "deploy/crds is stale: run 'cargo run -p stevedore-controlplane --bin crdgen' and commit the result" >&2
  exit 1
fi

step "local cluster with Stevedore deployed"
# A cluster left behind by a previous session whose processes are gone is cleaned first.
if ! deploy/local/cluster.sh status >/dev/null 2>&1; then
  deploy/local/cluster.sh down
fi
time deploy/local/run.sh --fake-nodes 2

step "tests"
cargo test --workspace --locked --no-fail-fast
