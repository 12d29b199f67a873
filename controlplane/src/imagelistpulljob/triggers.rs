//! Which ImageListPullJobs a change concerns: the job itself, and for an ImagePullJob,
//! its controlling ImageListPullJob (`workload::triggers::owner_keys`; a job adopts no
//! orphans: its ImagePullJobs carry its controller reference from their creation).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use kube::runtime::reflector::Store;

use crate::api::ImageListPullJob;
use crate::caches::Changes;
use crate::controller::ObjectKey;
use crate::controller::queue::WorkQueue;
use crate::controller::triggers::Triggers;
use crate::workload::triggers::owner_keys;

/// A job has no selector: its ImagePullJobs are found by controller reference only.
const NO_SELECTOR: LabelSelector = LabelSelector {
    match_expressions: None,
    match_labels: None,
};

/// The ImageListPullJob controlling an ImagePullJob, if any.
pub fn owner(meta: &ObjectMeta) -> Vec<ObjectKey> {
    owner_keys::<ImageListPullJob>(meta, &[], |_| &NO_SELECTOR, false)
}

/// What the ImageListPullJob controller listens to: its jobs and the ImagePullJobs they
/// control.
pub fn watches(
    changes: &Changes,
    jobs: &Store<ImageListPullJob>,
    queue: WorkQueue<ObjectKey>,
) -> Triggers<ObjectKey> {
    Triggers::of(jobs, queue)
        .watch_own(&changes.imagelistpulljobs)
        .watch(&changes.imagepulljobs, |child| owner(&child.metadata))
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

    use super::*;

    fn owned_by(kind: &str, api_version: &str) -> ObjectMeta {
        ObjectMeta {
            namespace: Some("ns".into()),
            owner_references: Some(vec![OwnerReference {
                api_version: api_version.into(),
                kind: kind.into(),
                name: "warm".into(),
                uid: "u".into(),
                controller: Some(true),
                ..OwnerReference::default()
            }]),
            ..ObjectMeta::default()
        }
    }

    #[test]
    fn an_image_pull_job_concerns_its_controlling_list_job_only() {
        let key = ObjectKey::new("ns", "warm");
        let cases = [
            (
                owned_by("ImageListPullJob", "apps.kruise.io/v1alpha1"),
                vec![key.clone()],
            ),
            (
                owned_by("ImageListPullJob", "apps.kruise.io/v1beta1"),
                vec![key],
            ),
            (owned_by("CloneSet", "apps.kruise.io/v1alpha1"), vec![]),
            (ObjectMeta::default(), vec![]),
        ];
        for (meta, want) in cases {
            assert_eq!(owner(&meta), want, "{meta:?}");
        }
    }
}
