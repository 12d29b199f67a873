#!/usr/bin/env bash
# Agent benchmarks on the local cluster (run `deploy/local/run.sh` first; needs root):
#   1. pull throughput of the multi-layer test image: the agent vs `ctr images pull` of the
#      same image from the same registry, RUNS times each, image and content removed between;
#   2. agent RSS idle and its peak during 10 concurrent pulls;
#   3. RestartContainers latency, from the call to the new container running.
# A release build of the agent runs as a separate process on its own socket and ports.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
RUNS=${RUNS:-3}
# shellcheck source=/dev/null
source <(deploy/local/cluster.sh env)
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/stevedore/cargo-target}
WORK=$(mktemp -d /tmp/stevedore-bench.XXXXXX)
SOCK=$WORK/agent.sock
CTR=(ctr --address "$STEVEDORE_CONTAINERD_SOCK" -n k8s.io)
IMAGE=$STEVEDORE_REGISTRY/stevedore/large:v1
G=$STEVEDORE_GRPCURL

cargo build --release --locked -q -p stevedore-agent
"$CARGO_TARGET_DIR/release/stevedore-agent" --node-name "$STEVEDORE_NODE_NAME" \
  --containerd-socket "$STEVEDORE_CONTAINERD_SOCK" --grpc-addr 127.0.0.1:11350 \
  --health-addr 127.0.0.1:11351 --metrics-addr 127.0.0.1:11351 --unix-socket "$SOCK" --insecure-registry "$STEVEDORE_REGISTRY" \
  --max-concurrent-pulls 10 >"$WORK/agent.log" 2>&1 &
AGENT=$!
trap 'kill $AGENT 2>/dev/null; rm -rf "$WORK"' EXIT
for _ in $(seq 1 50); do [[ -S $SOCK ]] && break; sleep 0.2; done

rss_kib() { awk '/^VmRSS:/ { print $2 }' "/proc/$AGENT/status"; }
peak_kib() { awk '/^VmHWM:/ { print $2 }' "/proc/$AGENT/status"; }
now() { date +%s.%N; }
# remove_image REF: every record naming the image's manifest (tag, repo digest, image ID),
# leftover pull leases, then containerd's GC removes content and snapshots (--sync).
remove_image() {
  local digest names leases
  digest=$("${CTR[@]}" images ls | awk -v r="$1" '$1 == r { print $3 }' | head -n1)
  if [[ -n $digest ]]; then
    names=$("${CTR[@]}" images ls | awk -v d="$digest" '$3 == d { print $1 }')
    "${CTR[@]}" images rm --sync $names >/dev/null
  fi
  leases=$("${CTR[@]}" leases ls -q | grep '^stevedore-pull-' || true)
  [[ -n $leases ]] && "${CTR[@]}" leases rm --sync $leases >/dev/null
  return 0
}
agent_pull() {
  "$G" -plaintext -max-time 600 -d "{\"image\":\"$1\",\"pull_policy\":\"PULL_POLICY_ALWAYS\"}" \
    "unix://$SOCK" stevedore.agent.v1.ImageService/PullImage >/dev/null
}

echo "== pull throughput: $IMAGE ($RUNS runs each, cache cleared between)"
SIZE=$(skopeo inspect --tls-verify=false --raw "docker://$IMAGE" |
  python3 -c 'import json,sys; m=json.load(sys.stdin); print(sum(l["size"] for l in m["layers"]) + m["config"]["size"])')
agent_total=0 ctr_total=0
for run in $(seq 1 "$RUNS"); do
  remove_image "$IMAGE"
  t0=$(now); agent_pull "$IMAGE"; t1=$(now)
  remove_image "$IMAGE"
  t2=$(now); "${CTR[@]}" images pull --plain-http "$IMAGE" >/dev/null; t3=$(now)
  a=$(echo "$t1 - $t0" | bc) c=$(echo "$t3 - $t2" | bc)
  agent_total=$(echo "$agent_total + $a" | bc) ctr_total=$(echo "$ctr_total + $c" | bc)
  printf 'run %d: agent %.2fs (%.0f MiB/s)  ctr %.2fs (%.0f MiB/s)\n' "$run" "$a" \
    "$(echo "$SIZE / $a / 1048576" | bc -l)" "$c" "$(echo "$SIZE / $c / 1048576" | bc -l)"
done
printf 'mean: agent %.2fs, ctr %.2fs, agent/ctr time ratio %.2f (%d bytes compressed)\n' \
  "$(echo "$agent_total / $RUNS" | bc -l)" "$(echo "$ctr_total / $RUNS" | bc -l)" \
  "$(echo "$agent_total / $ctr_total" | bc -l)" "$SIZE"

echo "== agent memory"
remove_image "$IMAGE"
echo "idle RSS: $(rss_kib) KiB"
# Ten distinct references to the same content (the registry dedups storage): ten pulls in
# flight at once through the pull manager.
for i in $(seq 1 10); do
  skopeo copy --quiet --src-tls-verify=false --dest-tls-verify=false \
    "docker://$IMAGE" "docker://$STEVEDORE_REGISTRY/bench/large-$i:v1"
done
for i in $(seq 1 10); do agent_pull "$STEVEDORE_REGISTRY/bench/large-$i:v1" & done
wait %2 %3 %4 %5 %6 %7 %8 %9 %10 %11 2>/dev/null || wait
echo "peak RSS during 10 concurrent pulls: $(peak_kib) KiB; RSS after: $(rss_kib) KiB"
for i in $(seq 1 10); do remove_image "$STEVEDORE_REGISTRY/bench/large-$i:v1"; done

echo "== RestartContainers latency (a fresh pod per run: kubelet backs off repeated restarts)"
for run in $(seq 1 "$RUNS"); do
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
