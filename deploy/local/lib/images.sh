# The local OCI registry and the test images, built from busybox-static with umoci and
# pushed with skopeo. Image layouts are cached; the registry's storage is cluster state.
# shellcheck shell=bash

REGISTRY_PORT=${STEVEDORE_REGISTRY_PORT:-5000}
REGISTRY=127.0.0.1:$REGISTRY_PORT
# Bump when the image recipes below change so cached layouts are rebuilt.
IMAGES_RECIPE=1
IMAGES_CACHE=$STEVEDORE_CACHE/images-r$IMAGES_RECIPE
SANDBOX_IMAGE=$REGISTRY/stevedore/pause:$PAUSE_TAG
# A second registry that demands a username and password (htpasswd), for credential tests.
# Its password is generated per cluster and kept in the state directory.
AUTH_REGISTRY_PORT=${STEVEDORE_AUTH_REGISTRY_PORT:-5001}
AUTH_REGISTRY=127.0.0.1:$AUTH_REGISTRY_PORT
AUTH_REGISTRY_USER=stevedore

start_registry() {
  mkdir -p "$STATE_DIR/registry"
  cat >"$STATE_DIR/registry.yml" <<YAML
version: 0.1
log: { level: info }
storage:
  filesystem: { rootdirectory: $STATE_DIR/registry }
  delete: { enabled: true }
http:
  addr: $REGISTRY
YAML
  pid_alive registry || require_port registry "$REGISTRY_PORT"
  start_daemon registry -- docker-registry serve "$STATE_DIR/registry.yml"
  wait_for registry 30 "$LOG_DIR/registry.log" -- curl -sf "http://$REGISTRY/v2/"
}

start_auth_registry() {
  local dir=$STATE_DIR/registry-auth
  mkdir -p "$dir/storage"
  if [[ ! -f $dir/password ]]; then
    openssl rand -hex 16 >"$dir/password"
    chmod 600 "$dir/password"
  fi
  # bcrypt, which the registry's htpasswd backend requires. Written once, and through a
  # rename: the running registry rereads the file when it changes, and an `up` beside
  # running tests that truncated it in place had the registry refuse the right password.
  if [[ ! -s $dir/htpasswd ]]; then
    python3 -c 'import crypt, sys; print(sys.argv[1] + ":" + crypt.crypt(sys.argv[2], crypt.mksalt(crypt.METHOD_BLOWFISH)))' \
      "$AUTH_REGISTRY_USER" "$(cat "$dir/password")" >"$dir/htpasswd.tmp" 2>/dev/null ||
      die "cannot hash the auth registry password (python3's crypt module)"
    mv "$dir/htpasswd.tmp" "$dir/htpasswd"
  fi
  cat >"$dir/config.yml" <<YAML
version: 0.1
log: { level: info }
storage:
  filesystem: { rootdirectory: $dir/storage }
auth:
  htpasswd: { realm: stevedore-local, path: $dir/htpasswd }
http:
  addr: $AUTH_REGISTRY
YAML
  pid_alive registry-auth || require_port registry-auth "$AUTH_REGISTRY_PORT"
  start_daemon registry-auth -- docker-registry serve "$dir/config.yml"
  # Up when it answers 401 to an anonymous request.
  wait_for registry-auth 30 "$LOG_DIR/registry-auth.log" -- \
    bash -c "[[ \$(curl -s -o /dev/null -w '%{http_code}' http://$AUTH_REGISTRY/v2/) == 401 ]]"
  local creds="$AUTH_REGISTRY_USER:$(cat "$dir/password")"
  curl -sf -o /dev/null -u "$creds" -H 'Accept: application/vnd.oci.image.manifest.v1+json' \
    "http://$AUTH_REGISTRY/v2/stevedore/web/manifests/v1" && return 0
  skopeo copy --quiet --dest-tls-verify=false --dest-creds "$creds" "oci:$IMAGES_CACHE/web:v1" \
    "docker://$AUTH_REGISTRY/stevedore/web:v1" >>"$LOG_DIR/images.log" 2>&1 ||
    die "skopeo copy of stevedore/web:v1 to $AUTH_REGISTRY failed (log: $LOG_DIR/images.log)"
}

