//! Rollout arithmetic: int-or-percent fields scaled the Kubernetes way, CloneSet partition,
//! and OpenKruise's `calculateDiffsWithExpectation` — how many pods to create, delete and
//! update in this reconcile — as one pure function over counted pods.
//!
//! The numbers decide what the controller may do *now*; the reconciler then picks which
//! pods (see `ordering`) and acts. Keeping them apart is what lets dozens of cases below be
//! checked without a cluster.

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

/// Int-or-percent arithmetic, in `stevedore-parsers` (fuzzed there).
pub use stevedore_parsers::int_or_percent::IntOrPercentError;
use stevedore_parsers::int_or_percent::{self, IntOrPercent};

use super::pod_view::PodView;
use crate::api::cloneset::DEFAULT_MAX_UNAVAILABLE;

#[cfg(test)]
#[path = "rollout_tests.rs"]
mod tests;

/// Field path of `updateStrategy.maxUnavailable`.
pub const MAX_UNAVAILABLE_FIELD: &str = "spec.updateStrategy.maxUnavailable";
/// Field path of `updateStrategy.maxSurge`.
pub const MAX_SURGE_FIELD: &str = "spec.updateStrategy.maxSurge";
/// Field path of `scaleStrategy.maxUnavailable`.
pub const SCALE_MAX_UNAVAILABLE_FIELD: &str = "spec.scaleStrategy.maxUnavailable";

/// A job's parallelism (ImagePullJob, BroadcastJob): the most tasks active at once, an
/// integer, or a percentage of the desired tasks rounded up (so any non-zero percentage of
/// a non-empty job lets one task run).
pub fn parallelism(value: &IntOrString, desired: usize) -> usize {
    match value {
        IntOrString::Int(n) => usize::try_from(*n).unwrap_or(0),
        IntOrString::String(s) => {
            let percent: usize = s
                .strip_suffix('%')
                .and_then(|p| p.parse().ok())
                .unwrap_or(100)
                .min(100);
            desired.saturating_mul(percent).div_ceil(100)
        }
    }
}

/// [`int_or_percent::scaled_value`] of a Kubernetes int-or-string field:
/// `intstr.GetScaledValueFromIntOrPercent`, negative values and percentages above 100%
/// accepted; use [`scaled_share`] for fields where those are invalid.
pub fn scaled_value(
    field: &'static str,
    value: &IntOrString,
    total: i32,
    round_up: bool,
) -> Result<i32, IntOrPercentError> {
    int_or_percent::scaled_value(field, plain(value), total, round_up)
}

/// [`int_or_percent::scaled_share`] of a Kubernetes int-or-string field: a share of the
/// replicas (partition, maxUnavailable, maxSurge), refusing negative values and
/// percentages above 100%, which admission should have caught.
pub fn scaled_share(
    field: &'static str,
    value: &IntOrString,
    total: i32,
    round_up: bool,
) -> Result<i32, IntOrPercentError> {
    int_or_percent::scaled_share(field, plain(value), total, round_up)
}

/// The parsers take a borrowed plain value, so they need no Kubernetes types.
fn plain(value: &IntOrString) -> IntOrPercent<'_> {
    match value {
        IntOrString::Int(int) => IntOrPercent::Int(*int),
        IntOrString::String(text) => IntOrPercent::Str(text),
    }
}

/// [`scaled_share`] for a percentage that may have a fraction (`"12.5%"`), as OpenKruise
/// allows for CloneSet `partition` only (kruise #1124): the percentage of `total` is
/// computed in binary floating point as Go's `math.Ceil(value * total / 100)` (or
/// `Floor`) does, so results agree with OpenKruise even where the decimal is inexact.
/// An integer is taken as is.
pub fn scaled_fractional_share(
    field: &'static str,
    value: &IntOrString,
    total: i32,
    round_up: bool,
) -> Result<i32, IntOrPercentError> {
    let text = match value {
        IntOrString::Int(_) => return scaled_share(field, value, total, round_up),
        IntOrString::String(text) => text,
    };
    let percent = parse_fractional_percent(field, text)?;
    if percent > 100.0 {
        return Err(IntOrPercentError::AboveHundredPercent {
            field,
            value: text.clone(),
        });
    }
    let scaled = percent * f64::from(total) / 100.0;
    let rounded = if round_up {
        scaled.ceil()
    } else {
        scaled.floor()
    };
    // Within [0, total] for a percentage in [0, 100], so the conversion is exact.
    Ok(rounded.clamp(0.0, f64::from(total.max(0))) as i32)
}

