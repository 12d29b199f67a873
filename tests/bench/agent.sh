#!/usr/bin/env bash
# Agent benchmarks on the local cluster (run `deploy/local/run.sh` first; needs root):
#   1. pull time of the multi-layer test image, side by side from the same registry: the
#      agent, `ctr images pull`, and kubelet's own CRI pull (`crictl pull`); RUNS runs each,
#      the image and its content removed before every pull;
#   2. agent RSS idle, and its peak (sampled every 50 ms) during 10 concurrent pulls;
#   3. RestartContainers latency, from the call to the new container running (RESTARTS
#      runs, default 10);
#   4. the agent's idle VmRSS after all that work (goal: <= 12 MiB), 5 s after the last.
# AGENT=deployed (default) measures the DaemonSet's agent on the kubelet node, through its
# root-only Unix socket; AGENT=release runs a release build of this checkout as a process
# of its own (own socket and ports) beside it.
#   AGENT_BIN=path    with AGENT=release: run that binary instead of building this checkout
#                     (to alternate two builds' runs when the machine is noisy).
#   SKIP_MEMORY=1     skip section 2; SKIP_RESTART=1 skip section 3, which starts pods on
#                     the kubelet node (pull-time runs need neither).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
# shellcheck source=figures-lib.sh
source tests/bench/figures-lib.sh
RUNS=${RUNS:-5}
RESTARTS=${RESTARTS:-10}
AGENT=${AGENT:-deployed}
# shellcheck source=/dev/null
source <(deploy/local/cluster.sh env)
# shellcheck source=/dev/null
source deploy/local/versions.env
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/stevedore/cargo-target}
CRICTL=${STEVEDORE_CRICTL:-$HOME/.cache/stevedore/crictl-$CRICTL_VERSION/bin/crictl}
[[ -x $CRICTL ]] || { echo "crictl not found at $CRICTL (deploy/local/cluster.sh up builds it)" >&2; exit 1; }
WORK=$(mktemp -d /tmp/stevedore-bench.XXXXXX)
CTR=(ctr --address "$STEVEDORE_CONTAINERD_SOCK" -n k8s.io)
export CRI_CONFIG_FILE=$WORK/crictl.yaml
cat >"$CRI_CONFIG_FILE" <<YAML
runtime-endpoint: unix://$STEVEDORE_CONTAINERD_SOCK
image-endpoint: unix://$STEVEDORE_CONTAINERD_SOCK
timeout: 600
YAML
CRI=("$CRICTL")
IMAGE=$STEVEDORE_REGISTRY/stevedore/large:v1
G=$STEVEDORE_GRPCURL
cleanup() { rm -rf "$WORK"; }

case $AGENT in
  deployed)
    SOCK=/run/stevedore/agent.sock
    container=$("${CRI[@]}" ps -q --name '^agent$' --label io.kubernetes.pod.namespace=kube-system --state running | head -n1)
    [[ -n $container ]] || { echo "no running agent container on this node" >&2; exit 1; }
    AGENT_PID=$("${CRI[@]}" inspect -o go-template --template '{{.info.pid}}' "$container")
    ;;
  release)
    SOCK=$WORK/agent.sock
    if [[ -z ${AGENT_BIN:-} ]]; then
      # The deployed images' build (one invocation for all binaries: lib/binaries.sh).
      (source deploy/local/lib/binaries.sh && cargo_build_binaries release -q)
      AGENT_BIN=$CARGO_TARGET_DIR/release/stevedore-agent
    fi
    "$AGENT_BIN" --node-name "$STEVEDORE_NODE_NAME" \
      --containerd-socket "$STEVEDORE_CONTAINERD_SOCK" --grpc-addr 127.0.0.1:11350 \
      --health-addr 127.0.0.1:11351 --metrics-addr 127.0.0.1:11352 --unix-socket "$SOCK" \
      --registry-config-dir "$STEVEDORE_STATE_DIR/containerd/certs.d" \
      --insecure-registry "$STEVEDORE_REGISTRY" --max-concurrent-pulls 10 >"$WORK/agent.log" 2>&1 &
    AGENT_PID=$!
    cleanup() { kill "$AGENT_PID" 2>/dev/null; rm -rf "$WORK"; }
    for _ in $(seq 1 50); do [[ -S $SOCK ]] && break; sleep 0.2; done
    ;;
  *) echo "AGENT must be deployed or release, not $AGENT" >&2; exit 1 ;;
