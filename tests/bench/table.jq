# The README's results table from tests/bench/results.json (written by report.sh): one row
# per measure of each benchmark, Stevedore beside the apiserver floor and the native
# controller where the run measured them, each ratio Stevedore's figure divided by theirs;
# then the run of each benchmark (commit, date, machine, build profile).

def figure: "\(.value) \(.unit)";
def ratio($of; $by): if $by == null or $by.value == 0 then "—"
  else "\(($of.value / $by.value) * 100 | round / 100)×" end;
def cell: if . == null then "—" else figure end;
def row_of($bench; $leads):
  . as $figures
  | ($figures | map(select(.who == "stevedore")) | first) as $ours
  | ($figures | map(select(.who == "floor")) | first) as $floor
  | ($figures | map(select(.who == "native")) | first) as $native
  | ($figures | map(select(.who | IN("stevedore", "floor", "native") | not))) as $others
  | [ (if $leads then "`\($bench.command)`" else "" end),
      $figures[0].measure,
      ($ours | cell),
      ($floor | cell),
      (if $ours == null then "—" else ratio($ours; $floor) end),
      ($native | cell),
      (if $ours == null then "—" else ratio($ours; $native) end),
      (if $others == [] then "—" else
         $others | map("\(.who) \(figure)" + (if $ours == null then "" else " (\(ratio($ours; .)))" end))
         | join(", ") end) ]
  | "| " + join(" | ") + " |";
def rows_of($bench):
  if $bench.exit != 0 then
    "| `\($bench.command)` | failed (exit \($bench.exit)): no figures | — | — | — | — | — | — |"
  else
    $bench.figures | group_by(.measure) as $groups
    # The measures in the order the script reported them, not alphabetically.
    | ($bench.figures | map(.measure) | reduce .[] as $m ([]; if index($m) then . else . + [$m] end))
    | to_entries[]
    | .key as $i | .value as $m
    | ($groups[] | select(.[0].measure == $m)) | row_of($bench; $i == 0)
  end;
def run_of: "- `\(.bench)`: commit \(.commit[0:10]), \(.date), \(.machine.cores) cores and \(.machine.memory_gib) GiB of memory, \(.profile) images";

"| benchmark | measure | Stevedore | apiserver floor | ×floor | native (kube-controller-manager; crictl for pulls) | ×native | also measured (×) |",
"|---|---|---|---|---|---|---|---|",
(.benches[] | rows_of(.)),
"",
"× is Stevedore's figure divided by the other one. The runs:",
"",
(.benches[] | run_of)
