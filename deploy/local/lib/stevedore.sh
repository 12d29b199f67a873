# Stevedore itself on the local cluster: the agent and the control plane binaries, each
# packaged as an OCI image (no Docker: umoci + skopeo), pushed to the local registry and
# run as the agent DaemonSet and the control-plane Deployment, plus a sample CloneSet.
# shellcheck shell=bash

REPO_ROOT=$(cd "$HERE/../.." && pwd)
CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$STEVEDORE_CACHE/cargo-target}
# Images are release builds unless asked otherwise: what a person runs and what benchmarks
# measure is the optimised binary. tests/run.sh asks for `dev` (debug) to keep CI short.
STEVEDORE_PROFILE=${STEVEDORE_PROFILE:-release}

# profile_dir PROFILE: the directory under the target dir where cargo puts that profile's
# binaries (the dev profile's is called debug).
profile_dir() {
  if [[ $1 == dev ]]; then echo debug; else echo "$1"; fi
}

ensure_cargo() {
  command -v cargo >/dev/null 2>&1 && return 0
  [[ -x $HOME/.cargo/bin/cargo ]] && { PATH=$HOME/.cargo/bin:$PATH; return 0; }
  die "cargo not found: install a Rust toolchain (rustup) to build Stevedore"
}

# must DESCRIPTION LOGFILE COMMAND...: runs COMMAND (a function is fine) in a subshell
# with errexit in force, output appended to LOGFILE, and dies naming DESCRIPTION and
# LOGFILE if it fails. (Under `( set -e; ... ) || die` bash ignores errexit inside.)
must() {
  local what=$1 logfile=$2 rc=0 errexit=+e
  shift 2
  [[ $- == *e* ]] && errexit=-e
  set +e
  (
    set -e
    "$@"
  ) >>"$logfile" 2>&1
  rc=$?
  set "$errexit"
  ((rc == 0)) || die "$what failed (log: $logfile)"
}

# cargo_progress: passes cargo's output through (to the build log) and, when fd 3 is open
# (build_image opens it on the terminal), shows its progress there: a line every 25 crates
# compiled and cargo's closing line, so a first build that takes minutes is seen moving.
cargo_progress() {
  if ! { true >&3; } 2>/dev/null; then
    cat
    return
  fi
  # Read line by line in bash: Debian's awk (mawk) reads a pipe in blocks, so its count
  # lagged the build by a hundred crates.
  local line compiled=0 words
  while IFS= read -r line; do
    printf '%s\n' "$line"
    read -ra words <<<"$line"
    case ${words[0]-} in
      Compiling)
        compiled=$((compiled + 1))
        ((compiled % 25 != 0)) || printf '    cargo: %d crates compiled (now %s %s)\n' \
          "$compiled" "${words[1]-}" "${words[2]-}" >&3
        ;;
      Finished) printf '    cargo: %s\n' "${line#"${line%%[![:space:]]*}"}" >&3 ;;
    esac
  done
}

# cargo_build: builds every binary Stevedore deploys (binaries.sh: the CSI driver, the
# agent, the control plane and the kubectl plugin) with STEVEDORE_PROFILE in one cargo
# invocation, whichever of them the caller needs, so the first call compiles the shared
# dependencies once and the later ones are no-ops. Under the target directory's image-build
# lock, which stays held (fd 9) until the caller's shell ends, so what it built is not
# swapped by another checkout's build before it is used.
cargo_build() {
  mkdir -p "$CARGO_TARGET_DIR"
  exec 9>"$CARGO_TARGET_DIR/.stevedore-image-build.lock"
  flock 9
  (cd "$REPO_ROOT" && CARGO_TARGET_DIR=$CARGO_TARGET_DIR cargo_build_binaries "$STEVEDORE_PROFILE") 2>&1 |
    cargo_progress
}

# compile_binaries: the CSI host-path driver's, the agent's, the control plane's and the
# kubectl plugin's binaries, nothing packaged or deployed; run.sh runs it beside `up`, so
# on a first run the Rust and Go builds overlap (each has long single-threaded phases that
# leave the other core idle). `up` starts the driver (csi.sh) once this build is done: its
# own cargo_build waits for the lock and then finds nothing to do.
compile_binaries() {
  local log=$STEVEDORE_CACHE/build-stevedore.log
  ensure_cargo
  mkdir -p "$STEVEDORE_CACHE"
  : >"$log"
  local what="the CSI driver, the agent, the control plane and the kubectl plugin"
  [[ $STEVEDORE_PROFILE != dev ]] || what+=" with every test (a dev build is the tests' build)"
  log "compiling $what ($STEVEDORE_PROFILE profile, one cargo invocation; a first release build compiles ~310 crates, about 10 min alone on 2 cores) beside the cluster's start (log: $log)"
  must "compiling Stevedore's binaries (cargo build of ${STEVEDORE_BINARIES[*]})" "$log" cargo_build 3>&2
  log "Stevedore's binaries are compiled"
}

