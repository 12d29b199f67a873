#!/usr/bin/env bash
# The local Stevedore cluster: a real single-node Kubernetes built from upstream sources
# (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kube-proxy),
# containerd (Debian's 1.6, or 2.x built from source) + runc + CNI from Debian, a local
# registry with test images, and optional kwok-simulated nodes.
#
#   cluster.sh up [--fake-nodes N] [--real-nodes N] [--containerd 1|2]
#                                    start (idempotent); builds binaries on first use; with
#                                    the CSI host-path driver, its provisioner and resizer;
#                                    kubelet's containerd is Debian's 1.6 or, with
#                                    --containerd 2, the pinned 2.x (kept until `down`);
#                                    --real-nodes N: N real kubelet nodes (default 1), the
#                                    N-1 besides the first tainted stevedore.dev/worker
#                                    (lib/nodes.sh)
#   cluster.sh deploy                build Stevedore's agent and control-plane images, run
#                                    them on the cluster, apply the sample CloneSet
#   cluster.sh node add              one more real worker node on the running cluster
#                                    (the next stevedore-worker-N); prints its name when Ready
#   cluster.sh node remove NAME      the last-added worker leaves: Node deleted, its
#                                    daemons, pods and namespaces gone
#   cluster.sh down                  stop everything it started and remove its state
#   cluster.sh status                what runs, with pids and log files
#   cluster.sh kubeconfig            print the admin kubeconfig path
#   cluster.sh env                   print shell exports (KUBECONFIG, registry, ...)
#   cluster.sh packages              install the Debian packages it and the build need
#                                    (protoc among them), nothing else
#   cluster.sh tools                 build the tools the tests use (kwok, grpcurl, crictl,
#                                    helm, containerd 2.x); `up` builds only what running needs
#   cluster.sh containerd2 up|down|env
#                                    containerd 2.x beside the cluster's, on its own root,
#                                    state and socket, for the agent's suites; `env` prints
#                                    the exports that point those suites at it
#   cluster.sh prebuild [--tools|--tools-but-containerd2|--containerd2]
#                                    build the Go binaries `up` needs (and with --tools the
#                                    tests' tools; the other two split them for tests/run.sh)
#                                    without starting anything
#   cluster.sh compile               compile Stevedore's CSI driver, agent, control plane and kubectl plugin
#   cluster.sh plugin                puts the `kubectl stevedore` plugin (built with the control plane) on the env's PATH
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=/dev/null
source "$HERE/versions.env"
for lib in common build network certs images containerd kube kwok binaries stevedore csi nodes; do
  # shellcheck source=/dev/null
  source "$HERE/lib/$lib.sh"
done

# Components in start order; `down` stops them in reverse.
DAEMONS=(etcd kube-apiserver kube-controller-manager kube-scheduler registry registry-auth containerd containerd2 kubelet kube-proxy
  csi-hostpath csi-provisioner csi-resizer kwok)
DEBIAN_PACKAGES=(containerd runc containernetworking-plugins docker-registry skopeo umoci
  busybox-static protobuf-compiler iproute2 iptables conntrack openssl curl gcc libc6-dev ca-certificates binutils util-linux
  jq socat)

apt_updated=0
apt_install() {
  if ((apt_updated == 0)); then
    apt-get update -qq || die "apt-get update failed"
    apt_updated=1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null ||
    die "apt-get install $* failed"
}

install_packages() {
  local missing=() p
  for p in "${DEBIAN_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  ((${#missing[@]} == 0)) && return 0
  log "installing Debian packages: ${missing[*]}"
  apt_install "${missing[@]}"
}

