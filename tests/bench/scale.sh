#!/usr/bin/env bash
# Stevedore as the cluster grows (run `deploy/local/run.sh` first; needs root): NODES kwok
# nodes (default 2,000, no agents), then for each pod count of SIZES (default 1000 5000
# 20000) a CloneSet (70 % of the pods), an Advanced StatefulSet (Parallel, 20 %) and an
# Advanced DaemonSet (10 %: one pod on each of that many nodes), all recreate rollouts
# with maxUnavailable 20 %:
#   1. create → every pod of the three ready, against the apiserver floor of the same
#      number of pod creates (api-floor create);
#   2. an image change of the CloneSet and the DaemonSet at once → every pod of the two
#      replaced and ready, against the floor of the same deletes and creates 20 % at a
#      time (api-floor roll --count). The StatefulSet is not rolled: kwok 0.7 deletes a
#      pod by name, not UID, so a StatefulSet pod made again under its name was deleted
#      again and again (50 of 200 pods down for minutes; a kubelet deletes with the UID
#      as precondition, and the native controller would meet the same loop on kwok);
#   3. the leader's RssAnon with those pods cached, and its growth per pod from the size
#      before (the slope: flat memory per pod means a constant slope);
#   4. caches synced: the standby replica deleted, the time until its successor is Ready
#      (readiness waits for every cache's first list);
#   5. failover: the leader killed (SIGKILL and forced deletion, so it cannot release its
#      Lease) and at once the CloneSet scaled up by one: the time until that pod exists,
#      made by the new leader;
#   6. the leader's reconciles per second over phases 1-2 and its work-queue wait p99;
#   7. phases 1-2 again with kube-controller-manager's own controllers on the same nodes
#      (NATIVE=1, the default): a Deployment (RollingUpdate, maxSurge 0, maxUnavailable
#      20 %: a recreate roll), a StatefulSet (Parallel) and a DaemonSet (maxUnavailable
#      20 %) of the same sizes, in a namespace of their own, deleted with it after.
# In-place rolls, ImagePullJobs and BroadcastJobs at this size need an agent per node,
# which 2,000 agent processes on one machine cannot give; those phases are not run here.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
# shellcheck source=figures-lib.sh
source tests/bench/figures-lib.sh
# shellcheck source=kwok-nodes.sh
source tests/bench/kwok-nodes.sh
# shellcheck source=controlplane-metrics.sh
source tests/bench/controlplane-metrics.sh
NODES=${NODES:-2000}
SIZES=${SIZES:-1000 5000 20000}
SETTLE=${SETTLE:-20}
STALL=${STALL:-180}
NATIVE=${NATIVE:-1}
PREFIX=scale
NS=stevedore-bench-scale
FLOOR_NS=stevedore-bench-scale-floor
NATIVE_NS=stevedore-bench-scale-native
# shellcheck source=/dev/null
source <(deploy/local/cluster.sh env)
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/stevedore/cargo-target}
V1=$STEVEDORE_REGISTRY/stevedore/web:v1
V2=$STEVEDORE_REGISTRY/stevedore/web:v2

