#!/usr/bin/env bash
# The control plane's memory per cached pod (run `deploy/local/run.sh` first; needs root):
# both replicas cache every pod of the cluster, so their anonymous memory grows with the
# pod count, and issue 34 asks that it stay flat and small per pod. Fresh replicas first
# (a rollout restart, so memory freed by earlier work is not reused and hides the growth),
# then bare pods (no owner, nothing to reconcile) on NODES simulated nodes, in two steps:
# FIRST pods, then up to TOTAL. Each replica's RssAnon (/proc/<pid>/status) is read after
# each step, once every pod runs and SETTLE seconds have passed; the growth from FIRST to
# TOTAL divided by the pods added is the memory each cached pod costs (the slope; the
# first step also carries the caches' and allocator's start-up growth). The leader's
# slope is the figure.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
# shellcheck source=figures-lib.sh
source tests/bench/figures-lib.sh
NODES=${NODES:-10}
FIRST=${FIRST:-2000}
TOTAL=${TOTAL:-6000}
SETTLE=${SETTLE:-20}
PREFIX=${PREFIX:-memory-bench}
NS=${NS:-stevedore-bench-memory}
# shellcheck source=/dev/null
source <(deploy/local/cluster.sh env)
V1=$STEVEDORE_REGISTRY/stevedore/web:v1
((FIRST > 0 && TOTAL > FIRST)) || { echo "need 0 < FIRST < TOTAL, got FIRST=$FIRST TOTAL=$TOTAL" >&2; exit 2; }

cleanup() {
  kubectl delete namespace "$NS" --wait=true --timeout=600s >/dev/null 2>&1 || true
  deploy/local/sim-agents.sh down "$PREFIX" || true
}
trap cleanup EXIT

# replica_pid POD: the host PID of control-plane replica POD (its process's environment
# names the pod).
replica_pid() {
  local pid
  for pid in $(pgrep -f '(^|/)stevedore-controlplane( |$)'); do
    if tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx "POD_NAME=$1"; then
      echo "$pid"
      return 0
    fi
  done
  return 1
}
anon_kib() { awk '/^RssAnon:/ { print $2 }' "/proc/$1/status"; }
leader() { kubectl -n kube-system get lease stevedore-controlplane -o jsonpath='{.spec.holderIdentity}'; }

# create_pods FROM TO: bare pods FROM..TO, spread over the simulated nodes by name (no
# scheduler in the way), then waits until all TO of them run.
create_pods() {
  local from=$1 to=$2 i
  for ((i = from; i <= to; i++)); do
    cat <<YAML
---
apiVersion: v1
kind: Pod
metadata: { name: p-$i, namespace: $NS, labels: { app: memory-bench } }
spec:
  nodeName: $(printf '%s-%03d' "$PREFIX" $((i % NODES)))
  tolerations: [{ operator: Exists }]
  containers: [{ name: web, image: "$V1" }]
YAML
  done | kubectl create -f - >/dev/null
  until [[ $(kubectl -n "$NS" get pods --field-selector=status.phase=Running -o name | wc -l) -ge $to ]]; do
    sleep 2
  done
}

echo "== fresh control-plane replicas" >&2
kubectl -n kube-system rollout restart deployment stevedore-controlplane >/dev/null
kubectl -n kube-system rollout status deployment stevedore-controlplane --timeout=300s >/dev/null
# replicas: the control plane's pods, once only the two new ones are left.
replicas() { kubectl -n kube-system get pods -o name | sed -n 's|^pod/\(stevedore-controlplane-.*\)|\1|p'; }
pods=$(replicas)
until (($(grep -c . <<<"$pods") == 2)) && leader_pod=$(leader) && grep -qx "$leader_pod" <<<"$pods" &&
  replica_pid "$leader_pod" >/dev/null; do
  sleep 1
  pods=$(replicas)
done
standby_pod=$(grep -vx "$leader_pod" <<<"$pods" | head -n1)
deploy/local/sim-agents.sh up "$NODES" "$PREFIX"
kubectl create namespace "$NS" >/dev/null
sleep "$SETTLE"
leader_pid=$(replica_pid "$leader_pod")
standby_pid=$(replica_pid "$standby_pod" || true)
cached_before=$(kubectl get pods -A -o name | wc -l)
leader_0=$(anon_kib "$leader_pid")

echo "== $FIRST bare pods on $NODES simulated nodes" >&2
create_pods 1 "$FIRST"
sleep "$SETTLE"
leader_1=$(anon_kib "$leader_pid")
standby_1=$([[ -n $standby_pid ]] && anon_kib "$standby_pid" || echo "?")

echo "== up to $TOTAL" >&2
create_pods $((FIRST + 1)) "$TOTAL"
sleep "$SETTLE"
leader_2=$(anon_kib "$leader_pid")
standby_2=$([[ -n $standby_pid ]] && anon_kib "$standby_pid" || echo "?")

slope() { awk -v a="$1" -v b="$2" -v n="$3" 'BEGIN { if (a ~ /^[0-9]+$/ && b ~ /^[0-9]+$/) printf "%.1f", (b - a) / n; else print "?" }'; }
leader_slope=$(slope "$leader_1" "$leader_2" $((TOTAL - FIRST)))
standby_slope=$(slope "$standby_1" "$standby_2" $((TOTAL - FIRST)))
cat <<EOF2
pods cached before:             $cached_before (the cluster's own)
leader RssAnon:                 ${leader_0} KiB fresh, ${leader_1} KiB with $FIRST pods more, ${leader_2} KiB with $TOTAL
per cached pod ($FIRST → $TOTAL):  leader ${leader_slope} KiB, standby ${standby_slope} KiB (goal: 2 KiB)
EOF2
bench_params cache_memory NODES FIRST TOTAL SETTLE
bench_figure cache_memory anon-per-cached-pod stevedore "$leader_slope" KiB
bench_figure cache_memory anon-per-cached-pod standby "$standby_slope" KiB
bench_figure cache_memory leader-anon-at-total stevedore "$((leader_2 / 1024))" MiB
