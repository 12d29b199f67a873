#!/usr/bin/env bash
# Runs Stevedore on this machine: the local cluster (see cluster.sh) and, on it, the
# Stevedore node agent (DaemonSet), the CRDs, the control plane (Deployment) and a sample
# CloneSet. Arguments go to `cluster.sh up`.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
"$HERE/cluster.sh" up "$@"
"$HERE/cluster.sh" deploy
