# Real storage that expands: Stevedore's own CSI host-path driver (tests/csi-hostpath) and
# the kubernetes-csi provisioner and resizer, all host processes beside the kubelet, plus
# the CSIDriver and two StorageClasses that name the driver. The existing default class
# (kube-controller-manager's in-tree host-path provisioner, kube.sh) stays the default.
# shellcheck shell=bash

CSI_DRIVER_NAME=hostpath.csi.stevedore.dev
# Where the kubelet looks for CSI sockets and for plugin registration sockets.
CSI_SOCKET=$KUBELET_DIR/plugins/$CSI_DRIVER_NAME/csi.sock
CSI_REGISTRATION_DIR=$KUBELET_DIR/plugins_registry
# The driver's volumes (directories) and the record of their capacities.
CSI_STATE_DIR=$STATE_DIR/csi-hostpath
# The driver binary runs from here, copied from the build: another checkout's build of the
# shared target dir cannot swap it under the running process.
CSI_DRIVER_BIN=$STATE_DIR/bin/stevedore-csi-hostpath
# The sidecars' metrics and health endpoints, on the host's loopback.
CSI_PROVISIONER_HTTP=127.0.0.1:10370
CSI_RESIZER_HTTP=127.0.0.1:10371

# build_csi_driver: the driver, built with Stevedore's other binaries in one cargo
# invocation (stevedore.sh, cargo_build). run.sh's `compile` built it already (a no-op
# here); `cluster.sh up` alone builds them all.
build_csi_driver() {
  local log=$STEVEDORE_CACHE/build-stevedore-csi-hostpath.log
  ensure_cargo
  : >"$log"
  must "compiling stevedore-csi-hostpath (cargo build of ${STEVEDORE_BINARIES[*]})" "$log" \
    copy_built_csi_driver
}

# copy_built_csi_driver: builds and copies in one shell, so cargo_build's lock on the
# target dir is held until the copy (another checkout's build cannot swap the binary).
copy_built_csi_driver() {
  local name=stevedore-csi-hostpath
  cargo_build
  mkdir -p "$(dirname "$CSI_DRIVER_BIN")"
  # Through a rename: a running driver keeps its (deleted) file until it restarts.
  cp "$CARGO_TARGET_DIR/$(profile_dir "$STEVEDORE_PROFILE")/$name" "$CSI_DRIVER_BIN.tmp"
  mv "$CSI_DRIVER_BIN.tmp" "$CSI_DRIVER_BIN"
}

# csi_driver_registered: the kubelet has added the driver to the node's CSINode (it did so
# after asking the registration socket and the driver's NodeGetInfo).
csi_driver_registered() {
  kubectl_admin get csinode "$NODE_NAME" -o jsonpath='{.spec.drivers[*].name}' |
    grep -qw "$CSI_DRIVER_NAME"
}

start_csi_driver() {
  pid_alive csi-hostpath || build_csi_driver
  start_daemon csi-hostpath -- env RUST_LOG=info "$CSI_DRIVER_BIN" \
    --csi-socket "$CSI_SOCKET" --registration-dir "$CSI_REGISTRATION_DIR" \
    --state-dir "$CSI_STATE_DIR" --node-name "$NODE_NAME" --driver-name "$CSI_DRIVER_NAME"
  wait_for "CSI driver $CSI_DRIVER_NAME registered with the kubelet" 60 "$LOG_DIR/csi-hostpath.log" -- \
    csi_driver_registered
}

# The sidecars use the admin kubeconfig: they are cluster infrastructure on this machine,
# as kube-scheduler is, and the admin identity covers the RBAC their manifests would grant.
start_csi_sidecars() {
  pid_alive csi-provisioner || require_port csi-provisioner "${CSI_PROVISIONER_HTTP##*:}"
  start_daemon csi-provisioner -- "$CSI_PROVISIONER_BIN/csi-provisioner" \
    --csi-address="$CSI_SOCKET" --kubeconfig="$STATE_DIR/kubeconfig" \
    --http-endpoint="$CSI_PROVISIONER_HTTP" --timeout=30s --retry-interval-max=30s --v=2
  pid_alive csi-resizer || require_port csi-resizer "${CSI_RESIZER_HTTP##*:}"
  start_daemon csi-resizer -- "$CSI_RESIZER_BIN/csi-resizer" \
    --csi-address="$CSI_SOCKET" --kubeconfig="$STATE_DIR/kubeconfig" \
    --http-endpoint="$CSI_RESIZER_HTTP" --timeout=30s --v=2
  wait_for csi-provisioner 60 "$LOG_DIR/csi-provisioner.log" -- curl -sf "http://$CSI_PROVISIONER_HTTP/metrics"
  wait_for csi-resizer 60 "$LOG_DIR/csi-resizer.log" -- curl -sf "http://$CSI_RESIZER_HTTP/metrics"
}

# The CSIDriver (no attach step: the volume is a directory on this node) and the two
# classes: one whose claims may grow, one whose claims the apiserver refuses to grow.
apply_csi_objects() {
  kubectl_admin apply -f - >>"$LOG_DIR/objects.log" 2>&1 <<YAML || die "applying the CSI objects failed (log: $LOG_DIR/objects.log)"
apiVersion: storage.k8s.io/v1
kind: CSIDriver
metadata:
  name: $CSI_DRIVER_NAME
spec:
  attachRequired: false
  podInfoOnMount: false
  # The kubelet applies a pod's fsGroup to the volume's files, as on a real filesystem.
  fsGroupPolicy: File
  volumeLifecycleModes: [Persistent]
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: stevedore-expandable
provisioner: $CSI_DRIVER_NAME
reclaimPolicy: Delete
volumeBindingMode: Immediate
allowVolumeExpansion: true
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: stevedore-fixed
provisioner: $CSI_DRIVER_NAME
reclaimPolicy: Delete
volumeBindingMode: Immediate
allowVolumeExpansion: false
YAML
}

# start_csi_storage: everything above; after the kubelet (whose registry it joins). The
# sidecars exit at their first call after losing the driver's socket (csi-lib-utils), so a
# driver started anew starts them anew too, rather than leave them to die at first use.
start_csi_storage() {
  apply_csi_objects
  if ! pid_alive csi-hostpath; then
    stop_daemon csi-resizer
    stop_daemon csi-provisioner
  fi
  start_csi_driver
  start_csi_sidecars
}
