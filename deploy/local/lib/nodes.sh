# Real worker nodes beside the kubelet node (`up --real-nodes N` adds N-1 of them), so
# what happens per node (DaemonSet rollouts, BroadcastJobs, per-node pulls, the agents'
# node-scoped credentials) is tested on more than one real kubelet.
#
# Each worker is a kubelet, a containerd and a kube-proxy of its own, run in:
# - a network namespace of its own, on a veth whose host end joins the cluster bridge:
#   node IP 198.18.0.(10+i), pods 198.18.(128+i).0/24 (routed by the host to the node), its
#   own iptables for kube-proxy's Services, its own CNI bridge;
# - a mount namespace of its own in which the paths the agent DaemonSet mounts
#   (/run/stevedore-local, containerd's socket directory, and /run/stevedore, the agent's
#   Unix socket) are the worker's own directories. One DaemonSet template then runs on
#   every node, as on a real cluster where each node has its own /run;
# - a cgroup root of its own (/stevedore-worker-i), so no kubelet manages another's pods.
# The local registries listen on 127.0.0.1 of the host; inside a worker, socat answers on
# the same 127.0.0.1 ports and relays over a Unix socket to the host's, so image names
# stay the same on every node. Workers carry the taint stevedore.dev/worker:NoSchedule
# (and the label stevedore.dev/worker=true): suites written for the one kubelet node keep
# their placement; what is meant for every real node tolerates it (the agent tolerates
# every taint).
# shellcheck shell=bash

WORKER_PREFIX=stevedore-worker-
WORKER_TAINT=stevedore.dev/worker
WORKERS_DIR=$STATE_DIR/workers
# Runtime directories (sockets, runc state) and the mount namespaces' files, outside
# /run/stevedore-local, which a worker's own directory replaces inside its namespace.
WORKERS_RUN=/run/stevedore-workers
RELAYED_PORTS=("$REGISTRY_PORT" "$AUTH_REGISTRY_PORT")

worker_name() { echo "$WORKER_PREFIX$1"; }
worker_ip() { echo "198.18.0.$((10 + $1))"; }
worker_pod_cidr() { echo "198.18.$((128 + $1)).0/24"; }
worker_netns() { worker_name "$1"; }
worker_mntns() { echo "$WORKERS_RUN/ns/$(worker_name "$1")"; }
worker_run() { echo "$WORKERS_RUN/$(worker_name "$1")"; }
worker_dir() { echo "$WORKERS_DIR/$(worker_name "$1")"; }

# in_worker I -- COMMAND...: COMMAND in worker I's network and mount namespaces.
in_worker() {
  local i=$1
  shift 2
  nsenter --mount="$(worker_mntns "$i")" --net="/run/netns/$(worker_netns "$i")" -- "$@"
}

# start_in_worker I NAME COMMAND...: a daemon (lib/common.sh's start_daemon) in worker I's
# namespaces, named and logged as NAME.
start_in_worker() {
  local i=$1 name=$2
  shift 2
  start_daemon "$name" -- nsenter --mount="$(worker_mntns "$i")" \
    --net="/run/netns/$(worker_netns "$i")" -- "$@"
}

# worker_count: how many real worker nodes this cluster has (they are numbered 1..count).
worker_count() {
  local n=0
  while [[ -d $(worker_dir $((n + 1))) ]]; do n=$((n + 1)); done
  echo "$n"
}

# ensure_real_nodes N: the kubelet node plus N-1 workers run and are Ready.
ensure_real_nodes() {
  local total=$1 i
  ((total > 1)) || return 0
  command -v socat >/dev/null || die "real worker nodes need socat (cluster.sh packages installs it)"
  start_registry_relays
  for ((i = 1; i < total; i++)); do start_worker "$i"; done
  for ((i = 1; i < total; i++)); do wait_worker_ready "$i"; done
}

wait_worker_ready() {
  local name
  name=$(worker_name "$1")
  wait_for "node $name Ready" 120 "$LOG_DIR/$name-kubelet.log" -- \
    kubectl_admin wait --for=condition=Ready "node/$name" --timeout=5s
}

