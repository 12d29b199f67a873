#!/usr/bin/env bash
# Idle memory of a release agent, fresh and after a burst of pulls (needs the local
# cluster's containerd and registry, `deploy/local/run.sh`, and root): RUNS times, a fresh
# agent process of its own (own Unix socket, loopback ports picked by the kernel) starts
# against the cluster's containerd and sits idle IDLE seconds; its VmRSS, RssAnon and
# RssFile are read from /proc/<pid>/status ("fresh"). Then it pulls BURST images at once,
# each its own content (nothing shared with any other image, so every blob is downloaded
# and every layer unpacked), the images are removed again, and after IDLE more seconds
# the same figures are read ("after burst"), with the peak VmRSS of the burst (VmHWM).
# The script prints each run and the median of each figure.
# It starts the agent as tests/bench/agent.sh (AGENT=release) does, and so as a release
# build runs in the DaemonSet, without the DaemonSet's environment unless given here.
#   AGENT_BIN=path   measure that binary instead of building the release agent.
#   RUNS=3 IDLE=30   runs and idle seconds per run (and after each burst).
#   BURST=10         images pulled at once in each run; 0: fresh figures only.
#   BURST_REPO=bench/idle-burst
#                    the registry repository of the burst's images (tags v1..vBURST),
#                    built once and pushed on first use, removed from containerd after
#                    each burst; give one of your own when others run this beside you.
#   BURST_SHARED=1   the burst pulls BURST tags of one image (BURST_REPO:v1) instead, as
#                    tests/bench/agent.sh does: one download, the other pulls wait for it.
#   Anything else in the environment reaches the agent, e.g. MALLOC_ARENA_MAX=2 (set in
#   deploy/agent/daemonset.yaml) or STEVEDORE_WORKER_THREADS=1.
# RestartContainers is not part of the burst: it needs pods that kubelet runs (agent.sh
# section 3 times it).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
# shellcheck source=figures-lib.sh
source tests/bench/figures-lib.sh
# shellcheck source=/dev/null
source <(deploy/local/cluster.sh env)
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/stevedore/cargo-target}
RUNS=${RUNS:-3}
IDLE=${IDLE:-30}
BURST=${BURST:-10}
BURST_REPO=${BURST_REPO:-bench/idle-burst}
WORK=$(mktemp -d /tmp/stevedore-bench-idle.XXXXXX)
CTR=(ctr --address "$STEVEDORE_CONTAINERD_SOCK" -n k8s.io)
G=$STEVEDORE_GRPCURL
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
echo "agent: $AGENT_BIN ($(stat -c %s "$AGENT_BIN") bytes); $RUNS runs, ${IDLE}s idle each, bursts of $BURST pulls"

BURST_SHARED=${BURST_SHARED:-}
burst_image() {
  if [[ -n $BURST_SHARED ]]; then
    echo "$STEVEDORE_REGISTRY/$BURST_REPO:v1-tag$1"
  else
    echo "$STEVEDORE_REGISTRY/$BURST_REPO:v$1"
  fi
}

# push_burst_image N: image N of the burst, shaped as the cluster's large:v1 (busybox, then
# four incompressible 16 MiB layers) but with content of its own: a file naming it in the
# bottom layer and data keyed by N in the others, so no blob and no layer is shared.
push_burst_image() {
  local n=$1 layout=$WORK/burst-layout bundle=$WORK/burst-bundle i
  rm -rf "$layout" "$bundle"
  umoci init --layout "$layout"
  umoci new --image "$layout:v$n"
  umoci unpack --image "$layout:v$n" "$bundle" >/dev/null
  mkdir -p "$bundle/rootfs/bin" "$bundle/rootfs/data"
  cp /bin/busybox "$bundle/rootfs/bin/busybox"
  echo "burst image $n" >"$bundle/rootfs/burst"
  umoci repack --refresh-bundle --image "$layout:v$n" "$bundle"
  for i in 1 2 3 4; do
    head -c $((16 * 1024 * 1024)) /dev/zero |
      openssl enc -aes-128-ctr -nosalt -K "$(printf '%016x%016x' "$n" "$i")" \
        -iv 00000000000000000000000000000000 >"$bundle/rootfs/data/blob-$i"
    umoci repack --refresh-bundle --image "$layout:v$n" "$bundle"
  done
  skopeo copy --quiet --dest-tls-verify=false "oci:$layout:v$n" "docker://$STEVEDORE_REGISTRY/$BURST_REPO:v$n"
  rm -rf "$layout" "$bundle"
}

# remove_image REF: every record naming the image's manifest (tag, repo digest, image ID);
# containerd's GC then removes its content and snapshots (--sync). The burst's images share
# nothing with other images, so this touches nothing else.
remove_image() {
  local digest names
  digest=$("${CTR[@]}" images ls | awk -v r="$1" '$1 == r { print $3 }' | head -n1)
  [[ -n $digest ]] || return 0
  names=$("${CTR[@]}" images ls | awk -v d="$digest" '$3 == d { print $1 }')
  # shellcheck disable=SC2086
  "${CTR[@]}" images rm --sync $names >/dev/null
}

