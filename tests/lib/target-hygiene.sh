# Keeps the shared Cargo target directory from filling the disk. Sourced by tests/run.sh.
#
# Every change to the tests crate's dependencies gives each of its ~50 test binaries a new
# hash, and Cargo never deletes the old ones. Left alone they filled CI's disk mid-link.

# Before building: when the disk holding the target directory is nearly full, the
# incremental caches go first (they only speed up rebuilds), then the whole debug tree.
ensure_target_space() {
  local dir=$1 min_free_gb=$2
  mkdir -p "$dir"
  if (($(free_gb "$dir") >= min_free_gb)); then return; fi
  echo "less than ${min_free_gb} GB free under $dir: removing incremental build caches"
  rm -rf "$dir"/debug/incremental "$dir"/release/incremental
  if (($(free_gb "$dir") >= min_free_gb)); then return; fi
  echo "still less than ${min_free_gb} GB free: removing the debug build tree (a full rebuild follows)"
  rm -rf "$dir"/debug
}

free_gb() {
  df --output=avail -BG "$1" | tail -n 1 | tr -dc '0-9'
}

# After building the tests: deletes integration-test executables (`tests/tests/*.rs`, the
# bulk of the tree) in debug/deps that this build did not produce, i.e. those of an earlier
# generation of the same target. Binaries, libraries and metadata are kept: `cargo run`,
# clippy and the image builds have hashes of their own for them.
prune_stale_test_executables() {
  local dir=$1 artifacts=$2 deps="$1/debug/deps" current stem file
  [[ -d $deps ]] || return 0
  current=$(grep -F '"kind":["test"]' "$artifacts" | grep -o '"executable":"[^"]*"' | sed 's/^"executable":"//; s/"$//' | xargs -r -n1 basename | sort -u)
  [[ -n $current ]] || return 0
  local removed=0
  for stem in $(sed 's/-[0-9a-f]\{16\}$//' <<<"$current" | sort -u); do
    for file in "$deps/$stem"-????????????????; do
      [[ -f $file && -x $file ]] || continue
      if ! grep -qxF "$(basename "$file")" <<<"$current"; then
        rm -f "$file" "$file.d"
        removed=$((removed + 1))
      fi
    done
  done
  echo "removed $removed stale test executables from $deps"
}
