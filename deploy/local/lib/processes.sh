# Background builds that must stop with the script that started them. Sourced by
# deploy/local/run.sh and tests/run.sh.
# shellcheck shell=bash

# kill_tree PID: stops PID and every process under it (a background cargo or go build
# and the compiler jobs it spawned), children first.
kill_tree() {
  local child
  for child in $(pgrep -P "$1"); do kill_tree "$child"; done
  kill "$1" 2>/dev/null || true
}
