//! The surging update (maxSurge > 0, or rollingUpdateType Surging): per node, the new
//! pod is created beside the old one and the old one is deleted only once the new one is
//! available — the native controller's `rollingUpdate` with surge. OpenKruise #627 and
//! #1012 reported Surging deleting old pods too early or leaving them behind; here an old
//! pod is deleted exactly when its node has an available updated pod.
//!
//! At most maxSurge nodes run two pods at once; a node whose old pod is not available
//! gets its new pod without waiting for the surge budget (nothing is lost by it).
//! `partition` nodes keep the old pod, and nodes outside `rollingUpdate.selector` too.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt as _;

use super::adapter::DaemonSetWorkload;
use super::nodes::{NodePods, oldest_first};
use crate::workload::actions::{Create, DeleteReason, Plan};
use crate::workload::adapter::PodSetWorkload as _;
use crate::workload::node_eval::NodeFit;
use crate::workload::plan::{MAX_CREATES_PER_SYNC, plan_delete};
use crate::workload::pod_view::{PodView, ViewContext};
use crate::workload::revision_adapter::RevisionAdapter;

/// What the surging update reads.
pub struct SurgeInput<'s, 'a> {
    pub workload: &'s DaemonSetWorkload<'a>,
    pub fits: &'s BTreeMap<String, NodeFit>,
    pub by_node: &'s BTreeMap<String, NodePods<'a>>,
    pub update_revision: &'s str,
    /// maxSurge scaled against the desired nodes.
    pub max_surge: i32,
    pub partition: i32,
    pub now: Timestamp,
}

/// One node's pods under a surging update: its oldest old and oldest updated pod.
struct NodeRevisions<'a> {
    old: Option<&'a Pod>,
    new: Option<&'a Pod>,
}

impl SurgeInput<'_, '_> {
    fn view<'p>(&self, pod: &'p Pod) -> PodView<'p> {
        let named = Default::default();
        let ctx = ViewContext {
            update_revision: self.update_revision,
            min_ready_seconds: self.workload.min_ready_seconds(),
            now: self.now,
            named_for_deletion: &named,
        };
        PodView::of(pod, &ctx)
    }

    fn available(&self, pod: &Pod) -> bool {
        self.view(pod).serving()
    }

    /// How long until a ready pod has been ready for `minReadySeconds`, if it is not yet
    /// available. Nothing else wakes the sync then: the node still counts as available
    /// (its old pod is), so the status shows no pod waiting for availability.
    fn until_available(&self, pod: &Pod) -> Option<Duration> {
        let view = self.view(pod);
        if !view.ready || view.available {
            return None;
        }
        let min_ready = i64::from(self.workload.min_ready_seconds());
        let left = view.ready_since.map_or(min_ready, |since| {
            min_ready - self.now.duration_since(since).as_secs()
        });
        Some(Duration::from_secs(u64::try_from(left).unwrap_or(0).max(1)))
    }

    fn revisions<'a>(&self, pods: &NodePods<'a>) -> NodeRevisions<'a> {
        let mut running = pods.running.clone();
        oldest_first(&mut running);
        let is_new = |p: &Pod| RevisionAdapter::is_on(p.labels(), self.update_revision);
        NodeRevisions {
            old: running.iter().find(|p| !is_new(p)).copied(),
            new: running.iter().find(|p| is_new(p)).copied(),
        }
    }
}

/// Plans the surging update's creates and deletes for this sync.
pub fn plan(input: &SurgeInput<'_, '_>, plan: &mut Plan) {
    let mut surging = 0;
    let mut unavailable_old = Vec::new();
    let mut candidates = Vec::new();
    let mut old_only: i32 = 0;
    for (node, pods) in input.by_node {
        if !input.fits.get(node).is_some_and(|f| f.should_run) {
            continue;
        }
        let NodeRevisions { old, new } = input.revisions(pods);
        let Some(old) = old else {
            continue;
        };
        if input.workload.held_back.contains(&old.name_any()) {
            continue;
        }
        match new {
            Some(new) if input.available(new) => {
                let why = "its node runs an available updated pod".to_owned();
                let reason = DeleteReason::RecreateUpdate;
                plan_delete(
                    input.workload,
                    old,
                    Vec::new(),
                    reason,
                    why,
                    input.now,
                    plan,
                );
            }
            Some(new) => {
                surging += 1;
                if let Some(wait) = input.until_available(new) {
                    plan.requeue(wait);
                }
            }
            None if !input.available(old) => {
                old_only += 1;
                unavailable_old.push(node.clone());
            }
            None => {
                old_only += 1;
                candidates.push(node.clone());
            }
        }
    }
    // The partition keeps that many nodes on the old pod: only the rest may move, and no
    // more than one sync creates.
    let movable = usize::try_from(old_only.saturating_sub(input.partition))
        .unwrap_or(0)
        .min(MAX_CREATES_PER_SYNC);
    let room = usize::try_from(input.max_surge.saturating_sub(surging)).unwrap_or(0);
    let free: Vec<String> = unavailable_old.into_iter().take(movable).collect();
    let surged = candidates.into_iter().take(room.min(movable - free.len()));
    plan.creates
        .extend(free.into_iter().chain(surged).map(|node| Create {
            instance_id: node,
            revision: input.update_revision.to_owned(),
        }));
}