/// `"<digits>[.<digits>]%"` as a number; the syntax the CRD's `partition` rule admits
/// (no sign, exponent or blanks, which Go's `ParseFloat` would also take).
fn parse_fractional_percent(field: &'static str, text: &str) -> Result<f64, IntOrPercentError> {
    let Some(number) = text.strip_suffix('%') else {
        return Err(IntOrPercentError::NotAPercentage {
            field,
            value: text.to_owned(),
        });
    };
    let (whole, fraction) = number.split_once('.').unwrap_or((number, "0"));
    let digits = |part: &str| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit());
    if !digits(whole) || !digits(fraction) {
        return Err(IntOrPercentError::InvalidNumber {
            field,
            value: text.to_owned(),
        });
    }
    number
        .parse::<f64>()
        .map_err(|_| IntOrPercentError::InvalidNumber {
            field,
            value: text.to_owned(),
        })
}

/// OpenKruise's `CalculatePartitionReplicas`: how many pods stay on the current revision.
/// A percentage (which may have a fraction, `"12.5%"`) is rounded up, so any non-zero
/// percentage keeps at least one old pod, but a percentage below 100% with more than one
/// replica still updates at least one pod; the result is clamped to `[0, replicas]`.
/// `field` is where the kind keeps its partition, named in errors.
pub fn partition_replicas(
    field: &'static str,
    partition: Option<&IntOrString>,
    replicas: i32,
) -> Result<i32, IntOrPercentError> {
    let Some(partition) = partition else {
        return Ok(0);
    };
    let mut kept = scaled_fractional_share(field, partition, replicas, true)?;
    if let IntOrString::String(text) = partition
        && replicas > 1
        && kept == replicas
        && text != "100%"
    {
        kept = replicas - 1;
    }
    Ok(kept.clamp(0, replicas.max(0)))
}

/// The workload settings the calculation depends on, as plain values: each workload's
/// adapter fills them from its own spec (CloneSet: `cloneset::adapter`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RolloutParams {
    /// `spec.replicas`.
    pub replicas: i32,
    /// `updateStrategy.partition` (None: 0).
    pub partition: Option<IntOrString>,
    /// Where the kind keeps its partition (CloneSet `spec.updateStrategy.partition`),
    /// named in errors.
    pub partition_field: &'static str,
    /// `updateStrategy.maxUnavailable` (None: 20%).
    pub max_unavailable: Option<IntOrString>,
    /// `updateStrategy.maxSurge` (None: 0).
    pub max_surge: Option<IntOrString>,
    /// `scaleStrategy.maxUnavailable` (None: unlimited).
    pub scale_max_unavailable: Option<IntOrString>,
    /// `updateStrategy.paused`: no surge while paused.
    pub paused: bool,
    /// `status.currentRevision == status.updateRevision`: pods can only move forward.
    pub revisions_consistent: bool,
    /// The CloneSetPartitionRollback gate: raising the partition rolls pods back.
    pub partition_rollback: bool,
    /// Count scale without pods in PreparingDelete (`scaleStrategy.excludePreparingDelete`).
    pub exclude_preparing_delete: bool,
}

impl RolloutParams {
    /// The settings under `updateStrategy.type: OnDelete`: no partition (a replacement is
    /// created at the update revision) and no surge (surge only serves a rolling update);
    /// maxUnavailable still bounds how many ready pods a scale-down deletes.
    pub fn on_delete(self) -> Self {
        Self {
            partition: None,
            max_surge: None,
            ..self
        }
    }
}

