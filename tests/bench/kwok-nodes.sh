# Sourced by the benchmarks that need simulated nodes: kwok runs their pods (Ready at once,
# no containers), and the taint keeps every other pod off them.

# make_kwok_nodes PREFIX COUNT: COUNT kwok nodes named PREFIX-000, PREFIX-001, ... (four
# digits from 1,000 nodes up), labelled stevedore.dev/bench=PREFIX and type=kwok; returns
# once all of them are Ready.
make_kwok_nodes() {
  local prefix=$1 count=$2 width=3 i
  ((count <= 1000)) || width=${#count}
  for ((i = 0; i < count; i++)); do
    cat <<YAML
---
apiVersion: v1
kind: Node
metadata:
  name: $(printf '%s-%0*d' "$prefix" "$width" "$i")
  annotations: { kwok.x-k8s.io/node: fake }
  labels: { stevedore.dev/bench: $prefix, type: kwok, kubernetes.io/os: linux }
spec:
  taints: [{ key: kwok.x-k8s.io/node, value: fake, effect: NoSchedule }]
YAML
  done | kubectl apply -f - >/dev/null
  # A count of Ready ones, not `kubectl wait`, which takes a watch per node in turn (8 min
  # for 2,000 nodes that were all Ready).
  until (($(kubectl get nodes -l "stevedore.dev/bench=$prefix" --no-headers | awk '$2 == "Ready"' | wc -l) == count)); do
    sleep 2
  done
}
