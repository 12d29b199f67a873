# Host networking for the local cluster. Everything lives in 198.18.0.0/15 (RFC 2544,
# reserved for benchmarking) on a bridge this script creates, so no cluster traffic is ever
# routed off the machine: node IP, pod CIDR and service CIDR all resolve to local devices.
# shellcheck shell=bash

HOST_BRIDGE=stevedore0        # holds the node IP; kubelet refuses a loopback node IP
NODE_IP=198.18.0.1
HOST_CIDR=198.18.0.1/15       # routes the whole range to the local bridge
POD_CIDR=198.18.128.0/24      # real pods on the kubelet node (CNI bridge + host-local)
POD_BRIDGE=stevedore-cni0
KWOK_POD_CIDR=198.18.192.0/20 # pod IPs kwok hands out on simulated nodes
SIM_NODE_IP=198.18.0.2        # every simulated node's InternalIP (kwok nodeIP)
SERVICE_CIDR=198.19.0.0/24
SERVICE_APISERVER_IP=198.19.0.1
GUARD_CHAIN=STEVEDORE-LOCAL

setup_network() {
  if ! ip link show "$HOST_BRIDGE" >/dev/null 2>&1; then
    ip link add "$HOST_BRIDGE" type bridge || die "ip link add $HOST_BRIDGE type bridge failed"
  fi
  # Not `ip addr | grep -q`: under pipefail, grep exiting at the first match can kill
  # `ip` with SIGPIPE and make the check fail although the address is there.
  grep -q "inet $HOST_CIDR" <<<"$(ip addr show dev "$HOST_BRIDGE")" ||
    ip addr add "$HOST_CIDR" dev "$HOST_BRIDGE" || die "cannot add $HOST_CIDR to $HOST_BRIDGE"
  # The simulated nodes' IP is local too, so agents for simulated nodes (sim-agents.sh)
  # can listen on it and the control plane reaches them as it reaches any node.
  grep -q "inet $SIM_NODE_IP/32" <<<"$(ip addr show dev "$HOST_BRIDGE")" ||
    ip addr add "$SIM_NODE_IP/32" dev "$HOST_BRIDGE" || die "cannot add $SIM_NODE_IP to $HOST_BRIDGE"
  ip link set "$HOST_BRIDGE" up
  sysctl -qw net.ipv4.ip_forward=1
  sysctl -qw net.bridge.bridge-nf-call-iptables=1 2>/dev/null || true
  # Pods may talk to each other, the node and services, never to anything off the machine.
  if ! iptables -n -L "$GUARD_CHAIN" >/dev/null 2>&1; then
    iptables -N "$GUARD_CHAIN"
    iptables -A "$GUARD_CHAIN" -s "$POD_CIDR" ! -d 198.18.0.0/15 -j DROP
    iptables -I FORWARD -j "$GUARD_CHAIN"
  fi
  write_cni_config
}

write_cni_config() {
  install_cni_config "$STATE_DIR/cni" "$POD_CIDR"
}

# install_cni_config DIR CIDR: DIR/net.d/10-stevedore.conflist, a bridge network handing
# out CIDR (addresses kept in DIR/networks). Every node's bridge has the same name: each
# real worker node has a network namespace of its own (lib/nodes.sh).
install_cni_config() {
  local dir=$1 cidr=$2
  mkdir -p "$dir/net.d" "$dir/networks"
  local conf="$dir/net.d/10-stevedore.conflist"
  # containerd reloads the file on every write event: written in place, it reads a
  # truncated file while pods start ("unexpected end of JSON input"). So the config is
  # written next to the watched directory and renamed into it only when it changed.
  local staged="$dir/10-stevedore.conflist.staged"
  cat >"$staged" <<JSON
{
  "cniVersion": "1.0.0",
  "name": "stevedore",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$POD_BRIDGE",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "$dir/networks",
        "ranges": [[{ "subnet": "$cidr" }]],
        "routes": [{ "dst": "0.0.0.0/0" }]
      }
    },
    { "type": "portmap", "capabilities": { "portMappings": true } }
  ]
}
JSON
  if cmp -s "$staged" "$conf"; then
    rm -f "$staged"
  else
    mv -f "$staged" "$conf"
  fi
}

teardown_network() {
  ip link del "$POD_BRIDGE" 2>/dev/null || true
  ip link del "$HOST_BRIDGE" 2>/dev/null || true
  if iptables -n -L "$GUARD_CHAIN" >/dev/null 2>&1; then
    iptables -D FORWARD -j "$GUARD_CHAIN" 2>/dev/null || true
    iptables -F "$GUARD_CHAIN"
    iptables -X "$GUARD_CHAIN"
  fi
}
