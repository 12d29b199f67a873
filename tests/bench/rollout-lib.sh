# Sourced by the rollout benchmarks.
#
# patch_observed KIND NAME PATCH: applies the JSON patch PATCH to KIND/NAME in $NS and
# returns once its controller has observed the generation the patch made. Until then the
# status still describes the finished previous rollout (every replica updated and ready,
# currentRevision == updateRevision), and a wait for "all updated" would end at once.
patch_observed() {
  local kind=$1 name=$2 patch=$3 generation
  generation=$(kubectl -n "$NS" patch "$kind" "$name" --type json -o jsonpath='{.metadata.generation}' -p "$patch")
  until (($(kubectl -n "$NS" get "$kind" "$name" -o jsonpath='{.status.observedGeneration}') >= generation)); do
    sleep 0.2
  done
}
