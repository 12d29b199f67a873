# The Kubernetes components: etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
# kubelet, kube-proxy and (optionally) kwok for simulated nodes.
# shellcheck shell=bash

NODE_NAME=${STEVEDORE_NODE_NAME:-stevedore-node}
APISERVER_PORT=${STEVEDORE_APISERVER_PORT:-6443}
ETCD_PORT=2379
ETCD_PEER_PORT=2380
KUBELET_DIR=$STATE_DIR/kubelet
# Dynamic PVs of kube-controller-manager's host-path provisioner land here (fixed upstream).
HOSTPATH_PV_DIR=/tmp/hostpath_pv

kubectl_admin() {
  "$K8S_BIN/kubectl" --kubeconfig "$STATE_DIR/kubeconfig" "$@"
}

# require_port COMPONENT PORT: refuses to start COMPONENT when something else holds PORT.
require_port() {
  port_free "$2" || die "port $2 needed by $1 is already in use ($(ss -Hltnp "sport = :$2" | head -n1))"
}

start_etcd() {
  pid_alive etcd || { require_port etcd "$ETCD_PORT"; require_port etcd "$ETCD_PEER_PORT"; }
  start_daemon etcd -- "$K8S_BIN/etcd" --name stevedore --data-dir "$STATE_DIR/etcd" \
    --listen-client-urls "https://127.0.0.1:$ETCD_PORT" \
    --advertise-client-urls "https://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster "stevedore=http://127.0.0.1:$ETCD_PEER_PORT" \
    --cert-file "$PKI/etcd.crt" --key-file "$PKI/etcd.key" \
    --trusted-ca-file "$PKI/ca.crt" --client-cert-auth \
    --unsafe-no-fsync
  wait_for etcd 60 "$LOG_DIR/etcd.log" -- curl -sf --cacert "$PKI/ca.crt" \
    --cert "$PKI/etcd.crt" --key "$PKI/etcd.key" "https://127.0.0.1:$ETCD_PORT/health"
}

# apiserver_has_admission_config: true when the running apiserver was started with the
# admission configuration (the webhook client certificate, certs.sh).
apiserver_has_admission_config() {
  grep -qz -- '^--admission-control-config-file=' "/proc/$(cat "$PID_DIR/kube-apiserver.pid")/cmdline"
}

start_apiserver() {
  # An apiserver an older checkout of these scripts started presents no client
  # certificate to the webhook, which the control plane then refuses to answer: restart
  # it with today's flags (the cluster's state is in etcd; clients reconnect).
  if pid_alive kube-apiserver && ! apiserver_has_admission_config; then
    log "restarting kube-apiserver: it runs without $ADMISSION_CONFIG (the webhook client certificate)"
    stop_daemon kube-apiserver
  fi
  pid_alive kube-apiserver || require_port kube-apiserver "$APISERVER_PORT"
  # The advertised address becomes the `kubernetes` Service's endpoint, which may not be a
  # loopback address (Endpoints validation refuses 127.0.0.0/8), so in-cluster clients reach
  # the apiserver on the node IP; local clients use 127.0.0.1.
  start_daemon kube-apiserver -- "$K8S_BIN/kube-apiserver" \
    --advertise-address="$NODE_IP" --bind-address=0.0.0.0 --secure-port="$APISERVER_PORT" \
    --etcd-servers="https://127.0.0.1:$ETCD_PORT" --etcd-cafile="$PKI/ca.crt" \
    --etcd-certfile="$PKI/etcd.crt" --etcd-keyfile="$PKI/etcd.key" \
    --service-cluster-ip-range="$SERVICE_CIDR" \
    --client-ca-file="$PKI/ca.crt" \
    --tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key" \
    --kubelet-client-certificate="$PKI/apiserver-kubelet-client.crt" \
    --kubelet-client-key="$PKI/apiserver-kubelet-client.key" \
    --kubelet-certificate-authority="$PKI/ca.crt" \
    --kubelet-preferred-address-types=InternalIP \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-account-key-file="$PKI/sa.pub" \
    --service-account-signing-key-file="$PKI/sa.key" \
    --authorization-mode=Node,RBAC \
    --enable-admission-plugins=NodeRestriction \
    --admission-control-config-file="$ADMISSION_CONFIG" \
    --allow-privileged=true \
    --profiling=false
  wait_for kube-apiserver 120 "$LOG_DIR/kube-apiserver.log" -- kubectl_admin get --raw /readyz
}

start_controller_manager() {
  local kc=$STATE_DIR/controller-manager.kubeconfig
  pid_alive kube-controller-manager || require_port kube-controller-manager 10257
  start_daemon kube-controller-manager -- "$K8S_BIN/kube-controller-manager" \
    --kubeconfig="$kc" --authentication-kubeconfig="$kc" --authorization-kubeconfig="$kc" \
    --bind-address=127.0.0.1 --secure-port=10257 \
    --service-account-private-key-file="$PKI/sa.key" --root-ca-file="$PKI/ca.crt" \
    --use-service-account-credentials=true \
    --cluster-signing-cert-file="$PKI/ca.crt" --cluster-signing-key-file="$PKI/ca.key" \
    --service-cluster-ip-range="$SERVICE_CIDR" \
    --enable-hostpath-provisioner=true \
    --leader-elect=false --profiling=false
  wait_for kube-controller-manager 60 "$LOG_DIR/kube-controller-manager.log" -- \
    curl -sfk https://127.0.0.1:10257/healthz
}

