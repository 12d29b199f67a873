# Builds the pinned upstream binaries with Go from the module proxy into the cache.
# shellcheck shell=bash

K8S_BIN=$STEVEDORE_CACHE/k8s-$K8S_VERSION/bin
KWOK_BIN=$STEVEDORE_CACHE/kwok-$KWOK_VERSION/bin
GRPCURL_BIN=$STEVEDORE_CACHE/grpcurl-$GRPCURL_VERSION/bin
CRICTL_BIN=$STEVEDORE_CACHE/crictl-$CRICTL_VERSION/bin
HELM_BIN=$STEVEDORE_CACHE/helm-$HELM_VERSION/bin
CSI_PROVISIONER_BIN=$STEVEDORE_CACHE/csi-provisioner-$CSI_PROVISIONER_VERSION/bin
CSI_RESIZER_BIN=$STEVEDORE_CACHE/csi-resizer-$CSI_RESIZER_VERSION/bin
CONTAINERD2_BIN=$STEVEDORE_CACHE/containerd-$CONTAINERD2_VERSION/bin
K8S_COMPONENTS=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl)

# Kubernetes 1.34 and etcd 3.6 need Go >= 1.24 (newer toolchains build them fine).
MIN_GO_MINOR=24

ensure_go() {
  if ! command -v go >/dev/null 2>&1; then
    if [[ -x /usr/local/go/bin/go ]]; then
      PATH=/usr/local/go/bin:$PATH
    else
      log "no Go toolchain found; installing Debian's golang-go"
      apt_install golang-go
    fi
  fi
  local minor
  minor=$(go env GOVERSION | sed -n 's/^go1\.\([0-9]*\).*/\1/p')
  ((${minor:-0} >= MIN_GO_MINOR)) ||
    die "Go $(go env GOVERSION) is too old to build Kubernetes $K8S_VERSION (needs go1.$MIN_GO_MINOR or newer on PATH)"
}