if ((BURST > 0)); then
  for n in $(seq 1 "$BURST"); do
    if [[ -n $BURST_SHARED ]]; then
      skopeo inspect --tls-verify=false --raw "docker://$STEVEDORE_REGISTRY/$BURST_REPO:v1" >/dev/null 2>&1 ||
        push_burst_image 1
      # The registry stores the content once.
      skopeo copy --quiet --src-tls-verify=false --dest-tls-verify=false \
        "docker://$STEVEDORE_REGISTRY/$BURST_REPO:v1" "docker://$(burst_image "$n")"
    else
      skopeo inspect --tls-verify=false --raw "docker://$(burst_image "$n")" >/dev/null 2>&1 ||
        push_burst_image "$n"
    fi
    remove_image "$(burst_image "$n")"
  done
fi

field_kib() { awk -v f="$1:" '$1 == f { print $2 }' "/proc/$AGENT_PID/status"; }
median() { tr ' ' '\n' <<<"$1" | sed '/^$/d' | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
# Each run's figures, by "<fresh|burst>.<VmRSS|RssAnon|RssFile|VmHWM>", space-separated.
declare -A seen
# figures WHEN FIELD...: prints the agent's figures now and adds them to `seen`.
figures() {
  local when=$1 field line="" kib
  shift
  for field in "$@"; do
    kib=$(field_kib "$field")
    seen[$when.$field]+=" $kib"
    line+=$(printf '  %s %6d KiB' "$field" "$kib")
  done
  printf 'run %d %-6s%s  threads %s\n' "$run" "$when:" "$line" "$(field_kib Threads)"
}
# summary WHEN FIELD...: the median of each field over the runs.
summary() {
  local when=$1 field line=""
  shift
  for field in "$@"; do
    line+=$(printf '  %s %6d KiB' "$field" "$(median "${seen[$when.$field]}")")
  done
  printf 'median %-6s%s\n' "$when:" "$line"
}
pull() {
  "$G" -plaintext -max-time 600 -d "{\"image\":\"$1\",\"pull_policy\":\"PULL_POLICY_ALWAYS\"}" \
    "unix://$sock" stevedore.agent.v1.ImageService/PullImage >/dev/null
}

for run in $(seq 1 "$RUNS"); do
  sock=$WORK/agent-$run.sock
  "$AGENT_BIN" --node-name "$STEVEDORE_NODE_NAME" \
    --containerd-socket "$STEVEDORE_CONTAINERD_SOCK" --grpc-addr 127.0.0.1:0 \
    --health-addr 127.0.0.1:0 --metrics-addr 127.0.0.1:0 --unix-socket "$sock" \
    --registry-config-dir "$STEVEDORE_STATE_DIR/containerd/certs.d" \
    --insecure-registry "$STEVEDORE_REGISTRY" --max-concurrent-pulls "$((BURST > 0 ? BURST : 1))" \
    >"$WORK/agent-$run.log" 2>&1 &
  AGENT_PID=$!
  for _ in $(seq 1 100); do [[ -S $sock ]] && break; sleep 0.1; done
  [[ -S $sock ]] || { echo "the agent did not start:"; cat "$WORK/agent-$run.log"; exit 1; }
  sleep "$IDLE"
  kill -0 "$AGENT_PID" || { echo "the agent exited:"; cat "$WORK/agent-$run.log"; exit 1; }
  figures fresh VmRSS RssAnon RssFile
  if ((BURST > 0)); then
    t0=$(date +%s.%N)
    pulls=()
    for n in $(seq 1 "$BURST"); do pull "$(burst_image "$n")" & pulls+=($!); done
    for p in "${pulls[@]}"; do wait "$p" || { echo "a pull failed:"; tail -20 "$WORK/agent-$run.log"; exit 1; }; done
    printf 'run %d burst: %d pulls in %.1f s\n' "$run" "$BURST" "$(echo "$(date +%s.%N) - $t0" | bc)"
    for n in $(seq 1 "$BURST"); do remove_image "$(burst_image "$n")"; done
    sleep "$IDLE"
    kill -0 "$AGENT_PID" || { echo "the agent exited:"; cat "$WORK/agent-$run.log"; exit 1; }
    figures burst VmRSS RssAnon RssFile VmHWM
  fi
  kill "$AGENT_PID"
  wait "$AGENT_PID" 2>/dev/null || true
  AGENT_PID=
done
summary fresh VmRSS RssAnon RssFile
bench_params agent_idle_rss RUNS IDLE BURST BURST_SHARED
bench_figure agent_idle_rss idle-vmrss-median stevedore "$(median "${seen[fresh.VmRSS]}")" KiB
bench_figure agent_idle_rss idle-rssanon-median stevedore "$(median "${seen[fresh.RssAnon]}")" KiB
if ((BURST > 0)); then
  summary burst VmRSS RssAnon RssFile VmHWM
  echo "(goal: VmRSS <= 12 MiB = 12288 KiB after the burst; VmHWM is the burst's peak)"
  bench_figure agent_idle_rss after-burst-vmrss-median stevedore "$(median "${seen[burst.VmRSS]}")" KiB
  bench_figure agent_idle_rss after-burst-rssanon-median stevedore "$(median "${seen[burst.RssAnon]}")" KiB
  bench_figure agent_idle_rss burst-peak-vmrss-median stevedore "$(median "${seen[burst.VmHWM]}")" KiB
fi