# add_worker: one more real worker node on a running cluster (the next number), as a node
# joins a production cluster while workloads run; prints its name once it is Ready.
add_worker() {
  local i
  i=$(($(worker_count) + 1))
  ((i < 50)) || die "the cluster already has 50 real nodes (the most it takes)"
  command -v socat >/dev/null || die "real worker nodes need socat (cluster.sh packages installs it)"
  start_registry_relays
  start_worker "$i"
  wait_worker_ready "$i"
  worker_name "$i"
}

# remove_worker NAME: the last-added worker leaves the cluster: its Node object is
# deleted and its daemons, pods, namespaces and routes go. Only the last one, so workers
# stay numbered 1..count.
remove_worker() {
  local name=$1 n
  n=$(worker_count)
  ((n > 0)) || die "the cluster has no real worker node to remove"
  [[ $name == "$(worker_name "$n")" ]] ||
    die "only the last-added worker, $(worker_name "$n"), can be removed; got '$name'"
  kubectl_admin delete node "$name" --wait=false >/dev/null 2>&1 || true
  stop_worker "$n"
  rm -rf --one-file-system "$(worker_dir "$n")"
  log "real worker node $name removed"
}

# start_registry_relays: on the host, a Unix socket per registry port that the workers'
# socat relays connect to.
start_registry_relays() {
  local port
  mkdir -p "$WORKERS_RUN"
  for port in "${RELAYED_PORTS[@]}"; do
    start_daemon "registry-relay-$port" -- socat \
      "UNIX-LISTEN:$WORKERS_RUN/registry-$port.sock,fork,unlink-early,mode=600" "TCP:127.0.0.1:$port"
  done
}

start_worker() {
  local i=$1 name
  name=$(worker_name "$i")
  mkdir -p "$(worker_dir "$i")" "$(worker_run "$i")"
  # ip warns "Peer netns reference is invalid" for every stale pin it meets in
  # /run/netns (left by runtimes that died with pods in them); only that line is dropped.
  worker_network "$i" 2> >(grep -v "Peer netns reference is invalid" >&2)
  worker_mounts "$i"
  worker_cgroups "$i"
  worker_credentials "$i"
  worker_containerd "$i"
  worker_registry_relays "$i"
  worker_kubelet "$i"
  worker_kube_proxy "$i"
  log "real worker node $name is up ($(worker_ip "$i"), pods $(worker_pod_cidr "$i"))"
}

# worker_network I: the namespace, its veth on the cluster bridge, and the routes both ways.
worker_network() {
  local i=$1 ns ip host_end
  ns=$(worker_netns "$i")
  ip=$(worker_ip "$i")
  host_end=stvd-w$i
  [[ -e /run/netns/$ns ]] || ip netns add "$ns"
  if ! ip link show "$host_end" >/dev/null 2>&1; then
    ip link add "$host_end" type veth peer name eth0 netns "$ns"
    ip link set "$host_end" master "$HOST_BRIDGE" up
  fi
  ip netns exec "$ns" sh -ec "
    ip link set lo up
    ip addr show dev eth0 | grep -q 'inet $ip/' || ip addr add $ip/24 dev eth0
    ip link set eth0 up
    ip route replace default via $NODE_IP
    sysctl -qw net.ipv4.ip_forward=1
    sysctl -qw net.bridge.bridge-nf-call-iptables=1 2>/dev/null || true
    iptables -n -L $GUARD_CHAIN >/dev/null 2>&1 || {
      iptables -N $GUARD_CHAIN
      iptables -A $GUARD_CHAIN -s $(worker_pod_cidr "$i") ! -d 198.18.0.0/15 -j DROP
      iptables -I FORWARD -j $GUARD_CHAIN
    }"
  ip route replace "$(worker_pod_cidr "$i")" via "$ip"
  install_cni_config "$(worker_dir "$i")/cni" "$(worker_pod_cidr "$i")"
}

