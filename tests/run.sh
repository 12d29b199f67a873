#!/usr/bin/env bash
# Runs every check and test of Stevedore: formatting, lints, generated-file drift, unit
# tests, and the integration suites against the local cluster (started when not running).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# Cargo's registry and build output live in the home directory, never in the clone.
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/stevedore/cargo-target}
export CARGO_TERM_COLOR=never
# Incremental caches only pay off when editing; here they doubled the debug tree's size.
export CARGO_INCREMENTAL=${CARGO_INCREMENTAL:-0}
# shellcheck source=tests/lib/target-hygiene.sh
source tests/lib/target-hygiene.sh
ensure_target_space "$CARGO_TARGET_DIR" "${STEVEDORE_MIN_FREE_GB:-20}"
# The cluster's images and simulated agents are debug builds here (faster to build; tests
# assert behaviour, not speed). `deploy/local/run.sh` on its own builds release images.
export STEVEDORE_PROFILE=${STEVEDORE_PROFILE:-dev}

# Each step says when it started (UTC), and the run ends with a table of how long each
# step and each test binary took, so a slow CI run shows where its time went.
# shellcheck source=tests/lib/timings.sh
source tests/lib/timings.sh

step "Debian packages the build needs (protoc for the generated gRPC code, ...)"
# A fresh machine has none of them; the cluster step would install them, but clippy
# builds the proto crate before that.
deploy/local/cluster.sh packages

step "Go builds (Kubernetes, etcd, the CSI provisioner and resizer, kwok, grpcurl, crictl, helm) start in the background"
# On a first run they take ~20 min, as long as the cargo steps below; run side by side,
# each fills the core the other leaves idle in its single-threaded link phases. The
# cluster step waits for them; when they are cached this takes a second. containerd 2.x,
# which only the last step uses, is built while the suites run (below): on a new machine
# it was the last 87 s of the builds the cluster step waited for.
go_builds_log=$(mktemp)
deploy/local/cluster.sh prebuild --tools-but-containerd2 >"$go_builds_log" 2>&1 &
go_builds_pid=$!
# shellcheck source=deploy/local/lib/processes.sh
source deploy/local/lib/processes.sh
crd_tmp=$(mktemp -d)
fuzz_pid=""
containerd2_build_pid=""
cleanup() {
  kill_tree "$go_builds_pid"
  [[ -z $fuzz_pid ]] || kill_tree "$fuzz_pid"
  [[ -z $containerd2_build_pid ]] || kill_tree "$containerd2_build_pid"
  rm -rf "$crd_tmp" "$go_builds_log" "${fuzz_log:-}" "${containerd2_build_log:-}"
}
trap cleanup EXIT

step "rustfmt"
cargo fmt --all -- --check

step "clippy"
cargo clippy --workspace --all-targets --locked -- -D warnings

step "no function over 80 lines outside tests"
tests/lib/long-functions.sh

step "the benchmark results table is generated as its fixture says"
tests/bench/table_test.sh

step "generated CRDs match deploy/crds"
cargo run --quiet --locked -p stevedore-api --bin crdgen -- "$crd_tmp"
if ! diff -ru deploy/crds "$crd_tmp"; then
  echo "deploy/crds is stale: run 'cargo run -p stevedore-api --bin crdgen' and commit the result" >&2
  exit 1
fi

step "fuzz: every cargo-fuzz target for ${FUZZ_SECONDS:-30} s, ${FUZZ_JOBS:-2} at a time, in the background beside the cluster's start"
# Nightly sanitizer builds have a target dir of their own; each corpus grows in the cache,
# seeded from fuzz/seeds; a crash's input is kept there and fails the run. It runs beside
# the wait for the Go builds and the cluster step, which mostly waits on processes starting
# (about 75 s when the build is warm), and is waited for before the tests. On a new machine
# cargo-fuzz is installed in the same background job (96 s in the foreground before).
fuzz_cache=${XDG_CACHE_HOME:-$HOME/.cache}/stevedore/fuzz
fuzz_log=$(mktemp)
# At the lowest CPU priority: the cluster step's build of every binary and test is CPU
# bound and was 65 s slower with the fuzzers beside it at equal priority (5 min 02 s against
# 3 min 57 s alone, 2026-11-28). Each target still runs its full time, on the cores the
# build leaves idle (its link steps run on one).
nice -n 19 bash -c 'command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
  source tests/lib/fuzz.sh && fuzz_all "$@"' fuzz \
  "$fuzz_cache" "${FUZZ_SECONDS:-30}" "${FUZZ_JOBS:-2}" >"$fuzz_log" 2>&1 &
