# Step and test-binary durations for tests/run.sh: each step is recorded as it starts, and
# at the end a table shows how long each step and each test binary took, with the five
# slowest binaries, so the next slow suite is visible the day it lands.

timings_steps=$(mktemp)

# Prints "==> [HH:MM:SS] <what>" and records when the step started.
step() {
  printf '\n==> [%s] %s\n' "$(date -u +%H:%M:%S)" "$*"
  printf '%s\t%s\n' "$(date +%s)" "$*" >>"$timings_steps"
}

# Each step's duration (to the next step's start, the last to now), then each test binary's
# from a "seconds<TAB>name<TAB>result" file (tests/lib/suites.sh writes one), longest first.
print_timings() {
  local durations=${1:-}
  printf '\n%-10s %s\n' "seconds" "step"
  awk -F'\t' -v now="$(date +%s)" '
    NR > 1 { printf "%-10d %s\n", $1 - start, name }
    { start = $1; name = $2 }
    END { if (NR) printf "%-10d %s\n", now - start, name }
  ' "$timings_steps"
  rm -f "$timings_steps"
  [[ -n "$durations" && -s "$durations" ]] || return 0
  printf '\n%-10s %-8s %s\n' "seconds" "result" "test binary"
  sort -t$'\t' -k1,1 -rn "$durations" | awk -F'\t' '{ printf "%-10s %-8s %s\n", $1, $3, $2 }'
  printf '\nslowest five test binaries:\n'
  sort -t$'\t' -k1,1 -rn "$durations" | head -n 5 | awk -F'\t' '{ printf "%-10s %s\n", $1, $2 }'
}
