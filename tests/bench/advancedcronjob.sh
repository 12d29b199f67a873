#!/usr/bin/env bash
# AdvancedCronJob scheduling delay on the local cluster (run `deploy/local/run.sh` first),
# side by side with the native CronJob controller of the cluster's kube-controller-manager:
# CRONS AdvancedCronJobs and CRONS native CronJobs, each `*/1 * * * *` with a suspended Job
# template (no pods: only the scheduling is measured), for MINUTES scheduled minutes. Both
# controllers name a run `<cron>-<scheduled unix minutes>`; the delay of a run is the time
# its Job's ADDED event reaches a watch here minus its scheduled minute. Prints p50/p99/max
# per controller.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
# shellcheck source=figures-lib.sh
source tests/bench/figures-lib.sh
CRONS=${CRONS:-200}
MINUTES=${MINUTES:-3}
OURS=stevedore-bench-acj
NATIVE=stevedore-bench-cronjob
# shellcheck source=/dev/null
source <(deploy/local/cluster.sh env)
work=$(mktemp -d)

cleanup() {
  # Each watcher's kubectl too: left running, it held the output pipe open, and
  # report.sh (which tees it) waited for good.
  local pid
  for pid in "${watchers[@]}"; do
    pkill -P "$pid" 2>/dev/null || true
    kill "$pid" 2>/dev/null || true
  done
  kubectl delete namespace "$OURS" "$NATIVE" --wait=false >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

job_template='{ spec: { suspend: true, template: { spec: { restartPolicy: Never, containers: [{ name: run, image: none.invalid/none }] } } } }'
crons() {
  local i
  for ((i = 0; i < CRONS; i++)); do
    printf -- '---\napiVersion: apps.kruise.io/v1alpha1\nkind: AdvancedCronJob\n'
    printf 'metadata: { name: c%03d, namespace: %s }\n' "$i" "$OURS"
    printf 'spec: { schedule: "*/1 * * * *", template: { jobTemplate: %s } }\n' "$job_template"
    printf -- '---\napiVersion: batch/v1\nkind: CronJob\n'
    printf 'metadata: { name: c%03d, namespace: %s }\n' "$i" "$NATIVE"
    printf 'spec: { schedule: "*/1 * * * *", jobTemplate: %s }\n' "$job_template"
  done
}

# watch_jobs NS: one "name arrival-seconds" line per Job ADDED to NS.
watch_jobs() {
  kubectl -n "$1" get jobs --watch-only -o jsonpath='{.metadata.name}{"\n"}' |
    while read -r name; do echo "$name $(date +%s.%N)"; done >"$work/$1"
}

kubectl create namespace "$OURS" >/dev/null
kubectl create namespace "$NATIVE" >/dev/null
watchers=()
watch_jobs "$OURS" &
watchers+=($!)
watch_jobs "$NATIVE" &
watchers+=($!)
crons | kubectl apply -f - >/dev/null
echo "== $CRONS AdvancedCronJobs and $CRONS CronJobs every minute, for $MINUTES minutes" >&2
# Past MINUTES minute boundaries, plus a margin for the last runs.
sleep $((60 * MINUTES - $(date +%s) % 60 + 15))

# delays NS: the delay of each first arrival of a run named <cron>-<minutes>, sorted.
delays() {
  awk '!seen[$1]++ { n = split($1, p, "-"); printf "%.3f\n", $2 - p[n] * 60 }' "$work/$1" | sort -n
}
stats() {
  delays "$1" | awk '{ d[NR] = $1 } END {
    if (NR == 0) { print "no runs"; exit }
    p50 = d[int((NR - 1) * 0.50) + 1]; p99 = d[int((NR - 1) * 0.99) + 1]
    printf "runs %d  p50 %.3fs  p99 %.3fs  max %.3fs\n", NR, p50, p99, d[NR] }'
}
echo "AdvancedCronJob (Stevedore):    $(stats "$OURS")"
echo "CronJob (kube-controller-manager): $(stats "$NATIVE")"
# percentile NS Q: the Q-quantile of the delays in NS (nothing when there was no run).
percentile() {
  delays "$1" | awk -v q="$2" '{ d[NR] = $1 } END { if (NR > 0) print d[int((NR - 1) * q) + 1] }'
}
bench_params advancedcronjob CRONS MINUTES
for q in 50 99; do
  bench_figure advancedcronjob "delay-p$q" stevedore "$(percentile "$OURS" "0.$q")" s
  bench_figure advancedcronjob "delay-p$q" native "$(percentile "$NATIVE" "0.$q")" s
done
