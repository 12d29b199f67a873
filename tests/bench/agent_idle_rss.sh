#!/usr/bin/env bash
# Idle memory of a release agent (needs the local cluster's containerd,
# `deploy/local/run.sh`, and root): RUNS times, a fresh agent process of its own (own Unix
# socket, loopback ports picked by the kernel) starts against the cluster's containerd,
# sits idle IDLE seconds, and its VmRSS, RssAnon and RssFile are read from
# /proc/<pid>/status; the script prints each run and the median of each figure.
# It starts the agent as tests/bench/agent.sh (AGENT=release) does, and so as a release
# build runs in the DaemonSet, without the DaemonSet's environment unless given here.
#   AGENT_BIN=path   measure that binary instead of building the release agent.
#   RUNS=3 IDLE=30   runs and idle seconds per run.
#   Anything else in the environment reaches the agent, e.g. MALLOC_ARENA_MAX=2 (set in
#   deploy/agent/daemonset.yaml) or STEVEDORE_WORKER_THREADS=1.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
# shellcheck source=figures-lib.sh
source tests/bench/figures-lib.sh
# shellcheck source=/dev/null
source <(deploy/local/cluster.sh env)
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/stevedore/cargo-target}
RUNS=${RUNS:-3}
IDLE=${IDLE:-30}
WORK=$(mktemp -d /tmp/stevedore-bench-idle.XXXXXX)
AGENT_PID=
cleanup() {
  [[ -n $AGENT_PID ]] && kill "$AGENT_PID" 2>/dev/null && wait "$AGENT_PID" 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT

if [[ -z ${AGENT_BIN:-} ]]; then
  # The deployed images' build (one invocation for all binaries: lib/binaries.sh).
  (source deploy/local/lib/binaries.sh && cargo_build_binaries release -q)
  AGENT_BIN=$CARGO_TARGET_DIR/release/stevedore-agent
fi
echo "agent: $AGENT_BIN ($(stat -c %s "$AGENT_BIN") bytes); $RUNS runs, ${IDLE}s idle each"

field_kib() { awk -v f="$1:" '$1 == f { print $2 }' "/proc/$AGENT_PID/status"; }
median() { tr ' ' '\n' <<<"$1" | sed '/^$/d' | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

rss="" anon="" file=""
for run in $(seq 1 "$RUNS"); do
  sock=$WORK/agent-$run.sock
  "$AGENT_BIN" --node-name "$STEVEDORE_NODE_NAME" \
    --containerd-socket "$STEVEDORE_CONTAINERD_SOCK" --grpc-addr 127.0.0.1:0 \
    --health-addr 127.0.0.1:0 --metrics-addr 127.0.0.1:0 --unix-socket "$sock" \
    --registry-config-dir "$STEVEDORE_STATE_DIR/containerd/certs.d" \
    --insecure-registry "$STEVEDORE_REGISTRY" >"$WORK/agent-$run.log" 2>&1 &
  AGENT_PID=$!
  for _ in $(seq 1 100); do [[ -S $sock ]] && break; sleep 0.1; done
  [[ -S $sock ]] || { echo "the agent did not start:"; cat "$WORK/agent-$run.log"; exit 1; }
  sleep "$IDLE"
  kill -0 "$AGENT_PID" || { echo "the agent exited:"; cat "$WORK/agent-$run.log"; exit 1; }
  r=$(field_kib VmRSS) a=$(field_kib RssAnon) f=$(field_kib RssFile)
  printf 'run %d: VmRSS %6d KiB  RssAnon %6d KiB  RssFile %6d KiB  threads %s\n' \
    "$run" "$r" "$a" "$f" "$(field_kib Threads)"
  rss="$rss $r" anon="$anon $a" file="$file $f"
  kill "$AGENT_PID"
  wait "$AGENT_PID" 2>/dev/null || true
  AGENT_PID=
done
printf 'median: VmRSS %d KiB (%.1f MiB)  RssAnon %d KiB  RssFile %d KiB\n' \
  "$(median "$rss")" "$(echo "$(median "$rss") / 1024" | bc -l)" "$(median "$anon")" "$(median "$file")"
bench_params agent_idle_rss RUNS IDLE
bench_figure agent_idle_rss idle-vmrss-median stevedore "$(median "$rss")" KiB
bench_figure agent_idle_rss idle-rssanon-median stevedore "$(median "$anon")" KiB
