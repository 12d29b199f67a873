//! Which AdvancedCronJobs a change concerns: the cron itself, and for a Job or a
//! BroadcastJob, its controlling cron (`workload::triggers::owner_keys`; a cron adopts
//! nothing). The next scheduled time is a requeue of the reconcile, not a trigger.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use kube::runtime::reflector::Store;

use crate::api::AdvancedCronJob;
use crate::caches::Changes;
use crate::controller::ObjectKey;
use crate::controller::queue::WorkQueue;
use crate::controller::triggers::Triggers;
use crate::workload::triggers::owner_keys;

/// A cron has no selector: its runs are found by controller reference only.
const NO_SELECTOR: LabelSelector = LabelSelector {
    match_expressions: None,
    match_labels: None,
};

/// The cron controlling a run, if any.
fn owner(meta: &ObjectMeta) -> Vec<ObjectKey> {
    owner_keys::<AdvancedCronJob>(meta, &[], |_| &NO_SELECTOR, false)
}

/// What the AdvancedCronJob controller listens to: its crons and the Jobs and
/// BroadcastJobs they control.
pub fn watches(
    changes: &Changes,
    crons: &Store<AdvancedCronJob>,
    queue: WorkQueue<ObjectKey>,
) -> Triggers<ObjectKey> {
    Triggers::of(crons, queue)
        .watch_own(&changes.advancedcronjobs)
        .watch(&changes.jobs, |job| owner(&job.metadata))
        .watch(&changes.broadcastjobs, |job| owner(&job.metadata))
}
