# Runs every test suite of a `cargo test --no-run --message-format=json` build, several at
# once, for tests/run.sh. Sourced; needs jq.
#
# A suite is a top-level module of a test binary made of modules (tests/tests/e2e/, whose
# main.rs names them: one crate to compile and link instead of one per suite), or any
# other test binary whole (a crate's unit tests). Why not one `cargo test`: it runs the
# binaries one after another, a binary's tests all at once, and most suites spend their
# time waiting on the cluster, not on the CPU. Each suite works in namespaces and nodes of
# its own, so suites can overlap safely, except the ones that take something every other
# suite relies on away for a while (the control plane's leader, the node's agent, the
# CRDs, the deployment itself) or that measure the whole cluster. Such a suite says so at
# the top of its file with a line
#
#   //! Runs alone: <why>
#
# and runs after the others, by itself. A suite runs in a process of its own (same working
# directory and CARGO_MANIFEST_DIR as `cargo test`, its tests on threads of one process),
# so the state its tests share in-process stays shared, and no other suite's.
#
# Output: each suite's output is printed in one piece when it ends (never interleaved),
# headed by its name, duration and result; a line per suite goes to $suite_durations
# ("seconds<TAB>name<TAB>ok|FAILED") for the timings table; the total of passed, failed and
# ignored tests is printed at the end.

suite_durations=$(mktemp)
# Each failed suite's failure report, printed again as the very last thing the run prints
# (print_failure_digest), since CI keeps only the tail of a long log.
suite_failures=$(mktemp)
# Last run's durations, so the longest suites start first next time.
suite_history=${XDG_CACHE_HOME:-$HOME/.cache}/stevedore/test-durations.tsv

# Prints "name<TAB>executable<TAB>package dir<TAB>alone(0|1)<TAB>tests" for each suite of
# the test executables in a cargo JSON message stream. Unit tests of a library are named
# after the crate ("stevedore_agent (lib)"), binaries' by their target name; each is one
# suite, run whole ("tests" empty). An integration test made of modules (tests/tests/e2e/,
# its root a main.rs) holds many suites, one per top-level module: each is listed under
# the module's name with its tests' full names, which it runs with `--exact`.
list_test_binaries() {
  local artifacts=$1 name exe dir src alone
  jq -r 'select(.reason == "compiler-artifact" and .profile.test and .executable != null)
    | [.target.name + (if (.target.kind | index("lib")) then " (lib)"
                       elif (.target.kind | index("bin")) then " (bin)" else "" end),
       .executable, (.manifest_path | rtrimstr("/Cargo.toml")), .target.src_path,
       (.target.kind | index("test") != null)] | @tsv' \
    "$artifacts" | sort -u |
    while IFS=$'\t' read -r name exe dir src integration; do
      if [[ $integration == true && $(basename "$src") == main.rs ]]; then
        list_module_suites "$exe" "$dir" "$(dirname "$src")"
        continue
      fi
      alone=0
      grep -q '^//! Runs alone:' "$src" && alone=1
      printf '%s\t%s\t%s\t%s\t\n' "$name" "$exe" "$dir" "$alone"
    done
}

# Prints a suite line (as list_test_binaries) for each top-level module of the test
# executable $1 that holds tests; "Runs alone" is read from the module's file in $3.
list_module_suites() {
  local exe=$1 dir=$2 src_dir=$3 suite tests file alone
  (cd "$dir" && "$exe" --list --format terse) | sed -n 's/: test$//p' |
    awk -F'::' '{ tests[$1] = tests[$1] (tests[$1] == "" ? "" : " ") $0 }
      END { for (s in tests) printf "%s\t%s\n", s, tests[s] }' | sort |
    while IFS=$'\t' read -r suite tests; do
      file=$src_dir/$suite.rs
      [[ -f $file ]] || file=$src_dir/$suite/mod.rs
      alone=0
      grep -q '^//! Runs alone:' "$file" && alone=1
      printf '%s\t%s\t%s\t%s\t%s\n' "$suite" "$exe" "$dir" "$alone" "$tests"
    done
}