# new_bundle LAYOUT TAG BUNDLE: an empty image TAG unpacked into BUNDLE for editing.
new_bundle() {
  local layout=$1 tag=$2 bundle=$3
  [[ -d $layout ]] || umoci init --layout "$layout"
  umoci new --image "$layout:$tag"
  umoci unpack --image "$layout:$tag" "$bundle" >/dev/null
}

install_busybox() {
  local rootfs=$1 applet
  mkdir -p "$rootfs/bin" "$rootfs/tmp" "$rootfs/etc" "$rootfs/www"
  cp /bin/busybox "$rootfs/bin/busybox"
  for applet in sh sleep httpd cat echo ls wget nc date env ps kill true false id; do
    ln -sf busybox "$rootfs/bin/$applet"
  done
  echo 'root:x:0:0:root:/:/bin/sh' >"$rootfs/etc/passwd"
  echo 'root:x:0:' >"$rootfs/etc/group"
}

# build_images: pause, two tags of one web image with different content, a large
# multi-layer image, and the two tags of the handoff sidecar. Runs once per recipe version
# (the handoff sidecar once per version of its source); later calls reuse the cached
# layouts.
build_images() {
  build_recipe_images
  build_handoff_images
}

build_recipe_images() {
  [[ -f $IMAGES_CACHE/done ]] && return 0
  local work
  work=$(mktemp -d)
  rm -rf "$IMAGES_CACHE"
  mkdir -p "$IMAGES_CACHE"
  (
    set -e
    cd "$work"
    # Sandbox image: kubernetes' own pause.c, compiled statically by build_pause.
    new_bundle "$IMAGES_CACHE/pause" base b
    cp "$K8S_BIN/pause" b/rootfs/pause
    umoci repack --image "$IMAGES_CACHE/pause:$PAUSE_TAG" b
    umoci config --image "$IMAGES_CACHE/pause:$PAUSE_TAG" --config.entrypoint /pause \
      --config.user 65535:65535
    rm -rf b

    # Web image: busybox httpd serving its version on :8080; v1 and v2 differ in content.
    local version
    for version in v1 v2; do
      new_bundle "$IMAGES_CACHE/web" base "b-$version"
      install_busybox "b-$version/rootfs"
      echo "$version" >"b-$version/rootfs/www/version"
      echo "stevedore test image $version" >"b-$version/rootfs/www/index.html"
      umoci repack --image "$IMAGES_CACHE/web:$version" "b-$version"
      umoci config --image "$IMAGES_CACHE/web:$version" \
        --config.cmd /bin/httpd --config.cmd -f --config.cmd -p --config.cmd 8080 \
        --config.cmd -h --config.cmd /www --config.env "IMAGE_VERSION=$version" \
        --config.exposedports 8080/tcp
      rm -rf "b-$version"
    done

    # Large image: busybox plus four incompressible 16 MiB layers (~64 MiB to pull), so a
    # pull runs long enough to observe per-layer progress.
    new_bundle "$IMAGES_CACHE/large" base b
    install_busybox b/rootfs
    umoci repack --refresh-bundle --image "$IMAGES_CACHE/large:v1" b
    local i
    for i in 1 2 3 4; do
      mkdir -p b/rootfs/data
      openssl enc -aes-128-ctr -nosalt -K "0000000000000000000000000000000$i" \
        -iv 00000000000000000000000000000000 -in /dev/zero 2>/dev/null |
        head -c $((16 * 1024 * 1024)) >"b/rootfs/data/blob-$i"
      umoci repack --refresh-bundle --image "$IMAGES_CACHE/large:v1" b
    done
    umoci config --image "$IMAGES_CACHE/large:v1" --config.cmd /bin/sleep --config.cmd 3600
    umoci gc --layout "$IMAGES_CACHE/large"
  ) >"$STEVEDORE_CACHE/build-images.log" 2>&1 ||
    die "building test images failed (umoci; log: $STEVEDORE_CACHE/build-images.log)"
  rm -rf "$work"
  touch "$IMAGES_CACHE/done"
}