# worker_mounts I: a persistent mount namespace whose /run/stevedore-local and
# /run/stevedore are the worker's own, and so are /var/log/pods and /var/log/containers
# (each kubelet removes the log directories of pods it does not know) and /run/netns
# (where its containerd pins its pods' network namespaces: they go with the worker's run
# directory instead of leaving files in the host's). Its file must live on a private
# mount.
worker_mounts() {
  local i=$1 file run logs
  file=$(worker_mntns "$i")
  run=$(worker_run "$i")
  logs=$(worker_dir "$i")/logs
  mkdir -p "$WORKERS_RUN/ns" "$run/agent-socket" "$run/netns" "$(dirname "$CONTAINERD_SOCK")" /run/stevedore /run/netns \
    "$logs/pods" "$logs/containers" /var/log/pods /var/log/containers
  if ! mountpoint -q "$WORKERS_RUN/ns"; then
    mount --bind "$WORKERS_RUN/ns" "$WORKERS_RUN/ns"
    mount --make-private "$WORKERS_RUN/ns"
  fi
  mountpoint -q "$file" 2>/dev/null && return 0
  touch "$file"
  unshare --mount="$file" --propagation slave -- true || die "cannot make the mount namespace of $(worker_name "$i")"
  nsenter --mount="$file" -- sh -ec "
    mount --bind $run $(dirname "$CONTAINERD_SOCK")
    mount --bind $run/agent-socket /run/stevedore
    mount --bind $logs/pods /var/log/pods
    mount --bind $logs/containers /var/log/containers
    mount --bind $run/netns /run/netns"
}

