#!/usr/bin/env bash
# Simulated nodes that have real agents, for tests and benchmarks at scale:
#   sim-agents.sh up N [PREFIX]   N kwok nodes PREFIX-000 ... (default prefix "sim-node"),
#                                 each with its own stevedore-agent process on this machine
#                                 (all sharing the one containerd), serving TLS on the kwok
#                                 node IP at its own port, which the Node names in the
#                                 annotation agent.stevedore.dev/port;
#   sim-agents.sh down [PREFIX]   stops those agents and deletes the nodes.
# The nodes carry label type=kwok (so DaemonSets that skip simulated nodes skip them) and
# label + taint stevedore.dev/simulated=PREFIX besides kwok's taint, so only pods that
# tolerate both land there. Needs a running cluster (run.sh).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=/dev/null
source <("$HERE/cluster.sh" env)
STATE_DIR=$STEVEDORE_STATE_DIR
BASE_PORT=${STEVEDORE_SIM_AGENT_BASE_PORT:-21000}
ADMIN_OFFSET=5000 # health and metrics endpoint (one listener on loopback) = gRPC port + this
# kubectl calls applying Nodes at once (each applies its share in order).
APPLY_CONCURRENCY=${STEVEDORE_SIM_APPLY_CONCURRENCY:-16}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/stevedore/cargo-target}
# The agents are release builds unless asked otherwise (tests/run.sh asks for dev), built
# as the deploy builds the agent of the images (lib/binaries.sh), so a deployed cluster's
# build is reused.
STEVEDORE_PROFILE=${STEVEDORE_PROFILE:-release}
# shellcheck source=lib/binaries.sh
source "$HERE/lib/binaries.sh"

die() { printf 'sim-agents: %s\n' "$*" >&2; exit 1; }

cmd=${1:-}
prefix=${3:-sim-node}
[[ $prefix =~ ^[a-z0-9]([-a-z0-9]*[a-z0-9])?$ ]] || die "PREFIX must be a DNS label, got '$prefix'"
dir=$STATE_DIR/sim-agents/$prefix