# Through a rename: suites running beside a second `up` read it at any moment.
write_env_file() {
  cat >"$STATE_DIR/env.tmp" <<ENV
export KUBECONFIG=$STATE_DIR/kubeconfig
export STEVEDORE_REGISTRY=$REGISTRY
export STEVEDORE_AUTH_REGISTRY=$AUTH_REGISTRY
export STEVEDORE_AUTH_REGISTRY_USER=$AUTH_REGISTRY_USER
export STEVEDORE_AUTH_REGISTRY_PASSWORD_FILE=$STATE_DIR/registry-auth/password
export STEVEDORE_CONTAINERD_SOCK=$CONTAINERD_SOCK
export STEVEDORE_CTR=$(containerd_bin_dir "$(cluster_containerd_major)")/ctr
export STEVEDORE_NODE_NAME=$NODE_NAME
export STEVEDORE_NODE_IP=$NODE_IP
export STEVEDORE_STATE_DIR=$STATE_DIR
export STEVEDORE_K8S_BIN=$K8S_BIN
export STEVEDORE_GRPCURL=$GRPCURL_BIN/grpcurl
export STEVEDORE_CRICTL=$CRICTL_BIN/crictl
export STEVEDORE_HELM=$HELM_BIN/helm
export STEVEDORE_WORKERS_RUN=$WORKERS_RUN
export PATH=$STATE_DIR/bin:$K8S_BIN:$GRPCURL_BIN:$HELM_BIN:\$PATH
ENV
  mv "$STATE_DIR/env.tmp" "$STATE_DIR/env"
}

cmd_up() {
  local fake_nodes=0 real_nodes=1 containerd=""
  while (($#)); do
    case $1 in
      --fake-nodes) fake_nodes=${2:?--fake-nodes needs a number}; shift 2 ;;
      --fake-nodes=*) fake_nodes=${1#*=}; shift ;;
      --real-nodes) real_nodes=${2:?--real-nodes needs a number}; shift 2 ;;
      --real-nodes=*) real_nodes=${1#*=}; shift ;;
      --containerd) containerd=${2:?--containerd needs 1 or 2}; shift 2 ;;
      --containerd=*) containerd=${1#*=}; shift ;;
      *) die "unknown argument to up: $1 (expected --fake-nodes N, --real-nodes N or --containerd 1|2)" ;;
    esac
  done
  [[ $fake_nodes =~ ^[0-9]+$ ]] || die "--fake-nodes must be a non-negative integer, got '$fake_nodes'"
  [[ $real_nodes =~ ^[1-9][0-9]*$ ]] && ((real_nodes <= 50)) ||
    die "--real-nodes must be a whole number from 1 to 50 (the kubelet node counts), got '$real_nodes'"
  [[ -z $containerd || $containerd == 1 || $containerd == 2 ]] ||
    die "--containerd must be 1 (Debian's 1.6) or 2 ($CONTAINERD2_VERSION), got '$containerd'"
  [[ $(id -u) == 0 ]] || die "up needs root (it runs containerd and kubelet)"
  # Without --containerd, a running cluster keeps its containerd and a new one gets 1.6.
  [[ -z $containerd ]] || choose_cluster_containerd "$containerd"

  install_packages
  # Only what running needs: kwok comes with the first simulated node (ensure_fake_nodes),
  # the test tools with `cluster.sh tools`.
  build_k8s
  build_csi_sidecars
  build_images
  mkdir -p "$STATE_DIR" "$LOG_DIR" "$PID_DIR"
  setup_network
  generate_pki
  write_env_file
  start_etcd
  start_apiserver
  start_controller_manager
  start_scheduler
  apply_cluster_objects
  start_registry
  push_images
  start_auth_registry
  start_containerd
  start_kubelet
  start_kube_proxy
  start_csi_storage
  ensure_real_nodes "$real_nodes"
  ensure_fake_nodes "$fake_nodes"
  log "cluster is up: export KUBECONFIG=$STATE_DIR/kubeconfig (or: source $STATE_DIR/env)"
  log "logs: $LOG_DIR   registry: $REGISTRY   node: $NODE_NAME ($NODE_IP)"
}

cmd_node() {
  [[ $(id -u) == 0 ]] || die "node needs root (it runs containerd and kubelet)"
  [[ -f $STATE_DIR/env ]] || die "the cluster is not up: start it with cluster.sh up"
  case ${1:-} in
    add) add_worker ;;
    remove) remove_worker "${2:?node remove needs the name of the node}" ;;
    *) die "unknown node command '${1:-}' (expected: node add, or node remove NAME)" ;;
  esac
}

# The tools the tests use beside the cluster: kwok, grpcurl, crictl, helm and containerd 2.x.
cmd_tools() {
  build_tools_but_containerd2
  build_containerd2
}

# The tools the suites use while the cluster runs; containerd 2.x is for the last step only.
build_tools_but_containerd2() {
  build_kwok
  build_grpcurl
  build_crictl
  build_helm
}