# Orders "name<TAB>..." lines longest-first by the last run's durations; suites never
# timed yet come first (a new suite may be a long one).
longest_first() {
  awk -F'\t' -v history="$suite_history" '
    BEGIN { while ((getline line < history) > 0) { split(line, f, "\t"); secs[f[2]] = f[1] } }
    { printf "%s\t%s\n", ($1 in secs) ? secs[$1] : 1e9, $0 }
  ' | sort -t$'\t' -k1,1 -rn | cut -f2-
}

# Runs one suite in the background (its binary, only the given tests when there are any);
# its output goes to $logs/<n>.log, and when it ends "<seconds> <status>" to $logs/<n>.done.
start_suite() {
  local n=$1 name=$2 exe=$3 dir=$4 logs=$5 tests=$6
  local -a only=()
  # shellcheck disable=SC2206 # full test names hold no spaces or globs
  [[ -z $tests ]] || only=(--exact $tests)
  (
    start=$(date +%s)
    set +e
    # RUST_LIB_BACKTRACE=0: a test's returned error prints its message without anyhow's
    # stack trace even when CI sets RUST_BACKTRACE (panics still print theirs).
    (cd "$dir" && CARGO_MANIFEST_DIR=$dir RUST_LIB_BACKTRACE=0 "$exe" "${only[@]}") >"$logs/$n.log" 2>&1
    status=$?
    echo "$(($(date +%s) - start)) $status" >"$logs/$n.done"
  ) &
}

# Prints a finished binary's output and records its duration and result.
report_suite() {
  local n=$1 name=$2 logs=$3 secs status result
  read -r secs status <"$logs/$n.done"
  result=ok
  ((status == 0)) || result=FAILED
  printf '\n---- %s: %s in %s s ----\n' "$name" "$result" "$secs"
  cat "$logs/$n.log"
  printf '%s\t%s\t%s\n' "$secs" "$name" "$result" >>"$suite_durations"
  [[ $result == ok ]] || record_failure "$name" "$logs/$n.log" >>"$suite_failures"
}

# A failed binary's report for the digest: libtest's "failures:" section (each failed
# test's output and panic message) when there is one, else the log's end (a crash).
# At most 80 lines, so one noisy suite cannot push the others out of CI's tail.
record_failure() {
  local name=$1 log=$2
  printf '\n---- %s ----\n' "$name"
  if grep -q '^failures:$' "$log"; then
    sed -n '/^failures:$/,/^test result:/p' "$log" | without_backtrace_frames | tail -n 80
  else
    without_backtrace_frames <"$log" | tail -n 40
  fi
}

# Drops a backtrace's frames ("  12: fn" and "at file:line" lines), which would otherwise
# fill the digest's lines and push the error message itself out of it.
without_backtrace_frames() {
  grep -Ev '^ +[0-9]+: |^ +at [^ ]+:[0-9]+(:[0-9]+)?$'
}

# Prints every failure recorded since the run began; nothing when none failed.
print_failure_digest() {
  [[ -s $suite_failures ]] || return 0
  printf '\nwhat failed, once more (the failed suites%s reports):\n' "'"
  cat "$suite_failures"
}

