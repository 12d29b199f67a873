//! The marks on a pod that ask for its deletion or weigh it: read into a
//! [`super::pod_view::PodView`] and ordered by [`super::deletion`], so both import them
//! from here.

/// Pod label that asks the workload to delete the pod (value is not checked, as in OpenKruise).
pub const SPECIFIED_DELETE_LABEL: &str = "apps.kruise.io/specified-delete";
/// Pod annotation: pods with a lower cost are deleted first (Kubernetes PodDeletionCost).
pub const POD_DELETION_COST_ANNOTATION: &str = "controller.kubernetes.io/pod-deletion-cost";

/// Parses a pod-deletion-cost the way Kubernetes does: a decimal int32 with no plus sign and
/// no leading zeros; anything else counts as 0 rather than failing the sync.
pub fn parse_deletion_cost(value: &str) -> i32 {
    let valid_first = match value.as_bytes().first() {
        Some(b'-') | Some(b'1'..=b'9') => true,
        Some(b'0') => value == "0",
        _ => false,
    };
    if !valid_first {
        return 0;
    }
    value.parse::<i32>().unwrap_or(0)
}
