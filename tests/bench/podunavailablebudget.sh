#!/usr/bin/env bash
# The cost of the disruption-budget check on the local cluster (run `deploy/local/run.sh`
# first; needs root): NODES simulated nodes, each with its own agent process
# (deploy/local/sim-agents.sh), one CloneSet of REPLICAS pods there, InPlaceIfPossible
# with maxUnavailable 20%, rolled in place to a new image twice, side by side:
#   1. without a budget;
#   2. with a PodUnavailableBudget of maxUnavailable 20% over the CloneSet (targetRef), so
#      every in-place update is a check-and-decrement of the budget first (a read and a
#      conditional status write, retried on conflicts);
# and the ratio of the two rollout times. Each run: create → all ready, image change →
# all updated in place and ready; the set is deleted between runs.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
# shellcheck source=figures-lib.sh
source tests/bench/figures-lib.sh
NODES=${NODES:-100}
REPLICAS=${REPLICAS:-1000}
PREFIX=bench
NS=stevedore-bench
# shellcheck source=/dev/null
source <(deploy/local/cluster.sh env)
# shellcheck source=rollout-lib.sh
source tests/bench/rollout-lib.sh
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
status() { kubectl -n "$NS" get cloneset bench -o jsonpath="$1"; }
budget() { kubectl -n "$NS" get podunavailablebudget bench -o jsonpath="$1"; }

create_cloneset() {
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
}

# roll: changes the image and prints the seconds until every pod is updated in place and
# ready.
roll() {
  local start
  start=$(now)
  patch_observed cloneset bench \
    "[{\"op\":\"replace\",\"path\":\"/spec/template/spec/containers/0/image\",\"value\":\"$V2\"}]"
  until [[ $(status '{.status.updatedReadyReplicas}/{.status.readyReplicas}/{.status.currentRevision}') == "$REPLICAS/$REPLICAS/$(status '{.status.updateRevision}')" ]] &&
    ! in_place_pending "$NS"; do
    sleep 0.5
  done
  since "$start"
}

delete_cloneset() {
  kubectl -n "$NS" delete cloneset bench --wait=true >/dev/null
  until [[ -z $(kubectl -n "$NS" get pods -o name) ]]; do sleep 1; done
}

deploy/local/sim-agents.sh up "$NODES" "$PREFIX"
kubectl create namespace "$NS" >/dev/null

echo "== in-place rollout of $REPLICAS pods on $NODES simulated nodes, no budget" >&2
create_cloneset
without_s=$(roll)
delete_cloneset

echo "== the same with a PodUnavailableBudget of maxUnavailable 20%" >&2
kubectl apply -f - >/dev/null <<YAML
apiVersion: policy.kruise.io/v1alpha1
kind: PodUnavailableBudget
metadata: { name: bench, namespace: $NS }
spec:
  targetRef: { apiVersion: apps.kruise.io/v1alpha1, kind: CloneSet, name: bench }
  maxUnavailable: 20%
YAML
create_cloneset
until [[ $(budget '{.status.currentAvailable}') == "$REPLICAS" ]]; do sleep 0.5; done
with_s=$(roll)
# Every pod's disruption was recorded and has ended again.
until [[ $(budget '{.status.currentAvailable}') == "$REPLICAS" ]]; do sleep 0.5; done
allowed=$(budget '{.status.unavailableAllowed}')
held=$(kubectl -n "$NS" get events --field-selector reason=DisruptionHeld -o name | wc -l)

cat <<EOF2
nodes with agents:               $NODES
replicas:                        $REPLICAS
roll in place (20%), no budget:  ${without_s}s
roll in place (20%), budget 20%: ${with_s}s
ratio (with / without):          $(awk -v a="$with_s" -v b="$without_s" 'BEGIN { printf "%.2f", a / b }')
budget after (allowed):          $allowed
DisruptionHeld events:           $held
EOF2
bench_params podunavailablebudget NODES REPLICAS
bench_figure podunavailablebudget inplace-rollout stevedore "$with_s" s
bench_figure podunavailablebudget inplace-rollout without-budget "$without_s" s
