# kwok manages simulated nodes (annotated kwok.x-k8s.io/node=fake) next to the real kubelet.
# shellcheck shell=bash

KWOK_NODE_PREFIX=kwok-node-
KWOK_NODE_IP=$SIM_NODE_IP
# Node Leases renewed at once. Each kubelet renews its own Lease every 10 s (a quarter of the
# 40 s duration), so a real cluster of N nodes has N renewals in flight; kwok's default of 4
# renews 2,000 Leases too slowly when the apiserver is busy: in the scale benchmark they fell
# 83 s behind, past kube-controller-manager's 50 s grace period, which then marked the nodes
# Unknown and their pods NotReady (pods that stayed NotReady, so 5,000 pods never settled).
KWOK_NODE_LEASE_PARALLELISM=64

# with_container_resources: kwok's pod-ready stage, with each running container reporting the
# resources of its spec as a kubelet does (`containerStatuses[].resources`). The apiserver
# refuses a pod's `resize` unless its running containers report them ("Pod running on node
# without support for resize"), so simulated pods can be resized in place like real ones.
with_container_resources() {
  awk '
    !done && /startedAt: \{\{ \$now \| Quote \}\}/ {
      print
      print "        {{ with .resources }}"
      print "        resources:"
      print "          {{ YAML . 2 }}"
      print "        {{ end }}"
      done = 1
      next
    }
    { print }'
}

# The stage definitions this kwok release needs, taken from its own module source.
write_kwok_config() {
  local src
  src=$(cd "$STEVEDORE_CACHE/src/kwok-$KWOK_VERSION" && go list -m -f '{{.Dir}}' sigs.k8s.io/kwok) ||
    die "cannot locate the sigs.k8s.io/kwok@$KWOK_VERSION module source for its stages"
  local stages=$src/kustomize/stage
  {
    cat <<YAML
apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokConfiguration
options:
  manageAllNodes: false
  manageNodesWithAnnotationSelector: kwok.x-k8s.io/node=fake
  cidr: $KWOK_POD_CIDR
  nodeIP: $KWOK_NODE_IP
  nodeLeaseDurationSeconds: 40
  nodeLeaseParallelism: $KWOK_NODE_LEASE_PARALLELISM
  serverAddress: 127.0.0.1:10247
YAML
    local f
    for f in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
      pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
      printf -- '---\n'
      if [[ $f == pod/fast/pod-ready.yaml ]]; then
        with_container_resources <"$stages/$f"
      else
        cat "$stages/$f"
      fi
    done
    for f in "$HERE"/kwok/*.yaml; do
      printf -- '---\n'
      cat "$f"
    done
  } >"$STATE_DIR/kwok.yaml.new"
  # A running kwok reads its stages at start only: restart it when they changed.
  if ! cmp -s "$STATE_DIR/kwok.yaml.new" "$STATE_DIR/kwok.yaml" 2>/dev/null; then
    stop_daemon kwok
  fi
  mv "$STATE_DIR/kwok.yaml.new" "$STATE_DIR/kwok.yaml"
}

start_kwok() {
  write_kwok_config
  pid_alive kwok || require_port kwok 10247
  start_daemon kwok -- "$KWOK_BIN/kwok" --kubeconfig="$STATE_DIR/kubeconfig" \
    --config="$STATE_DIR/kwok.yaml"
  wait_for kwok 60 "$LOG_DIR/kwok.log" -- curl -sf http://127.0.0.1:10247/healthz
}

# ensure_fake_nodes N: at least N simulated nodes exist and are Ready.
ensure_fake_nodes() {
  local count=$1 i name
  ((count > 0)) || return 0
  build_kwok
  start_kwok
  for ((i = 0; i < count; i++)); do
    name=$KWOK_NODE_PREFIX$i
    kubectl_admin apply -f - >>"$LOG_DIR/objects.log" 2>&1 <<YAML || die "creating simulated node $name failed (log: $LOG_DIR/objects.log)"
apiVersion: v1
kind: Node
metadata:
  name: $name
  annotations:
    kwok.x-k8s.io/node: fake
  labels:
    kubernetes.io/hostname: $name
    kubernetes.io/os: linux
    kubernetes.io/arch: amd64
    type: kwok
spec:
  taints:
  - key: kwok.x-k8s.io/node
    value: fake
    effect: NoSchedule
YAML
  done
  for ((i = 0; i < count; i++)); do
    wait_for "simulated node $KWOK_NODE_PREFIX$i Ready" 60 "$LOG_DIR/kwok.log" -- \
      kubectl_admin wait --for=condition=Ready "node/$KWOK_NODE_PREFIX$i" --timeout=5s
  done
}
