#!/usr/bin/env bash
# SidecarSet at scale on the local cluster (run `deploy/local/run.sh` first; needs root),
# side by side with recreating the same pods through the cluster's own Deployment
# controller, on the same NODES simulated nodes, each with its own agent process
# (deploy/local/sim-agents.sh):
#   1. a SidecarSet (apps.kruise.io/v1alpha1, limited to the namespace) injects the sidecar
#      `sidecar` (web:v1) into the REPLICAS pods of a CloneSet; its image changes to
#      web:v2 under RollingUpdate with maxUnavailable 20% → seconds until the SidecarSet's
#      status counts every pod updated and ready (each pod: InPlaceUpdateReady False
#      through its node's agent, the sidecar's image patch, kwok's simulated restart,
#      completion); the pods that kept their UID are counted;
#   2. the native apps/v1 Deployment (kube-controller-manager) of REPLICAS pods with the
#      same two containers: its sidecar's image v1 → v2 as a recreate rollout with the same
#      maxUnavailable (maxSurge 0) → seconds until all are updated and available;
#   3. the apiserver floor: the same pod writes of an in-place image change from a minimal
#      client (api-floor inplace; its pods have the one container it patches).
# On simulated nodes kwok's stage deploy/local/kwok/pod-sidecarset-upgrade.yaml restarts
# the sidecar under a new container ID once its new image is patched in, which is what the
# upgrade's completion check waits for, as on a real node; the summary says how many pods
# report the new image.
# PREFIX and NS name the simulated nodes and the namespace (also the SidecarSet), so two
# runs on one cluster keep apart. API_FLOOR=path uses that api-floor build instead of
# building the release one; FLOOR=0 leaves the floor out.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
NODES=${NODES:-100}
REPLICAS=${REPLICAS:-1000}
MAX_UNAVAILABLE=${MAX_UNAVAILABLE:-20%}
FLOOR=${FLOOR:-1}
PREFIX=${PREFIX:-sidecar-bench}
NS=${NS:-stevedore-bench-sidecarset}
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
# The SidecarSet is cluster-scoped: named after the namespace it is limited to.
SIDECARSET=$NS

cleanup() {
  kubectl delete sidecarset "$SIDECARSET" --ignore-not-found --wait=true >/dev/null 2>&1 || true
  kubectl delete namespace "$NS" --wait=true --timeout=300s >/dev/null 2>&1 || true
  deploy/local/sim-agents.sh down "$PREFIX" || true
}
trap cleanup EXIT
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "?" }'; }
# field KIND NAME JSONPATH: one field of an object of the benchmark (the namespace is
# ignored for the cluster-scoped SidecarSet).
field() { kubectl -n "$NS" get "$1" "$2" -o jsonpath="$3"; }
# pod_uids SELECTOR: the UIDs of the namespace's pods of SELECTOR, sorted.
pod_uids() { kubectl -n "$NS" get pods -l "$1" -o jsonpath='{range .items[*]}{.metadata.uid}{"\n"}{end}' | sort; }
# sidecar_on IMAGE SELECTOR: how many pods of SELECTOR report their sidecar running IMAGE.
sidecar_on() {
  kubectl -n "$NS" get pods -l "$2" -o json |
    jq --arg image "$1" '[.items[] | select(any(.status.containerStatuses[]?; .name == "sidecar" and .image == $image))] | length'
}
# delete_all KIND NAME SELECTOR: deletes the workload and waits until its pods are gone, so
# the next part starts on empty nodes.
delete_all() {
  kubectl -n "$NS" delete "$1" "$2" --wait=true >/dev/null
  until [[ -z $(kubectl -n "$NS" get pods -l "$3" -o name) ]]; do sleep 1; done
}

