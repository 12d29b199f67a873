# Shared helpers for the local cluster scripts. Sourced, never executed.
# shellcheck shell=bash

STEVEDORE_CACHE=${STEVEDORE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/stevedore}
# Runtime state (certs, data dirs, logs, pids) of the running local cluster.
STATE_DIR=${STEVEDORE_STATE_DIR:-/var/lib/stevedore-local}
LOG_DIR=$STATE_DIR/logs
PID_DIR=$STATE_DIR/pids

# Every line says how long the run has taken so far: run.sh starts the clock for both of
# its steps (up, deploy); a script run on its own starts its own.
export STEVEDORE_RUN_STARTED=${STEVEDORE_RUN_STARTED:-$(date +%s)}
elapsed() {
  local secs=$(($(date +%s) - STEVEDORE_RUN_STARTED))
  printf '%dm%02ds' $((secs / 60)) $((secs % 60))
}

log() { printf '[stevedore-local +%s] %s\n' "$(elapsed)" "$*" >&2; }

# die MESSAGE: stop `up` with a message that names what failed.
die() {
  printf '[stevedore-local] ERROR: %s\n' "$*" >&2
  exit 1
}

# wait_for DESCRIPTION TIMEOUT_SECONDS LOGFILE -- COMMAND...
# Polls COMMAND until it succeeds; on timeout fails naming the component and its log.
wait_for() {
  local what=$1 timeout=$2 logfile=$3
  shift 4
  local deadline=$((SECONDS + timeout))
  until "$@" >/dev/null 2>&1; do
    if ((SECONDS >= deadline)); then
      log "last lines of $logfile:"
      tail -n 20 "$logfile" >&2 2>/dev/null || true
      die "$what did not become healthy within ${timeout}s (check: $*; log: $logfile)"
    fi
    sleep 1
  done
}

# port_free PORT: true when nothing listens on 127.0.0.1:PORT / *:PORT.
port_free() {
  ! ss -Hltn "sport = :$1" 2>/dev/null | grep -q .
}

pid_alive() {
  local f=$PID_DIR/$1.pid
  [[ -f $f ]] && kill -0 "$(cat "$f")" 2>/dev/null
}

# start_daemon NAME -- COMMAND...: runs COMMAND in the background with its own log and pid
# file, unless a previous `up` already started it and it is still alive.
start_daemon() {
  local name=$1
  shift 2
  if pid_alive "$name"; then
    log "$name already running (pid $(cat "$PID_DIR/$name.pid"))"
    return 0
  fi
  mkdir -p "$LOG_DIR" "$PID_DIR"
  log "starting $name (log: $LOG_DIR/$name.log)"
  setsid "$@" >>"$LOG_DIR/$name.log" 2>&1 </dev/null &
  echo $! >"$PID_DIR/$name.pid"
}

# stop_daemon NAME: SIGTERM, wait up to 20s, then SIGKILL; always removes the pid file.
stop_daemon() {
  local name=$1 f=$PID_DIR/$1.pid pid
  [[ -f $f ]] || return 0
  pid=$(cat "$f")
  if kill -0 "$pid" 2>/dev/null; then
    log "stopping $name (pid $pid)"
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 40); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.5
    done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$f"
}