esac
trap cleanup EXIT
echo "agent: $AGENT (pid $AGENT_PID, socket $SOCK)"

rss_kib() { awk '/^VmRSS:/ { print $2 }' "/proc/$AGENT_PID/status"; }
now() { date +%s.%N; }
# remove_image REF: every record naming the image's manifest (tag, repo digest, image ID),
# leftover pull leases, then containerd's GC removes content and snapshots (--sync).
remove_image() {
  local digest names leases
  digest=$("${CTR[@]}" images ls | awk -v r="$1" '$1 == r { print $3 }' | head -n1)
  if [[ -n $digest ]]; then
    names=$("${CTR[@]}" images ls | awk -v d="$digest" '$3 == d { print $1 }')
    # shellcheck disable=SC2086
    "${CTR[@]}" images rm --sync $names >/dev/null
  fi
  leases=$("${CTR[@]}" leases ls -q | grep '^stevedore-pull-' || true)
  # shellcheck disable=SC2086
  [[ -n $leases ]] && "${CTR[@]}" leases rm --sync $leases >/dev/null
  return 0
}
agent_pull() {
  "$G" -plaintext -max-time 600 -d "{\"image\":\"$1\",\"pull_policy\":\"PULL_POLICY_ALWAYS\"}" \
    "unix://$SOCK" stevedore.agent.v1.ImageService/PullImage >/dev/null
}
ctr_pull() { "${CTR[@]}" images pull --plain-http "$1" >/dev/null; }
cri_pull() { "${CRI[@]}" pull "$1" >/dev/null; }
# timed PULLER REF: seconds a pull from a cleared cache takes.
timed() {
  local t0 t1
  remove_image "$2"
  t0=$(now); "$1" "$2"; t1=$(now)
  echo "$t1 - $t0" | bc
}
mibps() { echo "$SIZE / $1 / 1048576" | bc -l; }
mean() { echo "($(tr ' ' '+' <<<"$1")) / $RUNS" | bc -l; }

echo "== pull time: $IMAGE ($RUNS runs each, cache cleared before every pull)"
SIZE=$(skopeo inspect --tls-verify=false --raw "docker://$IMAGE" |
  python3 -c 'import json,sys; m=json.load(sys.stdin); print(sum(l["size"] for l in m["layers"]) + m["config"]["size"])')
agent_times="" ctr_times="" cri_times=""
for run in $(seq 1 "$RUNS"); do
  a=$(timed agent_pull "$IMAGE") c=$(timed ctr_pull "$IMAGE") k=$(timed cri_pull "$IMAGE")
  agent_times="$agent_times $a" ctr_times="$ctr_times $c" cri_times="$cri_times $k"
  printf 'run %d: agent %.2fs (%.0f MiB/s)  ctr %.2fs (%.0f MiB/s)  crictl %.2fs (%.0f MiB/s)\n' \
    "$run" "$a" "$(mibps "$a")" "$c" "$(mibps "$c")" "$k" "$(mibps "$k")"
done
am=$(mean "${agent_times# }") cm=$(mean "${ctr_times# }") km=$(mean "${cri_times# }")
printf 'mean: agent %.2fs, ctr %.2fs, crictl %.2fs; agent/ctr %.2f, agent/crictl %.2f (goal <= 0.95; %d bytes compressed)\n' \
  "$am" "$cm" "$km" "$(echo "$am / $cm" | bc -l)" "$(echo "$am / $km" | bc -l)" "$SIZE"