cleanup() {
  kubectl delete namespace "$NS" "$FLOOR_NS" "$NATIVE_NS" --wait=true --timeout=900s >/dev/null 2>&1 || true
  kubectl delete nodes -l "stevedore.dev/bench=$PREFIX" --wait=false >/dev/null 2>&1 || true
}
trap cleanup EXIT
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "?" }'; }
leader() { kubectl -n kube-system get lease stevedore-controlplane -o jsonpath='{.spec.holderIdentity}'; }
# replica_pid POD: the host PID of control-plane replica POD (its environment names it).
replica_pid() {
  local pid
  for pid in $(pgrep -f '(^|/)stevedore-controlplane( |$)'); do
    tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx "POD_NAME=$1" && { echo "$pid"; return 0; }
  done
  return 1
}
anon_kib() { awk '/^RssAnon:/ { print $2 }' "/proc/$1/status"; }
replicas() { kubectl -n kube-system get pods -l app.kubernetes.io/name=stevedore-controlplane -o name | sed 's|^pod/||'; }
wait_two_ready_replicas() {
  kubectl -n kube-system rollout status deployment stevedore-controlplane --timeout=600s >/dev/null
  until (($(replicas | grep -c .) == 2)); do sleep 0.5; done
}
# pods_marked_not_ready: how many times kube-controller-manager's node lifecycle controller
# has marked a pod NotReady (its NodeNotReady events), which it does when a node's Lease
# goes unrenewed past the grace period: kwok falling behind, not the workload under test.
pods_marked_not_ready() {
  kubectl get events -A --field-selector reason=NodeNotReady,involvedObject.kind=Pod -o json |
    jq '[.items[].count // 1] | add // 0'
}
# counter NAME: the sum of the leader's metric samples named NAME (0 when absent).
counter() { controlplane_metrics "$(leader)" | awk -v n="$1" 'index($0, n) == 1 { s += $NF } END { printf "%d", s }'; }
# wait_p99: the p99 of the leader's work-queue wait, the upper bound of the first bucket
# of its histogram that holds 99 % of the waits.
wait_p99() {
  controlplane_metrics "$(leader)" |
    awk '/^stevedore_controlplane_workqueue_wait_seconds_bucket/ {
      match($0, /le="[^"]*"/); c[substr($0, RSTART + 4, RLENGTH - 5)] += $NF }
      END { for (le in c) print le, c[le] }' | sort -g |
    awk '{ le[NR] = $1; c[NR] = $2 }
      END { if (NR == 0 || c[NR] == 0) { print "?"; exit }
        for (i = 1; i <= NR; i++) if (c[i] >= 0.99 * c[NR]) { print le[i]; exit } }'
}


# The workloads under test: Stevedore's (FLAVOUR=stevedore, in NS) or kube-controller-
# manager's (FLAVOUR=native, in NATIVE_NS); `use_flavour` sets WNS and the three kinds.
use_flavour() {
  FLAVOUR=$1
  case $FLAVOUR in
    stevedore)
      WNS=$NS CS_KIND=clonesets.apps.kruise.io STS_KIND=statefulsets.apps.kruise.io
      DS_KIND=daemonsets.apps.kruise.io CS_UPDATED=updatedReadyReplicas
      ;;
    native)
      WNS=$NATIVE_NS CS_KIND=deployments.apps STS_KIND=statefulsets.apps
      DS_KIND=daemonsets.apps CS_UPDATED=updatedReplicas
      ;;
  esac
}
use_flavour stevedore