sidecarset() {
  kubectl apply -f - >/dev/null <<YAML
apiVersion: apps.kruise.io/v1alpha1
kind: SidecarSet
metadata: { name: $SIDECARSET }
spec:
  namespace: $NS
  selector: { matchLabels: { app: sidecar-bench } }
  updateStrategy: { type: RollingUpdate, maxUnavailable: $MAX_UNAVAILABLE }
  containers: [{ name: sidecar, image: "$V1", imagePullPolicy: IfNotPresent }]
YAML
}

cloneset() {
  kubectl apply -f - >/dev/null <<YAML
apiVersion: apps.kruise.io/v1alpha1
kind: CloneSet
metadata: { name: sidecar-bench, namespace: $NS }
spec:
  replicas: $REPLICAS
  selector: { matchLabels: { app: sidecar-bench } }
  template:
    metadata: { labels: { app: sidecar-bench } }
    spec:
      nodeSelector: { stevedore.dev/simulated: $PREFIX }
      tolerations: [{ operator: Exists }]
      containers: [{ name: web, image: "$V1" }]
YAML
}

# The same pods as the SidecarSet's, the sidecar written into the template.
deployment() {
  kubectl apply -f - >/dev/null <<YAML
apiVersion: apps/v1
kind: Deployment
metadata: { name: sidecar-native, namespace: $NS }
spec:
  replicas: $REPLICAS
  selector: { matchLabels: { app: sidecar-native } }
  strategy: { type: RollingUpdate, rollingUpdate: { maxUnavailable: $MAX_UNAVAILABLE, maxSurge: 0 } }
  template:
    metadata: { labels: { app: sidecar-native } }
    spec:
      nodeSelector: { stevedore.dev/simulated: $PREFIX }
      tolerations: [{ operator: Exists }]
      containers:
        - { name: web, image: "$V1" }
        - { name: sidecar, image: "$V1", imagePullPolicy: IfNotPresent }
YAML
}

# sidecarset_done: the SidecarSet's status, for the spec last written, counts every pod
# matched, updated, and updated and ready (not upgrading). One read per poll, so the poll
# adds little to the time measured.
sidecarset_done() {
  local generation observed counts
  IFS=' ' read -r generation observed counts < <(field sidecarset "$SIDECARSET" \
    '{.metadata.generation} {.status.observedGeneration} {.status.matchedPods}/{.status.updatedPods}/{.status.updatedReadyPods}')
  [[ $counts == "$REPLICAS/$REPLICAS/$REPLICAS" && ${observed:-0} -ge $generation ]]
}

# deployment_done: every replica of the template last written is there and available, and
# no pod of an older one is left.
deployment_done() {
  local generation observed counts
  IFS=' ' read -r generation observed counts < <(field deployment sidecar-native \
    '{.metadata.generation} {.status.observedGeneration} {.status.replicas}/{.status.updatedReplicas}/{.status.availableReplicas}')
  [[ $counts == "$REPLICAS/$REPLICAS/$REPLICAS" && ${observed:-0} -ge $generation ]]
}

# The floor's binary: given, or the release build as the other benchmarks build it.
if ((FLOOR)) && [[ -z ${API_FLOOR:-} ]]; then
  cargo build -q --release --locked -p stevedore-tests --bin api_floor
  API_FLOOR=$CARGO_TARGET_DIR/release/api_floor
fi
deploy/local/sim-agents.sh up "$NODES" "$PREFIX"
kubectl create namespace "$NS" >/dev/null

echo "== SidecarSet: a sidecar injected into a CloneSet's $REPLICAS pods on $NODES simulated nodes" >&2
# The SidecarSet first: a sidecar is injected only when its pod is created.
sidecarset
cloneset
until [[ $(field cloneset sidecar-bench '{.status.readyReplicas}') == "$REPLICAS" ]] && sidecarset_done; do sleep 0.5; done
injected=$(sidecar_on "$V1" app=sidecar-bench)
uids_before=$(pod_uids app=sidecar-bench)
start=$(now)
patch_observed sidecarset "$SIDECARSET" \
  "[{\"op\":\"replace\",\"path\":\"/spec/containers/0/image\",\"value\":\"$V2\"}]"
