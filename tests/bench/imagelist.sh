#!/usr/bin/env bash
# ImageList distribution and ImagePullJob at scale on the local cluster (run
# `deploy/local/run.sh --fake-nodes 1` first; needs root): NODES simulated nodes, each with
# its own agent process (deploy/local/sim-agents.sh, all sharing the one containerd).
#   1. fan-out: one change written to all NODES ImageLists at once (an entry for a small
#      image already in containerd, server-side apply, 64 writes in flight), timed until
#      every list's status shows it acknowledged and Succeeded, then its removal; ROUNDS
#      rounds. Then the same on one list alone, SINGLE_ROUNDS rounds (median).
#      Acknowledged = status.observedGeneration reached the generation of our write and
#      status.images has the entry in some phase: the distributor writes that only after
#      the node's agent accepted the list (ApplyImageList returned). Removal acknowledged =
#      observedGeneration caught up and the entry gone from status.images.
#   2. one ImagePullJob over the NODES nodes per value in PARALLELISM (completionPolicy
#      Always, imagePullPolicy PULL_POLICY): time to completionTime and until its entries
#      are released from every list; meanwhile the leader's reconciles (its /metrics) and
#      the apiserver's writes (apiserver_request_total: POST/PUT/PATCH/APPLY/DELETE, by
#      resource), as totals and per second. The apiserver counts every client: other work
#      on the cluster during the run shows up there too.
#   3. the floor of such a job from a minimal client, 16 writes in flight (api-floor
#      imagelist-entries): the job's entries applied on every list, released once every
#      list reports the image pulled; and, beside it, the entry writes alone.
#   4. RSS of the leader control plane and of the agents.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
# shellcheck source=figures-lib.sh
source tests/bench/figures-lib.sh
NODES=${NODES:-100}
ROUNDS=${ROUNDS:-3}
SINGLE_ROUNDS=${SINGLE_ROUNDS:-5}
PARALLELISM=${PARALLELISM:-10 100%}
PULL_POLICY=${PULL_POLICY:-Always}
PREFIX=benchimg
NS=stevedore-bench-imagelist
LABEL=stevedore.dev/simulated=$PREFIX
# shellcheck source=/dev/null
source <(deploy/local/cluster.sh env)
# shellcheck source=controlplane-metrics.sh
source tests/bench/controlplane-metrics.sh
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/stevedore/cargo-target-bench}
FANOUT_IMAGE=$STEVEDORE_REGISTRY/stevedore/pause:3.10
JOB_IMAGE=$STEVEDORE_REGISTRY/stevedore/web:v1
SIM_DIR=$STEVEDORE_STATE_DIR/sim-agents/$PREFIX
CTR=(ctr --address "$STEVEDORE_CONTAINERD_SOCK" -n k8s.io)
WORK=$(mktemp -d /tmp/stevedore-bench-imagelist.XXXXXX)
SAMPLER=""

cleanup() {
  [[ -n $SAMPLER ]] && kill "$SAMPLER" 2>/dev/null
  kubectl delete namespace "$NS" --wait=true --timeout=300s >/dev/null 2>&1 || true
  deploy/local/sim-agents.sh down "$PREFIX" || true
  rm -rf "$WORK"
}
trap cleanup EXIT
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
per_s() { awk -v n="$1" -v s="$2" 'BEGIN { printf "%.1f", (s > 0 ? n / s : 0) }'; }

