#!/usr/bin/env bash
# The README's benchmark results table, generated from the figures report.sh collected, so
# no figure is typed by hand.
#
# Usage: tests/bench/table.sh RESULTS.json             prints the table (markdown)
#        tests/bench/table.sh RESULTS.json --into FILE  writes it into FILE, in place of
#                                                      what stands between the lines
#                                                      <!-- bench-table:begin --> and
#                                                      <!-- bench-table:end -->
set -euo pipefail
here=$(dirname "${BASH_SOURCE[0]}")
BEGIN='<!-- bench-table:begin -->'
END='<!-- bench-table:end -->'

results=${1:?usage: table.sh RESULTS.json [--into FILE]}
table=$(jq -r -f "$here/table.jq" "$results")
if (($# == 1)); then
  echo "$table"
  exit 0
fi
[[ ${2:-} == --into && -n ${3:-} ]] || { echo "usage: table.sh RESULTS.json [--into FILE]" >&2; exit 2; }
file=$3
if [[ $(grep -cxF "$BEGIN" "$file") != 1 || $(grep -cxF "$END" "$file") != 1 ]]; then
  echo "$file needs the lines '$BEGIN' and '$END', once each, where the table goes" >&2
  exit 1
fi
if (($(grep -nxF "$BEGIN" "$file" | cut -d: -f1) > $(grep -nxF "$END" "$file" | cut -d: -f1))); then
  echo "$file has '$END' before '$BEGIN'" >&2
  exit 1
fi
TABLE=$table awk -v begin="$BEGIN" -v end="$END" '
  $0 == begin { print; print ENVIRON["TABLE"]; skipping = 1; next }
  $0 == end { skipping = 0 }
  !skipping { print }
' "$file" >"$file.new"
mv "$file.new" "$file"
