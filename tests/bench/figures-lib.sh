# Sourced by the benchmarks: their figures as lines tests/bench/report.sh collects, beside
# the text a person reads.
#
#   BENCH-PARAMS <bench> <VAR=value>...           the parameters the run used (defaults
#                                                  too), each value quoted for the shell
#   BENCH <bench> <measure> <who> <value> <unit>  one figure
#
# <who> says whose figure it is: `stevedore`, `floor` (the same writes from the minimal
# client api-floor), `native` (the native controller of kube-controller-manager, or
# kubelet's own CRI pull), or any other one-word name of what else the run measured (ctr,
# without-budget). <measure> is one word naming what was timed or counted, the same for
# every <who> of one comparison (create, rollout).

# bench_params BENCH VAR...: the parameters, each VAR with its value in this run.
bench_params() {
  local bench=$1 var line
  shift
  line="BENCH-PARAMS $bench"
  for var in "$@"; do
    line+=" $var=$(printf '%q' "${!var}")"
  done
  echo "$line"
}

# bench_figure BENCH MEASURE WHO VALUE UNIT: one figure; a value that is not a number (a
# part that did not finish, "?") is said on stderr and left out.
bench_figure() {
  if (($# != 5)); then
    echo "bench_figure takes BENCH MEASURE WHO VALUE UNIT, not: $*" >&2
    return 1
  fi
  if [[ ! $4 =~ ^-?[0-9]+([.][0-9]+)?$ ]]; then
    echo "no figure for $1 $2 ($3): '$4' is not a number" >&2
    return 0
  fi
  echo "BENCH $1 $2 $3 $4 $5"
}