# containerd 2.x beside the cluster's containerd (see lib/containerd.sh).
cmd_containerd2() {
  case ${1:-} in
    up)
      [[ $(id -u) == 0 ]] || die "containerd2 up needs root (containerd mounts snapshots)"
      start_containerd2_beside
      log "containerd $CONTAINERD2_VERSION is up on $CONTAINERD2_SOCK (log: $LOG_DIR/containerd2.log)"
      log "point the agent's suites at it with: source <(deploy/local/cluster.sh containerd2 env)"
      ;;
    down) stop_containerd2_beside ;;
    env) containerd2_env ;;
    *) die "unknown argument to containerd2: ${1:-(none)} (expected up, down or env)" ;;
  esac
}

# Everything `up` builds with Go (and with --tools what `tools` builds), nothing started:
# tests/run.sh runs it in the background while its cargo steps run.
cmd_prebuild() {
  case ${1:-} in
    "") build_k8s && build_csi_sidecars ;;
    --tools) build_k8s && build_csi_sidecars && cmd_tools ;;
    --tools-but-containerd2) build_k8s && build_csi_sidecars && build_tools_but_containerd2 ;;
    --containerd2) build_containerd2 ;;
    *) die "unknown argument to prebuild: $1 (expected --tools, --tools-but-containerd2, --containerd2 or nothing)" ;;
  esac
}

cmd_down() {
  local i
  stop_workers
  for ((i = ${#DAEMONS[@]} - 1; i >= 0; i--)); do
    stop_daemon "${DAEMONS[i]}"
  done
  kill_pod_processes
  if [[ -x $K8S_BIN/kube-proxy ]]; then
    "$K8S_BIN/kube-proxy" --cleanup >/dev/null 2>&1 || true
  fi
  teardown_network
  # Unmount whatever kubelet and containerd left mounted, deepest first, before removal.
  local mounts
  mounts=$(awk -v dir="$STATE_DIR" -v run="$(dirname "$CONTAINERD_SOCK")" \
    'index($2, dir) == 1 || index($2, run) == 1 { print $2 }' /proc/self/mounts | sort -r)
  [[ -n $mounts ]] && xargs -r -n1 umount -l <<<"$mounts" 2>/dev/null
  # /run/stevedore holds the agent DaemonSet's Unix socket (a hostPath).
  rm -rf --one-file-system "$STATE_DIR" "$(dirname "$CONTAINERD_SOCK")" "$HOSTPATH_PV_DIR" /run/stevedore
  log "cluster is down; state removed"
}

cmd_status() {
  local d state rc=0
  for d in "${DAEMONS[@]}" $(worker_daemons); do
    if pid_alive "$d"; then
      state="running (pid $(cat "$PID_DIR/$d.pid"))"
    elif [[ -f $PID_DIR/$d.pid ]]; then
      state="DEAD (pid file left)"
      rc=1
    else
      state="stopped"
    fi
    printf '%-24s %-28s %s\n' "$d" "$state" "$LOG_DIR/$d.log"
  done
  if pid_alive kube-apiserver; then
    kubectl_admin get nodes -o wide 2>/dev/null || true
  fi
  return $rc
}

cmd_deploy() {
  pid_alive kube-apiserver || die "the cluster is not up (run: cluster.sh up)"
  deploy_agent
  deploy_controlplane
  deploy_samples
  # What tests/bench/report.sh records as the build profile of the figures it measures.
  echo "$STEVEDORE_PROFILE" >"$STATE_DIR/deployed-profile"
}

case ${1:-} in
  up) shift; cmd_up "$@" ;;
  deploy) cmd_deploy ;;
  down) cmd_down ;;
  node) shift; cmd_node "$@" ;;
  status) cmd_status ;;
  kubeconfig) echo "$STATE_DIR/kubeconfig" ;;
  env) [[ -f $STATE_DIR/env ]] && cat "$STATE_DIR/env" || die "the cluster is not up" ;;
  packages)
    [[ $(id -u) == 0 ]] || die "packages needs root (it runs apt-get)"
    install_packages
    ;;
  tools) cmd_tools ;;
  prebuild) shift; cmd_prebuild "$@" ;;
  containerd2) shift; cmd_containerd2 "$@" ;;
  compile) compile_binaries ;;
  plugin) install_plugin ;;
  *) sed -n '2,/^set -euo pipefail$/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
