#!/usr/bin/env bash
# In-place resize against recreate at scale on the local cluster (run `deploy/local/run.sh`
# first; needs root): NODES simulated nodes, each with its own agent process
# (deploy/local/sim-agents.sh), and REPLICAS pods of one CloneSet there. kwok plays the
# kubelet: its `pod-inplace-update` stage reports the spec's resources once the controller has
# started the update, as a kubelet does after applying a resize.
#   1. InPlaceIfPossible, maxUnavailable 20%: a cpu request change → every pod resized through
#      its `resize` subresource (same pod), all ready on the new resources;
#   2. ReCreate, maxUnavailable 20%: the same change → every pod deleted and created again;
# both from the same starting point, one after the other in one run. Prints both and the ratio.
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
# shellcheck source=controlplane-metrics.sh
source tests/bench/controlplane-metrics.sh
IMAGE=$STEVEDORE_REGISTRY/stevedore/web:v1

cleanup() {
  kubectl delete namespace "$NS" --wait=true --timeout=300s >/dev/null 2>&1 || true
  deploy/local/sim-agents.sh down "$PREFIX" || true
}
trap 'cleanup; rm -rf "$WORK"' EXIT
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
status() { kubectl -n "$NS" get cloneset "$1" -o jsonpath="$2"; }
uids() { kubectl -n "$NS" get pods -l "app=$1" -o jsonpath='{range .items[*]}{.metadata.uid}{"\n"}{end}' | sort; }
# kept NAME: how many of the set's pods from before the change are still there.
kept() { comm -12 "$WORK/$1.before" <(uids "$1") | wc -l; }
WORK=$(mktemp -d)

# rollout NAME TYPE: creates the CloneSet at cpu 100m, waits for all ready, changes the cpu
# request to 200m and prints the seconds until every pod is updated and ready.
rollout() {
  local name=$1 type=$2
  kubectl apply -f - >/dev/null <<YAML
apiVersion: apps.kruise.io/v1alpha1
kind: CloneSet
metadata: { name: $name, namespace: $NS }
spec:
  replicas: $REPLICAS
  selector: { matchLabels: { app: $name } }
  updateStrategy: { type: $type, maxUnavailable: 20% }
  template:
    metadata: { labels: { app: $name } }
    spec:
      nodeSelector: { stevedore.dev/simulated: $PREFIX }
      tolerations: [{ operator: Exists }]
      containers:
        - name: web
          image: "$IMAGE"
          resources: { requests: { cpu: 100m, memory: 16Mi }, limits: { cpu: "1", memory: 64Mi } }
YAML
  until [[ $(status "$name" '{.status.readyReplicas}/{.status.updatedReadyReplicas}') == "$REPLICAS/$REPLICAS" ]]; do sleep 0.5; done
  uids "$name" >"$WORK/$name.before"
  local start
  start=$(now)
  patch_observed cloneset "$name" \
    '[{"op":"replace","path":"/spec/template/spec/containers/0/resources/requests/cpu","value":"200m"}]'
  until [[ $(status "$name" '{.status.updatedReadyReplicas}/{.status.readyReplicas}/{.status.currentRevision}') == "$REPLICAS/$REPLICAS/$(status "$name" '{.status.updateRevision}')" ]] &&
    ! in_place_pending "$NS" "app=$name"; do
    sleep 0.5
  done
  since "$start"
}

deploy/local/sim-agents.sh up "$NODES" "$PREFIX"
kubectl create namespace "$NS" >/dev/null

echo "== in-place resize of $REPLICAS pods on $NODES simulated nodes with agents" >&2
resize_s=$(rollout resize InPlaceIfPossible)
resize_kept=$(kept resize)
resized=$(kubectl -n "$NS" get pods -l app=resize -o jsonpath='{range .items[*]}{.status.containerStatuses[0].resources.requests.cpu}{"\n"}{end}' | grep -c '^200m$' || true)
kubectl -n "$NS" delete cloneset resize --wait=true >/dev/null
until [[ -z $(kubectl -n "$NS" get pods -o name) ]]; do sleep 1; done

echo "== recreate of the same $REPLICAS pods" >&2
recreate_s=$(rollout recreate ReCreate)
recreate_kept=$(kept recreate)
kubectl -n "$NS" delete cloneset recreate --wait=true >/dev/null

rss=""
for pid in $(pgrep -f '(^|/)stevedore-controlplane( |$)'); do
  rss+="$(awk '/^VmRSS:/ { r = $2 } /^VmHWM:/ { h = $2 } END { printf "%d/%d MiB", r / 1024, h / 1024 }' "/proc/$pid/status") "
done

cat <<EOF2
nodes with agents:                 $NODES
replicas:                          $REPLICAS
in-place resize (20%):             ${resize_s}s   (same pods kept: $resize_kept, showing cpu 200m: $resized)
recreate (20%):                    ${recreate_s}s   (same pods kept: $recreate_kept)
recreate / resize:                 $(awk -v a="$recreate_s" -v b="$resize_s" 'BEGIN { printf "%.2f", a / b }')x
control-plane RSS (now/peak):      $rss
EOF2
bench_params resize NODES REPLICAS
bench_figure resize cpu-change stevedore "$resize_s" s
bench_figure resize cpu-change recreate "$recreate_s" s
