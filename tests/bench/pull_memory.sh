#!/usr/bin/env bash
# Agent peak memory when a registry sends oversized documents (needs the local cluster's
# containerd, `deploy/local/run.sh`, and root). A fake registry on loopback serves
#   bigconfig:v1 - a manifest whose config blob is 64 MiB,
#   chunked:v1   - a 64 MiB manifest sent with chunked encoding (no Content-Length);
# for each, a fresh release agent (own socket and ports) pulls it once and the script
# prints the agent's VmHWM (peak RSS) before and after the pull. A bounded agent refuses
# both and stays near its idle peak.
#   AGENT_BIN=path  measure that binary instead of building the release agent.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
# shellcheck source=/dev/null
source <(deploy/local/cluster.sh env)
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/stevedore/cargo-target}
WORK=$(mktemp -d /tmp/stevedore-bench-memory.XXXXXX)
SOCK=$WORK/agent.sock
CTR=(ctr --address "$STEVEDORE_CONTAINERD_SOCK" -n k8s.io)
SIZE_MIB=${SIZE_MIB:-64}
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT

if [[ -z ${AGENT_BIN:-} ]]; then
  # The deployed images' build (one invocation for all binaries: lib/binaries.sh).
  (source deploy/local/lib/binaries.sh && cargo_build_binaries release -q)
  AGENT_BIN=$CARGO_TARGET_DIR/release/stevedore-agent
fi

cat >"$WORK/registry.py" <<'EOF'
import hashlib, http.server, json, sys
MIB = 1 << 20
size = int(sys.argv[1]) * MIB
config = b'{"architecture":"amd64","os":"linux","rootfs":{"type":"layers","diff_ids":[]},"pad":"'
config += b"a" * (size - len(config) - 2) + b'"}'
config_digest = "sha256:" + hashlib.sha256(config).hexdigest()
manifest = json.dumps({"schemaVersion": 2,
    "mediaType": "application/vnd.oci.image.manifest.v1+json",
    "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
               "digest": config_digest, "size": len(config)},
    "layers": []}).encode()

class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *args): pass
    def send(self, body, content_type):
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def do_GET(self):
        try:
            if self.path == "/v2/bench/bigconfig/manifests/v1":
                self.send(manifest, "application/vnd.oci.image.manifest.v1+json")
            elif self.path == "/v2/bench/bigconfig/blobs/" + config_digest:
                self.send(config, "application/octet-stream")
            elif self.path == "/v2/bench/chunked/manifests/v1":
                self.send_response(200)
                self.send_header("Content-Type", "application/vnd.oci.image.manifest.v1+json")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                chunk = b" " * MIB
                for _ in range(size // MIB):
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                self.wfile.write(b"0\r\n\r\n")
            else:
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()
        except (BrokenPipeError, ConnectionResetError):
            pass

server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
EOF
python3 "$WORK/registry.py" "$SIZE_MIB" >"$WORK/port" &
PIDS+=($!)
for _ in $(seq 1 100); do [[ -s $WORK/port ]] && break; sleep 0.2; done
REGISTRY=127.0.0.1:$(head -n1 "$WORK/port")

hwm_kib() { awk '/^VmHWM:/ { print $2 }' "/proc/$1/status"; }

# measure NAME: a fresh agent pulls $REGISTRY/bench/NAME:v1 once; prints its peak RSS.
measure() {
  local image=$REGISTRY/bench/$1:v1 agent idle peak answer
  rm -f "$SOCK"
  "$AGENT_BIN" --node-name "$STEVEDORE_NODE_NAME" \
    --containerd-socket "$STEVEDORE_CONTAINERD_SOCK" --grpc-addr 127.0.0.1:11360 \
    --admin-addr 127.0.0.1:11361 --unix-socket "$SOCK" >"$WORK/agent-$1.log" 2>&1 &
  agent=$!
  PIDS+=("$agent")
  for _ in $(seq 1 100); do [[ -S $SOCK ]] && break; sleep 0.2; done
  sleep 1
  idle=$(hwm_kib "$agent")
  answer=$("$STEVEDORE_GRPCURL" -plaintext -max-time 300 \
    -d "{\"image\":\"$image\",\"pull_policy\":\"PULL_POLICY_ALWAYS\"}" \
    "unix://$SOCK" stevedore.agent.v1.ImageService/PullImage 2>&1 | tail -n 3 | tr '\n' ' ') || true
  peak=$(hwm_kib "$agent")
  kill "$agent"
  wait "$agent" 2>/dev/null || true
  printf '%-10s peak RSS %6d KiB before the pull, %6d KiB after (+%d KiB)\n' \
    "$1" "$idle" "$peak" $((peak - idle))
  printf '           agent answered: %s\n' "${answer:0:300}"
  remove_image "$image"
}

# A pull that went through leaves records (tag, repo digest, image ID) and a 64 MiB blob:
# remove every record naming the same manifest, then GC takes the content (--sync).
remove_image() {
  local digest names
  digest=$("${CTR[@]}" images ls | awk -v r="$1" '$1 == r { print $3 }' | head -n1)
  [[ -z $digest ]] && return 0
  names=$("${CTR[@]}" images ls | awk -v d="$digest" '$3 == d { print $1 }')
  # shellcheck disable=SC2086
  "${CTR[@]}" images rm --sync $names >/dev/null
}

echo "== agent peak RSS, ${SIZE_MIB} MiB documents from $REGISTRY ($AGENT_BIN)"
measure bigconfig
measure chunked
