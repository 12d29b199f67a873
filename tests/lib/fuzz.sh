# The fuzz step of tests/run.sh: builds every cargo-fuzz target of fuzz/ once, then runs
# them a few at a time (two by default: each target is one single-threaded process, and
# CI machines have two cores), each for a fixed time. Each target's corpus grows under the
# cache, seeded from fuzz/seeds; a failing target prints the tail of its log and fails the
# step, its crashing input kept under the cache's artifacts dir.

# fuzz_all CACHE SECONDS JOBS: every target for SECONDS, JOBS at once; fails if any failed.
fuzz_all() {
  local cache=$1 seconds=$2 jobs=$3
  cargo +nightly fuzz build --fuzz-dir fuzz --target-dir "$cache/target"
  local targets
  mapfile -t targets < <(cargo +nightly fuzz list --fuzz-dir fuzz)
  local i failed=0
  for ((i = 0; i < ${#targets[@]}; i += jobs)); do
    fuzz_batch "$cache" "$seconds" "${targets[@]:i:jobs}" || failed=1
    # A failure stops the step once its batch is done, so its report is not buried.
    ((failed == 0)) || return 1
  done
}

# fuzz_batch CACHE SECONDS TARGET...: the targets side by side; each reported in order.
fuzz_batch() {
  local cache=$1 seconds=$2
  shift 2
  local names=("$@") target pids=() failed=0
  for target in "${names[@]}"; do
    fuzz_run "$cache" "$seconds" "$target" &
    pids+=($!)
  done
  local index status
  for index in "${!pids[@]}"; do
    status=0
    wait "${pids[index]}" || status=$?
    fuzz_report "$cache" "${names[index]}" "$status" || failed=1
  done
  return "$failed"
}

# fuzz_run CACHE SECONDS TARGET: one target, its output in CACHE/TARGET.log.
fuzz_run() {
  local cache=$1 seconds=$2 target=$3
  mkdir -p "$cache/corpus/$target" "$cache/artifacts/$target"
  cargo +nightly fuzz run --fuzz-dir fuzz --target-dir "$cache/target" "$target" \
    "$cache/corpus/$target" "fuzz/seeds/$target" -- \
    -max_total_time="$seconds" -artifact_prefix="$cache/artifacts/$target/" \
    -print_final_stats=1 >"$cache/$target.log" 2>&1
}

# fuzz_report CACHE TARGET STATUS: the target's executed-units line, or, when it failed,
# the tail of its log and where its input is kept (and a non-zero status).
fuzz_report() {
  local cache=$1 target=$2 status=$3
  if ((status != 0)); then
    tail -n 40 "$cache/$target.log" >&2
    echo "fuzz target $target failed; its input is kept in $cache/artifacts/$target/" >&2
    return 1
  fi
  echo "$target: $(grep -E '^stat::number_of_executed_units' "$cache/$target.log")"
}
