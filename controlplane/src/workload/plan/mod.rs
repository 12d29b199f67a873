//! One sync of a pod set as a pure decision, for any [`PodSetWorkload`] (OpenKruise's
//! `syncCloneSet` order): refresh pods (finish grace periods and in-place updates, move
//! lifecycle states), then scale (create, delete specified or surplus pods); only a sync
//! that did not scale goes on to update pods to the update revision — so one sync never
//! both creates and updates against the same stale counts.
//!
//! The workload adds what is its own before and around these steps (CloneSet: instance
//! ids, claims, `podsToDelete`); see `cloneset::plan`.

mod delete;
mod refresh;
mod update;

#[cfg(test)]
mod env_restart_tests;
#[cfg(test)]
mod in_place_tests;
#[cfg(test)]
mod lifecycle_hook_tests;
#[cfg(test)]
mod on_delete_tests;
#[cfg(test)]
mod preparing_update_tests;
#[cfg(test)]
mod refresh_tests;
#[cfg(test)]
mod resize_tests;
#[cfg(test)]
mod scale_down_tests;
#[cfg(test)]
mod scale_tests;
#[cfg(test)]
mod toy_case;
#[cfg(test)]
mod toy_execute_tests;
#[cfg(test)]
mod toy_tests;
#[cfg(test)]
mod update_method_tests;
#[cfg(test)]
mod update_order_tests;

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap};

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::jiff::Timestamp;

use super::actions::Plan;
use super::adapter::{PodSetWorkload, UpdateStrategyType};
use super::inplace::{InPlaceError, UpdateMethod};
use super::lifecycle::PodHookView;
use super::pod_view::{PodView, ViewContext, is_active, pod_labels};
use super::rollout::{self, IntOrPercentError, RolloutDiffs, RolloutParams};

pub use delete::plan_delete;
pub use update::CLAIMS_REVISION_ANNOTATION;

/// What one sync of a pod set sees.
pub struct PodSetSnapshot<'a, W: PodSetWorkload> {
    pub workload: &'a W,
    /// Pods the workload controls (after adoption and release), terminating ones included.
    pub pods: Vec<&'a Pod>,
    /// Claims the workload controls.
    pub claims: Vec<&'a PersistentVolumeClaim>,
    pub update_revision: &'a str,
    pub current_revision: &'a str,
    /// Revision name → what it records.
    pub revisions: &'a BTreeMap<String, W::Revision>,
    /// Pod names the workload asks to delete (CloneSet's `scaleStrategy.podsToDelete`).
    pub named_for_deletion: &'a BTreeSet<String>,
    pub now: Timestamp,
}

#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error(transparent)]
    IntOrPercent(#[from] IntOrPercentError),
    #[error("pod {pod}: {source}")]
    InPlace {
        pod: String,
        #[source]
        source: InPlaceError,
    },
}

impl PlanError {
    fn in_place(pod: &Pod) -> impl FnOnce(InPlaceError) -> Self + '_ {
        |source| Self::InPlace {
            pod: pod.metadata.name.clone().unwrap_or_default(),
            source,
        }
    }
}

/// The hook-relevant parts of `pod`.
pub fn hook_view(pod: &Pod) -> PodHookView<'_> {
    PodHookView {
        labels: pod_labels(pod),
        finalizers: pod.metadata.finalizers.as_deref().unwrap_or_default(),
    }
}

/// A lifecycle timestamp as OpenKruise writes it: RFC 3339 in whole seconds.
fn now_string(now: Timestamp) -> String {
    now.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// Most pods created in one sync; the rest come with the next (a burst cap per sync, which
/// the executor's slow start carries out in batches of 1, 2, 4, ...). Every planner plans
/// at most this many creates, so planning costs O(what one sync does), never O(replicas).
pub const MAX_CREATES_PER_SYNC: usize = 500;

/// [`MAX_CREATES_PER_SYNC`] as the pod counts' type.
const MAX_CREATES: i32 = MAX_CREATES_PER_SYNC as i32;

/// How many pods the scale step may create now, and how many of them on the current
/// revision.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScaleUp {
    pub count: i32,
    pub old_revision: i32,
}