# prepare_k8s_module DIR: a tiny Go module that requires k8s.io/kubernetes at the pinned release and
# replaces every staging module it requires at v0.0.0 with the matching v0.X.Y tag.
prepare_k8s_module() {
  local dir=$1 minor staging_version gomod
  minor=${K8S_VERSION#v1.}
  staging_version=v0.$minor
  mkdir -p "$dir"
  (
    cd "$dir" || exit 1
    export GOFLAGS=-mod=mod
    [[ -f go.mod ]] || go mod init stevedore.local/k8s-build >/dev/null 2>&1
    gomod=$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
    [[ -f $gomod ]] || { echo "cannot download k8s.io/kubernetes@$K8S_VERSION go.mod" >&2; exit 1; }
    local -a edits=(-require="k8s.io/kubernetes@$K8S_VERSION")
    local mod
    # Every `k8s.io/<name> v0.0.0` line of that release's go.mod is a staging module.
    while read -r mod; do
      edits+=(-replace="$mod=$mod@$staging_version")
    done < <(awk '$1 ~ /^k8s\.io\// && $2 == "v0.0.0" { print $1 }' "$gomod" | sort -u)
    go mod edit "${edits[@]}"
    # Mirror the release's own godebug setting and Go language version.
    go mod edit -go="$(awk '$1 == "go" { print $2; exit }' "$gomod")"
    cat >tools.go <<'GO'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubelet"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
GO
    go mod tidy -e >/dev/null 2>&1 || go mod tidy
  )
}

k8s_ldflags() {
  local minor=${K8S_VERSION#v1.}
  minor=${minor%%.*}
  # The release's tag time from the module proxy keeps the build reproducible; the proxy
  # does not carry the commit hash, so gitCommit stays empty rather than "$Format:%H$".
  local date info
  info=$(go env GOMODCACHE)/cache/download/k8s.io/kubernetes/@v/$K8S_VERSION.info
  date=$(sed -n 's/.*"Time":"\([^"]*\)".*/\1/p' "$info" 2>/dev/null)
  date=${date:-1970-01-01T00:00:00Z}
  local flags="-s -w"
  local pkg
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    flags+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
    flags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$date -X $pkg.gitCommit="
  done
  echo "$flags"
}

build_k8s() {
  local c missing=0
  for c in "${K8S_COMPONENTS[@]}" etcd pause; do
    [[ -x $K8S_BIN/$c ]] || missing=1
  done
  ((missing)) || return 0
  ensure_go
  local src=$STEVEDORE_CACHE/src/k8s-$K8S_VERSION tmp=$K8S_BIN.tmp buildlog=$STEVEDORE_CACHE/build-k8s-$K8S_VERSION.log
  log "building Kubernetes $K8S_VERSION and etcd from source with Go, first run only: about 16 min on 2 cores (log: $buildlog)"
  rm -rf "$tmp"
  mkdir -p "$tmp"
  (
    set -e
    prepare_k8s_module "$src" || exit 1
    cd "$src" || exit 1
    local -a pkgs=()
    for c in "${K8S_COMPONENTS[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$c"); done
    CGO_ENABLED=0 go build -trimpath -ldflags "$(k8s_ldflags)" -o "$tmp/" "${pkgs[@]}" || exit 1
    build_etcd "$src" "$tmp" || exit 1
    build_pause "$src" "$tmp" || exit 1
  ) >"$buildlog" 2>&1 || die "building Kubernetes $K8S_VERSION failed (command: go build in $src; log: $buildlog)"
  rm -rf "$K8S_BIN"
  mv "$tmp" "$K8S_BIN"
  log "Kubernetes binaries ready in $K8S_BIN"
}

# etcd at the version that release's integration tests use (hack/lib/etcd.sh).
build_etcd() {
  local k8s_src=$1 out=$2 dir etcd_version kdir
  kdir=$(cd "$k8s_src" && go list -m -f '{{.Dir}}' k8s.io/kubernetes)
  etcd_version=$(sed -n 's/^ETCD_VERSION=\${ETCD_VERSION:-\(.*\)}$/\1/p' "$kdir/hack/lib/etcd.sh")
  [[ -n $etcd_version ]] || { echo "cannot read ETCD_VERSION from $kdir/hack/lib/etcd.sh"; return 1; }
  echo "etcd version: $etcd_version"
  dir=$STEVEDORE_CACHE/src/etcd-v$etcd_version
  mkdir -p "$dir"
  (
    cd "$dir" || exit 1
    export GOFLAGS=-mod=mod
    [[ -f go.mod ]] || go mod init stevedore.local/etcd-build
    go mod edit -require="go.etcd.io/etcd/server/v3@v$etcd_version"
    printf '//go:build tools\n\npackage tools\n\nimport _ "go.etcd.io/etcd/server/v3"\n' >tools.go
    go mod tidy
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$out/etcd" go.etcd.io/etcd/server/v3
  )
}

# The sandbox image's pause binary, compiled from the release's own build/pause/linux/pause.c.
build_pause() {
  local k8s_src=$1 out=$2 kdir
  kdir=$(cd "$k8s_src" && go list -m -f '{{.Dir}}' k8s.io/kubernetes)
  cc -Os -Wall -Werror -static -DVERSION="v$PAUSE_TAG-stevedore" -o "$out/pause" "$kdir/build/pause/linux/pause.c"
}

build_kwok() {
  [[ -x $KWOK_BIN/kwok ]] && return 0
  ensure_go
  local dir=$STEVEDORE_CACHE/src/kwok-$KWOK_VERSION buildlog=$STEVEDORE_CACHE/build-kwok-$KWOK_VERSION.log
  log "building kwok $KWOK_VERSION (first run only; log: $buildlog)"
  mkdir -p "$dir" "$KWOK_BIN.tmp"
  (
    cd "$dir" || exit 1
    export GOFLAGS=-mod=mod
    [[ -f go.mod ]] || go mod init stevedore.local/kwok-build
    go mod edit -require="sigs.k8s.io/kwok@$KWOK_VERSION"
    printf '//go:build tools\n\npackage tools\n\nimport _ "sigs.k8s.io/kwok/cmd/kwok"\n' >tools.go
    go mod tidy
    CGO_ENABLED=0 go build -trimpath \
      -ldflags "-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=$KWOK_VERSION" \
      -o "$KWOK_BIN.tmp/kwok" sigs.k8s.io/kwok/cmd/kwok
  ) >"$buildlog" 2>&1 || die "building kwok $KWOK_VERSION failed (command: go build sigs.k8s.io/kwok/cmd/kwok in $dir; log: $buildlog)"
  rm -rf "$KWOK_BIN"
  mv "$KWOK_BIN.tmp" "$KWOK_BIN"
}

build_grpcurl() {
  [[ -x $GRPCURL_BIN/grpcurl ]] && return 0
  ensure_go
  local buildlog=$STEVEDORE_CACHE/build-grpcurl-$GRPCURL_VERSION.log
  log "building grpcurl $GRPCURL_VERSION (first run only; log: $buildlog)"
  mkdir -p "$GRPCURL_BIN"
  GOBIN=$GRPCURL_BIN CGO_ENABLED=0 go install -trimpath -ldflags "-s -w -X main.version=$GRPCURL_VERSION" \
    "github.com/fullstorydev/grpcurl/cmd/grpcurl@$GRPCURL_VERSION" >"$buildlog" 2>&1 ||
    die "building grpcurl failed (command: go install github.com/fullstorydev/grpcurl/cmd/grpcurl@$GRPCURL_VERSION; log: $buildlog)"
}

build_crictl() {
  [[ -x $CRICTL_BIN/crictl ]] && return 0
  ensure_go
  local buildlog=$STEVEDORE_CACHE/build-crictl-$CRICTL_VERSION.log
  log "building crictl $CRICTL_VERSION (first run only; log: $buildlog)"
  mkdir -p "$CRICTL_BIN"
  GOBIN=$CRICTL_BIN CGO_ENABLED=0 go install -trimpath -ldflags "-s -w" \
    "sigs.k8s.io/cri-tools/cmd/crictl@$CRICTL_VERSION" >"$buildlog" 2>&1 ||
    die "building crictl failed (command: go install sigs.k8s.io/cri-tools/cmd/crictl@$CRICTL_VERSION; log: $buildlog)"
}

build_helm() {
  [[ -x $HELM_BIN/helm ]] && return 0
  ensure_go
  local buildlog=$STEVEDORE_CACHE/build-helm-$HELM_VERSION.log
  log "building helm $HELM_VERSION (first run only; log: $buildlog)"
  mkdir -p "$HELM_BIN.tmp"
  (
    set -e
    # As helm's Makefile: its version, and the Kubernetes version `helm template` and
    # `helm lint` assume (that of its client-go, v0.X -> 1.X; else they assume 1.20).
    gomod=$(go mod download -json "helm.sh/helm/v3@$HELM_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
    minor=$(awk '$1 == "k8s.io/client-go" { split($2, v, "."); print v[2] }' "$gomod")
    [[ -n $minor ]] || { echo "cannot read helm's k8s.io/client-go version from $gomod"; exit 1; }
    flags="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
    for pkg in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
      flags+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$minor"
    done
    GOBIN=$HELM_BIN.tmp CGO_ENABLED=0 go install -trimpath -ldflags "$flags" \
      "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
  ) >"$buildlog" 2>&1 ||
    die "building helm failed (command: go install helm.sh/helm/v3/cmd/helm@$HELM_VERSION; log: $buildlog)"
  rm -rf "$HELM_BIN"
  mv "$HELM_BIN.tmp" "$HELM_BIN"
}

# build_csi_sidecar NAME MODULE VERSION BIN_DIR: a kubernetes-csi sidecar's command, built in
# its module's own directory: `go install module@version` refuses modules whose go.mod has
# replace directives, as these have (k8s.io staging modules).
build_csi_sidecar() {
  local name=$1 module=$2 version=$3 bin=$4
  [[ -x $bin/$name ]] && return 0
  ensure_go
  local buildlog=$STEVEDORE_CACHE/build-$name-$version.log
  log "building $name $version (first run only; log: $buildlog)"
  rm -rf "$bin.tmp"
  mkdir -p "$bin.tmp"
  (
    set -e
    dir=$(go mod download -json "$module@$version" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
    [[ -d $dir ]] || { echo "cannot download $module@$version"; exit 1; }
    cd "$dir"
    GOFLAGS=-mod=readonly CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=$version" \
      -o "$bin.tmp/$name" "./cmd/$name"
  ) >"$buildlog" 2>&1 ||
    die "building $name failed (command: go build ./cmd/$name in the module $module@$version; log: $buildlog)"
  rm -rf "$bin"
  mv "$bin.tmp" "$bin"
}

# The CSI sidecars the local cluster's host-path driver runs with (csi.sh).
build_csi_sidecars() {
  build_csi_sidecar csi-provisioner github.com/kubernetes-csi/external-provisioner/v5 \
    "$CSI_PROVISIONER_VERSION" "$CSI_PROVISIONER_BIN"
  build_csi_sidecar csi-resizer github.com/kubernetes-csi/external-resizer \
    "$CSI_RESIZER_VERSION" "$CSI_RESIZER_BIN"
}

# containerd 2.x, its runc shim and ctr, from its Go module as its Makefile builds them
# (version stamped by -X, the shim without gRPC). Pure Go: the btrfs snapshotter needs cgo
# and is left out, as are devmapper and zfs, which the local cluster disables anyway.
build_containerd2() {
  [[ -x $CONTAINERD2_BIN/containerd && -x $CONTAINERD2_BIN/containerd-shim-runc-v2 && -x $CONTAINERD2_BIN/ctr ]] && return 0
  ensure_go
  local buildlog=$STEVEDORE_CACHE/build-containerd-$CONTAINERD2_VERSION.log
  local module=github.com/containerd/containerd/v2
  local stamp="-X $module/version.Version=$CONTAINERD2_VERSION -X $module/version.Package=$module"
  log "building containerd $CONTAINERD2_VERSION (first run only; log: $buildlog)"
  rm -rf "$CONTAINERD2_BIN.tmp"
  mkdir -p "$CONTAINERD2_BIN.tmp"
  (
    set -e
    export GOBIN=$CONTAINERD2_BIN.tmp CGO_ENABLED=0
    tags="urfave_cli_no_docs no_btrfs no_devmapper no_zfs"
    go install -trimpath -tags "$tags" -ldflags "-s -w $stamp" \
      "$module/cmd/containerd@$CONTAINERD2_VERSION" "$module/cmd/ctr@$CONTAINERD2_VERSION"
    go install -trimpath -tags "$tags no_grpc" -ldflags "-s -w $stamp" \
      "$module/cmd/containerd-shim-runc-v2@$CONTAINERD2_VERSION"
  ) >"$buildlog" 2>&1 ||
    die "building containerd $CONTAINERD2_VERSION failed (command: go install $module/cmd/containerd@$CONTAINERD2_VERSION; log: $buildlog)"
  rm -rf "$CONTAINERD2_BIN"
  mv "$CONTAINERD2_BIN.tmp" "$CONTAINERD2_BIN"
  log "containerd $CONTAINERD2_VERSION ready in $CONTAINERD2_BIN"
}