# assign_ports NODE...: gives each node without one its gRPC port (and admin port = port +
# ADMIN_OFFSET), kept across restarts in $dir/NODE.port: the first port no other simulated
# node has and nothing listens on. One pass under a lock shared by every prefix, so two
# `up`s at once (tests, benchmarks) never pick the same port before either agent listens;
# the taken and listening ports are read once into sets (a grep per candidate port made
# 500 nodes cost ~125,000 processes).
assign_ports() {
  (
    flock 9
    local -A taken=()
    local p name port=$BASE_PORT
    for p in $(cat "$STATE_DIR"/sim-agents/*/*.port 2>/dev/null || true); do taken[$p]=1; done
    for p in $(ss -Hltn | awk '{ n = split($4, a, ":"); print a[n] }'); do taken[$p]=1; done
    for name in "$@"; do
      [[ -f $dir/$name.port ]] && continue
      while [[ -n ${taken[$port]:-} || -n ${taken[$((port + ADMIN_OFFSET))]:-} ]]; do
        ((++port < BASE_PORT + ADMIN_OFFSET)) || exit 1
      done
      echo "$port" >"$dir/$name.port"
      taken[$port]=1
    done
  ) 9>"$STATE_DIR/sim-agents/.ports.lock" || die "no free port for the simulated agents"
}

# running PIDFILE: whether the process it names lives (a killed one that is not reaped
# yet, a zombie, does not).
running() {
  local pid
  pid=$(cat "$1" 2>/dev/null) || return 1
  kill -0 "$pid" 2>/dev/null && [[ $(ps -o stat= -p "$pid") != Z* ]]
}

up() {
  local count=$1 i name port kwok_ip
  [[ $count =~ ^[0-9]+$ ]] && ((count > 0 && count <= 1000)) || die "N must be 1..1000, got '$count'"
  [[ -f $STATE_DIR/pki/simulated-agent-serving.crt ]] ||
    die "no simulated-agent certificate: run deploy/local/cluster.sh up again"
  kwok_ip=$(kubectl get node kwok-node-0 -o jsonpath='{.status.addresses[?(@.type=="InternalIP")].address}' 2>/dev/null) ||
    die "kwok is not running (run deploy/local/run.sh --fake-nodes 1 first)"
  mkdir -p "$dir"
  # STEVEDORE_SIM_REUSE_AGENT=1 starts killed agents again from the binary they ran,
  # without a build that may wait minutes on another build's target-dir lock.
  if [[ ${STEVEDORE_SIM_REUSE_AGENT:-} != 1 || ! -x $dir/stevedore-agent ]]; then
    # The deploy's one invocation, so its build is reused and the agent is the images'
    # (for dev, the tests' build: a no-op once tests/run.sh or a deploy built them).
    (cd "$HERE/../.." && cargo_build_binaries "$STEVEDORE_PROFILE" -q)
    # Replace, not overwrite: the running agents keep their (now unlinked) binary.
    local built=$CARGO_TARGET_DIR/debug/stevedore-agent
    [[ $STEVEDORE_PROFILE == dev ]] || built=$CARGO_TARGET_DIR/$STEVEDORE_PROFILE/stevedore-agent
    cp "$built" "$dir/stevedore-agent.new"
    mv -f "$dir/stevedore-agent.new" "$dir/stevedore-agent"
  fi
  # The Nodes in at most APPLY_CONCURRENCY kubectl calls running at once, each applying
  # its share of the Nodes one after another: one process and one discovery per share
  # instead of one per node (500 nodes took 6.5-8 min one apply at a time), and the
  # apiserver round trips of the shares overlap.
  local names=() shares=$((count < APPLY_CONCURRENCY ? count : APPLY_CONCURRENCY)) n=0 share
  for ((i = 0; i < count; i++)); do names+=("$(printf '%s-%03d' "$prefix" "$i")"); done
  assign_ports "${names[@]}"
  for ((i = 0; i < shares; i++)); do : >"$dir/nodes-$i.yaml"; done
  for name in "${names[@]}"; do
    port=$(<"$dir/$name.port")
    # The share is chosen here, not in the redirection: that is expanded in cat's process.
    share=$dir/nodes-$((n % shares)).yaml
    n=$((n + 1))
    cat >>"$share" <<YAML
---
apiVersion: v1
kind: Node
metadata:
  name: $name
  annotations:
    kwok.x-k8s.io/node: fake
    agent.stevedore.dev/port: "$port"
  labels:
    kubernetes.io/hostname: $name
    kubernetes.io/os: linux
    kubernetes.io/arch: amd64
    type: kwok
    stevedore.dev/simulated: $prefix
spec:
  taints:
    - { key: kwok.x-k8s.io/node, value: fake, effect: NoSchedule }
    - { key: stevedore.dev/simulated, value: $prefix, effect: NoSchedule }
YAML
  done
  local pids=()
  for ((i = 0; i < shares; i++)); do
    kubectl apply --server-side --force-conflicts --field-manager=sim-agents \
      -f "$dir/nodes-$i.yaml" >/dev/null &
    pids+=($!)
  done
  for i in "${!pids[@]}"; do
    wait "${pids[$i]}" || die "applying the Nodes of $dir/nodes-$i.yaml failed"
  done
  for name in "${names[@]}"; do
    port=$(<"$dir/$name.port")
    running "$dir/$name.pid" && continue
    setsid "$dir/stevedore-agent" --node-name "$name" \
      --containerd-socket "$STEVEDORE_CONTAINERD_SOCK" \
      --grpc-addr "$kwok_ip:$port" \
      --health-addr "127.0.0.1:$((port + ADMIN_OFFSET))" --metrics-addr "127.0.0.1:$((port + ADMIN_OFFSET))" \
      --unix-socket "$dir/$name.sock" \
      --tls-cert "$STATE_DIR/pki/simulated-agent-serving.crt" \
      --tls-key "$STATE_DIR/pki/simulated-agent-serving.key" \
      --insecure-registry "$STEVEDORE_REGISTRY" >"$dir/$name.log" 2>&1 </dev/null &
    echo $! >"$dir/$name.pid"
  done
  for name in "${names[@]}"; do
    port=$(($(<"$dir/$name.port") + ADMIN_OFFSET))
    for _ in $(seq 1 100); do
      curl -sf "http://127.0.0.1:$port/readyz" >/dev/null && break
      sleep 0.2
    done
    running "$dir/$name.pid" && curl -sf "http://127.0.0.1:$port/readyz" >/dev/null ||
      die "agent $name is not ready (log: $dir/$name.log)"
  done
  kubectl wait --for=condition=Ready node -l "stevedore.dev/simulated=$prefix" --timeout=120s >/dev/null
  echo "sim-agents: $count simulated nodes with agents ($prefix-*), logs in $dir" >&2
}

down() {
  local f
  if [[ -d $dir ]]; then
    for f in "$dir"/*.pid; do
      [[ -f $f ]] || continue
      kill "$(cat "$f")" 2>/dev/null || true
      rm -f "$f"
    done
  fi
  kubectl delete node -l "stevedore.dev/simulated=$prefix" --wait=false >/dev/null 2>&1 || true
  rm -rf "$dir"
}

case $cmd in
  up) up "${2:-}" ;;
  down) prefix=${2:-sim-node}; dir=$STATE_DIR/sim-agents/$prefix; down ;;
  *) die "usage: sim-agents.sh up N [PREFIX] | down [PREFIX]" ;;
esac