/// The active pods of a snapshot with their views, in the snapshot's order.
pub struct PodSet<'s, 'a, W: PodSetWorkload> {
    snap: &'s PodSetSnapshot<'a, W>,
    params: RolloutParams,
    active: Vec<&'a Pod>,
    views: Vec<PodView<'a>>,
    /// How a pod moves from a revision (by name) to the update revision, worked out once
    /// per sync: it compares the two revisions' templates, the same for every pod of a
    /// revision (a rollout of N pods compared them N times, 125 KB each in a debug build).
    update_methods: RefCell<HashMap<String, UpdateMethod>>,
}

impl<'s, 'a, W: PodSetWorkload> PodSet<'s, 'a, W> {
    pub fn new(snap: &'s PodSetSnapshot<'a, W>) -> Self {
        let ctx = ViewContext {
            update_revision: snap.update_revision,
            min_ready_seconds: snap.workload.min_ready_seconds(),
            now: snap.now,
            named_for_deletion: snap.named_for_deletion,
        };
        let active: Vec<&Pod> = snap.pods.iter().copied().filter(|p| is_active(p)).collect();
        let views = active.iter().map(|p| PodView::of(p, &ctx)).collect();
        let params = snap
            .workload
            .rollout_params(snap.current_revision, snap.update_revision);
        let params = match snap.workload.update_strategy_type() {
            UpdateStrategyType::RollingUpdate => params,
            UpdateStrategyType::OnDelete => params.on_delete(),
        };
        Self {
            snap,
            params,
            active,
            views,
            update_methods: RefCell::default(),
        }
    }

    /// OpenKruise's `calculateDiffsWithExpectation` over the active pods, a pod counting
    /// as updated by its revision label (what the update step moves).
    pub fn diffs(&self) -> Result<RolloutDiffs, PlanError> {
        Ok(rollout::calculate_diffs(&self.params, &self.views)?)
    }

    /// The same for the scale step, where a pod in PreparingUpdate counts as updated
    /// (OpenKruise `revision.IsPodUpdate` under PreparingUpdateAsUpdate): its update has
    /// begun, so a replacement for a deleted current-revision pod stays current.
    fn scale_diffs(&self) -> Result<RolloutDiffs, PlanError> {
        let updated = |v: &PodView<'_>| v.updated || v.preparing_update();
        Ok(rollout::calculate_diffs_counting(
            &self.params,
            &self.views,
            updated,
        )?)
    }

    /// The revision of each pod to create, in creation order: the first
    /// `scale.old_revision` on the current revision while it still exists, the rest on
    /// the update revision; at most [`MAX_CREATES_PER_SYNC`].
    pub fn new_pod_revisions(&self, scale: ScaleUp) -> Vec<&'a str> {
        let count = scale.count.clamp(0, MAX_CREATES);
        let old = scale.old_revision.clamp(0, count);
        let current_exists = self.snap.revisions.contains_key(self.snap.current_revision);
        (0..count)
            .map(|i| {
                if i < old && current_exists {
                    self.snap.current_revision
                } else {
                    self.snap.update_revision
                }
            })
            .collect()
    }

    /// The scale and update steps after refresh: `create` adds the pods a scale-up asks
    /// for, at most [`MAX_CREATES_PER_SYNC`] (the workload names them); otherwise surplus
    /// and specified pods are deleted, and only a sync that deleted nothing updates pods.
    pub fn scale_and_update(
        &self,
        plan: &mut Plan,
        create: impl FnOnce(ScaleUp, &mut Plan),
    ) -> Result<(), PlanError> {
        let diffs = self.scale_diffs()?;
        if diffs.scale_up > 0 && diffs.scale_up_limit > 0 {
            let scale = ScaleUp {
                count: diffs.scale_up.min(diffs.scale_up_limit).min(MAX_CREATES),
                old_revision: diffs.scale_up_old_revision,
            };
            create(scale, plan);
            return Ok(());
        }
        if self.scale_down(&diffs, plan) {
            return Ok(());
        }
        self.update(&self.diffs()?, plan)
    }

    /// The update step alone, for a workload that scales by rules of its own
    /// (StatefulSet: by ordinal) and updates only once its scale step is settled.
    pub fn update_only(&self, plan: &mut Plan) -> Result<(), PlanError> {
        let diffs = self.diffs()?;
        self.update(&diffs, plan)
    }

    /// The active pods and their views, in the same order.
    pub fn active_views(&self) -> impl Iterator<Item = (&'a Pod, &PodView<'_>)> {
        self.active.iter().copied().zip(&self.views)
    }

    fn pod_named(&self, name: &str) -> Option<usize> {
        self.views.iter().position(|v| v.name == name)
    }
}
