# The binaries Stevedore deploys and how they are built: in ONE cargo invocation, whatever
# the caller needs of them. The deploy (stevedore.sh, csi.sh), the simulated agents and the
# benchmarks all build through cargo_build_binaries, so the binary they run is the binary
# the images carry: a build of one package resolves its dependencies' features on its own
# (features unify over the packages of one invocation), so it compiles tonic, kube, hyper,
# ... a second time and links a slightly different program. Built together, the shared
# dependencies compile once and every later call is a no-op.
# Needs nothing else sourced; the caller's CARGO_TARGET_DIR and working directory (the
# repository) apply.
# shellcheck shell=bash

# Package and binary share each name.
STEVEDORE_BINARIES=(stevedore-csi-hostpath stevedore-agent stevedore-controlplane kubectl-stevedore)

# cargo_build_binaries PROFILE [CARGO_ARGS...]: builds every binary of STEVEDORE_BINARIES
# with cargo profile PROFILE (dev or release) into $CARGO_TARGET_DIR/<debug|release>/.
#
# Dev builds are the tests' (tests/run.sh deploys them; the suites start simulated agents
# from them), so a dev build is the whole workspace with every test, resolved as `cargo
# test --workspace` resolves features: the binaries the cluster runs are the ones the test
# build makes, and the test build after the deploy compiles nothing. Built as four binaries
# alone, their features resolved apart from the tests', the workspace's crates compiled
# twice in every CI run, and the test build relinked every binary over the deployed ones.
#
# A suite that starts simulated agents calls this from inside a test process, whose
# environment carries what cargo sets for a test (CARGO_MANIFEST_DIR, CARGO_PKG_*, ...).
# ring's fingerprint tracks CARGO_MANIFEST_DIR, so such a build recompiled ring and all
# that depends on it (3 min), and the next build outside a test compiled it back: the
# build runs without those variables.
cargo_build_binaries() (
  local profile=$1 name selection=() var
  shift
  for var in $(compgen -e); do
    [[ ! $var =~ ^CARGO_(MANIFEST_|PKG_|CRATE_|BIN_|PRIMARY_) ]] || unset "$var"
  done
  if [[ $profile == dev ]]; then
    cargo build --locked --workspace --all-targets "$@"
    return
  fi
  for name in "${STEVEDORE_BINARIES[@]}"; do selection+=(-p "$name" --bin "$name"); done
  cargo build --locked --profile "$profile" "${selection[@]}" "$@"
)