# handoff_source_digest: names a version of the handoff sidecar's source.
handoff_source_digest() {
  cat "$REPO_ROOT"/tests/images/handoff/{go.mod,main.go} | sha256sum | cut -c1-16
}

# build_handoff_images: the sidecar of tests/tests/e2e/sidecarset_hot_upgrade.rs, which hands
# its listening socket to its successor (tests/images/handoff, Go's standard library
# only): the static binary as entrypoint on busybox (its readiness probe is a shell
# test), v1 and v2 differing in the version it serves. Its source changes with the
# repository, so its marker names the source's digest: an edit rebuilds these two alone,
# in seconds.
build_handoff_images() {
  local layout=$IMAGES_CACHE/handoff marker work version
  marker=$IMAGES_CACHE/handoff-$(handoff_source_digest).done
  [[ -f $marker ]] && return 0
  ensure_go
  work=$(mktemp -d)
  (
    set -e
    cd "$work"
    GOTOOLCHAIN=local GOFLAGS= CGO_ENABLED=0 go -C "$REPO_ROOT/tests/images/handoff" build \
      -trimpath -ldflags "-s -w" -o "$work/handoff" .
    rm -rf "$layout" "$IMAGES_CACHE"/handoff-*.done
    for version in v1 v2; do
      new_bundle "$layout" base "b-$version"
      install_busybox "b-$version/rootfs"
      mkdir -p "b-$version/rootfs/run/handoff"
      cp handoff "b-$version/rootfs/handoff"
      umoci repack --image "$layout:$version" "b-$version"
      umoci config --image "$layout:$version" --config.entrypoint /handoff \
        --config.env "HANDOFF_VERSION=$version" --config.exposedports 8081/tcp
    done
    umoci gc --layout "$layout"
  ) >"$STEVEDORE_CACHE/build-handoff.log" 2>&1 ||
    die "building the handoff sidecar images failed (go build, umoci; log: $STEVEDORE_CACHE/build-handoff.log)"
  rm -rf "$work"
  touch "$marker"
}

# pushed REPO TAG: whether the registry holds REPO:TAG as the cached layout has it (the
# same manifest digest: skopeo copies an OCI manifest unchanged).
pushed() {
  local repo=$1 tag=$2 cached held
  cached=$(jq -r --arg tag "$tag" \
    '.manifests[] | select(.annotations["org.opencontainers.image.ref.name"] == $tag) | .digest' \
    "$IMAGES_CACHE/$repo/index.json")
  held=$(curl -sf -o /dev/null -D - -H 'Accept: application/vnd.oci.image.manifest.v1+json' \
    "http://$REGISTRY/v2/stevedore/$repo/manifests/$tag" |
    tr -d '\r' | sed -n 's/^docker-content-digest: *//Ip')
  [[ -n $held && $held == "$cached" ]]
}

# push_images: copies every cached image into the registry unless it is already there.
# The recipe images are pushed once per registry; the handoff sidecar's whenever its
# build changed, since its source changes with the repository.
push_images() {
  local ref
  for ref in "pause:$PAUSE_TAG" web:v1 web:v2 large:v1 handoff:v1 handoff:v2; do
    local repo=${ref%%:*} tag=${ref#*:}
    if [[ $repo == handoff ]]; then
      pushed "$repo" "$tag" && continue
    else
      curl -sf -o /dev/null -H 'Accept: application/vnd.oci.image.manifest.v1+json' \
        "http://$REGISTRY/v2/stevedore/$repo/manifests/$tag" && continue
    fi
    log "pushing $REGISTRY/stevedore/$ref"
    skopeo copy --quiet --dest-tls-verify=false "oci:$IMAGES_CACHE/$repo:$tag" \
      "docker://$REGISTRY/stevedore/$ref" >>"$LOG_DIR/images.log" 2>&1 ||
      die "skopeo copy of stevedore/$ref to $REGISTRY failed (log: $LOG_DIR/images.log)"
  done
}