until sidecarset_done; do sleep 0.5; done
sidecar_s=$(since "$start")
kept_uids=$(comm -12 <(echo "$uids_before") <(pod_uids app=sidecar-bench) | grep -c . || true)
upgraded=$(sidecar_on "$V2" app=sidecar-bench)

rss=""
for pid in $(pgrep -f '(^|/)stevedore-controlplane( |$)'); do
  rss+="$(awk '/^VmRSS:/ { r = $2 } /^VmHWM:/ { h = $2 } END { printf "%d/%d MiB", r / 1024, h / 1024 }' "/proc/$pid/status") "
done
leader=$(kubectl -n kube-system get lease stevedore-controlplane -o jsonpath='{.spec.holderIdentity}')
metrics=$(controlplane_metrics "$leader" || true)
reconciles=$(awk '/^stevedore_controlplane_reconciles_total\{kind="SidecarSet"\}/ { print $2 }' <<<"$metrics")
# The SidecarSet goes first: with the CloneSet deleted its pods would otherwise be
# recreated by nothing, but a SidecarSet left behind could match the next part's pods.
kubectl delete sidecarset "$SIDECARSET" --wait=true >/dev/null
delete_all cloneset sidecar-bench app=sidecar-bench

echo "== native apps/v1 Deployment (kube-controller-manager), the sidecar's image changed by recreating the pods" >&2
deployment
until deployment_done; do sleep 0.5; done
uids_before=$(pod_uids app=sidecar-native)
start=$(now)
patch_observed deployment sidecar-native \
  "[{\"op\":\"replace\",\"path\":\"/spec/template/spec/containers/1/image\",\"value\":\"$V2\"}]"
until deployment_done && [[ $(sidecar_on "$V2" app=sidecar-native) == "$REPLICAS" ]]; do sleep 0.5; done
native_s=$(since "$start")
native_kept_uids=$(comm -12 <(echo "$uids_before") <(pod_uids app=sidecar-native) | grep -c . || true)
delete_all deployment sidecar-native app=sidecar-native

floor_s="?"
if ((FLOOR)); then
  echo "== apiserver floor (api-floor, 64 requests in flight)" >&2
  "$API_FLOOR" create --namespace "$NS" --node-label "stevedore.dev/simulated=$PREFIX" \
    --replicas "$REPLICAS" --image "$V1" >/dev/null
  floor_s=$("$API_FLOOR" inplace --namespace "$NS" --image "$V2")
fi

cat <<EOF2
nodes with agents:                 $NODES
pods (CloneSet, sidecar injected): $REPLICAS ($injected with the sidecar on v1 before the change)
sidecar v1 → v2 ($MAX_UNAVAILABLE):           SidecarSet in place ${sidecar_s}s  (native Deployment recreate ${native_s}s: $(ratio "$native_s" "$sidecar_s")× as long; floor ${floor_s}s for the same pod writes, all at once)
pods that kept their UID:          SidecarSet $kept_uids of $REPLICAS; native $native_kept_uids of $REPLICAS
pods whose status shows sidecar v2: SidecarSet $upgraded of $REPLICAS; native $REPLICAS
control-plane RSS (now/peak):      $rss
SidecarSet reconciles (leader):    ${reconciles:-?}
EOF2
bench_params sidecarset NODES REPLICAS MAX_UNAVAILABLE
# The native controller has no in-place update: its figure is its recreate rollout.
bench_figure sidecarset sidecar-rollout stevedore "$sidecar_s" s
bench_figure sidecarset sidecar-rollout native "$native_s" s
((FLOOR == 0)) || bench_figure sidecarset sidecar-rollout floor "$floor_s" s
bench_figure sidecarset kept-uid stevedore "$kept_uids" pods
bench_figure sidecarset kept-uid native "$native_kept_uids" pods
bench_figure sidecarset sidecar-on-v2 stevedore "$upgraded" pods
bench_figure sidecarset reconciles stevedore "${reconciles:-?}" count
