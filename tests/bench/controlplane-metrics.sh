# Sourced by the benchmarks. controlplane_metrics POD: the /metrics of control-plane
# replica POD, which listens on its pod's localhost only (--metrics-addr), read through
# `kubectl port-forward` to an ephemeral local port.
controlplane_metrics() {
  local out pf port="" rc=1
  out=$(mktemp)
  kubectl -n kube-system port-forward "pod/$1" :10354 >"$out" 2>/dev/null &
  pf=$!
  for _ in $(seq 1 100); do
    port=$(sed -n 's/^Forwarding from 127\.0\.0\.1:\([0-9]*\) .*/\1/p' "$out" | head -n1)
    [[ -n $port ]] && break
    sleep 0.1
  done
  if [[ -n $port ]] && curl -sf "http://127.0.0.1:$port/metrics"; then rc=0; fi
  kill "$pf" 2>/dev/null || true
  wait "$pf" 2>/dev/null || true
  rm -f "$out"
  return "$rc"
}