# worker_cgroups I: the worker's cgroup root in every v1 hierarchy (cpuset's must hold
# CPUs and memory nodes before a task may join it); on v2, one directory.
worker_cgroups() {
  local root=/$(worker_name "$1") controller
  if [[ -f /sys/fs/cgroup/cgroup.controllers ]]; then
    mkdir -p "/sys/fs/cgroup$root"
    return 0
  fi
  for controller in /sys/fs/cgroup/*/; do
    [[ -L ${controller%/} ]] && continue
    mkdir -p "$controller${root#/}"
  done
  if [[ -d /sys/fs/cgroup/cpuset$root ]]; then
    cat /sys/fs/cgroup/cpuset/cpuset.cpus >"/sys/fs/cgroup/cpuset$root/cpuset.cpus"
    cat /sys/fs/cgroup/cpuset/cpuset.mems >"/sys/fs/cgroup/cpuset$root/cpuset.mems"
  fi
}

# worker_credentials I: the kubelet's client and serving certificates (its own node
# identity, so the Node authorizer and NodeRestriction hold it to its own node) and
# kubeconfigs that reach the apiserver on the host's bridge address.
worker_credentials() {
  local i=$1 name ip dir server
  name=$(worker_name "$i")
  ip=$(worker_ip "$i")
  dir=$(worker_dir "$i")
  server=https://$NODE_IP:$APISERVER_PORT
  issue_cert "$name-client" "/O=system:nodes/CN=system:node:$name" "extendedKeyUsage=clientAuth"
  issue_cert "$name-serving" "/O=system:nodes/CN=system:node:$name" "extendedKeyUsage=serverAuth
subjectAltName=IP:$ip,DNS:$name"
  write_kubeconfig "$name-client" "$dir/kubelet.kubeconfig" "$server"
  write_kubeconfig kube-proxy "$dir/kube-proxy.kubeconfig" "$server"
}

worker_containerd() {
  local i=$1 name dir sock major
  name=$(worker_name "$i")
  dir=$(worker_dir "$i")/containerd
  sock=$(worker_run "$i")/containerd.sock
  major=$(cluster_containerd_major)
  write_containerd_config "$major" "$dir" "$sock" "$(worker_dir "$i")/cni/net.d"
  # Pulls of images named 127.0.0.1:5000/... go to the relay, as on the kubelet node.
  rm -rf "$dir/certs.d" && cp -r "$CONTAINERD_DIR/certs.d" "$dir/certs.d"
  start_in_worker "$i" "$name-containerd" env PATH="$(containerd_bin_dir "$major"):$PATH" \
    "$(containerd_bin_dir "$major")/containerd" --config "$dir/config.toml"
  wait_for "$name-containerd" 60 "$LOG_DIR/$name-containerd.log" -- containerd_ready "$sock"
}

worker_registry_relays() {
  local i=$1 port
  for port in "${RELAYED_PORTS[@]}"; do
    start_in_worker "$i" "$(worker_name "$i")-registry-$port" socat \
      "TCP-LISTEN:$port,bind=127.0.0.1,fork,reuseaddr" "UNIX-CONNECT:$WORKERS_RUN/registry-$port.sock"
  done
}

worker_kubelet() {
  local i=$1 name dir
  name=$(worker_name "$i")
  dir=$(worker_dir "$i")
  mkdir -p "$dir/kubelet"
  kubelet_config "$(worker_ip "$i")" "$(worker_pod_cidr "$i")" "$(worker_run "$i")/containerd.sock" \
    "$PKI/$name-serving" "/$name" "$WORKER_TAINT" >"$dir/kubelet-config.yaml"
  start_in_worker "$i" "$name-kubelet" "$K8S_BIN/kubelet" \
    --config="$dir/kubelet-config.yaml" --kubeconfig="$dir/kubelet.kubeconfig" \
    --hostname-override="$name" --node-ip="$(worker_ip "$i")" \
    --node-labels="$WORKER_TAINT=true" --root-dir="$dir/kubelet" --v=1
  wait_for "$name-kubelet" 90 "$LOG_DIR/$name-kubelet.log" -- \
    in_worker "$i" -- curl -sf http://127.0.0.1:10248/healthz
}

worker_kube_proxy() {
  local i=$1 name
  name=$(worker_name "$i")
  start_in_worker "$i" "$name-kube-proxy" "$K8S_BIN/kube-proxy" \
    --kubeconfig="$(worker_dir "$i")/kube-proxy.kubeconfig" --hostname-override="$name" \
    --proxy-mode=iptables --cluster-cidr=198.18.128.0/17 \
    --healthz-bind-address=127.0.0.1:10256 --metrics-bind-address=127.0.0.1:10249 \
    --conntrack-max-per-core=0
  wait_for "$name-kube-proxy" 60 "$LOG_DIR/$name-kube-proxy.log" -- \
    in_worker "$i" -- curl -sf http://127.0.0.1:10256/healthz
}

# worker_daemons_of I: worker I's daemons, in start order.
worker_daemons_of() {
  local name port
  name=$(worker_name "$1")
  echo "$name-containerd"
  for port in "${RELAYED_PORTS[@]}"; do echo "$name-registry-$port"; done
  echo "$name-kubelet" "$name-kube-proxy"
}

# worker_daemons: the daemons of every worker, in start order, then the host's relays.
worker_daemons() {
  local i n port
  n=$(worker_count)
  for ((i = 1; i <= n; i++)); do worker_daemons_of "$i"; done
  for port in "${RELAYED_PORTS[@]}"; do echo "registry-relay-$port"; done
}

# stop_worker I: worker I's daemons, pods, shims, namespaces and routes.
stop_worker() {
  local i=$1 d run
  for d in $(worker_daemons_of "$i" | tac); do stop_daemon "$d"; done
  kill_shims_of "$(worker_run "$i")/containerd.sock"
  kill_cgroup_processes "$(worker_name "$i")"
  ip route del "$(worker_pod_cidr "$i")" 2>/dev/null || true
  ip link del "stvd-w$i" 2>/dev/null || true
  ip netns del "$(worker_netns "$i")" 2>/dev/null || true
  umount -l "$(worker_mntns "$i")" 2>/dev/null || true
  run=$(worker_run "$i")
  awk -v run="$run" 'index($2, run) == 1 { print $2 }' /proc/self/mounts | sort -r |
    xargs -r -n1 umount -l 2>/dev/null || true
  rm -rf --one-file-system "$run" "$(worker_mntns "$i")"
  return 0
}

# stop_workers: every worker's daemons, pods, shims, namespaces and routes; their Node
# objects go with the apiserver's state.
stop_workers() {
  local n i port
  n=$(worker_count)
  for ((i = n; i >= 1; i--)); do stop_worker "$i"; done
  for port in "${RELAYED_PORTS[@]}"; do stop_daemon "registry-relay-$port"; done
  umount -l "$WORKERS_RUN/ns" 2>/dev/null || true
  local mounts
  mounts=$(awk -v run="$WORKERS_RUN" 'index($2, run) == 1 { print $2 }' /proc/self/mounts | sort -r)
  [[ -n $mounts ]] && xargs -r -n1 umount -l <<<"$mounts" 2>/dev/null
  rm -rf --one-file-system "$WORKERS_RUN"
  return 0
}