# install_plugin: puts the `kubectl stevedore` plugin, built with the other binaries
# (cargo_build), on the PATH the env file sets ($STATE_DIR/bin), so kubectl finds it right
# after the run command.
install_plugin() {
  local built
  built=$CARGO_TARGET_DIR/$(profile_dir "$STEVEDORE_PROFILE")/kubectl-stevedore
  [[ -x $built ]] || die "the kubectl stevedore plugin was not built ($built is missing)"
  mkdir -p "$STATE_DIR/bin"
  ln -sfn "$built" "$STATE_DIR/bin/kubectl-stevedore"
  log "kubectl stevedore: installed at $STATE_DIR/bin/kubectl-stevedore ($STEVEDORE_PROFILE build); 'source $STATE_DIR/env' puts it on PATH, then: kubectl stevedore rollout status clone/sample"
}

# compile NAME BIN: builds Stevedore's binaries (cargo_build) and copies NAME's, stripped,
# to BIN. The target directory may be shared by several checkouts and cargo copies each
# build's binary to the same debug/NAME: a lock held from the build until the copy keeps a
# deploy from another checkout from swapping it in between.
compile() {
  local name=$1 bin=$2
  cargo_build
  # Release images carry no symbol table either (7 MiB less for the control plane; a
  # panic's backtrace then shows addresses only); debug images keep their symbols.
  local strip=--strip-all
  [[ $STEVEDORE_PROFILE == dev ]] && strip=--strip-debug
  objcopy "$strip" "$CARGO_TARGET_DIR/$(profile_dir "$STEVEDORE_PROFILE")/$name" "$bin"
}

# package BIN USER LAYOUT:TAG REF: an image of the binary BIN at /usr/local/bin (its
# entrypoint) with the glibc libraries it links and Debian's CA roots, run as USER
# (uid:gid), pushed to REF.
package() {
  local bin=$1 user=$2 image=$3 ref=$4 name
  name=$(basename "$bin")
  cd "$(dirname "$bin")"
  new_bundle "${image%:*}" base b
  install -D -m 0755 "$bin" "b/rootfs/usr/local/bin/$name"
  # The binary links glibc dynamically; ship exactly the libraries it needs.
  local lib
  for lib in $(ldd "$bin" | awk '/=>/ { print $3 } /^\t\/lib/ { print $1 }'); do
    if [[ -f $lib ]]; then install -D "$lib" "b/rootfs$lib"; fi
  done
  # Trust roots for servers with public certificates (registries served over TLS).
  install -D -m 0644 /etc/ssl/certs/ca-certificates.crt b/rootfs/etc/ssl/certs/ca-certificates.crt
  mkdir -p b/rootfs/tmp b/rootfs/etc
  echo 'root:x:0:0:root:/:/sbin/nologin' >b/rootfs/etc/passwd
  if [[ ${user%%:*} != 0 ]]; then
    echo "$name:x:${user%%:*}:${user#*:}:$name:/:/sbin/nologin" >>b/rootfs/etc/passwd
  fi
  umoci repack --image "$image" b
  umoci config --image "$image" --config.entrypoint "/usr/local/bin/$name" --config.user "$user"
  skopeo copy --quiet --dest-tls-verify=false "oci:$image" "docker://$ref"
}

# build_image COMPONENT USER: builds binary stevedore-COMPONENT, packages it as
# $REGISTRY/stevedore/COMPONENT running as USER (uid:gid) and prints the image reference.
# The tag is a digest of the image's inputs, so a rebuilt binary rolls its workload and an
# unchanged one changes nothing.
build_image() {
  local component=$1 user=$2
  local name=stevedore-$component repo=stevedore/$component
  local buildlog=$LOG_DIR/build-$component.log work bin tag ref
  ensure_cargo
  work=$(mktemp -d)
  bin=$work/$name
  : >"$buildlog"
  log "building the $component ($STEVEDORE_PROFILE profile; with every other binary in one cargo invocation, a no-op once 'cluster.sh compile' ran; log: $buildlog)"
  must "building the $component (cargo build -p $name)" "$buildlog" compile "$name" "$bin" 3>&2
  # Everything that goes into the image decides its tag.
  tag=$({ cat "$bin" /etc/ssl/certs/ca-certificates.crt "${BASH_SOURCE[0]}" && echo "$user"; } |
    sha256sum | cut -c1-16)
  ref=$REGISTRY/$repo:$tag
  if ! curl -sf -o /dev/null -H 'Accept: application/vnd.oci.image.manifest.v1+json' \
    "http://$REGISTRY/v2/$repo/manifests/$tag"; then
    must "packaging the $component image (umoci/skopeo)" "$buildlog" \
      package "$bin" "$user" "$work/layout:$tag" "$ref"
  fi
  rm -rf "$work"
  echo "$ref"
}