fuzz_pid=$!

step "waiting for the Go builds started at the beginning"
if ! wait "$go_builds_pid"; then
  cat "$go_builds_log" >&2
  echo "the Go builds failed (deploy/local/cluster.sh prebuild --tools); their output is above" >&2
  exit 1
fi
cat "$go_builds_log"

step "local cluster with Stevedore deployed"
# A cluster left behind by a previous session whose processes are gone is cleaned first.
if ! deploy/local/cluster.sh status >/dev/null 2>&1; then
  deploy/local/cluster.sh down
fi
time deploy/local/run.sh --fake-nodes 2 --real-nodes 3

step "waiting for the fuzz run started before the cluster"
if ! wait "$fuzz_pid"; then
  cat "$fuzz_log" >&2
  echo "a fuzz target failed (its output is above)" >&2
  exit 1
fi
fuzz_pid=""
cat "$fuzz_log"

step "helm chart lints (deploy/helm/stevedore; its crds/ is deploy/crds, checked above)"
helm=$(deploy/local/cluster.sh env | sed -n 's/^export STEVEDORE_HELM=//p')
"$helm" lint --strict deploy/helm/stevedore

step "tests"
# The deploy's dev build was the tests' build (deploy/local/lib/binaries.sh), so this
# compiles nothing; it lists the test executables for the runner.
(source deploy/local/lib/binaries.sh && cargo_build_binaries dev)
test_artifacts=$(mktemp)
cargo test --workspace --locked --no-run --message-format=json-render-diagnostics >"$test_artifacts"
prune_stale_test_executables "$CARGO_TARGET_DIR" "$test_artifacts"
step "doc tests"
cargo test --workspace --locked --doc

step "tests built; running them, ${STEVEDORE_TEST_JOBS:-4} suites at a time"
# Four: the overlapping suites mostly wait on the cluster; on the 2-core machine they took
# 361 s four at a time against 415 s three at a time, all passing (2026-11-28).
# shellcheck source=tests/lib/suites.sh
source tests/lib/suites.sh
# containerd 2.x for the last step, built beside the suites (a second when cached) at the
# lowest CPU priority: the suites mostly wait on the cluster, and the cluster comes first.
containerd2_build_log=$(mktemp)
nice -n 19 deploy/local/cluster.sh prebuild --containerd2 >"$containerd2_build_log" 2>&1 &
containerd2_build_pid=$!
set +e
run_test_binaries "$test_artifacts" "${STEVEDORE_TEST_JOBS:-4}"
status=$?
set -e

step "the agent's suites again, against containerd 2.x beside the cluster's 1.6"
# About a minute: the suites that take containerd from the test's environment, one at a
# time, on a containerd 2.x of their own (tests/src/containerd.rs); it is stopped after.
containerd2_status=1
if ! wait "$containerd2_build_pid"; then
  cat "$containerd2_build_log" >&2
  echo "building containerd 2.x failed (deploy/local/cluster.sh prebuild --containerd2); its output is above" >&2
fi
containerd2_build_pid=""
if deploy/local/cluster.sh containerd2 up; then
  set +e
  run_agent_suites_on_containerd2 "$test_artifacts" "$(deploy/local/cluster.sh containerd2 env)"
  containerd2_status=$?
  set -e
fi
deploy/local/cluster.sh containerd2 down
((status != 0)) || status=$containerd2_status
rm -f "$test_artifacts"
step "done: the tests exited with $status"
print_timings "$suite_durations"
print_failure_digest
exit "$status"
