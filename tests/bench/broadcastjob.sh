#!/usr/bin/env bash
# BroadcastJob at scale on the local cluster (run `deploy/local/run.sh` first; needs root):
# NODES simulated kwok nodes (no agents: a BroadcastJob needs none), whose task pods kwok
# runs to success (the pod-complete-on-request stage, asked for by a template annotation):
#   1. a BroadcastJob with parallelism 50 → phase completed;
#   2. the same with no parallelism limit → completed;
#   each with the control plane's BroadcastJob reconciles/s, its API writes/s and its RSS;
#   writes are counted by the apiserver: the script adds an APF FlowSchema of its own that
#   matches only the control plane's service account and only write verbs, ahead of
#   `kube-system-service-accounts` (where its requests go otherwise, with every other
#   kube-system account's), and reads that schema's dispatched-requests counter;
#   3. the apiserver floor: the same NODES pinned task pods created by a minimal client
#      (api-floor tasks, 64 in flight) and run to success.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
# shellcheck source=figures-lib.sh
source tests/bench/figures-lib.sh
# shellcheck source=kwok-nodes.sh
source tests/bench/kwok-nodes.sh
NODES=${NODES:-500}
PREFIX=bcj-bench
NS=stevedore-bench-bcj
# shellcheck source=/dev/null
source <(deploy/local/cluster.sh env)
# shellcheck source=controlplane-metrics.sh
source tests/bench/controlplane-metrics.sh
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/stevedore/cargo-target}
IMAGE=$STEVEDORE_REGISTRY/stevedore/web:v1

WRITES_SCHEMA=stevedore-bench-controlplane-writes

cleanup() {
  kubectl delete flowschema "$WRITES_SCHEMA" --ignore-not-found >/dev/null 2>&1 || true
  kubectl delete namespace "$NS" --wait=true --timeout=600s >/dev/null 2>&1 || true
  kubectl delete nodes -l "stevedore.dev/bench=$PREFIX" --wait=false >/dev/null 2>&1 || true
}
trap cleanup EXIT
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# A FlowSchema for the control plane's writes alone (precedence 850: before
# kube-system-service-accounts' 900), served at the priority level they had anyway.
count_writes() {
  kubectl apply -f - >/dev/null <<YAML
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: FlowSchema
metadata: { name: $WRITES_SCHEMA }
spec:
  matchingPrecedence: 850
  priorityLevelConfiguration: { name: workload-high }
  distinguisherMethod: { type: ByNamespace }
  rules:
    - subjects:
        - kind: ServiceAccount
          serviceAccount: { namespace: kube-system, name: stevedore-controlplane }
      resourceRules:
        - verbs: [create, update, patch, delete, deletecollection]
          apiGroups: ["*"]
          resources: ["*"]
          namespaces: ["*"]
          clusterScope: true
YAML
  # The apiserver's APF configuration follows FlowSchemas within a second or so.
  sleep 3
}
# The control plane's write requests dispatched so far (0 before its first).
cp_writes() {
  kubectl get --raw /metrics |
    awk -v fs="flow_schema=\"$WRITES_SCHEMA\"" '/^apiserver_flowcontrol_dispatched_requests_total\{/ && index($0, fs) { s += $2 } END { print s + 0 }'
}
leader_metric() {
  local leader
  leader=$(kubectl -n kube-system get lease stevedore-controlplane -o jsonpath='{.spec.holderIdentity}')
  controlplane_metrics "$leader" | awk -v m="$1" 'index($0, m) == 1 { printf "%d", $2 }'
}
rss() {
  local out="" pid
  for pid in $(pgrep -f '(^|/)stevedore-controlplane( |$)'); do
    out+="$(awk '/^VmRSS:/ { r = $2 } /^VmHWM:/ { h = $2 } END { printf "%d/%d MiB", r / 1024, h / 1024 }' "/proc/$pid/status") "
  done
  echo "$out"
}


# run_job NAME PARALLELISM_YAML: creates the job, waits for completed, prints
# "seconds reconciles requests".
run_job() {
  local name=$1 parallelism=$2 start reconciles0 requests0 secs
  reconciles0=$(leader_metric 'stevedore_controlplane_reconciles_total{kind="BroadcastJob"}')
  requests0=$(cp_writes)
  start=$(now)
  kubectl apply -f - >/dev/null <<YAML
apiVersion: apps.kruise.io/v1alpha1
kind: BroadcastJob
metadata: { name: $name, namespace: $NS }
spec:
  $parallelism
  completionPolicy: { type: Always }
  template:
    metadata: { annotations: { stevedore.dev/kwok-complete: "true" } }
    spec:
      restartPolicy: Never
      nodeSelector: { stevedore.dev/bench: $PREFIX }
      tolerations: [{ operator: Exists }]
      containers: [{ name: task, image: "$IMAGE" }]
YAML
  until [[ $(kubectl -n "$NS" get broadcastjob "$name" -o jsonpath='{.status.phase}') == completed ]]; do
    sleep 0.5
  done
  secs=$(since "$start")
  local reconciles requests
  reconciles=$(leader_metric 'stevedore_controlplane_reconciles_total{kind="BroadcastJob"}')
  requests=$(cp_writes)
  # A counter the controller has not moved yet is absent from /metrics: 0.
  echo "$secs $((${reconciles:-0} - ${reconciles0:-0})) $((${requests%.*} - ${requests0%.*}))"
  kubectl -n "$NS" delete broadcastjob "$name" --wait=true >/dev/null
  until [[ -z $(kubectl -n "$NS" get pods -o name) ]]; do sleep 1; done
}

rate() { awk -v n="$1" -v s="$2" 'BEGIN { printf "%.0f", n / s }'; }

cargo build -q --release --locked -p stevedore-tests --bin api_floor
FLOOR=$CARGO_TARGET_DIR/release/api_floor
echo "== $NODES simulated nodes" >&2
make_kwok_nodes "$PREFIX" "$NODES"
count_writes
kubectl create namespace "$NS" >/dev/null

echo "== BroadcastJob, parallelism 50" >&2
read -r p50_s p50_rec p50_req < <(run_job bench-p50 'parallelism: 50')
p50_rss=$(rss)
echo "== BroadcastJob, no parallelism limit" >&2
read -r all_s all_rec all_req < <(run_job bench-all '')
all_rss=$(rss)

echo "== apiserver floor (api-floor tasks, 64 requests in flight)" >&2
floor_s=$("$FLOOR" tasks --namespace "$NS" --node-label "stevedore.dev/bench=$PREFIX" --image "$IMAGE")

cat <<EOF2
simulated nodes:               $NODES
parallelism 50 → completed:    ${p50_s}s   reconciles $p50_rec ($(rate "$p50_rec" "$p50_s")/s), API writes $p50_req ($(rate "$p50_req" "$p50_s")/s), RSS now/peak $p50_rss
unlimited → completed:         ${all_s}s   reconciles $all_rec ($(rate "$all_rec" "$all_s")/s), API writes $all_req ($(rate "$all_req" "$all_s")/s), RSS now/peak $all_rss
floor (same pods, 64 at once): ${floor_s}s   unlimited/floor: $(awk -v a="$all_s" -v b="$floor_s" 'BEGIN { printf "%.2f", a / b }')x
EOF2
bench_params broadcastjob NODES
bench_figure broadcastjob completed-parallelism-50 stevedore "$p50_s" s
bench_figure broadcastjob completed-unlimited stevedore "$all_s" s
bench_figure broadcastjob completed-unlimited floor "$floor_s" s
bench_figure broadcastjob api-writes-unlimited stevedore "$all_req" count
