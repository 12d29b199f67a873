#!/usr/bin/env bash
# Tests the generation of the README's benchmark table (table.sh): a fixture of figures
# gives the expected markdown, the table lands between the markers of a file and nowhere
# else, and a file without the markers is refused and left as it was; and report.sh's
# collection of a benchmark's `BENCH` lines into the results (report.sh --from-log).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
fixtures=tests/fixtures/bench
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() {
  echo "table_test: $*" >&2
  exit 1
}

# The table of the fixture is the expected one, to the character.
tests/bench/table.sh "$fixtures/results.json" >"$work/table.md"
diff -u "$fixtures/table.md" "$work/table.md" || fail "the table differs from $fixtures/table.md"

# Written into a file: between the markers, the old table replaced, the rest kept.
cat >"$work/README.md" <<'MD'
# Title
before
<!-- bench-table:begin -->
| an old | table |
<!-- bench-table:end -->
after
MD
tests/bench/table.sh "$fixtures/results.json" --into "$work/README.md"
{
  printf '# Title\nbefore\n<!-- bench-table:begin -->\n'
  cat "$fixtures/table.md"
  printf '<!-- bench-table:end -->\nafter\n'
} >"$work/expected.md"
diff -u "$work/expected.md" "$work/README.md" || fail "the table did not replace the old one between the markers"

# No markers: refused, the file untouched.
printf '# Title\nno markers\n' >"$work/plain.md"
cp "$work/plain.md" "$work/plain.before"
if tests/bench/table.sh "$fixtures/results.json" --into "$work/plain.md" 2>/dev/null; then
  fail "a file without markers was accepted"
fi
cmp -s "$work/plain.md" "$work/plain.before" || fail "a refused file was changed"
# Collected from a benchmark's output: its own figures with its command, another's
# ignored; a second run replaces the first; a failed run is kept as failed.
cat >"$work/cloneset.log" <<'LOG'
== CloneSet of 1000 pods on 100 simulated nodes with agents
BENCH-PARAMS cloneset NODES=100 REPLICAS=1000
BENCH cloneset create stevedore 18.5 s
BENCH cloneset create floor 18.32 s
BENCH statefulset create floor 99 s
create → all ready: 18.5s
LOG
printf '<!-- bench-table:begin -->\n<!-- bench-table:end -->\n' >"$work/table-only.md"
collect() { RESULTS=$work/results.json README=$work/table-only.md tests/bench/report.sh --from-log "$@"; }
collect cloneset "$work/cloneset.log"
collect statefulset "$work/cloneset.log" 3
sed -i 's/18.5 s/17.0 s/' "$work/cloneset.log"
collect cloneset "$work/cloneset.log"
got=$(jq -c '[.benches[] | [.bench, .exit, .command, [.figures[] | [.measure, .who, .value, .unit]]]]' "$work/results.json")
want='[["cloneset",0,"NODES=100 REPLICAS=1000 tests/bench/cloneset.sh",[["create","stevedore",17,"s"],["create","floor",18.32,"s"]]],["statefulset",3,"tests/bench/statefulset.sh",[["create","floor",99,"s"]]]]'
[[ $got == "$want" ]] || fail "collected $got, not $want"
grep -qF '| 17 s | 18.32 s | 0.93× |' "$work/table-only.md" || fail "the table does not show the collected figures"

echo "table_test: ok"