/// OpenKruise's `expectationDiffs`: what this reconcile may do.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RolloutDiffs {
    /// Pods to create.
    pub scale_up: i32,
    /// Of those, how many should be on the current (old) revision; may exceed `scale_up`.
    pub scale_up_old_revision: i32,
    /// Pods to delete, beyond those already specified for deletion.
    pub scale_down: i32,
    /// Of those, how many should be old-revision pods; may exceed `scale_down`.
    pub scale_down_old_revision: i32,
    /// Most pods to create now, capped by `scaleStrategy.maxUnavailable`.
    pub scale_up_limit: i32,
    /// Most ready pods that may be deleted now, capped by `updateStrategy.maxUnavailable`.
    pub delete_ready_limit: i32,
    /// Pods temporarily above `replicas` (maxSurge in use).
    pub use_surge: i32,
    /// The part of `use_surge` that is old-revision pods.
    pub use_surge_old_revision: i32,
    /// Positive: pods to move to the update revision; negative: pods to roll back.
    pub update: i32,
    /// Most pods that may be unavailable while updating.
    pub update_max_unavailable: i32,
}

#[derive(Default)]
struct Counts {
    total: i64,
    new: i64,
    new_active: i64,
    old: i64,
    old_active: i64,
    unavailable: i64,
    to_delete_new: i64,
    to_delete_old: i64,
    preparing_delete_new: i64,
    preparing_delete_old: i64,
}

/// Counts the pods by revision and state; `updated` says whether a pod counts as on the
/// update revision, its view whether it is serving, in PreparingDelete, specified for
/// deletion or terminating.
fn count(pods: &[PodView<'_>], updated: impl Fn(&PodView<'_>) -> bool) -> Counts {
    let mut c = Counts::default();
    for pod in pods.iter().filter(|pod| !pod.terminating) {
        c.total += 1;
        let (all, active, to_delete, preparing) = if updated(pod) {
            (
                &mut c.new,
                &mut c.new_active,
                &mut c.to_delete_new,
                &mut c.preparing_delete_new,
            )
        } else {
            (
                &mut c.old,
                &mut c.old_active,
                &mut c.to_delete_old,
                &mut c.preparing_delete_old,
            )
        };
        *all += 1;
        if pod.preparing_delete() {
            *preparing += 1;
        } else {
            *active += 1;
            if pod.specified_delete {
                *to_delete += 1;
            } else if !pod.serving() {
                c.unavailable += 1;
            }
        }
    }
    c
}