# The leader's pod, its /metrics, and its process (the container's init process).
leader_pod() { kubectl -n kube-system get lease stevedore-controlplane -o jsonpath='{.spec.holderIdentity}'; }
leader_metrics() { controlplane_metrics "$1"; }
leader_pid() {
  local id
  id=$(kubectl -n kube-system get pod "$1" -o jsonpath='{.status.containerStatuses[0].containerID}')
  "${CTR[@]}" tasks ls | awk -v id="${id#containerd://}" '$1 == id { print $2 }'
}
# rss PID: resident memory now and at peak, and the part of it that is the process's own
# (RssAnon; the rest is mostly the binary's pages, which processes of one binary share).
rss() {
  awk '/^VmRSS:/ { r = $2 } /^VmHWM:/ { h = $2 } /^RssAnon:/ { a = $2 }
    END { printf "%d MiB (peak %d MiB), of which its own (RssAnon) %d MiB", r / 1024, h / 1024, a / 1024 }' "/proc/$1/status"
}
cpu_s() { awk -v hz="$(getconf CLK_TCK)" '{ printf "%.1f", ($14 + $15) / hz }' "/proc/$1/stat"; }
# metric NAME: the sum of the series whose name and labels start with NAME, from stdin.
metric() { awk -v m="$1" 'index($0, m) == 1 { s += $NF } END { print s + 0 }'; }
# api_writes: "resource[/subresource] VERB count" for every write the apiserver counted;
# refused ones as VERB:CODE (e.g. PATCH:409, a conflict).
api_writes() {
  kubectl get --raw /metrics | awk '
    function label(name,   r) {
      if (match($0, name "=\"[^\"]*\"")) { r = substr($0, RSTART, RLENGTH); sub(/^[^"]*"/, "", r); sub(/"$/, "", r); return r }
      return ""
    }
    /^apiserver_request_total\{/ {
      verb = label("verb")
      if (verb !~ /^(POST|PUT|PATCH|APPLY|DELETE|DELETECOLLECTION)$/) next
      r = label("resource"); s = label("subresource"); if (s != "") r = r "/" s
      code = label("code"); if (code !~ /^2/) verb = verb ":" code
      n[r " " verb] += $NF
    }
    END { for (k in n) print k, n[k] }'
}
# writes_between BEFORE AFTER: the differences, one "resource VERB count" a line.
writes_between() {
  awk 'NR == FNR { b[$1 " " $2] = $3; next } { d = $3 - b[$1 " " $2]; if (d > 0) print $1, $2, d }' "$1" "$2" | sort
}
# reconciles_between BEFORE AFTER: "kind count" of reconciles per kind.
reconciles_between() {
  awk -F'[" ]' '
    /^stevedore_controlplane_reconciles_total\{/ { if (NR == FNR) b[$2] = $NF; else { d = $NF - b[$2]; if (d > 0) print $2, d } }
  ' "$1" "$2"
}
# print_writes DELTA SECONDS: the writes to Stevedore's resources and Events by resource,
# then their sum and everything else.
print_writes() {
  awk -v s="$2" '
    BEGIN { split("imagelists imagelists/status imagepulljobs imagepulljobs/status events", keys, " ") }
    { n[$1] += $3; v[$1] = v[$1] sprintf(" %s %d", $2, $3); all += $3 }
    END {
      for (i = 1; i <= 5; i++) {
        k = keys[i]; mine += n[k]; seen[k] = 1
        if (n[k]) printf "    %-22s %6d  %6.1f/s  (%s )\n", k, n[k], n[k] / s, v[k]
      }
      printf "    %-22s %6d  %6.1f/s\n", "= together", mine, mine / s
      other = ""; for (k in n) if (!(k in seen)) other = other sprintf(" %s %d", k, n[k])
      printf "    %-22s %6d  %6.1f/s  (%s )\n", "other resources", all - mine, (all - mine) / s, other
    }' "$1"
}
# peak_rate FILE: the highest per-second rate between consecutive "time count" samples.
peak_rate() {
  awk 'NR > 1 && $1 > t { r = ($2 - c) / ($1 - t); if (r > m) m = r } { t = $1; c = $2 }
    END { if (NR < 2) print "n/a"; else printf "%.1f/s", m }' "$1"
}
# agents_not_serving: the simulated nodes whose agent does not answer on its admin port
# yet. Not "whose agent has an ImageList session": the leader opens a node's session only
# once its list has something for the agent (an empty list, a new node's, needs none), so
# the first fan-out below also opens the sessions, as it would on a real cluster.
agents_not_serving() {
  local f
  for f in "$SIM_DIR"/*.port; do
    curl -sf -m 5 -o /dev/null "http://127.0.0.1:$(($(cat "$f") + 5000))/metrics" ||
      basename "$f" .port
  done
}
agents_rss() {
  local f
  for f in "$SIM_DIR"/*.pid; do cat "/proc/$(cat "$f")/status" 2>/dev/null || true; done | awk '
    /^VmRSS:/ { n++; r += $2 } /^RssAnon:/ { a += $2; if ($2 > m) m = $2 } /^RssFile:/ { f = $2 }
    END { printf "%d agents: RssAnon %d MiB in all, %.1f MiB each on average, largest %.1f MiB; VmRSS %.1f MiB each, the rest being the shared binary (RssFile %.1f MiB)",
      n, a / 1024, (n ? a / n / 1024 : 0), m / 1024, (n ? r / n / 1024 : 0), f / 1024 }'
}

cargo build -q --release --locked -p stevedore-tests --bin imagelist_bench --bin api_floor
BENCH=$CARGO_TARGET_DIR/release/imagelist_bench
FLOOR=$CARGO_TARGET_DIR/release/api_floor
# The fan-out measures distribution, not a pull: the image is in containerd beforehand
# (kubelet's image GC may have removed it).
"${CTR[@]}" images ls -q | grep -x "$FANOUT_IMAGE" >/dev/null ||
  "${CTR[@]}" images pull --plain-http "$FANOUT_IMAGE" >/dev/null
deploy/local/sim-agents.sh up "$NODES" "$PREFIX"
kubectl create namespace "$NS" >/dev/null

echo "== waiting for every agent to serve" >&2
start=$(now)
while missing=$(agents_not_serving) && [[ -n $missing ]]; do
  if (($(since "$start" | cut -d. -f1) > 300)); then
    echo "no agent serving after 300s on $(wc -l <<<"$missing") nodes: $(head -n 10 <<<"$missing" | tr '\n' ' ')" >&2
    leader_metrics "$(leader_pod)" | grep '^stevedore_controlplane_agent_rpcs_total' >&2 || true
    for node in $(head -n 3 <<<"$missing"); do
      echo "-- $node: agent up $(ps -o etimes= -p "$(cat "$SIM_DIR/$node.pid")" || echo "(gone)")s; log:" >&2
      tail -n 5 "$SIM_DIR/$node.log" >&2
    done
    exit 1
  fi
  sleep 1
done
sessions_s=$(since "$start")
leader=$(leader_pod)
pid=$(leader_pid "$leader")
echo "   all $NODES agents serving after ${sessions_s}s; leader $leader (pid $pid)" >&2

echo "== fan-out: one entry on $NODES ImageLists, $ROUNDS rounds" >&2
leader_metrics "$leader" >"$WORK/fanout-cp-before"
api_writes >"$WORK/fanout-api-before"
start=$(now)
"$BENCH" fanout --nodes-label "$LABEL" --image "$FANOUT_IMAGE" --rounds "$ROUNDS" | tee "$WORK/fanout" >&2
fanout_s=$(since "$start")
api_writes >"$WORK/fanout-api-after"
leader_metrics "$leader" >"$WORK/fanout-cp-after"
writes_between "$WORK/fanout-api-before" "$WORK/fanout-api-after" >"$WORK/fanout-writes"
fanout_pushes=$(($(metric 'stevedore_controlplane_agent_rpcs_total{method="ApplyImageList",code="Ok"}' <"$WORK/fanout-cp-after") -
  $(metric 'stevedore_controlplane_agent_rpcs_total{method="ApplyImageList",code="Ok"}' <"$WORK/fanout-cp-before")))

echo "== one ImageList alone ($PREFIX-000), $SINGLE_ROUNDS rounds" >&2
"$BENCH" fanout --node "$PREFIX-000" --image "$FANOUT_IMAGE" --rounds "$SINGLE_ROUNDS" | tee "$WORK/single" >&2
agents_rss_idle=$(agents_rss)

job_report=""
job_released=()
i=0
for parallelism in $PARALLELISM; do
  i=$((i + 1))
  job=bench-$i
  echo "== ImagePullJob $job: parallelism $parallelism over $NODES nodes, imagePullPolicy $PULL_POLICY" >&2
  [[ $parallelism == *% ]] && p="\"$parallelism\"" || p=$parallelism
  leader=$(leader_pod)
  pid=$(leader_pid "$leader")
  apiserver=$(pgrep -x kube-apiserver | head -n1)
  leader_metrics "$leader" >"$WORK/job-cp-before"
  api_writes >"$WORK/job-api-before"
  cp_cpu=$(cpu_s "$pid") api_cpu=$(cpu_s "$apiserver")
  (while sleep 1; do
    printf '%s %s\n' "$(now)" "$(leader_metrics "$leader" | metric 'stevedore_controlplane_reconciles_total{kind="ImagePullJob"}')"
  done) >"$WORK/job-samples" 2>/dev/null &
  SAMPLER=$!
  start=$(now)
  kubectl apply -f - >/dev/null <<YAML
apiVersion: apps.kruise.io/v1alpha1
kind: ImagePullJob
metadata: { name: $job, namespace: $NS }
spec:
  image: $JOB_IMAGE
  selector: { matchLabels: { stevedore.dev/simulated: $PREFIX } }
  parallelism: $p
  imagePullPolicy: $PULL_POLICY
  completionPolicy: { type: Always }
YAML
  until [[ -n $(kubectl -n "$NS" get imagepulljob "$job" -o jsonpath='{.status.completionTime}') ]]; do
    (($(since "$start" | cut -d. -f1) < 1800)) || { echo "$job did not complete in 1800s" >&2; exit 1; }
    sleep 0.5
  done
  complete_s=$(since "$start")
  counts=$(kubectl -n "$NS" get imagepulljob "$job" -o jsonpath='{.status.succeeded}/{.status.desired} succeeded, {.status.failed} failed')
  "$BENCH" absent --nodes-label "$LABEL" --image "$JOB_IMAGE" >/dev/null
  released_s=$(since "$start")
  api_writes >"$WORK/job-api-after"
  leader_metrics "$leader" >"$WORK/job-cp-after"
  cp_cpu=$(awk -v a="$cp_cpu" -v b="$(cpu_s "$pid")" 'BEGIN { printf "%.1f", b - a }')
  api_cpu=$(awk -v a="$api_cpu" -v b="$(cpu_s "$apiserver")" 'BEGIN { printf "%.1f", b - a }')
  kill "$SAMPLER" 2>/dev/null || true
  wait "$SAMPLER" 2>/dev/null || true
  SAMPLER=""
  [[ $(leader_pod) == "$leader" ]] || echo "note: the leader changed during $job; its figures are partial" >&2
  writes_between "$WORK/job-api-before" "$WORK/job-api-after" >"$WORK/job-writes"
  reconciles=$(reconciles_between "$WORK/job-cp-before" "$WORK/job-cp-after")
  ipj=$(awk '$1 == "ImagePullJob" { print $2 }' <<<"$reconciles")
  ipj=${ipj:-0}
  after() { metric "$1" <"$WORK/job-cp-after"; }
  before() { metric "$1" <"$WORK/job-cp-before"; }
  dur_sum=$(awk -v a="$(before 'stevedore_controlplane_reconcile_duration_seconds_sum{kind="ImagePullJob"}')" \
    -v b="$(after 'stevedore_controlplane_reconcile_duration_seconds_sum{kind="ImagePullJob"}')" 'BEGIN { print b - a }')
  pushes=$(($(after 'stevedore_controlplane_agent_rpcs_total{method="ApplyImageList",code="Ok"}') -
    $(before 'stevedore_controlplane_agent_rpcs_total{method="ApplyImageList",code="Ok"}')))
  # One word per measure: parallelism 100% is "job-released-100pct".
  job_released+=("job-released-${parallelism/\%/pct} $released_s")
  job_report+="
ImagePullJob parallelism $parallelism, imagePullPolicy $PULL_POLICY, over $NODES nodes:
  completed (status.completionTime):   ${complete_s}s  ($counts)
  entries released from every list:    ${released_s}s  (the window of the figures below)
  reconciles (leader), by kind:        $(tr '\n' ' ' <<<"$reconciles")
  ImagePullJob reconciles:             $ipj = $(per_s "$ipj" "$released_s")/s on average, peak $(peak_rate "$WORK/job-samples") (1 s samples); mean $(awk -v s="$dur_sum" -v n="$ipj" 'BEGIN { printf "%.0f", (n ? s / n * 1000 : 0) }') ms each
  ApplyImageList pushes to agents:     $pushes
  CPU: leader ${cp_cpu}s, kube-apiserver ${api_cpu}s
  API writes (apiserver_request_total: resource, total, per second, by verb; VERB:CODE refused):
$(print_writes "$WORK/job-writes" "$released_s")"
  kubectl -n "$NS" delete imagepulljob "$job" --wait=true --timeout=120s >/dev/null
done

# The floor of a job at parallelism 100%: from a minimal client, as many writes in flight as
# the job keeps (16, imagepulljob/entries.rs CONCURRENT_WRITES), the job's entries (its
# image, alwaysPull under PULL_POLICY=Always) applied on every list, then, once every list
# reports the image Succeeded, released: the job's writes and the agents' work it waits
# for, nothing planned. Beside it, the entry writes alone (an image the nodes have, no
# wait), which was the floor until it was seen to leave out the pulls the job waits for.
echo "== floor: api-floor imagelist-entries over $NODES lists" >&2
floor_flags=(--wait-succeeded)
[[ $PULL_POLICY != Always ]] || floor_flags+=(--always-pull)
api_writes >"$WORK/floor-api-before"
floor16=$("$FLOOR" --concurrency 16 imagelist-entries --node-label "$LABEL" --image "$JOB_IMAGE" "${floor_flags[@]}")
writes16=$("$FLOOR" --concurrency 16 imagelist-entries --node-label "$LABEL" --image "$FANOUT_IMAGE")
api_writes >"$WORK/floor-api-after"
writes_between "$WORK/floor-api-before" "$WORK/floor-api-after" >"$WORK/floor-writes"

leader=$(leader_pod)
pid=$(leader_pid "$leader")
cat <<EOF2

nodes with agents:                   $NODES (all serving ${sessions_s}s after the nodes were Ready)
fan-out of one ImageList change, $FANOUT_IMAGE
  (acknowledged: observedGeneration reached and the entry in status; per list: from its write):
$(sed 's/^/  /' "$WORK/fanout")
  during the fan-out rounds (${fanout_s}s): ApplyImageList pushes $fanout_pushes; API writes (VERB:CODE refused):
$(print_writes "$WORK/fanout-writes" "$fanout_s")
one ImageList alone, $PREFIX-000:
$(sed 's/^/  /' "$WORK/single")
$job_report
floor, one job at 100% from a minimal client, 16 writes in flight ($NODES applies, then $NODES releases):
  the job's entries, released once every list reports the image pulled: ${floor16}s
  the entry writes alone (an image the nodes have, no wait):          ${writes16}s
  API writes of both runs (VERB:CODE refused):
$(print_writes "$WORK/floor-writes" "$(awk -v a="$floor16" -v b="$writes16" 'BEGIN { print a + b }')")

leader control plane ($leader) RSS:  $(rss "$pid")
agents RSS after the fan-out:        $agents_rss_idle
agents RSS at the end:               $(agents_rss)
EOF2
bench_params imagelist NODES ROUNDS SINGLE_ROUNDS PARALLELISM PULL_POLICY
for figure in "${job_released[@]}"; do
  read -r measure seconds <<<"$figure"
  bench_figure imagelist "$measure" stevedore "$seconds" s
done
# The floor does a job's writes at 100%, as many in flight as the job keeps (16), and waits
# for the pulls the job waits for.
bench_figure imagelist job-released-100pct floor "$floor16" s
