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
# from a cargo test log ("Running ... (path/deps/<name>-<hash>)" then "finished in N.NNs").
print_timings() {
  local test_log=${1:-}
  printf '\n%-10s %s\n' "seconds" "step"
  awk -F'\t' -v now="$(date +%s)" '
    NR > 1 { printf "%-10d %s\n", $1 - start, name }
    { start = $1; name = $2 }
    END { if (NR) printf "%-10d %s\n", now - start, name }
  ' "$timings_steps"
  [[ -n "$test_log" && -f "$test_log" ]] || return 0
  local binaries
  binaries=$(awk '
    /^ *Running / { path = $NF; gsub(/[()]/, "", path); n = split(path, parts, "/");
                    bin = parts[n]; sub(/-[0-9a-f]+$/, "", bin) }
    /^ *Doc-tests / { bin = "doc-tests " $2 }
    /^test result:/ && bin != "" { secs = $NF; sub(/s$/, "", secs);
                                   printf "%.1f\t%s\n", secs, bin; bin = "" }
  ' "$test_log")
  printf '\n%-10s %s\n' "seconds" "test binary"
  printf '%s\n' "$binaries" | awk -F'\t' 'NF { printf "%-10s %s\n", $1, $2 }'
  printf '\nslowest five test binaries:\n'
  printf '%s\n' "$binaries" | sort -t$'\t' -k1,1 -rn | head -n 5 |
    awk -F'\t' 'NF { printf "%-10s %s\n", $1, $2 }'
  rm -f "$timings_steps"
}