/// `calculateDiffsWithExpectation`: pods to create, delete and update now.
///
/// * partition pods stay old; `update` is how far the old/new split is from that target;
/// * maxSurge (rounded up; 0 while paused) lets extra pods exist, used either to replace
///   specified-delete pods without going below maxUnavailable or to update by creating
///   first — never both in one reconcile;
/// * maxUnavailable (rounded up, or down when surge is on, as Deployments do) limits how
///   many ready pods may be deleted and how many may be unavailable while updating; pods
///   already unavailable or in PreparingDelete use up that budget;
/// * `scaleStrategy.maxUnavailable` caps creations while too many pods are unavailable.
pub fn calculate_diffs(
    params: &RolloutParams,
    pods: &[PodView<'_>],
) -> Result<RolloutDiffs, IntOrPercentError> {
    calculate_diffs_counting(params, pods, |pod| pod.updated)
}

/// [`calculate_diffs`] with `updated` deciding which pods count as on the update revision
/// (the scale step also counts pods in PreparingUpdate, OpenKruise's `IsPodUpdate` under
/// PreparingUpdateAsUpdate), so no caller copies the views to change that one fact.
pub fn calculate_diffs_counting(
    params: &RolloutParams,
    pods: &[PodView<'_>],
    updated: impl Fn(&PodView<'_>) -> bool,
) -> Result<RolloutDiffs, IntOrPercentError> {
    let limits = Limits::of(params)?;
    let replicas = i64::from(params.replicas);
    let partition = limits.partition;
    let c = count(pods, updated);
    let mut update_old_diff = c.old_active - partition;
    let mut update_new_diff = c.new_active - (replicas - partition);
    let total_unavailable = c.preparing_delete_new + c.preparing_delete_old + c.unavailable;
    if params.revisions_consistent || !params.partition_rollback {
        update_old_diff = update_old_diff.max(0);
        update_new_diff = update_new_diff.min(0);
    }

    let mut res = Diffs64::default();
    if limits.max_surge > 0 {
        let (surge, old_surge) = surge_wanted(
            &c,
            &limits,
            total_unavailable,
            update_old_diff,
            update_new_diff,
        );
        res.use_surge = limits.max_surge.min(surge);
        res.use_surge_old_revision = res.use_surge.min(old_surge);
    }

    let (current_total, current_old) = if params.exclude_preparing_delete {
        (
            c.total - c.preparing_delete_old - c.preparing_delete_new,
            c.old - c.preparing_delete_old,
        )
    } else {
        (c.total, c.old)
    };
    let expected_total = replicas + res.use_surge;
    let expected_old = partition + res.use_surge_old_revision;

    let up = expected_total - current_total;
    if up > 0 {
        res.scale_up = up;
        res.scale_up_old_revision = (expected_old - current_old).max(0);
        res.scale_up_limit = up.min((limits.scale_max_unavailable - total_unavailable).max(0));
    }
    let down = current_total - c.to_delete_old - c.to_delete_new - expected_total;
    if down > 0 {
        res.scale_down = down;
        res.scale_down_old_revision = (current_old - c.to_delete_old - expected_old).max(0);
    }
    if c.to_delete_new > 0 || c.to_delete_old > 0 || res.scale_down > 0 {
        res.delete_ready_limit =
            (limits.max_unavailable + (c.total - replicas) - total_unavailable).max(0);
    }
    res.update = if update_old_diff.abs() <= update_new_diff.abs() {
        update_old_diff
    } else {
        -update_new_diff
    };
    if res.update != 0 {
        res.update_max_unavailable = update_unavailable_limit(&limits, &c, replicas);
    }
    Ok(res.narrow())
}

/// maxUnavailable for an update, pods beyond replicas (surge) allowed on top.
fn update_unavailable_limit(limits: &Limits, c: &Counts, replicas: i64) -> i64 {
    limits.max_unavailable + c.total - replicas
}

/// The update's maxUnavailable when no pod changes revision but some still have work in
/// the rolling update (claims to grow, `workload::claim_resize`), which `calculate_diffs`
/// leaves at 0 then.
pub fn update_max_unavailable(
    params: &RolloutParams,
    pods: &[PodView<'_>],
) -> Result<i32, IntOrPercentError> {
    let limits = Limits::of(params)?;
    let limit = update_unavailable_limit(
        &limits,
        &count(pods, |pod| pod.updated),
        i64::from(params.replicas),
    );
    Ok(i32::try_from(limit.clamp(0, i64::from(i32::MAX))).unwrap_or(i32::MAX))
}

/// The int-or-percent settings scaled against the replicas.
struct Limits {
    /// Pods that stay on the current revision.
    partition: i64,
    /// Rounded up; 0 while paused.
    max_surge: i64,
    /// Rounded up, or down when surge is on (as Deployments do).
    max_unavailable: i64,
    /// `scaleStrategy.maxUnavailable`; unlimited when unset.
    scale_max_unavailable: i64,
}

impl Limits {
    fn of(params: &RolloutParams) -> Result<Self, IntOrPercentError> {
        let replicas = params.replicas;
        let partition = params.partition.as_ref();
        let partition = i64::from(partition_replicas(
            params.partition_field,
            partition,
            replicas,
        )?);
        let max_surge = match (&params.max_surge, params.paused) {
            (Some(surge), false) => {
                i64::from(scaled_share(MAX_SURGE_FIELD, surge, replicas, true)?)
            }
            _ => 0,
        };
        let default_unavailable = IntOrString::String(DEFAULT_MAX_UNAVAILABLE.to_owned());
        let max_unavailable = params
            .max_unavailable
            .as_ref()
            .unwrap_or(&default_unavailable);
        let max_unavailable = i64::from(scaled_share(
            MAX_UNAVAILABLE_FIELD,
            max_unavailable,
            replicas,
            max_surge == 0,
        )?);
        let scale_max_unavailable = match &params.scale_max_unavailable {
            Some(value) => i64::from(scaled_share(
                SCALE_MAX_UNAVAILABLE_FIELD,
                value,
                replicas,
                true,
            )?),
            None => i64::from(i32::MAX),
        };
        Ok(Self {
            partition,
            max_surge,
            max_unavailable,
            scale_max_unavailable,
        })
    }
}

/// The surge (and its old-revision part) wanted either to replace specified-delete pods
/// without going below maxUnavailable, or to update by creating first.
fn surge_wanted(
    c: &Counts,
    limits: &Limits,
    total_unavailable: i64,
    update_old_diff: i64,
    update_new_diff: i64,
) -> (i64, i64) {
    let to_delete = c.to_delete_new + c.to_delete_old;
    let (mut scale_surge, mut scale_old_surge) = (0, 0);
    if to_delete > 0 {
        scale_surge = (total_unavailable + to_delete - limits.max_unavailable)
            .max(0)
            .min(to_delete);
        if scale_surge > c.to_delete_new {
            scale_old_surge = scale_surge - c.to_delete_new;
        }
    }
    let (mut update_surge, mut update_old_surge) = (0, 0);
    if opposite_signs(update_old_diff, update_new_diff) {
        if update_old_diff.abs() <= update_new_diff.abs() {
            update_surge = update_old_diff.abs();
            if update_old_diff < 0 {
                update_old_surge = update_surge;
            }
        } else {
            update_surge = update_new_diff.abs();
            if update_new_diff > 0 {
                update_old_surge = update_surge;
            }
        }
    }
    // The controller never scales and updates in the same reconcile, so only one of the
    // two reasons gets the surge.
    if scale_surge >= update_surge {
        (scale_surge, scale_old_surge)
    } else {
        (update_surge, update_old_surge)
    }
}

fn opposite_signs(a: i64, b: i64) -> bool {
    (a > 0 && b < 0) || (a < 0 && b > 0)
}

/// The diffs while computing, in i64 so that `replicas + surge` and an unlimited
/// scale maxUnavailable cannot overflow.
#[derive(Default)]
struct Diffs64 {
    scale_up: i64,
    scale_up_old_revision: i64,
    scale_down: i64,
    scale_down_old_revision: i64,
    scale_up_limit: i64,
    delete_ready_limit: i64,
    use_surge: i64,
    use_surge_old_revision: i64,
    update: i64,
    update_max_unavailable: i64,
}

impl Diffs64 {
    fn narrow(self) -> RolloutDiffs {
        let n = |v: i64| {
            i32::try_from(v.clamp(i64::from(i32::MIN), i64::from(i32::MAX))).unwrap_or_default()
        };
        RolloutDiffs {
            scale_up: n(self.scale_up),
            scale_up_old_revision: n(self.scale_up_old_revision),
            scale_down: n(self.scale_down),
            scale_down_old_revision: n(self.scale_down_old_revision),
            scale_up_limit: n(self.scale_up_limit),
            delete_ready_limit: n(self.delete_ready_limit),
            use_surge: n(self.use_surge),
            use_surge_old_revision: n(self.use_surge_old_revision),
            update: n(self.update),
            update_max_unavailable: n(self.update_max_unavailable),
        }
    }
}
