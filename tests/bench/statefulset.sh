#!/usr/bin/env bash
# Advanced StatefulSet at scale on the local cluster (run `deploy/local/run.sh` first; needs
# root), side by side with the cluster's own StatefulSet controller and the apiserver floor:
# NODES simulated nodes, each with its own agent process (deploy/local/sim-agents.sh), one
# Parallel StatefulSet of REPLICAS pods there:
#   1. Advanced StatefulSet (apps.kruise.io/v1beta1): create → all ready, then an image
#      change under InPlaceIfPossible with maxUnavailable 20% → all updated in place;
#   2. the native apps/v1 StatefulSet (kube-controller-manager): the same create, then the
#      same image change as its recreate rollout (maxUnavailable 20%, where the cluster's
#      MaxUnavailableStatefulSet gate allows it, else one pod at a time);
#   3. control-plane RSS with those pods cached, reconciles and agent RPCs;
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
# status RESOURCE JSONPATH: one field of the benchmark's set of kind RESOURCE.
status() { kubectl -n "$NS" get "$1" bench -o jsonpath="$2"; }

# statefulset API_VERSION POD_UPDATE_POLICY: the benchmark's set (the policy line is left
# out for the native kind, which has no in-place update).
statefulset() {
  local policy=""
  [[ -n $2 ]] && policy="podUpdatePolicy: $2,"
  kubectl apply -f - >/dev/null <<YAML
apiVersion: $1
kind: StatefulSet
metadata: { name: bench, namespace: $NS }
spec:
  replicas: $REPLICAS
  serviceName: bench
  podManagementPolicy: Parallel
  selector: { matchLabels: { app: bench } }
  updateStrategy:
    type: RollingUpdate
    rollingUpdate: { $policy maxUnavailable: 20% }
  template:
    metadata: { labels: { app: bench } }
    spec:
      nodeSelector: { stevedore.dev/simulated: $PREFIX }
      tolerations: [{ operator: Exists }]
      containers: [{ name: web, image: "$V1" }]
YAML
}

# run RESOURCE API_VERSION POLICY: create → all ready, then image change → all updated;
# prints "create_s rollout_s".
run() {
  local resource=$1 start create_s rollout_s
  start=$(now)
  statefulset "$2" "$3"
  until [[ $(status "$resource" '{.status.readyReplicas}/{.status.updatedReplicas}') == "$REPLICAS/$REPLICAS" ]]; do sleep 0.5; done
  create_s=$(since "$start")
  start=$(now)
  patch_observed "$resource" bench \
    "[{\"op\":\"replace\",\"path\":\"/spec/template/spec/containers/0/image\",\"value\":\"$V2\"}]"
  until [[ $(status "$resource" '{.status.updatedReplicas}/{.status.readyReplicas}/{.status.currentRevision}') == "$REPLICAS/$REPLICAS/$(status "$resource" '{.status.updateRevision}')" ]] &&
    ! in_place_pending "$NS"; do
    sleep 0.5
  done
  rollout_s=$(since "$start")
  echo "$create_s $rollout_s"
}

# delete RESOURCE: deletes the set and waits for its pods to go.
delete() {
  kubectl -n "$NS" delete "$1" bench --wait=true >/dev/null
  until [[ -z $(kubectl -n "$NS" get pods -o name) ]]; do sleep 1; done
}

cargo build -q --release --locked -p stevedore-tests --bin api_floor
FLOOR=$CARGO_TARGET_DIR/release/api_floor
deploy/local/sim-agents.sh up "$NODES" "$PREFIX"
kubectl create namespace "$NS" >/dev/null

echo "== Advanced StatefulSet of $REPLICAS pods on $NODES simulated nodes with agents" >&2
read -r asts_create_s asts_rollout_s < <(run statefulsets.apps.kruise.io apps.kruise.io/v1beta1 InPlaceIfPossible)
in_place=$(kubectl -n "$NS" get pods -o jsonpath='{range .items[*]}{.status.containerStatuses[0].restartCount}{"\n"}{end}' | grep -c '^1$' || true)
rss=""
for pid in $(pgrep -f '(^|/)stevedore-controlplane( |$)'); do
  rss+="$(awk '/^VmRSS:/ { r = $2 } /^VmHWM:/ { h = $2 } END { printf "%d/%d MiB", r / 1024, h / 1024 }' "/proc/$pid/status") "
done
leader=$(kubectl -n kube-system get lease stevedore-controlplane -o jsonpath='{.spec.holderIdentity}')
metrics=$(controlplane_metrics "$leader" || true)
reconciles=$(awk '/^stevedore_controlplane_reconciles_total\{kind="StatefulSet"\}/ { print $2 }' <<<"$metrics")
agent_ok=$(awk '/^stevedore_controlplane_agent_rpcs_total\{.*SetPodCondition.*Ok/ { s += $2 } END { print s + 0 }' <<<"$metrics")
delete statefulsets.apps.kruise.io

echo "== native apps/v1 StatefulSet (kube-controller-manager), recreate rollout" >&2
read -r native_create_s native_rollout_s < <(run statefulsets.apps apps/v1 "")
delete statefulsets.apps

echo "== apiserver floor (api-floor, 64 requests in flight)" >&2
floor_create_s=$("$FLOOR" create --namespace "$NS" --node-label "stevedore.dev/simulated=$PREFIX" \
  --replicas "$REPLICAS" --image "$V1")
floor_inplace_s=$("$FLOOR" inplace --namespace "$NS" --image "$V2")

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "?" }'; }
cat <<EOF2
nodes with agents:                 $NODES
replicas (Parallel):               $REPLICAS
create → all ready:                ${asts_create_s}s  (native ${native_create_s}s, floor ${floor_create_s}s; ×floor $(ratio "$asts_create_s" "$floor_create_s"))
roll all (20%):                    in place ${asts_rollout_s}s  (native recreate ${native_rollout_s}s: $(ratio "$native_rollout_s" "$asts_rollout_s")× faster; floor ${floor_inplace_s}s)
pods restarted in place:           $in_place of $REPLICAS (restartCount 1, same pods)
control-plane RSS (now/peak):      $rss
StatefulSet reconciles (leader):   ${reconciles:-?}
SetPodCondition calls OK:          $agent_ok
EOF2
bench_params statefulset NODES REPLICAS
bench_figure statefulset create stevedore "$asts_create_s" s
bench_figure statefulset create floor "$floor_create_s" s
bench_figure statefulset create native "$native_create_s" s
# The native controller has no in-place update: its figure is its recreate rollout.
bench_figure statefulset rollout stevedore "$asts_rollout_s" s
bench_figure statefulset rollout floor "$floor_inplace_s" s
bench_figure statefulset rollout native "$native_rollout_s" s
bench_figure statefulset restarted-in-place stevedore "$in_place" pods
bench_figure statefulset reconciles stevedore "${reconciles:-?}" count
