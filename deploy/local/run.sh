#!/usr/bin/env bash
# Runs Stevedore on this machine: the local cluster (see cluster.sh) and, on it, the
# Stevedore node agent (DaemonSet), the CRDs, the control plane (Deployment) and a sample
# CloneSet. Arguments go to `cluster.sh up` (`--fake-nodes N`; `--containerd 2` runs
# kubelet on the pinned containerd 2.x instead of Debian's 1.6, until `cluster.sh down`).
# Run it as root.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=/dev/null
source "$HERE/lib/common.sh"
# shellcheck source=/dev/null
source "$HERE/lib/processes.sh"

# Stevedore's binaries compile while `up` builds and starts Kubernetes: on a first run
# both builds take minutes, and each leaves a core idle in its single-threaded link
# phases. The packages come first: the Rust build needs protoc.
"$HERE/cluster.sh" packages
"$HERE/cluster.sh" compile &
compile_pid=$!
# If `up` fails, the compile (cargo and its rustc jobs) stops with it.
trap 'kill_tree "$compile_pid"' EXIT
"$HERE/cluster.sh" up "$@"
wait "$compile_pid" || die "compiling Stevedore's binaries failed (log: $STEVEDORE_CACHE/build-stevedore.log)"
trap - EXIT
"$HERE/cluster.sh" deploy
"$HERE/cluster.sh" plugin
