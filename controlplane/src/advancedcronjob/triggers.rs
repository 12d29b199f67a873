//! Which AdvancedCronJobs a change concerns: the cron itself, and for a Job or a
//! BroadcastJob, its controlling cron (`workload::triggers::owner_keys`; a cron adopts
//! nothing). The next scheduled time is a requeue of the reconcile, not a trigger.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use kube::runtime::reflector::Store;
use tokio_util::sync::CancellationToken;

use crate::api::AdvancedCronJob;
use crate::caches::Changes;
use crate::controller::ObjectKey;
use crate::controller::queue::WorkQueue;
use crate::controller::triggers::received;
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

/// Feeds `queue` from the shared watches until `shutdown`.
pub async fn run(
    changes: Changes,
    crons: Store<AdvancedCronJob>,
    queue: WorkQueue<ObjectKey>,
    shutdown: CancellationToken,
) {
    let mut cron_rx = changes.advancedcronjobs.subscribe();
    let mut job_rx = changes.jobs.subscribe();
    let mut broadcast_rx = changes.broadcastjobs.subscribe();
    let all = || {
        (crons.state().iter())
            .map(|cron| ObjectKey::of(cron.as_ref()))
            .collect()
    };
    loop {
        let keys = tokio::select! {
            () = shutdown.cancelled() => return,
            r = cron_rx.recv() => received(r, |cron| vec![ObjectKey::of(cron.as_ref())]),
            r = job_rx.recv() => received(r, |job| owner(&job.metadata)),
            r = broadcast_rx.recv() => received(r, |job| owner(&job.metadata)),
        };
        if !keys.queue(&queue, "AdvancedCronJob", all) {
            return;
        }
    }
}