# Runs the given suite lines (as list_test_binaries prints them), at most $jobs at once;
# returns once all ended.
# Logs are named <group>-<n> so the groups' logs stay apart for the totals.
run_pool() {
  local jobs=$1 logs=$2 group=$3 n=0 running=0 name exe dir tests
  local -A names=()
  local -a queue=()
  mapfile -t queue
  while ((${#queue[@]} > 0 || running > 0)); do
    while ((${#queue[@]} > 0 && running < jobs)); do
      IFS=$'\t' read -r name exe dir _ tests <<<"${queue[0]}"
      queue=("${queue[@]:1}")
      n=$((n + 1))
      names[$group-$n]=$name
      start_suite "$group-$n" "$name" "$exe" "$dir" "$logs" "$tests"
      running=$((running + 1))
    done
    wait -n 2>/dev/null || true
    local key
    for key in "${!names[@]}"; do
      if [[ -f $logs/$key.done ]]; then
        report_suite "$key" "${names[$key]}" "$logs"
        unset "names[$key]"
        running=$((running - 1))
      fi
    done
  done
}

# The sum of every binary's "test result:" line.
print_test_totals() {
  local logs=$1
  cat "$logs"/*.log | awk '
    /^test result:/ { for (i = 1; i <= NF; i++) {
        if ($(i+1) ~ /^passed/) passed += $i
        if ($(i+1) ~ /^failed/) failed += $i
        if ($(i+1) ~ /^ignored/) ignored += $i } }
    END { printf "\n%d tests passed, %d failed, %d ignored\n", passed, failed, ignored }'
}

# Runs every test suite of the build: those that may overlap $jobs at a time, then those
# that run alone one by one. Fails when any suite failed, naming them.
run_test_binaries() {
  local artifacts=$1 jobs=$2 logs binaries
  logs=$(mktemp -d)
  binaries=$(list_test_binaries "$artifacts")
  local overlapping alone
  overlapping=$(awk -F'\t' '$4 == 0' <<<"$binaries" | longest_first)
  alone=$(awk -F'\t' '$4 == 1' <<<"$binaries")
  echo "$(wc -l <<<"$overlapping") suites overlapping ($jobs at a time), then $(grep -c . <<<"$alone") one by one:"
  awk -F'\t' '{ print "  runs alone: " $1 }' <<<"$alone"
  run_pool "$jobs" "$logs" overlapping <<<"$overlapping"
  [[ -z $alone ]] || run_pool 1 "$logs" alone <<<"$alone"
  print_test_totals "$logs"
  mkdir -p "$(dirname "$suite_history")"
  cp "$suite_durations" "$suite_history"
  rm -rf "$logs"
  local failed
  failed=$(awk -F'\t' '$3 == "FAILED" { print "  " $2 }' "$suite_durations")
  if [[ -n $failed ]]; then
    printf 'failed suites:\n%s\n' "$failed" >&2
    return 1
  fi
}

# The agent's suites that run against the containerd the test environment names
# (tests/src/containerd.rs), run again on containerd 2.x beside the cluster's 1.6. The
# suites whose every test needs the deployed agent or no containerd at all are left out.
CONTAINERD2_SUITES='^(agent_images|agent_node|agent_kill_mid_pull|agent_bearer_auth)$'

# Runs those binaries of the build one at a time (they share one containerd's content and
# leases), named "<suite> (containerd 2)" in the output and the timings, with
# `cluster.sh containerd2 env` in their environment. Fails naming the failed ones.
run_agent_suites_on_containerd2() {
  local artifacts=$1 env=$2 logs binaries failed
  logs=$(mktemp -d)
  binaries=$(list_test_binaries "$artifacts" |
    awk -F'\t' -v OFS='\t' -v suites="$CONTAINERD2_SUITES" '$1 ~ suites { $1 = $1 " (containerd 2)"; print }')
  [[ -n $binaries ]] || { echo "no agent suite was built" >&2; return 1; }
  (
    # shellcheck source=/dev/null
    source <(printf '%s\n' "$env")
    run_pool 1 "$logs" containerd2 <<<"$binaries"
  )
  print_test_totals "$logs"
  rm -rf "$logs"
  failed=$(awk -F'\t' '$2 ~ /\(containerd 2\)$/ && $3 == "FAILED" { print "  " $2 }' "$suite_durations")
  if [[ -n $failed ]]; then
    printf 'failed on containerd 2:\n%s\n' "$failed" >&2
    return 1
  fi
}