# apply_overlay DIR COMPONENT IMAGE: applies the kustomization DIR with the placeholder
# image 127.0.0.1:5000/stevedore/COMPONENT:latest replaced by IMAGE.
apply_overlay() {
  local dir=$1 component=$2 image=$3
  kubectl_admin kustomize "$dir" |
    sed "s|image: 127.0.0.1:5000/stevedore/$component:latest|image: $image|" |
    kubectl_admin apply -f - >>"$LOG_DIR/objects.log" 2>&1 ||
    die "applying the $component manifests failed (log: $LOG_DIR/objects.log)"
}

deploy_agent() {
  local image
  image=$(build_image agent 0:0)
  log "deploying the agent ($image)"
  apply_overlay "$REPO_ROOT/deploy/local/agent" agent "$image"
  wait_for "agent DaemonSet rollout" 180 "$LOG_DIR/objects.log" -- \
    kubectl_admin -n kube-system rollout status ds/stevedore-agent --timeout=5s
}

# deploy_crds: the generated CRDs, server-side (no last-applied annotation, which large
# schemas would overflow), then waits until the apiserver serves them.
deploy_crds() {
  log "applying the CRDs (deploy/crds)"
  kubectl_admin apply --server-side --force-conflicts --field-manager=stevedore-deploy \
    -f "$REPO_ROOT/deploy/crds" >>"$LOG_DIR/objects.log" 2>&1 ||
    die "applying the CRDs failed (log: $LOG_DIR/objects.log)"
  kubectl_admin wait --for=condition=Established --timeout=60s -f "$REPO_ROOT/deploy/crds" \
    >>"$LOG_DIR/objects.log" 2>&1 ||
    die "the CRDs in deploy/crds were not Established within 60s (log: $LOG_DIR/objects.log)"
}

# deploy_webhook_client_ca: the CA of the apiserver's webhook client certificate
# (certs.sh) as the ConfigMap kube-system/stevedore-webhook-client-ca, which the control
# plane trusts for its webhook's callers (deploy/local/controlplane).
deploy_webhook_client_ca() {
  apiserver_has_admission_config ||
    die "the apiserver runs without $ADMISSION_CONFIG, so it presents no client certificate to the webhook, which the control plane would then refuse to answer: run 'deploy/local/cluster.sh up' first (it restarts the apiserver only)"
  kubectl_admin -n kube-system create configmap stevedore-webhook-client-ca \
    --from-file=ca.crt="$PKI/webhook-client-ca.crt" --dry-run=client -o yaml |
    kubectl_admin apply -f - >>"$LOG_DIR/objects.log" 2>&1 ||
    die "applying the ConfigMap kube-system/stevedore-webhook-client-ca failed (log: $LOG_DIR/objects.log)"
}

deploy_controlplane() {
  local image holder
  image=$(build_image controlplane 65532:65532)
  deploy_crds
  deploy_webhook_client_ca
  # A cluster brought up before the kubelet node got its control-plane label gets it here.
  label_control_plane_node
  log "deploying the control plane ($image)"
  apply_overlay "$REPO_ROOT/deploy/local/controlplane" controlplane "$image"
  kubectl_admin -n kube-system rollout status deploy/stevedore-controlplane --timeout=180s \
    >>"$LOG_DIR/objects.log" 2>&1 || {
    kubectl_admin -n kube-system get pods -l app.kubernetes.io/name=stevedore-controlplane \
      -o wide >&2 || true
    die "the control-plane Deployment did not roll out within 180s (kubectl -n kube-system describe deploy/stevedore-controlplane; log: $LOG_DIR/objects.log)"
  }
  wait_for "control-plane leader election" 60 "$LOG_DIR/objects.log" -- controlplane_leader
  holder=$(controlplane_leader)
  log "control-plane leader: $holder (kubectl -n kube-system get lease stevedore-controlplane)"
}

# controlplane_leader: prints the holder of the control plane's Lease; fails while there
# is none or it names a pod that is gone or terminating (a replica the rollout replaced).
controlplane_leader() {
  local holder
  holder=$(kubectl_admin -n kube-system get lease stevedore-controlplane \
    -o jsonpath='{.spec.holderIdentity}' 2>/dev/null) && [[ -n $holder ]] || return 1
  [[ -z $(kubectl_admin -n kube-system get pod "$holder" \
    -o jsonpath='{.metadata.deletionTimestamp}' 2>/dev/null || echo gone) ]] || return 1
  echo "$holder"
}

# deploy_samples: workloads to look at (deploy/samples); they get pods once the
# reconcilers run.
deploy_samples() {
  log "applying the sample CloneSet (default/sample)"
  kubectl_admin apply -f "$REPO_ROOT/deploy/samples" >>"$LOG_DIR/objects.log" 2>&1 ||
    die "applying deploy/samples failed (log: $LOG_DIR/objects.log)"
}
