#!/usr/bin/env bash
# CloneSet at scale on the local cluster (run `deploy/local/run.sh` first; needs root):
# NODES simulated nodes, each with its own agent process (deploy/local/sim-agents.sh, all
# sharing the one containerd), one CloneSet of REPLICAS pods there, InPlaceIfPossible with
# maxUnavailable 20%:
#   1. create → status says all REPLICAS ready;
#   2. image change → all REPLICAS updated in place and ready (each pod: InPlaceUpdateReady
#      False through its node's agent, image patch, kwok's simulated restart, completion);
#   3. control-plane RSS (every replica) with those pods cached, reconciles and agent RPCs;
#   4. the apiserver floor: the same pod writes from a minimal client (api-floor).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
NODES=${NODES:-100}
REPLICAS=${REPLICAS:-1000}
PREFIX=bench
NS=stevedore-bench
# shellcheck source=/dev/null
source <(deploy/local/cluster.sh env)
# shellcheck source=rollout-lib.sh
source tests/bench/rollout-lib.sh
# shellcheck source=figures-lib.sh
source tests/bench/figures-lib.sh
# shellcheck source=controlplane-metrics.sh
source tests/bench/controlplane-metrics.sh
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/stevedore/cargo-target}
V1=$STEVEDORE_REGISTRY/stevedore/web:v1
V2=$STEVEDORE_REGISTRY/stevedore/web:v2

cleanup() {
  kubectl delete namespace "$NS" --wait=true --timeout=300s >/dev/null 2>&1 || true
  deploy/local/sim-agents.sh down "$PREFIX" || true
}
trap cleanup EXIT
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
# wait_for_status EXPR: polls the CloneSet until the jq-free jsonpath test in EXPR holds.
status() { kubectl -n "$NS" get cloneset bench -o jsonpath="$1"; }

cargo build -q --release --locked -p stevedore-tests --bin api_floor
FLOOR=$CARGO_TARGET_DIR/release/api_floor
deploy/local/sim-agents.sh up "$NODES" "$PREFIX"
kubectl create namespace "$NS" >/dev/null

echo "== CloneSet of $REPLICAS pods on $NODES simulated nodes with agents" >&2
start=$(now)
kubectl apply -f - >/dev/null <<YAML
apiVersion: apps.kruise.io/v1alpha1
kind: CloneSet
metadata: { name: bench, namespace: $NS }
spec:
  replicas: $REPLICAS
  selector: { matchLabels: { app: bench } }
  updateStrategy: { type: InPlaceIfPossible, maxUnavailable: 20% }
  template:
    metadata: { labels: { app: bench } }
    spec:
      nodeSelector: { stevedore.dev/simulated: $PREFIX }
      tolerations: [{ operator: Exists }]
      containers: [{ name: web, image: "$V1" }]
YAML
until [[ $(status '{.status.readyReplicas}/{.status.updatedReadyReplicas}') == "$REPLICAS/$REPLICAS" ]]; do sleep 0.5; done
create_s=$(since "$start")

start=$(now)
patch_observed cloneset bench \
  "[{\"op\":\"replace\",\"path\":\"/spec/template/spec/containers/0/image\",\"value\":\"$V2\"}]"
until [[ $(status '{.status.updatedReadyReplicas}/{.status.readyReplicas}/{.status.currentRevision}') == "$REPLICAS/$REPLICAS/$(status '{.status.updateRevision}')" ]] &&
  ! in_place_pending "$NS"; do
  sleep 0.5
done
rollout_s=$(since "$start")
same_uids=$(kubectl -n "$NS" get pods -o jsonpath='{range .items[*]}{.status.containerStatuses[0].restartCount}{"\n"}{end}' | grep -c '^1$' || true)

rss=""
for pid in $(pgrep -f '(^|/)stevedore-controlplane( |$)'); do
  rss+="$(awk '/^VmRSS:/ { r = $2 } /^VmHWM:/ { h = $2 } END { printf "%d/%d MiB", r / 1024, h / 1024 }' "/proc/$pid/status") "
done
leader=$(kubectl -n kube-system get lease stevedore-controlplane -o jsonpath='{.spec.holderIdentity}')
metrics=$(controlplane_metrics "$leader" || true)
reconciles=$(awk '/^stevedore_controlplane_reconciles_total\{kind="CloneSet"\}/ { print $2 }' <<<"$metrics")
agent_ok=$(awk '/^stevedore_controlplane_agent_rpcs_total\{.*SetPodCondition.*Ok/ { s += $2 } END { print s + 0 }' <<<"$metrics")

kubectl -n "$NS" delete cloneset bench --wait=true >/dev/null
until [[ -z $(kubectl -n "$NS" get pods -o name) ]]; do sleep 1; done

echo "== apiserver floor (api-floor, 64 requests in flight)" >&2
floor_create_s=$("$FLOOR" create --namespace "$NS" --node-label "stevedore.dev/simulated=$PREFIX" \
  --replicas "$REPLICAS" --image "$V1")
floor_inplace_s=$("$FLOOR" inplace --namespace "$NS" --image "$V2")

cat <<EOF2
nodes with agents:            $NODES
replicas:                     $REPLICAS
create → all ready:           ${create_s}s   (floor: ${floor_create_s}s for $REPLICAS creates + Ready)
roll all in place (20%):      ${rollout_s}s   (floor: ${floor_inplace_s}s for the same pod writes, all at once)
pods restarted in place:      $same_uids of $REPLICAS (restartCount 1, same pods)
control-plane RSS (now/peak): $rss
CloneSet reconciles (leader): ${reconciles:-?}
SetPodCondition calls OK:     $agent_ok
EOF2
bench_params cloneset NODES REPLICAS
bench_figure cloneset create stevedore "$create_s" s
bench_figure cloneset create floor "$floor_create_s" s
bench_figure cloneset inplace-rollout stevedore "$rollout_s" s
bench_figure cloneset inplace-rollout floor "$floor_inplace_s" s
bench_figure cloneset restarted-in-place stevedore "$same_uids" pods
bench_figure cloneset reconciles stevedore "${reconciles:-?}" count