# workloads CS STS DS IMAGE: the three workloads of FLAVOUR at those sizes with IMAGE.
workloads() {
  [[ $FLAVOUR == stevedore ]] || { native_workloads "$@"; return; }
  local template="{ metadata: { labels: { app: APP } }, spec: { nodeSelector: { stevedore.dev/bench: $PREFIX }, tolerations: [{ operator: Exists }], terminationGracePeriodSeconds: 0, containers: [{ name: web, image: \"$4\" }] } }"
  kubectl apply -f - >/dev/null <<YAML
apiVersion: apps.kruise.io/v1alpha1
kind: CloneSet
metadata: { name: scale-cs, namespace: $NS }
spec:
  replicas: $1
  selector: { matchLabels: { app: scale-cs } }
  updateStrategy: { type: ReCreate, maxUnavailable: 20% }
  template: ${template//APP/scale-cs}
---
apiVersion: apps.kruise.io/v1beta1
kind: StatefulSet
metadata: { name: scale-sts, namespace: $NS }
spec:
  replicas: $2
  serviceName: scale-sts
  podManagementPolicy: Parallel
  selector: { matchLabels: { app: scale-sts } }
  updateStrategy: { type: RollingUpdate, rollingUpdate: { maxUnavailable: 20% } }
  template: ${template//APP/scale-sts}
---
apiVersion: apps.kruise.io/v1alpha1
kind: DaemonSet
metadata: { name: scale-ds, namespace: $NS }
spec:
  selector: { matchLabels: { app: scale-ds } }
  updateStrategy: { type: RollingUpdate, rollingUpdate: { maxUnavailable: 20% } }
  template:
    metadata: { labels: { app: scale-ds } }
    spec:
      nodeSelector: { stevedore.dev/scale-ds: "in" }
      tolerations: [{ operator: Exists }]
      terminationGracePeriodSeconds: 0
      containers: [{ name: web, image: "$4" }]
YAML
}

# native_workloads CS STS DS IMAGE: kube-controller-manager's counterparts of `workloads`.
native_workloads() {
  local template="{ metadata: { labels: { app: APP } }, spec: { nodeSelector: { stevedore.dev/bench: $PREFIX }, tolerations: [{ operator: Exists }], terminationGracePeriodSeconds: 0, containers: [{ name: web, image: \"$4\" }] } }"
  kubectl apply -f - >/dev/null <<YAML
apiVersion: apps/v1
kind: Deployment
metadata: { name: scale-cs, namespace: $NATIVE_NS }
spec:
  replicas: $1
  selector: { matchLabels: { app: scale-cs } }
  strategy: { type: RollingUpdate, rollingUpdate: { maxSurge: 0, maxUnavailable: 20% } }
  template: ${template//APP/scale-cs}
---
apiVersion: apps/v1
kind: StatefulSet
metadata: { name: scale-sts, namespace: $NATIVE_NS }
spec:
  replicas: $2
  serviceName: scale-sts
  podManagementPolicy: Parallel
  selector: { matchLabels: { app: scale-sts } }
  template: ${template//APP/scale-sts}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: { name: scale-ds, namespace: $NATIVE_NS }
spec:
  selector: { matchLabels: { app: scale-ds } }
  updateStrategy: { type: RollingUpdate, rollingUpdate: { maxUnavailable: 20% } }
  template:
    metadata: { labels: { app: scale-ds } }
    spec:
      nodeSelector: { stevedore.dev/scale-ds: "in" }
      tolerations: [{ operator: Exists }]
      terminationGracePeriodSeconds: 0
      containers: [{ name: web, image: "$4" }]
YAML
}

# roll IMAGE: the image change of the set (CloneSet or Deployment) and the DaemonSet.
roll() {
  local patch="[{\"op\":\"replace\",\"path\":\"/spec/template/spec/containers/0/image\",\"value\":\"$1\"}]"
  kubectl -n "$WNS" patch "$CS_KIND" scale-cs --type json -p "$patch" >/dev/null
  kubectl -n "$WNS" patch "$DS_KIND" scale-ds --type json -p "$patch" >/dev/null
}

# caught_up KIND NAME FIELDS WANT: the status of KIND/NAME has seen its generation and its
# two FIELDS (jsonpath, "a}/{b") are both WANT.
caught_up() {
  local generation observed a b
  IFS=/ read -r generation observed a b < <(kubectl -n "$WNS" get "$1" "$2" \
    -o jsonpath="{.metadata.generation}/{.status.observedGeneration}/{$3}")
  [[ $generation == "$observed" && $a == "$4" && $b == "$4" ]]
}

# settled CS STS DS IMAGE COUNT: each workload's status has seen its generation and says
# every pod updated and ready at those sizes, and COUNT of their pods run IMAGE.
settled() {
  caught_up "$CS_KIND" scale-cs ".status.$CS_UPDATED}/{.status.readyReplicas" "$1" &&
    caught_up "$STS_KIND" scale-sts '.status.updatedReplicas}/{.status.readyReplicas' "$2" &&
    caught_up "$DS_KIND" scale-ds '.status.updatedNumberScheduled}/{.status.numberReady' "$3" &&
    (($(kubectl -n "$WNS" get pods -o jsonpath='{range .items[*]}{.spec.containers[0].image}{"\n"}{end}' | grep -cx "$4") == $5))
}

# ready_counts: the three workloads' ready counts, which move while they make progress.
ready_counts() {
  kubectl -n "$WNS" get "$CS_KIND,$STS_KIND,$DS_KIND" \
    -o jsonpath='{range .items[*]}{.status.readyReplicas}{.status.numberReady}/{.status.updatedReplicas}{.status.updatedNumberScheduled} {end}'
}

# wait_settled ARGS...: until `settled ARGS...`; fails, saying so, when the ready counts
# did not move for STALL seconds (at 5,000 pods some pods stayed NotReady for good after
# kube-controller-manager set their Ready condition to False).
wait_settled() {
  local last="" moved
  moved=$(now)
  until settled "$@"; do
    local counts
    counts=$(ready_counts)
    [[ $counts == "$last" ]] || { last=$counts; moved=$(now); }
    if (($(awk -v a="$moved" -v b="$(now)" -v s="$STALL" 'BEGIN { print (b - a > s) }'))); then
      echo "stalled: ready/updated counts ($counts) unchanged for ${STALL}s" >&2
      echo "pods marked NotReady by the node lifecycle controller (kwok behind on node Leases) since this size began: $(($(pods_marked_not_ready) - not_ready0))" >&2
      return 1
    fi
    sleep 1
  done
}

cargo build -q --release --locked -p stevedore-tests --bin api_floor
FLOOR=$CARGO_TARGET_DIR/release/api_floor
echo "== $NODES kwok nodes" >&2
start=$(now)
make_kwok_nodes "$PREFIX" "$NODES"
nodes_s=$(since "$start")
kubectl create namespace "$NS" >/dev/null
kubectl create namespace "$FLOOR_NS" >/dev/null
bench_params scale NODES SIZES SETTLE STALL NATIVE
echo "nodes:  $NODES kwok nodes ready in ${nodes_s}s"
prev_size=0 prev_anon=""
for size in $SIZES; do
  cs=$((size * 7 / 10)) sts=$((size * 2 / 10))
  ds=$((size - cs - sts))
  ((ds <= NODES)) || { echo "size $size needs $ds nodes for the DaemonSet, have $NODES" >&2; exit 2; }
  kubectl label nodes -l "stevedore.dev/bench=$PREFIX" stevedore.dev/scale-ds- >/dev/null
  # awk, not head: head's early exit would fail the pipeline (SIGPIPE under pipefail).
  kubectl get nodes -l "stevedore.dev/bench=$PREFIX" -o name | sort | awk -v n="$ds" 'NR <= n' |
    xargs sh -c 'kubectl label --overwrite "$@" stevedore.dev/scale-ds=in' label >/dev/null
  echo "== $size pods: CloneSet $cs, Advanced StatefulSet $sts, Advanced DaemonSet $ds" >&2
  r0=$(counter stevedore_controlplane_reconciles_total)
  not_ready0=$(pods_marked_not_ready)
  start=$(now)
  workloads "$cs" "$sts" "$ds" "$V1"
  # A stalled size has no figures; a larger one would stall as well.
  wait_settled "$cs" "$sts" "$ds" "$V1" "$size" || { echo "$size pods: the create stalled"; break; }
  create_s=$(since "$start")
  start=$(now)
  roll "$V2"
  wait_settled "$cs" "$sts" "$ds" "$V2" $((cs + ds)) || { echo "$size pods: the roll stalled"; break; }
  roll_s=$(since "$start")
  busy_s=$(awk -v a="$create_s" -v b="$roll_s" 'BEGIN { print a + b }')
  r1=$(counter stevedore_controlplane_reconciles_total)
  reconciles_per_s=$(awk -v r=$((r1 - r0)) -v t="$busy_s" 'BEGIN { printf "%.1f", r / t }')
  p99=$(wait_p99 || echo "?")

  sleep "$SETTLE"
  leader_pod=$(leader)
  anon=$(anon_kib "$(replica_pid "$leader_pod")")
  slope="?"
  [[ -z $prev_anon ]] || slope=$(awk -v a="$prev_anon" -v b="$anon" -v n=$((size - prev_size)) 'BEGIN { printf "%.2f", (b - a) / n }')

  echo "== caches synced: the standby replaced" >&2
  standby=$(replicas | grep -vx "$leader_pod" | awk 'NR == 1')
  start=$(now)
  kubectl -n kube-system delete pod "$standby" --wait=false >/dev/null
  until [[ $(replicas | grep -vx "$leader_pod" | grep -vx "$standby" | awk 'NR == 1') != "" ]]; do sleep 0.2; done
  successor=$(replicas | grep -vx "$leader_pod" | grep -vx "$standby" | awk 'NR == 1')
  kubectl -n kube-system wait --for=condition=Ready "pod/$successor" --timeout=600s >/dev/null
  synced_s=$(since "$start")
  wait_two_ready_replicas

  echo "== failover: the leader killed, the CloneSet scaled by one" >&2
  pid=$(replica_pid "$leader_pod" || true)
  start=$(now)
  [[ -z $pid ]] || kill -KILL "$pid"
  kubectl -n kube-system delete pod "$leader_pod" --grace-period=0 --force >/dev/null 2>&1
  kubectl -n "$NS" scale cloneset scale-cs --replicas=$((cs + 1)) >/dev/null
  until (($(kubectl -n "$NS" get pods -l app=scale-cs -o name | wc -l) > cs)); do sleep 0.2; done
  failover_s=$(since "$start")
  wait_two_ready_replicas

  kubectl -n "$NS" delete cloneset scale-cs --wait=false >/dev/null
  kubectl -n "$NS" delete statefulsets.apps.kruise.io scale-sts --wait=false >/dev/null
  kubectl -n "$NS" delete daemonsets.apps.kruise.io scale-ds --wait=false >/dev/null
  until [[ -z $(kubectl -n "$NS" get pods -o name) ]]; do sleep 2; done

  native_create_s="not run" native_roll_s="not run"
  if [[ $NATIVE == 1 ]]; then
    echo "== kube-controller-manager: Deployment $cs, StatefulSet $sts, DaemonSet $ds" >&2
    use_flavour native
    kubectl create namespace "$NATIVE_NS" >/dev/null
    start=$(now)
    workloads "$cs" "$sts" "$ds" "$V1"
    if wait_settled "$cs" "$sts" "$ds" "$V1" "$size"; then
      native_create_s=$(since "$start")
      start=$(now)
      roll "$V2"
      if wait_settled "$cs" "$sts" "$ds" "$V2" $((cs + ds)); then
        native_roll_s=$(since "$start")
      else
        native_roll_s=stalled
      fi
    else
      native_create_s=stalled
    fi
    # The namespace with it: the apiserver refuses creates in a terminating namespace, so
    # the controllers make nothing new while its pods are deleted in one collection.
    kubectl delete namespace "$NATIVE_NS" --wait=true --timeout=900s >/dev/null
    use_flavour stevedore
  fi

  echo "== floor: $size pod creates, then $((cs + ds)) of them replaced 20 % at a time" >&2
  # A floor that stalls (api-floor says how far it got) is reported as stalled, not
  # finished by hand; the run goes on to the next size.
  floor_create_s=$("$FLOOR" create --namespace "$FLOOR_NS" --node-label "stevedore.dev/bench=$PREFIX" --replicas "$size" --image "$V1") ||
    floor_create_s=stalled
  floor_roll_s="not run"
  [[ $floor_create_s == stalled ]] ||
    floor_roll_s=$("$FLOOR" roll --namespace "$FLOOR_NS" --image "$V2" --batch $(((cs + ds) / 5)) --count $((cs + ds))) ||
    floor_roll_s=stalled
  kubectl -n "$FLOOR_NS" delete pods --all --grace-period=0 --wait=false >/dev/null
  until [[ -z $(kubectl -n "$FLOOR_NS" get pods -o name) ]]; do sleep 2; done

  cat <<EOF2
$size pods ($cs + $sts + $ds):
  create → all ready:      ${create_s}s (floor ${floor_create_s}s, $(ratio "$create_s" "$floor_create_s")×; kube-controller-manager ${native_create_s}s, $(ratio "$create_s" "$native_create_s")×)
  recreate roll of $((cs + ds)):  ${roll_s}s (floor ${floor_roll_s}s, $(ratio "$roll_s" "$floor_roll_s")×; kube-controller-manager ${native_roll_s}s, $(ratio "$roll_s" "$native_roll_s")×)
  leader RssAnon:          ${anon} KiB; per pod since the size before: ${slope} KiB
  standby caches synced:   ${synced_s}s
  failover to acting:      ${failover_s}s
  reconciles/s:            ${reconciles_per_s}; work-queue wait p99 ${p99}s
  pods marked NotReady by the node lifecycle controller: $(($(pods_marked_not_ready) - not_ready0))
EOF2
  bench_figure scale "create-$size" stevedore "$create_s" s
  bench_figure scale "create-$size" floor "$floor_create_s" s
  bench_figure scale "roll-$size" stevedore "$roll_s" s
  bench_figure scale "roll-$size" floor "$floor_roll_s" s
  bench_figure scale "create-$size" native "$native_create_s" s
  bench_figure scale "roll-$size" native "$native_roll_s" s
  bench_figure scale "leader-anon-$size" stevedore "$((anon / 1024))" MiB
  bench_figure scale "anon-per-pod-$size" stevedore "$slope" KiB
  bench_figure scale "caches-synced-$size" stevedore "$synced_s" s
  bench_figure scale "failover-$size" stevedore "$failover_s" s
  bench_figure scale "reconciles-per-s-$size" stevedore "$reconciles_per_s" 1/s
  prev_size=$size prev_anon=$anon
done
