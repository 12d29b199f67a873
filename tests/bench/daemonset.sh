#!/usr/bin/env bash
# Advanced DaemonSet at scale on the local cluster (run `deploy/local/run.sh` first; needs
# root), side by side with the cluster's own DaemonSet controller (kube-controller-manager)
# and the apiserver floor, with the same template on the same nodes:
#   1. NODES simulated kwok nodes (no agents): create → every node scheduled and ready,
#      then an image change rolled out Standard with maxUnavailable 10%; the Advanced
#      DaemonSet (apps.kruise.io/v1alpha1), then the native apps/v1 one; then the floor
#      (api-floor daemon / daemon-roll: the same pinned pods and replacements, 10% at a
#      time, from a minimal client);
#   2. AGENT_NODES simulated nodes with agents (deploy/local/sim-agents.sh): the image
#      change under InPlaceIfPossible (maxUnavailable 10%) against the native recreate
#      rollout, and the floor (api-floor daemon / inplace);
#   each with the control plane's DaemonSet reconciles/s and its RSS.
# PARTS="kwok" or PARTS="agents" runs one part alone (default: both).
# To measure a control plane running out of the cluster (the dev-cp script), set DEV_CP_LOG
# to its log (the metrics address is read from it) and CONTROLPLANE_PROCESS to a pattern
# of its command line.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
# shellcheck source=figures-lib.sh
source tests/bench/figures-lib.sh
# shellcheck source=kwok-nodes.sh
source tests/bench/kwok-nodes.sh
NODES=${NODES:-500}
AGENT_NODES=${AGENT_NODES:-100}
# Which parts to run: "kwok agents" (both, the default), or either alone.
PARTS=${PARTS:-kwok agents}
# Seconds between status polls (each poll is three kubectl calls, ~0.2 s more); until
# session 11 the polls were 0.5 s apart and the rollout wait began 1 s after the patch,
# which added up to ~1.5 s to every rollout time, native or not.
POLL=${POLL:-0.2}
part() { [[ " $PARTS " == *" $1 "* ]]; }
PREFIX=ds-bench
AGENT_PREFIX=ds-bench-agents
NS=stevedore-bench-ds
CONTROLPLANE_PROCESS=${CONTROLPLANE_PROCESS:-'(^|/)stevedore-controlplane( |$)'}
# shellcheck source=/dev/null
source <(deploy/local/cluster.sh env)
# shellcheck source=controlplane-metrics.sh
source tests/bench/controlplane-metrics.sh
# shellcheck source=rollout-lib.sh
source tests/bench/rollout-lib.sh
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/stevedore/cargo-target}
V1=$STEVEDORE_REGISTRY/stevedore/web:v1
V2=$STEVEDORE_REGISTRY/stevedore/web:v2

cleanup() {
  kubectl delete namespace "$NS" --wait=true --timeout=600s >/dev/null 2>&1 || true
  kubectl delete nodes -l "stevedore.dev/bench=$PREFIX" --wait=false >/dev/null 2>&1 || true
  deploy/local/sim-agents.sh down "$AGENT_PREFIX" >/dev/null 2>&1 || true
}
trap cleanup EXIT
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "?" }'; }
rate() { awk -v n="$1" -v s="$2" 'BEGIN { if (s > 0) printf "%.0f", n / s; else print "?" }'; }

metrics() {
  if [[ -n ${DEV_CP_LOG:-} ]]; then
    local addr
    addr=$(sed 's/\x1b\[[0-9;]*m//g' "$DEV_CP_LOG" |
      sed -n 's/.*metrics endpoint listening metrics_addr=\([0-9.:]*\).*/\1/p' | tail -n1)
    curl -sf "http://$addr/metrics"
  else
    controlplane_metrics "$(kubectl -n kube-system get lease stevedore-controlplane -o jsonpath='{.spec.holderIdentity}')"
  fi
}
# DaemonSet reconciles so far (a counter not moved yet is absent: 0).
reconciles() {
  metrics | awk 'index($0, "stevedore_controlplane_reconciles_total{kind=\"DaemonSet\"}") == 1 { printf "%d", $2 }' || true
}
rss() {
  local out="" pid
  for pid in $(pgrep -f "$CONTROLPLANE_PROCESS"); do
    out+="$(awk '/^VmRSS:/ { r = $2 } /^VmHWM:/ { h = $2 } END { printf "%d/%d MiB", r / 1024, h / 1024 }' "/proc/$pid/status") "
  done
  echo "$out"
}