bench_params agent RUNS RESTARTS AGENT
# crictl pull is kubelet's own path (CRI), the native one; ctr pulls through containerd's
# client library.
bench_figure agent pull-mean stevedore "$(printf '%.2f' "$am")" s
bench_figure agent pull-mean native "$(printf '%.2f' "$km")" s
bench_figure agent pull-mean ctr "$(printf '%.2f' "$cm")" s
remove_image "$IMAGE"

if [[ -z ${SKIP_MEMORY:-} ]]; then
  echo "== agent memory (goal: idle <= 15 MiB, peak <= 40 MiB)"
  sleep 5
  echo "idle RSS: $(rss_kib) KiB"
  # Ten distinct references to the same content (the registry dedups storage): ten pulls in
  # flight at once.
  for i in $(seq 1 10); do
    skopeo copy --quiet --src-tls-verify=false --dest-tls-verify=false \
      "docker://$IMAGE" "docker://$STEVEDORE_REGISTRY/bench/large-$i:v1"
  done
  pulls=()
  for i in $(seq 1 10); do agent_pull "$STEVEDORE_REGISTRY/bench/large-$i:v1" & pulls+=($!); done
  any_running() { local p; for p in "$@"; do kill -0 "$p" 2>/dev/null && return 0; done; return 1; }
  peak=0
  while any_running "${pulls[@]}"; do
    rss=$(rss_kib); ((rss > peak)) && peak=$rss
    sleep 0.05
  done
  wait "${pulls[@]}"
  echo "peak RSS during 10 concurrent pulls: $peak KiB; RSS after: $(rss_kib) KiB"
  bench_figure agent peak-rss-10-pulls stevedore "$((peak / 1024))" MiB
  for i in $(seq 1 10); do remove_image "$STEVEDORE_REGISTRY/bench/large-$i:v1"; done
  sleep 5
  echo "idle RSS after the pulls: $(rss_kib) KiB"
fi

if [[ -n ${SKIP_RESTART:-} ]]; then exit 0; fi

echo "== RestartContainers latency (a fresh pod per run: kubelet backs off repeated restarts)"
for run in $(seq 1 "$RESTARTS"); do
  pod=stevedore-bench-$run
  kubectl run "$pod" --image="$STEVEDORE_REGISTRY/stevedore/web:v1" --restart=Always \
    --overrides="{\"spec\":{\"nodeName\":\"$STEVEDORE_NODE_NAME\"}}" >/dev/null
  kubectl wait --for=condition=Ready "pod/$pod" --timeout=120s >/dev/null
  uid=$(kubectl get pod "$pod" -o jsonpath='{.metadata.uid}')
  ns=$(kubectl get pod "$pod" -o jsonpath='{.metadata.namespace}')
  t0=$(now)
  op=$("$G" -plaintext -d "{\"pod\":{\"namespace\":\"$ns\",\"name\":\"$pod\",\"uid\":\"$uid\"},\"container_names\":[\"$pod\"],\"termination_grace_period_seconds\":1}" \
    "unix://$SOCK" stevedore.agent.v1.ContainerService/RestartContainers |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["operationId"])')
  "$G" -plaintext -max-time 120 -d "{\"operation_id\":\"$op\"}" "unix://$SOCK" \
    stevedore.agent.v1.ContainerService/WatchRestart >"$WORK/restart.json"
  t1=$(now)
  grep -q SUCCEEDED "$WORK/restart.json" || { echo "restart did not succeed:"; cat "$WORK/restart.json"; exit 1; }
  printf 'run %d: %.2fs from RestartContainers to the new container running\n' "$run" "$(echo "$t1 - $t0" | bc)"
  kubectl delete pod "$pod" --wait=false >/dev/null
done

sleep 5
after_kib=$(rss_kib)
echo "idle RSS after $RUNS timed pulls, 10 concurrent ones and $RESTARTS restarts: $after_kib KiB"
bench_figure agent idle-vmrss-after-work stevedore "$(awk -v k="$after_kib" 'BEGIN { printf "%.1f", k / 1024 }')" MiB
