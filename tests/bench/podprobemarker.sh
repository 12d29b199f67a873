#!/usr/bin/env bash
# The memory of one node's agent running a PodProbeMarker's probes (run
# `deploy/local/run.sh` first; needs root): one simulated node with its own agent process
# (deploy/local/sim-agents.sh), PODS pods of a native Deployment there, then:
#   1. idle: the agent's VmRSS and RssAnon (/proc/<pid>/status) and CPU time after IDLE
#      seconds with the pods running and nothing to probe;
#   2. probing: a PodProbeMarker selecting those pods, one exec probe each every PERIOD
#      seconds; once the node's NodePodProbe reports a result for every pod, PERIODS probe
#      periods more, then the same figures.
# The pods are kwok's and have no containers: every exec probe asks containerd for the
# pod's container, finds none and fails ("command could not run"). The agent still runs
# each probe on its period (its task, the containerd look-up, the threshold state machine,
# the result streamed once to the control plane); the CPU time it spends meanwhile is
# printed beside the idle one to show it. An exec probe is used because it leaves the
# machine no traffic: tcpSocket and httpGet probes would connect to kwok's made-up pod IPs.
# PREFIX and NS name the simulated node and the namespace (also the PodProbeMarker).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
PODS=${PODS:-100}
PERIOD=${PERIOD:-5}
PERIODS=${PERIODS:-6}
IDLE=${IDLE:-30}
PREFIX=${PREFIX:-probe-bench}
NS=${NS:-stevedore-bench-probes}
# shellcheck source=/dev/null
source <(deploy/local/cluster.sh env)
# shellcheck source=figures-lib.sh
source tests/bench/figures-lib.sh
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/stevedore/cargo-target}
V1=$STEVEDORE_REGISTRY/stevedore/web:v1
NODE=$PREFIX-000

cleanup() {
  kubectl delete namespace "$NS" --wait=true --timeout=300s >/dev/null 2>&1 || true
  deploy/local/sim-agents.sh down "$PREFIX" || true
}
trap cleanup EXIT

# field_kib FIELD: one field of the agent's /proc/<pid>/status, in KiB.
field_kib() { awk -v f="$1:" '$1 == f { print $2 }' "/proc/$AGENT_PID/status"; }
# cpu_seconds: the user and system CPU time the agent has used so far.
cpu_seconds() {
  awk -v hz="$(getconf CLK_TCK)" '{ sub(/^.*\) /, ""); printf "%.2f", ($12 + $13) / hz }' "/proc/$AGENT_PID/stat"
}
# probed: how many pods of the node's NodePodProbe have a result (any state) of the probe.
probed() {
  kubectl get nodepodprobe "$NODE" -o json 2>/dev/null |
    jq '[.status.podProbeStatuses[]? | select(any(.probeStates[]?; .lastProbeTime != null))] | length'
}
# probes_listed: how many pods the node's NodePodProbe asks its agent to probe.
probes_listed() {
  kubectl get nodepodprobe "$NODE" -o json 2>/dev/null | jq '[.spec.podProbes[]? | select(.probes | length > 0)] | length'
}

deploy/local/sim-agents.sh up 1 "$PREFIX"
AGENT_PID=$(<"$STEVEDORE_STATE_DIR/sim-agents/$PREFIX/$NODE.pid")
kubectl create namespace "$NS" >/dev/null

echo "== $PODS pods on $NODE, its agent idle for ${IDLE}s" >&2
kubectl apply -f - >/dev/null <<YAML
apiVersion: apps/v1
kind: Deployment
metadata: { name: probed, namespace: $NS }
spec:
  replicas: $PODS
  selector: { matchLabels: { app: probed } }
  template:
    metadata: { labels: { app: probed } }
    spec:
      nodeSelector: { stevedore.dev/simulated: $PREFIX }
      tolerations: [{ operator: Exists }]
      containers: [{ name: web, image: "$V1" }]
YAML
until [[ $(kubectl -n "$NS" get deployment probed -o jsonpath='{.status.readyReplicas}') == "$PODS" ]]; do sleep 0.5; done
cpu_start=$(cpu_seconds)
sleep "$IDLE"
idle_rss=$(field_kib VmRSS) idle_anon=$(field_kib RssAnon)
idle_cpu=$(awk -v a="$cpu_start" -v b="$(cpu_seconds)" 'BEGIN { printf "%.2f", b - a }')

echo "== a PodProbeMarker: one exec probe every ${PERIOD}s on each of the $PODS pods" >&2
kubectl apply -f - >/dev/null <<YAML
apiVersion: apps.kruise.io/v1alpha1
kind: PodProbeMarker
metadata: { name: probed, namespace: $NS }
spec:
  selector: { matchLabels: { app: probed } }
  probes:
    - name: alive
      containerName: web
      podConditionType: bench.stevedore.dev/alive
      probe:
        exec: { command: [/bin/true] }
        periodSeconds: $PERIOD
        timeoutSeconds: 1
YAML
start=$(date +%s)
until [[ $(probed) == "$PODS" ]]; do
  if (($(date +%s) - start > 300)); then
    echo "after 300 s the NodePodProbe lists $(probes_listed) pods and has results for $(probed), not $PODS" >&2
    exit 1
  fi
  sleep 1
done
first_s=$(($(date +%s) - start))
cpu_start=$(cpu_seconds)
window=$((PERIOD * PERIODS))
sleep "$window"
probe_rss=$(field_kib VmRSS) probe_anon=$(field_kib RssAnon)
probe_cpu=$(awk -v a="$cpu_start" -v b="$(cpu_seconds)" 'BEGIN { printf "%.2f", b - a }')
listed=$(probes_listed)
failed=$(kubectl get nodepodprobe "$NODE" -o json |
  jq '[.status.podProbeStatuses[]?.probeStates[]? | select(.state == "Failed")] | length')

cat <<EOF2
agent of one simulated node, $PODS pods there:
  idle (${IDLE}s):                    VmRSS ${idle_rss} KiB  RssAnon ${idle_anon} KiB  CPU ${idle_cpu}s
  probing ($PERIODS periods of ${PERIOD}s):      VmRSS ${probe_rss} KiB  RssAnon ${probe_anon} KiB  CPU ${probe_cpu}s in ${window}s
  probes pushed to the agent:        $listed pods; a result for every pod ${first_s}s after the marker
  probes Failed (no container):      $failed (exec on kwok's pods, which run nothing)
EOF2
bench_params podprobemarker PODS PERIOD PERIODS IDLE
bench_figure podprobemarker agent-vmrss-idle stevedore "$idle_rss" KiB
bench_figure podprobemarker agent-vmrss-probing stevedore "$probe_rss" KiB
bench_figure podprobemarker agent-rssanon-idle stevedore "$idle_anon" KiB
bench_figure podprobemarker agent-rssanon-probing stevedore "$probe_anon" KiB
bench_figure podprobemarker probed-pods stevedore "$listed" pods