# daemonset API_VERSION NODE_LABEL ROLLING_YAML: the benchmark's DaemonSet on the nodes with
# NODE_LABEL (key: value).
daemonset() {
  kubectl apply -f - >/dev/null <<YAML
apiVersion: $1
kind: DaemonSet
metadata: { name: bench, namespace: $NS }
spec:
  selector: { matchLabels: { app: ds-bench } }
  updateStrategy: { type: RollingUpdate, rollingUpdate: { $3 } }
  template:
    metadata: { labels: { app: ds-bench } }
    spec:
      nodeSelector: { $2 }
      tolerations: [{ operator: Exists }]
      terminationGracePeriodSeconds: 0
      containers: [{ name: web, image: "$V1" }]
YAML
}

field() { kubectl -n "$NS" get "$1" bench -o jsonpath="$2"; }
# settled RESOURCE N: the status has seen the latest generation, N nodes desired, every
# one scheduled, updated, ready and available.
settled() {
  local want="$2/$2/$2/$2/$2" generation
  generation=$(field "$1" '{.metadata.generation}')
  [[ $(field "$1" '{.status.observedGeneration}') == "$generation" ]] &&
    [[ $(field "$1" '{.status.desiredNumberScheduled}/{.status.currentNumberScheduled}/{.status.updatedNumberScheduled}/{.status.numberReady}/{.status.numberAvailable}') == "$want" ]]
}

# run RESOURCE API_VERSION NODE_LABEL N ROLLING_YAML: create → settled, then the image
# change → settled; prints "create_s rollout_s create_reconciles rollout_reconciles".
run() {
  local resource=$1 n=$4 start create_s rollout_s r0 r1 r2
  r0=$(reconciles)
  start=$(now)
  daemonset "$2" "$3" "$5"
  until settled "$resource" "$n"; do sleep "$POLL"; done
  create_s=$(since "$start")
  r1=$(reconciles)
  start=$(now)
  kubectl -n "$NS" patch "$resource" bench --type json \
    -p "[{\"op\":\"replace\",\"path\":\"/spec/template/spec/containers/0/image\",\"value\":\"$V2\"}]" >/dev/null
  # No settle time needed: settled() waits for the status to see the new generation.
  until settled "$resource" "$n" &&
    [[ $(kubectl -n "$NS" get pods -l app=ds-bench -o jsonpath='{range .items[*]}{.spec.containers[0].image}{"\n"}{end}' | grep -cx "$V2") == "$n" ]] &&
    ! in_place_pending "$NS" app=ds-bench; do
    sleep "$POLL"
  done
  rollout_s=$(since "$start")
  r2=$(reconciles)
  echo "$create_s $rollout_s $((${r1:-0} - ${r0:-0})) $((${r2:-0} - ${r1:-0}))"
}

# delete RESOURCE: deletes the DaemonSet and waits for its pods to go.
delete() {
  kubectl -n "$NS" delete "$1" bench --wait=true >/dev/null
  until [[ -z $(kubectl -n "$NS" get pods -o name) ]]; do sleep 1; done
}

# Release builds unless asked otherwise (STEVEDORE_PROFILE=dev, as sim-agents.sh reads it).
if [[ ${STEVEDORE_PROFILE:-release} == dev ]]; then
  cargo build -q --locked -p stevedore-tests --bin api_floor
  FLOOR=$CARGO_TARGET_DIR/debug/api_floor
else
  cargo build -q --release --locked -p stevedore-tests --bin api_floor
  FLOOR=$CARGO_TARGET_DIR/release/api_floor
fi
kubectl create namespace "$NS" >/dev/null
if part kwok; then
  TENTH=$(((NODES + 9) / 10))
  echo "== $NODES simulated nodes" >&2
  make_kwok_nodes "$PREFIX" "$NODES"
  KWOK_LABEL="stevedore.dev/bench: $PREFIX"

  echo "== Advanced DaemonSet, Standard rollout (maxUnavailable 10%)" >&2
  read -r ads_create ads_roll ads_create_rec ads_roll_rec < <(run daemonsets.apps.kruise.io apps.kruise.io/v1alpha1 "$KWOK_LABEL" "$NODES" 'rollingUpdateType: Standard, maxUnavailable: 10%')
  ads_rss=$(rss)
  delete daemonsets.apps.kruise.io
  echo "== native apps/v1 DaemonSet (kube-controller-manager)" >&2
  read -r native_create native_roll _ _ < <(run daemonsets.apps apps/v1 "$KWOK_LABEL" "$NODES" 'maxUnavailable: 10%')
  delete daemonsets.apps
  echo "== apiserver floor (api-floor daemon / daemon-roll, 64 requests in flight)" >&2
  floor_create=$("$FLOOR" daemon --namespace "$NS" --node-label "stevedore.dev/bench=$PREFIX" --image "$V1")
  floor_roll=$("$FLOOR" daemon-roll --namespace "$NS" --image "$V2" --batch "$TENTH")
  kubectl -n "$NS" delete pods --all --grace-period=0 --wait=true >/dev/null
  kubectl delete nodes -l "stevedore.dev/bench=$PREFIX" --wait=false >/dev/null
