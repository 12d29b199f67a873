# containerd with its own config, root, state and socket, CRI on, cgroupfs, CNI from
# Debian's plugin directory, and the local registry reachable over plain HTTP.
# shellcheck shell=bash

CONTAINERD_DIR=$STATE_DIR/containerd
CONTAINERD_SOCK=${STEVEDORE_CONTAINERD_SOCK:-/run/stevedore-local/containerd.sock}
CNI_BIN_DIR=/usr/lib/cni

# true when this process cannot lower its oom_score_adj (CAP_SYS_RESOURCE, bit 24, missing
# from the effective set), as in some VM sandboxes.
cannot_lower_oom_score() {
  local capeff
  capeff=$(awk '/^CapEff:/ { print $2 }' /proc/self/status)
  (((16#$capeff >> 24 & 1) == 0))
}

write_containerd_config() {
  local RESTRICT_OOM_SCORE_ADJ=false
  cannot_lower_oom_score && RESTRICT_OOM_SCORE_ADJ=true
  mkdir -p "$CONTAINERD_DIR/root" "$CONTAINERD_DIR/state" "$(dirname "$CONTAINERD_SOCK")" \
    "$CONTAINERD_DIR/certs.d/$REGISTRY"
  cat >"$CONTAINERD_DIR/certs.d/$REGISTRY/hosts.toml" <<TOML
server = "http://$REGISTRY"

[host."http://$REGISTRY"]
  capabilities = ["pull", "resolve", "push"]
TOML
  cat >"$CONTAINERD_DIR/config.toml" <<TOML
version = 2
root = "$CONTAINERD_DIR/root"
state = "$CONTAINERD_DIR/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]

[grpc]
  address = "$CONTAINERD_SOCK"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$SANDBOX_IMAGE"
  # Sandboxes on such machines may lack CAP_SYS_RESOURCE in the bounding set, and then runc
  # cannot lower oom_score_adj (kubelet asks for -998 for pod sandboxes): clamp instead.
  restrict_oom_score_adj = $RESTRICT_OOM_SCORE_ADJ
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "$(dirname "$CONTAINERD_SOCK")/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$CNI_BIN_DIR"
    conf_dir = "$STATE_DIR/cni/net.d"
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "$CONTAINERD_DIR/certs.d"
TOML
}

containerd_ready() {
  ctr --address "$CONTAINERD_SOCK" version
}

start_containerd() {
  write_containerd_config
  start_daemon containerd -- containerd --config "$CONTAINERD_DIR/config.toml"
  wait_for containerd 60 "$LOG_DIR/containerd.log" -- containerd_ready
}

# kill_pod_processes: after a crash or on `down`, nothing may keep running in pod cgroups
# or containerd shims that belong to this cluster.
kill_pod_processes() {
  local pids
  pids=$(pgrep -f "containerd-shim-runc-v2 .*-address $CONTAINERD_SOCK" || true)
  [[ -n $pids ]] && kill -KILL $pids 2>/dev/null
  local controller dir
  for controller in /sys/fs/cgroup/*/; do
    dir=${controller}kubepods
    [[ -d $dir ]] || continue
    find "$dir" -name cgroup.procs -exec cat {} + 2>/dev/null | xargs -r kill -KILL 2>/dev/null
  done
  sleep 1
  for controller in /sys/fs/cgroup/*/; do
    dir=${controller}kubepods
    [[ -d $dir ]] && find "$dir" -depth -type d -exec rmdir {} + 2>/dev/null
  done
  return 0
}
