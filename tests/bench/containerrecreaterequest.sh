#!/usr/bin/env bash
# ContainerRecreateRequests at scale on the local cluster (run `deploy/local/run.sh` first;
# needs root): NODES simulated nodes, each with its own agent process
# (deploy/local/sim-agents.sh), a CloneSet of one pod per node, then one request per pod,
# all created at once, each recreating the pod's container through its node's agent:
# the time until every request is finished, how many Completed, and the time of one
# request (creation → completionTime) at the 50th and 99th percentile, and why requests
# failed. Note: a simulated node's agent has no containers of its kwok pods to stop (the
# shared containerd runs none), so today every request there fails with "no running
# container named web" within a second: the figure is the control plane's path to the
# agent's answer until the agent can simulate a restart for kwok pods.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
# shellcheck source=figures-lib.sh
source tests/bench/figures-lib.sh
NODES=${NODES:-100}
PREFIX=bench
NS=stevedore-bench
# shellcheck source=/dev/null
source <(deploy/local/cluster.sh env)
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/stevedore/cargo-target}
V1=$STEVEDORE_REGISTRY/stevedore/web:v1

cleanup() {
  kubectl delete namespace "$NS" --wait=true --timeout=300s >/dev/null 2>&1 || true
  deploy/local/sim-agents.sh down "$PREFIX" || true
}
trap cleanup EXIT
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

deploy/local/sim-agents.sh up "$NODES" "$PREFIX"
kubectl create namespace "$NS" >/dev/null
kubectl apply -f - >/dev/null <<YAML
apiVersion: apps.kruise.io/v1alpha1
kind: CloneSet
metadata: { name: bench, namespace: $NS }
spec:
  replicas: $NODES
  selector: { matchLabels: { app: bench } }
  template:
    metadata: { labels: { app: bench } }
    spec:
      nodeSelector: { stevedore.dev/simulated: $PREFIX }
      tolerations: [{ operator: Exists }]
      topologySpreadConstraints:
        - { maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: DoNotSchedule,
            labelSelector: { matchLabels: { app: bench } } }
      containers: [{ name: web, image: "$V1" }]
YAML
until [[ $(kubectl -n "$NS" get cloneset bench -o jsonpath='{.status.readyReplicas}') == "$NODES" ]]; do sleep 0.5; done

echo "== $NODES ContainerRecreateRequests at once, one per pod, one pod per node" >&2
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
until [[ $(finished) == "$NODES" ]]; do sleep 0.5; done
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

cat <<EOF2
nodes with agents:                 $NODES
requests (one per pod):            $NODES
all finished:                      ${all_s}s
Completed:                         $completed of $NODES
per request p50 / p99 (whole s):   $percentiles
failures (count, message):
${failures:-  none}
EOF2
bench_params containerrecreaterequest NODES
bench_figure containerrecreaterequest all-finished stevedore "$all_s" s
bench_figure containerrecreaterequest completed stevedore "$completed" requests
bench_figure containerrecreaterequest request-p50 stevedore "$p50_s" s
bench_figure containerrecreaterequest request-p99 stevedore "$p99_s" s