start_scheduler() {
  local kc=$STATE_DIR/scheduler.kubeconfig
  pid_alive kube-scheduler || require_port kube-scheduler 10259
  start_daemon kube-scheduler -- "$K8S_BIN/kube-scheduler" \
    --kubeconfig="$kc" --authentication-kubeconfig="$kc" --authorization-kubeconfig="$kc" \
    --bind-address=127.0.0.1 --secure-port=10259 --leader-elect=false --profiling=false
  wait_for kube-scheduler 60 "$LOG_DIR/kube-scheduler.log" -- \
    curl -sfk https://127.0.0.1:10259/healthz
}

write_kubelet_config() {
  mkdir -p "$KUBELET_DIR"
  kubelet_config "$NODE_IP" "$POD_CIDR" "$CONTAINERD_SOCK" "$PKI/kubelet-serving" \
    >"$STATE_DIR/kubelet-config.yaml"
}

# kubelet_config ADDRESS POD_CIDR CONTAINERD_SOCK SERVING_CERT [CGROUP_ROOT [TAINT]]: a
# kubelet's configuration. A real worker node (lib/nodes.sh) passes its own cgroup root, so
# two kubelets on this machine never manage one another's pod cgroups, and its taint.
kubelet_config() {
  local address=$1 pod_cidr=$2 sock=$3 cert=$4 cgroup_root=${5:-} taint=${6:-}
  local oom_score_adj=-999
  cannot_lower_oom_score && oom_score_adj=0
  cat <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication:
  anonymous: { enabled: false }
  webhook: { enabled: true }
  x509: { clientCAFile: $PKI/ca.crt }
authorization: { mode: Webhook }
tlsCertFile: $cert.crt
tlsPrivateKeyFile: $cert.key
containerRuntimeEndpoint: unix://$sock
cgroupDriver: cgroupfs
# The machine uses cgroup v1, which this release still supports when asked.
failCgroupV1: false
failSwapOn: false
oomScoreAdj: $oom_score_adj
address: $address
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
clusterDomain: cluster.local
resolvConf: /etc/resolv.conf
podCIDR: $pod_cidr
serializeImagePulls: false
# A test machine's disk is shared with builds; never evict test pods for disk pressure.
evictionHard: { memory.available: 100Mi, nodefs.available: 1%, imagefs.available: 1%, nodefs.inodesFree: 1% }
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
YAML
  [[ -z $cgroup_root ]] || echo "cgroupRoot: $cgroup_root"
  [[ -z $taint ]] || printf 'registerWithTaints:\n  - { key: %s, effect: NoSchedule }\n' "$taint"
}

start_kubelet() {
  write_kubelet_config
  pid_alive kubelet || { require_port kubelet 10250; require_port kubelet 10248; }
  start_daemon kubelet -- "$K8S_BIN/kubelet" \
    --config="$STATE_DIR/kubelet-config.yaml" \
    --kubeconfig="$STATE_DIR/kubelet-client.kubeconfig" \
    --hostname-override="$NODE_NAME" --node-ip="$NODE_IP" \
    --root-dir="$KUBELET_DIR" --v=1
  wait_for kubelet 90 "$LOG_DIR/kubelet.log" -- curl -sf http://127.0.0.1:10248/healthz
  wait_for "node $NODE_NAME Ready" 120 "$LOG_DIR/kubelet.log" -- \
    kubectl_admin wait --for=condition=Ready "node/$NODE_NAME" --timeout=5s
  label_control_plane_node
}

# label_control_plane_node: the kubelet node is this machine, which runs the apiserver,
# so it carries the control-plane role label (the Stevedore control plane prefers such
# nodes). No taint: the tests' pods run there too.
label_control_plane_node() {
  kubectl_admin label --overwrite node "$NODE_NAME" node-role.kubernetes.io/control-plane= \
    >>"$LOG_DIR/objects.log" 2>&1 || die "labelling node $NODE_NAME failed (log: $LOG_DIR/objects.log)"
}

start_kube_proxy() {
  pid_alive kube-proxy || require_port kube-proxy 10256
  start_daemon kube-proxy -- "$K8S_BIN/kube-proxy" \
    --kubeconfig="$STATE_DIR/kube-proxy.kubeconfig" --hostname-override="$NODE_NAME" \
    --proxy-mode=iptables --cluster-cidr="$POD_CIDR" \
    --healthz-bind-address=127.0.0.1:10256 --metrics-bind-address=127.0.0.1:10249 \
    --conntrack-max-per-core=0
  wait_for kube-proxy 60 "$LOG_DIR/kube-proxy.log" -- curl -sf http://127.0.0.1:10256/healthz
}

# Cluster objects every later step relies on: the default StorageClass and kube-proxy's
# RBAC (its client certificate names the user system:kube-proxy).
apply_cluster_objects() {
  kubectl_admin apply -f - >>"$LOG_DIR/objects.log" 2>&1 <<'YAML' || die "applying cluster objects failed (log: $LOG_DIR/objects.log)"
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: standard
  annotations:
    storageclass.kubernetes.io/is-default-class: "true"
provisioner: kubernetes.io/host-path
reclaimPolicy: Delete
volumeBindingMode: Immediate
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: stevedore-local:kube-proxy
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: system:node-proxier
subjects:
- apiGroup: rbac.authorization.k8s.io
  kind: User
  name: system:kube-proxy
YAML
}
