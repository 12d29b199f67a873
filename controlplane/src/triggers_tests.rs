//! Which watches each controller's declared triggers listen to: the same kinds its
//! hand-written `select!` loop listened to before the triggers were declared (each kind's
//! mappings have tests of their own beside them).

use std::sync::Arc;

use kube::Resource;
use kube::runtime::reflector::Store;
use kube::runtime::reflector::store::Writer;

use crate::caches::Changes;
use crate::controller::ObjectKey;
use crate::controller::queue::{Backoff, WorkQueue};
use crate::controller::triggers::Triggers;
use crate::daemonset::unplaced::UnplacedNodes;

fn store<K>() -> Store<K>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    Writer::<K>::default().as_reader()
}

fn queue() -> WorkQueue<ObjectKey> {
    WorkQueue::new(Backoff::default())
}

/// What each controller's triggers listen to, sorted.
fn listened(declare: impl FnOnce(&Changes) -> Triggers<ObjectKey>) -> Vec<&'static str> {
    let changes = Changes::unfed();
    let _triggers = declare(&changes);
    let mut kinds = changes.listened();
    kinds.sort_unstable();
    kinds
}

#[test]
fn each_controller_listens_to_the_kinds_it_always_did() {
    type Declare = Box<dyn FnOnce(&Changes) -> Triggers<ObjectKey>>;
    let cases: Vec<(&str, Declare, Vec<&str>)> = vec![
        (
            "CloneSet",
            Box::new(|c| crate::cloneset::triggers::watches(c, &store(), queue())),
            vec![
                "CloneSet",
                "ControllerRevision",
                "PersistentVolumeClaim",
                "Pod",
            ],
        ),
        (
            "StatefulSet",
            Box::new(|c| crate::statefulset::triggers::watches(c, &store(), queue())),
            vec![
                "ControllerRevision",
                "PersistentVolumeClaim",
                "Pod",
                "StatefulSet",
            ],
        ),
        (
            "DaemonSet",
            Box::new(|c| {
                let unplaced = Arc::new(UnplacedNodes::default());
                crate::daemonset::triggers::watches(c, &store(), store(), unplaced, queue())
            }),
            vec!["ControllerRevision", "DaemonSet", "Node", "Pod"],
        ),
        (
            "ImagePullJob",
            Box::new(|c| {
                crate::imagepulljob::triggers::watches(c, &store(), store(), store(), queue())
            }),
            vec!["ImageList", "ImagePullJob", "Node", "Pod"],
        ),
        (
            "ImageListPullJob",
            Box::new(|c| crate::imagelistpulljob::triggers::watches(c, &store(), queue())),
            vec!["ImageListPullJob", "ImagePullJob"],
        ),
        (
            "BroadcastJob",
            Box::new(|c| crate::broadcastjob::triggers::watches(c, &store(), store(), queue())),
            vec!["BroadcastJob", "Node", "Pod"],
        ),
        (
            "PodUnavailableBudget",
            Box::new(|c| crate::budget::triggers::watches(c, &store(), queue())),
            vec!["CloneSet", "Pod", "PodUnavailableBudget", "StatefulSet"],
        ),
        (
            "AdvancedCronJob",
            Box::new(|c| crate::advancedcronjob::triggers::watches(c, &store(), queue())),
            vec!["AdvancedCronJob", "BroadcastJob", "Job"],
        ),
        (
            "ContainerRecreateRequest",
            Box::new(|c| crate::containerrecreate::triggers::watches(c, &store(), queue())),
            vec!["ContainerRecreateRequest", "Pod"],
        ),
    ];
    for (controller, declare, want) in cases {
        assert_eq!(listened(declare), want, "{controller}");
    }
}
