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

# in_place_pending NS [SELECTOR]: true while a pod (of SELECTOR) has an in-place update that
# has not completed: apps.kruise.io/inplace-update-state without Stevedore's completion mark.
# The annotation itself stays once the update is done, as OpenKruise leaves it.
in_place_pending() {
  local ns=$1 selector=${2:-}
  kubectl -n "$ns" get pods ${selector:+-l "$selector"} -o json |
    jq -e '[.items[].metadata.annotations["apps.kruise.io/inplace-update-state"] // empty
            | select(contains("\"stevedoreCompleted\":true") | not)] | length > 0' >/dev/null
}
