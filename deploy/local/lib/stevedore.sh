# Stevedore itself on the local cluster: the agent binary packaged as an OCI image (no
# Docker: umoci + skopeo), pushed to the local registry and run as the DaemonSet.
# shellcheck shell=bash

REPO_ROOT=$(cd "$HERE/../.." && pwd)
CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$STEVEDORE_CACHE/cargo-target}

ensure_cargo() {
  command -v cargo >/dev/null 2>&1 && return 0
  [[ -x $HOME/.cargo/bin/cargo ]] && { PATH=$HOME/.cargo/bin:$PATH; return 0; }
  die "cargo not found: install a Rust toolchain (rustup) to build the agent"
}

# build_agent_image: prints the image reference; the tag is a digest of the image's inputs
# so a rebuilt agent rolls the DaemonSet and an unchanged one changes nothing.
build_agent_image() {
  ensure_cargo
  local buildlog=$LOG_DIR/build-agent.log
  (cd "$REPO_ROOT" && CARGO_TARGET_DIR=$CARGO_TARGET_DIR cargo build --locked -p stevedore-agent) \
    >"$buildlog" 2>&1 || die "building the agent failed (command: cargo build -p stevedore-agent; log: $buildlog)"
  local work bin tag ref
  work=$(mktemp -d)
  bin=$work/stevedore-agent
  objcopy --strip-debug "$CARGO_TARGET_DIR/debug/stevedore-agent" "$bin"
  # Everything that goes into the image decides its tag.
  tag=$(cat "$bin" /etc/ssl/certs/ca-certificates.crt "${BASH_SOURCE[0]}" | sha256sum | cut -c1-16)
  ref=$REGISTRY/stevedore/agent:$tag
  if ! curl -sf -o /dev/null -H 'Accept: application/vnd.oci.image.manifest.v1+json' \
    "http://$REGISTRY/v2/stevedore/agent/manifests/$tag"; then
    (
      set -e
      cd "$work"
      new_bundle "$work/layout" base b
      install -D -m 0755 "$bin" b/rootfs/usr/local/bin/stevedore-agent
      # The binary links glibc dynamically; ship exactly the libraries it needs.
      ldd "$bin" | awk '/=>/ { print $3 } /^\t\/lib/ { print $1 }' | while read -r lib; do
        [[ -f $lib ]] && install -D "$lib" "b/rootfs$lib"
      done
      # Trust roots for registries served over TLS (from Debian's ca-certificates).
      install -D -m 0644 /etc/ssl/certs/ca-certificates.crt b/rootfs/etc/ssl/certs/ca-certificates.crt
      mkdir -p b/rootfs/tmp b/rootfs/etc
      echo 'root:x:0:0:root:/:/sbin/nologin' >b/rootfs/etc/passwd
      umoci repack --image "$work/layout:$tag" b
      umoci config --image "$work/layout:$tag" --config.entrypoint /usr/local/bin/stevedore-agent
      skopeo copy --quiet --dest-tls-verify=false "oci:$work/layout:$tag" "docker://$ref"
    ) >>"$buildlog" 2>&1 || die "packaging the agent image failed (umoci/skopeo; log: $buildlog)"
  fi
  rm -rf "$work"
  echo "$ref"
}

deploy_agent() {
  local image
  image=$(build_agent_image)
  log "deploying the agent ($image)"
  kubectl_admin -n kube-system create secret tls stevedore-agent-tls \
    --cert="$PKI/agent-serving.crt" --key="$PKI/agent-serving.key" --dry-run=client -o yaml |
    kubectl_admin apply -f - >>"$LOG_DIR/objects.log" 2>&1 ||
    die "creating Secret kube-system/stevedore-agent-tls failed (log: $LOG_DIR/objects.log)"
  # The manifests name the image 127.0.0.1:5000/stevedore/agent:latest; run the one just built.
  kubectl_admin kustomize "$REPO_ROOT/deploy/local/agent" |
    sed "s|image: 127.0.0.1:5000/stevedore/agent:latest|image: $image|" |
    kubectl_admin apply -f - >>"$LOG_DIR/objects.log" 2>&1 ||
    die "applying the agent manifests failed (log: $LOG_DIR/objects.log)"
  wait_for "agent DaemonSet rollout" 180 "$LOG_DIR/objects.log" -- \
    kubectl_admin -n kube-system rollout status ds/stevedore-agent --timeout=5s
}
