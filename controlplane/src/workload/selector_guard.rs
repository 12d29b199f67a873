//! The selector guard every pod-set kind (CloneSet, Advanced StatefulSet, Advanced
//! DaemonSet) runs before it claims or creates anything: a selector that does not select
//! the set's own template would release every pod it made and create pods it cannot own,
//! without end. The CRDs refuse such a set; one admitted by an older or relaxed CRD is
//! refused here, the same way for every kind:
//! - nothing is created, adopted or released;
//! - the kind's create condition (CloneSet `FailedScale`, StatefulSet `FailedCreatePod`,
//!   DaemonSet `FailedCreate`: the condition the executor's check of a created pod's
//!   labels writes too) turns True with reason `SelectingAll` (an empty selector, the
//!   reason Kubernetes' and OpenKruise's DaemonSet controllers give) or `SelectorMismatch`;
//! - a Warning event with the same reason and message;
//! - both written only when the status changes; the set is looked at again when it
//!   changes (its spec is the only fix), not on a timer.

use std::fmt::Debug;

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::core::v1::{ObjectReference, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::jiff::Timestamp;
use kube::Resource;
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::selector::{SelectorMismatch, selector_selects_template};
use super::set_controller::PodSetParts;
use crate::controller::ObjectKey;
use crate::controller::api_error::ApiError;
use crate::controller::conditions::{StatusCondition, set_condition};
use crate::controller::runner::Outcome;

/// The reason Kubernetes' Deployment and DaemonSet controllers give an empty selector.
pub const SELECTING_ALL: &str = "SelectingAll";
/// The reason for a selector that misses the template's labels; the shared executor gives
/// the same reason to a pod it will not create because the selector misses a label the
/// controller set on it.
pub use super::selector::SELECTOR_MISMATCH;

/// Why a set is refused: the reason of its condition and event, and the message a person
/// reads in both.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SelectorRefusal {
    pub reason: &'static str,
    pub message: String,
}

impl SelectorRefusal {
    fn of(mismatch: &SelectorMismatch) -> Self {
        let reason = match mismatch {
            SelectorMismatch::Empty => SELECTING_ALL,
            _ => SELECTOR_MISMATCH,
        };
        let message = format!(
            "{mismatch}; no pods are created, adopted or released until the selector selects the template's labels"
        );
        Self { reason, message }
    }
}

/// Whether `selector` selects the labels of `template`; the refusal to report when not.
pub fn check_template_selected(
    selector: &LabelSelector,
    template: &PodTemplateSpec,
) -> Result<(), SelectorRefusal> {
    let empty = Default::default();
    let labels = (template.metadata.as_ref())
        .and_then(|m| m.labels.as_ref())
        .unwrap_or(&empty);
    selector_selects_template(selector, labels).map_err(|mismatch| SelectorRefusal::of(&mismatch))
}

/// A kind's status as far as the guard writes it: the generation it saw and its
/// conditions.
pub trait RefusableStatus: Clone + Default {
    type Condition: StatusCondition;
    fn observed_generation_mut(&mut self) -> &mut i64;
    fn conditions_mut(&mut self) -> &mut Vec<Self::Condition>;
}

/// The status of a set at `generation` that the guard refuses: everything `old` had (the
/// counts stay as they were), the generation observed, and `condition_type` True with the
/// refusal's reason and message.
pub fn refused_status<S: RefusableStatus>(
    old: Option<&S>,
    generation: i64,
    condition_type: &str,
    refusal: &SelectorRefusal,
    now: Timestamp,
) -> S {
    let mut status = old.cloned().unwrap_or_default();
    *status.observed_generation_mut() = generation;
    let message = refusal.message.clone();
    set_condition(
        status.conditions_mut(),
        condition_type,
        true,
        refusal.reason,
        message,
        now,
    );
    status
}

/// A pod-set kind as the guard reads it: its selector, template and status, and the type
/// of its create condition.
pub trait GuardedSet:
    Resource<Scope = NamespaceResourceScope> + Clone + DeserializeOwned + Debug
{
    type Status: RefusableStatus + Serialize + PartialEq;
    /// The condition a failed create sets (FailedScale, FailedCreatePod, FailedCreate).
    const CREATE_CONDITION: &'static str;
    fn selector(&self) -> &LabelSelector;
    fn template(&self) -> &PodTemplateSpec;
    fn status(&self) -> Option<&Self::Status>;
}

/// The guard of `set` (`key`; `object` in events): `None` when its selector selects its
/// template and the sync goes on; else the set is reported as refused (its status and a
/// Warning event, written when the status changes) and the sync ends with the outcome
/// given.
pub async fn refuse_unselected_template<K>(
    parts: &PodSetParts,
    key: &ObjectKey,
    object: &ObjectReference,
    set: &K,
) -> Result<Option<Outcome>, ApiError>
where
    K: GuardedSet,
    K::DynamicType: Default,
{
    let Err(refusal) = check_template_selected(set.selector(), set.template()) else {
        return Ok(None);
    };
    let old = set.status();
    let generation = set.meta().generation.unwrap_or(0);
    let now = Timestamp::now();
    let refused = refused_status(old, generation, K::CREATE_CONDITION, &refusal, now);
    if old == Some(&refused) {
        return Ok(Some(Outcome::Done));
    }
    let message = &refusal.message;
    tracing::warn!(%message, "the selector does not select the template; nothing is done");
    parts.write_status::<K, _>(key, old, &refused).await?;
    (parts.events)
        .warning(object, refusal.reason, "Create", message.clone())
        .await;
    Ok(Some(Outcome::Done))
}

#[cfg(test)]
#[path = "selector_guard_tests.rs"]
mod tests;