fi
if part agents; then
  echo "== $AGENT_NODES simulated nodes with agents" >&2
  deploy/local/sim-agents.sh up "$AGENT_NODES" "$AGENT_PREFIX"
  AGENT_LABEL="stevedore.dev/simulated: $AGENT_PREFIX"
  echo "== Advanced DaemonSet, InPlaceIfPossible (maxUnavailable 10%)" >&2
  read -r ip_create ip_roll _ ip_roll_rec < <(run daemonsets.apps.kruise.io apps.kruise.io/v1alpha1 "$AGENT_LABEL" "$AGENT_NODES" 'rollingUpdateType: InPlaceIfPossible, maxUnavailable: 10%')
  in_place=$(kubectl -n "$NS" get pods -l app=ds-bench -o jsonpath='{range .items[*]}{.status.containerStatuses[0].restartCount}{"\n"}{end}' | grep -c '^1$' || true)
  ip_rss=$(rss)
  delete daemonsets.apps.kruise.io
  echo "== native apps/v1 DaemonSet, recreate rollout (maxUnavailable 10%)" >&2
  read -r native_ip_create native_recreate _ _ < <(run daemonsets.apps apps/v1 "$AGENT_LABEL" "$AGENT_NODES" 'maxUnavailable: 10%')
  delete daemonsets.apps
  echo "== apiserver floor (api-floor daemon / inplace)" >&2
  floor_agent_create=$("$FLOOR" daemon --namespace "$NS" --node-label "stevedore.dev/simulated=$AGENT_PREFIX" --image "$V1")
  floor_inplace=$("$FLOOR" inplace --namespace "$NS" --image "$V2")
fi

part kwok && cat <<EOF2
kwok nodes:                        $NODES
create → all scheduled and ready:  ${ads_create}s  (native ${native_create}s: ×native $(ratio "$ads_create" "$native_create"); floor ${floor_create}s: ×floor $(ratio "$ads_create" "$floor_create"))
                                   reconciles $ads_create_rec ($(rate "$ads_create_rec" "$ads_create")/s)
Standard rollout, 10% unavailable: ${ads_roll}s  (native ${native_roll}s: ×native $(ratio "$ads_roll" "$native_roll"); floor ${floor_roll}s: ×floor $(ratio "$ads_roll" "$floor_roll"))
                                   reconciles $ads_roll_rec ($(rate "$ads_roll_rec" "$ads_roll")/s); RSS now/peak $ads_rss
EOF2
part agents && cat <<EOF2
nodes with agents:                 $AGENT_NODES
create → all ready:                ${ip_create}s  (native ${native_ip_create}s, floor ${floor_agent_create}s)
InPlaceIfPossible rollout, 10%:    ${ip_roll}s  (native recreate ${native_recreate}s: $(ratio "$native_recreate" "$ip_roll")× faster; floor ${floor_inplace}s)
                                   reconciles $ip_roll_rec ($(rate "$ip_roll_rec" "$ip_roll")/s); RSS now/peak $ip_rss
pods restarted in place:           $in_place of $AGENT_NODES (restartCount 1, same pods)
EOF2
bench_params daemonset NODES AGENT_NODES PARTS POLL
if part kwok; then
  bench_figure daemonset create stevedore "$ads_create" s
  bench_figure daemonset create floor "$floor_create" s
  bench_figure daemonset create native "$native_create" s
  bench_figure daemonset standard-rollout stevedore "$ads_roll" s
  bench_figure daemonset standard-rollout floor "$floor_roll" s
  bench_figure daemonset standard-rollout native "$native_roll" s
fi
if part agents; then
  bench_figure daemonset create-with-agents stevedore "$ip_create" s
  bench_figure daemonset create-with-agents floor "$floor_agent_create" s
  bench_figure daemonset create-with-agents native "$native_ip_create" s
  # The native controller has no in-place update: its figure is its recreate rollout.
  bench_figure daemonset inplace-rollout stevedore "$ip_roll" s
  bench_figure daemonset inplace-rollout floor "$floor_inplace" s
  bench_figure daemonset inplace-rollout native "$native_recreate" s
  bench_figure daemonset restarted-in-place stevedore "$in_place" pods
fi
exit 0
