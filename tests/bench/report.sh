#!/usr/bin/env bash
# Runs the benchmarks one after another and records what they measured, so that no figure
# in the README is typed by hand:
#   tests/bench/results.json  per benchmark: the commit, date, machine (cores, memory),
#                             build profile of the deployed images, its command, and each
#                             figure with that command (the lines `BENCH ...` each script
#                             prints, tests/bench/figures-lib.sh);
#   README.md                 the results table between <!-- bench-table:begin --> and
#                             <!-- bench-table:end -->, generated from that file (table.sh).
# A benchmark run again replaces its own entry; the others' stay, each with its own run.
#
# Usage: tests/bench/report.sh [BENCH...]   e.g. report.sh cloneset statefulset daemonset
#        (default: every benchmark below). Each runs with the environment given (NODES=...),
#        and each script's output, in full, goes to LOGS (default: a new temporary folder).
#        tests/bench/report.sh --from-log BENCH LOG [EXIT]: records the figures of a run
#        whose output was kept in LOG (EXIT: how it ended, default 0) without running it.
# Needs the local cluster with Stevedore deployed (deploy/local/run.sh; see each script's
# header for what else it needs, such as --fake-nodes 1) and root, as the scripts do.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
ALL=(cloneset statefulset daemonset broadcastjob podunavailablebudget resize sidecarset
  containerrecreaterequest advancedcronjob imagelist agent agent_idle_rss podprobemarker
  cache_memory scale)
RESULTS=${RESULTS:-tests/bench/results.json}
README=${README:-README.md}
LOGS=${LOGS:-$(mktemp -d -t stevedore-bench.XXXXXX)}
mkdir -p "$LOGS"

benches=("$@")
[[ ${1:-} != --from-log ]] || benches=("${2:-}")
((${#benches[@]} > 0)) || benches=("${ALL[@]}")
for bench in "${benches[@]}"; do
  if [[ " ${ALL[*]} " != *" $bench "* ]]; then
    echo "no benchmark '$bench' reports figures; the ones that do: ${ALL[*]}" >&2
    exit 2
  fi
done

# The run's circumstances, shared by every benchmark of it.
commit=$(git rev-parse HEAD)
[[ -z $(git status --porcelain --untracked-files=no) ]] || commit+="-dirty"
cores=$(nproc)
memory_gib=$(awk '/^MemTotal:/ { printf "%.1f", $2 / 1048576 }' /proc/meminfo)
# deploy/local/cluster.sh deploy writes down the profile it built the images with.
# No cluster (`cluster.sh env` fails), as when CI checks the table before starting one: the
# profile is unknown, and --from-log still records.
state_dir=$(deploy/local/cluster.sh env 2>/dev/null | sed -n 's/^export STEVEDORE_STATE_DIR=//p' || true)
profile=$(cat "${state_dir:-/nonexistent}/deployed-profile" 2>/dev/null || echo unknown)

# entry BENCH LOG EXIT DATE: the JSON entry of one benchmark's run, from its output.
entry() {
  local bench=$1 log=$2 status=$3 date=$4 params command
  params=$(sed -n "s/^BENCH-PARAMS $bench //p" "$log" | head -1)
  command="${params:+$params }tests/bench/$bench.sh"
  { grep "^BENCH $bench " "$log" || true; } | jq -R -s \
    --arg bench "$bench" --arg command "$command" --arg commit "$commit" --arg date "$date" \
    --arg profile "$profile" --argjson cores "$cores" --argjson memory "$memory_gib" \
    --argjson exit "$status" '{
      bench: $bench, command: $command, commit: $commit, date: $date,
      machine: { cores: $cores, memory_gib: $memory }, profile: $profile, exit: $exit,
      figures: [split("\n")[] | select(length > 0) | split(" ")
        | { measure: .[2], who: .[3], value: (.[4] | tonumber), unit: .[5], command: $command }]
    }'
}

# record ENTRY: puts ENTRY into RESULTS in place of the benchmark's earlier entry.
record() {
  local previous='{"benches": []}'
  [[ -f $RESULTS ]] && previous=$(cat "$RESULTS")
  jq --argjson entry "$1" '
    if any(.benches[]; .bench == $entry.bench)
    then .benches |= map(if .bench == $entry.bench then $entry else . end)
    else .benches += [$entry] end' <<<"$previous" >"$RESULTS.new"
  mv "$RESULTS.new" "$RESULTS"
}

if [[ ${1:-} == --from-log ]]; then
  record "$(entry "${2:?--from-log BENCH LOG [EXIT]}" "${3:?--from-log BENCH LOG [EXIT]}" "${4:-0}" \
    "$(date -u -r "$3" +%Y-%m-%dT%H:%M:%SZ)")"
  tests/bench/table.sh "$RESULTS" --into "$README"
  exit 0
fi
for bench in "${benches[@]}"; do
  log=$LOGS/$bench.log
  echo "== $bench (output: $log)" >&2
  date=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  status=0
  "tests/bench/$bench.sh" 2>&1 | tee "$log" || status=${PIPESTATUS[0]}
  record "$(entry "$bench" "$log" "$status" "$date")"
  ((status == 0)) || echo "== $bench failed (exit $status); recorded as failed" >&2
done
tests/bench/table.sh "$RESULTS" --into "$README"
echo "== figures in $RESULTS, the table in $README; the scripts' output in $LOGS" >&2
