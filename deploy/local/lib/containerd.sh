# containerd with its own config, root, state and socket, CRI on, cgroupfs, CNI from
# Debian's plugin directory, and the local registry reachable over plain HTTP.
#
# Two instances may run. The cluster's (daemon `containerd`, the one kubelet uses) is
# Debian's 1.6 unless `up --containerd 2` chose containerd 2.x for the cluster's life
# (recorded in $CONTAINERD_MAJOR_FILE until `down`). `cluster.sh containerd2 up` starts a
# second one beside it (daemon `containerd2`): containerd 2.x on a root, state, socket and
# config of its own that no kubelet uses, for the agent's suites to run against.
# shellcheck shell=bash

CONTAINERD_DIR=$STATE_DIR/containerd
CONTAINERD_SOCK=${STEVEDORE_CONTAINERD_SOCK:-/run/stevedore-local/containerd.sock}
CONTAINERD_MAJOR_FILE=$STATE_DIR/containerd-major
CONTAINERD2_DIR=$STATE_DIR/containerd2
# Under the cluster's run directory, so `down` removes it with the rest.
CONTAINERD2_SOCK=$(dirname "$CONTAINERD_SOCK")/containerd2/containerd.sock
CNI_BIN_DIR=/usr/lib/cni

# true when this process cannot lower its oom_score_adj (CAP_SYS_RESOURCE, bit 24, missing
# from the effective set), as in some VM sandboxes.
cannot_lower_oom_score() {
  local capeff
  capeff=$(awk '/^CapEff:/ { print $2 }' /proc/self/status)
  (((16#$capeff >> 24 & 1) == 0))
}

# cluster_containerd_major: 1 (Debian's 1.6) or 2, as the running cluster was brought up.
cluster_containerd_major() {
  cat "$CONTAINERD_MAJOR_FILE" 2>/dev/null || echo 1
}

# choose_cluster_containerd MAJOR: records the cluster's containerd on the first `up`;
# a later `up` asking for another one fails instead of swapping a runtime under kubelet.
choose_cluster_containerd() {
  local wanted=$1 running
  [[ $wanted == 1 || $wanted == 2 ]] || die "--containerd must be 1 or 2, got '$wanted'"
  if pid_alive containerd; then
    running=$(cluster_containerd_major)
    [[ $running == "$wanted" ]] ||
      die "the cluster runs containerd $running; to run it on containerd $wanted, run cluster.sh down first"
    return 0
  fi
  mkdir -p "$STATE_DIR"
  echo "$wanted" >"$CONTAINERD_MAJOR_FILE"
}

# containerd_bin_dir MAJOR: where that containerd, its ctr and its runc shim are.
containerd_bin_dir() {
  if [[ $1 == 2 ]]; then echo "$CONTAINERD2_BIN"; else echo /usr/bin; fi
}

# write_registry_hosts DIR: DIR/certs.d, the registry configuration (config_path) that
# lets containerd's own pulls reach the local registry over plain HTTP.
write_registry_hosts() {
  local certs=$1/certs.d
  mkdir -p "$certs/$REGISTRY"
  cat >"$certs/$REGISTRY/hosts.toml" <<TOML
server = "http://$REGISTRY"

[host."http://$REGISTRY"]
  capabilities = ["pull", "resolve", "push"]
TOML
}

# Plugins no instance here uses: snapshotters this machine has no backing for.
DISABLED_SNAPSHOTTERS='"io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"'

# containerd1_config DIR SOCK CNI_CONF_DIR: containerd 1.6's config (version 2).
containerd1_config() {
  local dir=$1 sock=$2 cni_conf=$3 restrict=false
  cannot_lower_oom_score && restrict=true
  cat <<TOML
version = 2
root = "$dir/root"
state = "$dir/state"
disabled_plugins = [$DISABLED_SNAPSHOTTERS]

[grpc]
  address = "$sock"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$SANDBOX_IMAGE"
  # Sandboxes on such machines may lack CAP_SYS_RESOURCE in the bounding set, and then runc
  # cannot lower oom_score_adj (kubelet asks for -998 for pod sandboxes): clamp instead.
  restrict_oom_score_adj = $restrict
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "$(dirname "$sock")/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$CNI_BIN_DIR"
    conf_dir = "$cni_conf"
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "$dir/certs.d"
TOML
}

# containerd2_config DIR SOCK CNI_CONF_DIR: the same settings for containerd 2.x. Config
# version 3 (CRI split into an images and a runtime plugin) is the one every 2.x reads;
# 2.3 migrates it to its version 4 at start with a warning. NRI, on by default in 2.x, is
# off: it listens on a machine-wide socket and nothing here uses it. (The drop-in
# directory /etc/containerd/conf.d is read only by configs that import it, as 2.x's
# generated default does; this one does not.)
containerd2_config() {
  local dir=$1 sock=$2 cni_conf=$3 restrict=false
  cannot_lower_oom_score && restrict=true
  cat <<TOML
version = 3
root = "$dir/root"
state = "$dir/state"
disabled_plugins = [$DISABLED_SNAPSHOTTERS, "io.containerd.nri.v1.nri"]

[grpc]
  address = "$sock"

[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = "$SANDBOX_IMAGE"
  [plugins.'io.containerd.cri.v1.images'.registry]
    config_path = "$dir/certs.d"

[plugins.'io.containerd.cri.v1.runtime']
  # As for 1.6: clamp oom_score_adj where it cannot be lowered.
  restrict_oom_score_adj = $restrict
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      # This build's shim, never Debian's 1.6 one from PATH.
      runtime_path = "$CONTAINERD2_BIN/containerd-shim-runc-v2"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "$(dirname "$sock")/runc"
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ["$CNI_BIN_DIR"]
    conf_dir = "$cni_conf"
TOML
}

# write_containerd_config MAJOR DIR SOCK CNI_CONF_DIR: DIR/config.toml and DIR/certs.d.
write_containerd_config() {
  local major=$1 dir=$2 sock=$3 cni_conf=$4
  mkdir -p "$dir/root" "$dir/state" "$(dirname "$sock")"
  write_registry_hosts "$dir"
  if [[ $major == 2 ]]; then
    containerd2_config "$dir" "$sock" "$cni_conf" >"$dir/config.toml"
  else
    containerd1_config "$dir" "$sock" "$cni_conf" >"$dir/config.toml"
  fi
}

# containerd_ready SOCK: its API answers (any ctr speaks to both majors).
containerd_ready() {
  ctr --address "$1" version
}

# start_containerd_daemon NAME MAJOR DIR SOCK: starts that containerd with its bin
# directory first on PATH (containerd looks its runc shim up there).
start_containerd_daemon() {
  local name=$1 major=$2 dir=$3 sock=$4 bin
  bin=$(containerd_bin_dir "$major")
  start_daemon "$name" -- env PATH="$bin:$PATH" "$bin/containerd" --config "$dir/config.toml"
  wait_for "$name" 60 "$LOG_DIR/$name.log" -- containerd_ready "$sock"
}

# start_containerd: the cluster's containerd, the one kubelet uses.
start_containerd() {
  local major
  major=$(cluster_containerd_major)
  [[ $major == 2 ]] && build_containerd2
  write_containerd_config "$major" "$CONTAINERD_DIR" "$CONTAINERD_SOCK" "$STATE_DIR/cni/net.d"
  start_containerd_daemon containerd "$major" "$CONTAINERD_DIR" "$CONTAINERD_SOCK"
}

# start_containerd2_beside: containerd 2.x beside the cluster's. It runs no pods: its CNI
# configuration directory is its own and empty.
start_containerd2_beside() {
  build_containerd2
  write_containerd_config 2 "$CONTAINERD2_DIR" "$CONTAINERD2_SOCK" "$CONTAINERD2_DIR/net.d"
  start_containerd_daemon containerd2 2 "$CONTAINERD2_DIR" "$CONTAINERD2_SOCK"
}

# stop_containerd2_beside: stops it, its shims and mounts, and removes its state.
stop_containerd2_beside() {
  stop_daemon containerd2
  kill_shims_of "$CONTAINERD2_SOCK"
  local mounts
  mounts=$(awk -v dir="$CONTAINERD2_DIR" -v run="$(dirname "$CONTAINERD2_SOCK")" \
    'index($2, dir) == 1 || index($2, run) == 1 { print $2 }' /proc/self/mounts | sort -r)
  [[ -n $mounts ]] && xargs -r -n1 umount -l <<<"$mounts" 2>/dev/null
  rm -rf --one-file-system "$CONTAINERD2_DIR" "$(dirname "$CONTAINERD2_SOCK")"
}

# containerd2_env: the exports that point the agent's suites at containerd 2.x beside
# the cluster's (tests/src/containerd.rs reads them).
containerd2_env() {
  echo "export STEVEDORE_TEST_CONTAINERD_SOCK=$CONTAINERD2_SOCK"
  echo "export STEVEDORE_TEST_CTR=$CONTAINERD2_BIN/ctr"
}

# kill_shims_of SOCK: the runc shims a containerd on SOCK started.
kill_shims_of() {
  local pids
  pids=$(pgrep -f "containerd-shim-runc-v2 .*-address $1" || true)
  [[ -n $pids ]] && kill -KILL $pids 2>/dev/null
  return 0
}

# kill_pod_processes: after a crash or on `down`, nothing may keep running in pod cgroups
# or containerd shims that belong to this cluster.
kill_pod_processes() {
  kill_shims_of "$CONTAINERD_SOCK"
  kill_shims_of "$CONTAINERD2_SOCK"
  kill_cgroup_processes kubepods
  release_stale_pod_netns
}

# release_stale_pod_netns: the pod network namespaces containerd pinned under /run/netns
# (cni-*) that no process is in any more. Pods killed with the cluster never had their
# sandbox torn down, so their pins stayed mounted from one `down` to the next; a
# namespace some process still uses (another runtime's pod) is left alone.
release_stale_pod_netns() {
  local used pin inode
  [[ -d /run/netns ]] || return 0
  # stat fails for the processes that exit while it runs: what it read is enough.
  used=$(stat -L -c %i /proc/[0-9]*/ns/net 2>/dev/null | sort -u || true)
  for pin in /run/netns/cni-*; do
    [[ -e $pin ]] || continue
    inode=$(stat -L -c %i "$pin" 2>/dev/null) || continue
    grep -qx "$inode" <<<"$used" && continue
    # Pinned by a bind mount of nsfs (which `mountpoint` does not see), sometimes twice.
    while umount "$pin" 2>/dev/null; do :; done
    rm -f "$pin" 2>/dev/null || true # still pinned beneath a later mount: left
  done
  return 0
}

# kill_cgroup_processes DIR: kills every process in the cgroups under /DIR of every
# hierarchy (the kubelet node's pods are under /kubepods, a real worker's under its own
# cgroup root), then removes those cgroups, deepest first.
kill_cgroup_processes() {
  local controller dir
  for controller in /sys/fs/cgroup/*/; do
    dir=$controller$1
    [[ -d $dir ]] || continue
    find "$dir" -name cgroup.procs -exec cat {} + 2>/dev/null | xargs -r kill -KILL 2>/dev/null
  done
  sleep 1
  for controller in /sys/fs/cgroup/*/; do
    dir=$controller$1
    [[ -d $dir ]] && find "$dir" -depth -type d -exec rmdir {} + 2>/dev/null
  done
  return 0
}
