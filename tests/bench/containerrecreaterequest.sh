#!/usr/bin/env bash
# ContainerRecreateRequests at scale on real pods (run `deploy/local/run.sh` first; needs
# root): a CloneSet of PODS pods (default 100) spread over the cluster's real (kubelet)
# nodes, then one request per pod, all created at once, each recreating the pod's real
# container through its node's agent: the time until every request is finished, how many
# Completed, the time of one request (creation → completionTime, whole seconds as the API
# stamps them) at the 50th and 99th percentile, that every pod's container restarted
# exactly once, and why requests failed. Real pods: a simulated (kwok) pod's status names
# no containerID, so a request for it is refused at admission and measures nothing.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
# shellcheck source=figures-lib.sh
source tests/bench/figures-lib.sh
PODS=${PODS:-100}
NS=stevedore-bench
# shellcheck source=/dev/null
source <(deploy/local/cluster.sh env)
V1=$STEVEDORE_REGISTRY/stevedore/web:v1

cleanup() {
  kubectl delete namespace "$NS" --wait=true --timeout=300s >/dev/null 2>&1 || true
}
trap cleanup EXIT
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
# within SECONDS WHAT COMMAND...: polls COMMAND until it succeeds; fails naming WHAT after
# SECONDS, so a request or pod that never finishes ends the run instead of hanging it.
within() {
  local limit=$((SECONDS + $1)) what=$2
  shift 2
  until "$@"; do
    ((SECONDS < limit)) || { echo "containerrecreaterequest.sh: $what did not happen within the limit" >&2; exit 1; }
    sleep 0.5
  done
}

real_nodes=$(kubectl get nodes -l 'type!=kwok' -o name | wc -l)
kubectl create namespace "$NS" >/dev/null
kubectl apply -f - >/dev/null <<YAML
apiVersion: apps.kruise.io/v1alpha1
kind: CloneSet
metadata: { name: bench, namespace: $NS }
spec:
  replicas: $PODS
  selector: { matchLabels: { app: bench } }
  template:
    metadata: { labels: { app: bench } }
    spec:
      terminationGracePeriodSeconds: 0
      affinity:
        nodeAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            nodeSelectorTerms:
              - matchExpressions: [{ key: type, operator: NotIn, values: [kwok] }]
      containers: [{ name: web, image: "$V1" }]
YAML
echo "== $PODS pods on $real_nodes real nodes" >&2
up_start=$(now)
all_ready() { [[ $(kubectl -n "$NS" get cloneset bench -o jsonpath='{.status.readyReplicas}') == "$PODS" ]]; }
within 600 "every pod ready" all_ready
echo "   ready after $(since "$up_start")s" >&2

echo "== $PODS ContainerRecreateRequests at once, one per pod" >&2
requests=$(mktemp)
for pod in $(kubectl -n "$NS" get pods -l app=bench -o jsonpath='{.items[*].metadata.name}'); do
  cat >>"$requests" <<YAML
---
apiVersion: apps.kruise.io/v1alpha1
kind: ContainerRecreateRequest
metadata: { name: recreate-$pod, namespace: $NS }
spec: { podName: $pod, containers: [{ name: web }] }
YAML
done
start=$(now)
kubectl apply -f "$requests" >/dev/null
rm -f "$requests"
finished() {
  kubectl -n "$NS" get containerrecreaterequests \
    -o jsonpath='{range .items[*]}{.status.phase}{"\n"}{end}' | grep -cE '^(Completed|Failed)$' || true
}
all_finished() { [[ $(finished) == "$PODS" ]]; }
within 600 "every request finished" all_finished
all_s=$(since "$start")

# One line per request: phase, creation, completion.
times=$(kubectl -n "$NS" get containerrecreaterequests -o jsonpath='{range .items[*]}{.status.phase} {.metadata.creationTimestamp} {.status.completionTime}{"\n"}{end}')
completed=$(grep -c '^Completed ' <<<"$times" || true)
failures=$(kubectl -n "$NS" get containerrecreaterequests \
  -o jsonpath='{range .items[?(@.status.phase=="Failed")]}{.status.message}{"\n"}{end}' | sort | uniq -c | head -n 3)
percentiles=$(awk '{ c = $2; d = $3; gsub(/[-:TZ]/, " ", c); gsub(/[-:TZ]/, " ", d);
    print mktime(d) - mktime(c) }' <<<"$times" | sort -n |
  awk '{ v[NR] = $1 } END { p50 = v[int((NR - 1) * 0.50) + 1]; p99 = v[int((NR - 1) * 0.99) + 1];
    printf "%d %d", p50, p99 }')
read -r p50_s p99_s <<<"$percentiles"
percentiles="${p50_s}s / ${p99_s}s"

# Each request's container restarted once, and no other container did.
restarts=$(kubectl -n "$NS" get pods -l app=bench \
  -o jsonpath='{range .items[*]}{.status.containerStatuses[0].restartCount}{"\n"}{end}' | sort | uniq -c | tr '\n' ';')

cat <<EOF2
real nodes:                        $real_nodes
requests (one per pod):            $PODS
all finished:                      ${all_s}s
Completed:                         $completed of $PODS
per request p50 / p99 (whole s):   $percentiles
pods by restart count (count n):   $restarts
failures (count, message):
${failures:-  none}
EOF2
bench_params containerrecreaterequest PODS real_nodes
bench_figure containerrecreaterequest all-finished stevedore "$all_s" s
bench_figure containerrecreaterequest completed stevedore "$completed" requests
bench_figure containerrecreaterequest request-p50 stevedore "$p50_s" s
bench_figure containerrecreaterequest request-p99 stevedore "$p99_s" s
