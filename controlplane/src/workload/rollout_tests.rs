use std::collections::BTreeMap;

use super::*;
use crate::workload::lifecycle::LifecycleState;

/// Where the tests' kind (CloneSet) keeps its partition.
const PARTITION_FIELD: &str = "spec.updateStrategy.partition";

fn int(value: i32) -> IntOrString {
    IntOrString::Int(value)
}

fn pct(value: &str) -> IntOrString {
    IntOrString::String(value.to_owned())
}

#[test]
fn partition_table() {
    let cases: &[(Option<IntOrString>, i32, i32)] = &[
        (None, 5, 0),
        (Some(int(0)), 5, 0),
        (Some(int(3)), 5, 3),
        (Some(int(7)), 5, 5),
        (Some(pct("0%")), 5, 0),
        (Some(pct("20%")), 5, 1),
        (Some(pct("30%")), 5, 2),
        (Some(pct("99%")), 5, 4),
        (Some(pct("100%")), 5, 5),
        (Some(pct("90%")), 1, 1),
        (Some(pct("50%")), 2, 1),
        (Some(pct("99%")), 0, 0),
        (Some(pct("1%")), 100, 1),
        (Some(pct("1%")), 3, 1),
    ];
    for (partition, replicas, want) in cases {
        assert_eq!(
            partition_replicas(PARTITION_FIELD, partition.as_ref(), *replicas),
            Ok(*want),
            "{partition:?} of {replicas}"
        );
    }
    assert!(partition_replicas(PARTITION_FIELD, Some(&pct("150%")), 5).is_err());
    assert!(partition_replicas(PARTITION_FIELD, Some(&int(-1)), 5).is_err());
    assert!(partition_replicas(PARTITION_FIELD, Some(&pct("x%")), 5).is_err());
}

#[test]
fn fractional_percent_shares_round_like_openkruise() {
    // (value, total, round_up, want): Go's math.Ceil/Floor(value * total / 100) in f64.
    let cases: &[(IntOrString, i32, bool, i32)] = &[
        (int(3), 10, true, 3),
        (pct("50%"), 10, true, 5),
        (pct("12.5%"), 8, true, 1),
        (pct("12.5%"), 8, false, 1),
        (pct("12.5%"), 10, true, 2),
        (pct("12.5%"), 10, false, 1),
        (pct("0.01%"), 100, true, 1),
        (pct("0.01%"), 100, false, 0),
        (pct("99.99%"), 10000, true, 9999),
        (pct("33.3%"), 3, true, 1),
        (pct("33.3%"), 3, false, 0),
        (pct("0.5%"), 0, true, 0),
        (pct("100%"), 7, true, 7),
        // 0.07 * 10000 is 700.0000000000001 in binary floating point, so the scaled
        // value rounds up to 8 where decimal arithmetic would give 7 — as in OpenKruise.
        (pct("0.07%"), 10000, true, 8),
        (pct("0.07%"), 10000, false, 7),
    ];
    for (value, total, round_up, want) in cases {
        assert_eq!(
            scaled_fractional_share(PARTITION_FIELD, value, *total, *round_up),
            Ok(*want),
            "{value:?} of {total}, round_up={round_up}"
        );
    }
}

#[test]
fn bad_fractional_percents_name_the_field() {
    let field = PARTITION_FIELD;
    let invalid = |v: &str| IntOrPercentError::InvalidNumber {
        field,
        value: v.to_owned(),
    };
    let cases: &[(IntOrString, IntOrPercentError)] = &[
        (pct("12.%"), invalid("12.%")),
        (pct(".5%"), invalid(".5%")),
        (pct("-1.5%"), invalid("-1.5%")),
        (pct("+1.5%"), invalid("+1.5%")),
        (pct("1e1%"), invalid("1e1%")),
        (pct("NaN%"), invalid("NaN%")),
        (pct("1.5 %"), invalid("1.5 %")),
        (pct("1.2.3%"), invalid("1.2.3%")),
        (
            pct("12.5"),
            IntOrPercentError::NotAPercentage {
                field,
                value: "12.5".into(),
            },
        ),
        (
            pct("100.5%"),
            IntOrPercentError::AboveHundredPercent {
                field,
                value: "100.5%".into(),
            },
        ),
        (
            int(-1),
            IntOrPercentError::Negative {
                field,
                value: "-1".into(),
            },
        ),
    ];
    for (value, want) in cases {
        assert_eq!(
            scaled_fractional_share(field, value, 10, true).as_ref(),
            Err(want),
            "{value:?}"
        );
    }
    assert_eq!(
        invalid("12.%").to_string(),
        "spec.updateStrategy.partition: \"12.%\" is not a valid percentage"
    );
}

#[test]
fn fractional_partition_table() {
    let cases: &[(IntOrString, i32, i32)] = &[
        (pct("12.5%"), 8, 1),
        (pct("12.5%"), 10, 2),
        (pct("0.01%"), 100, 1),
        (pct("0.5%"), 1, 1),
        // Rounds up to all 4, but below 100% one pod still updates.
        (pct("99.9%"), 4, 3),
        (pct("99.99%"), 10000, 9999),
        (pct("0.0%"), 5, 0),
    ];
    for (partition, replicas, want) in cases {
        assert_eq!(
            partition_replicas(PARTITION_FIELD, Some(partition), *replicas),
            Ok(*want),
            "{partition:?} of {replicas}"
        );
    }
}

#[test]
fn other_fields_keep_whole_percentages() {
    // maxUnavailable, maxSurge and scaleStrategy.maxUnavailable go through scaled_share,
    // which refuses a fraction naming the field, as OpenKruise's webhook does.
    let params = RolloutParams {
        replicas: 10,
        max_surge: Some(pct("12.5%")),
        ..RolloutParams::default()
    };
    assert_eq!(
        calculate_diffs(&params, &[]),
        Err(IntOrPercentError::InvalidNumber {
            field: MAX_SURGE_FIELD,
            value: "12.5%".into(),
        })
    );
    let params = RolloutParams {
        replicas: 8,
        partition: Some(pct("12.5%")),
        ..RolloutParams::default()
    };
    assert!(calculate_diffs(&params, &[]).is_ok());
}

/// A pod as the diff calculation reads it: on the update revision or not, serving
/// (available, no update under way, lifecycle Normal) or not, specified for deletion or not.
const fn pod(updated: bool, available: bool, specified_delete: bool) -> PodView<'static> {
    PodView {
        name: String::new(),
        labels: std::borrow::Cow::Owned(BTreeMap::new()),
        node_name: String::new(),
        phase: String::new(),
        ready: available,
        ready_since: None,
        available,
        in_place_not_ready: false,
        deletion_cost: 0,
        max_restarts: 0,
        created: None,
        updated,
        specified_delete,
        lifecycle: None,
        updating_in_place: false,
        terminating: false,
    }
}
/// Old revision, available.
const O: PodView<'_> = pod(false, true, false);
/// Old revision, specified for deletion.
const OD: PodView<'_> = pod(false, true, true);
/// New revision, available.
const N: PodView<'_> = pod(true, true, false);
/// New revision, not available.
const NU: PodView<'_> = pod(true, false, false);
/// New revision, specified for deletion.
const ND: PodView<'_> = pod(true, true, true);
/// New revision, not available, specified for deletion.
const NUD: PodView<'_> = pod(true, false, true);
/// New revision in PreparingDelete.
const NP: PodView<'_> = {
    let mut pod = N;
    pod.lifecycle = Some(LifecycleState::PreparingDelete);
    pod
};
/// New revision, terminating.
const NT: PodView<'_> = {
    let mut pod = N;
    pod.terminating = true;
    pod
};

/// The CloneSet of OpenKruise's tests: partition, maxUnavailable and maxSurge all set, the
/// two revisions different, partition rollback enabled.
fn set(
    replicas: i32,
    partition: IntOrString,
    max_unavailable: IntOrString,
    max_surge: IntOrString,
) -> RolloutParams {
    RolloutParams {
        replicas,
        partition: Some(partition),
        partition_field: PARTITION_FIELD,
        max_unavailable: Some(max_unavailable),
        max_surge: Some(max_surge),
        partition_rollback: true,
        ..RolloutParams::default()
    }
}

fn consistent(params: RolloutParams) -> RolloutParams {
    RolloutParams {
        revisions_consistent: true,
        ..params
    }
}

const NONE: RolloutDiffs = RolloutDiffs {
    scale_up: 0,
    scale_up_old_revision: 0,
    scale_down: 0,
    scale_down_old_revision: 0,
    scale_up_limit: 0,
    delete_ready_limit: 0,
    use_surge: 0,
    use_surge_old_revision: 0,
    update: 0,
    update_max_unavailable: 0,
};

/// Shorthand for an expected result: only the named fields differ from zero.
macro_rules! diffs {
    ($($field:ident: $value:expr),* $(,)?) => {
        RolloutDiffs { $($field: $value,)* ..NONE }
    };
}

/// Cases from OpenKruise's `TestCalculateDiffsWithExpectation` (older expectations with a
/// signed `scaleNum` are mapped to scale_up / scale_down; where specified-delete pods are
/// involved the current algorithm excludes them from scale-down, recomputed by hand).
#[rustfmt::skip]
#[test]
fn diffs_follow_openkruise() {
    let cases: Vec<(&str, RolloutParams, Vec<PodView<'_>>, RolloutDiffs)> = vec![
        ("empty cloneset", set(0, int(0), int(1), int(0)), vec![], NONE),
        ("scale to 5, step 1", set(5, int(0), int(1), int(0)), vec![], diffs!(scale_up: 5, scale_up_limit: 5)),
        ("scale to 5, step 2", set(5, int(0), int(1), int(0)), vec![N; 5], NONE),
        ("delete 1, step 1", set(5, int(0), int(1), int(0)), vec![ND, N, N, N, N], diffs!(delete_ready_limit: 1)),
        ("delete 1, step 2", set(5, int(0), int(1), int(0)), vec![N; 4], diffs!(scale_up: 1, scale_up_limit: 1)),
        ("delete 2, step 1", set(5, int(0), int(1), int(0)), vec![ND, ND, N, N, N], diffs!(delete_ready_limit: 1)),
        ("delete 2, step 2", set(5, int(0), int(1), int(0)), vec![ND, N, N, N], diffs!(scale_up: 1, scale_up_limit: 1)),
        ("delete 2, step 3: replacement not ready", set(5, int(0), int(1), int(0)), vec![ND, N, N, N, NU], NONE),
        ("delete 2, step 4", set(5, int(0), int(1), int(0)), vec![ND, N, N, N, N], diffs!(delete_ready_limit: 1)),
        ("delete 2 and replicas to 4, step 1", set(4, int(0), int(1), int(0)), vec![NUD, NUD, N, N, N], diffs!(delete_ready_limit: 2)),
        ("delete 2 and replicas to 4, step 2", set(4, int(0), int(1), int(0)), vec![N; 3], diffs!(scale_up: 1, scale_up_limit: 1)),
        ("partition 3, step 1", set(5, int(3), int(1), int(0)), vec![O; 5], diffs!(update: 2, update_max_unavailable: 1)),
        ("partition 3, step 2", set(5, int(3), int(1), int(0)), vec![N, O, O, O, O], diffs!(update: 1, update_max_unavailable: 1)),
        ("partition 3, step 3", set(5, int(3), int(1), int(0)), vec![N, N, O, O, O], NONE),
        ("rollback to partition 4, step 1", set(5, int(4), int(2), int(0)), vec![N, N, N, N, O], diffs!(update: -3, update_max_unavailable: 2)),
        ("rollback to partition 4, step 2", set(5, int(4), int(2), int(0)), vec![N, N, O, O, O], diffs!(update: -1, update_max_unavailable: 2)),
        ("rollback to partition 4, step 3", set(5, int(4), int(2), int(0)), vec![N, O, O, O, O], NONE),
        ("delete with maxSurge, step 1", set(5, int(0), int(0), int(1)), vec![ND, N, N, N, N], diffs!(scale_up: 1, scale_up_limit: 1, use_surge: 1)),
        ("delete with maxSurge, step 2", set(5, int(0), int(0), int(1)), vec![ND, N, N, N, N, NU], diffs!(use_surge: 1)),
        ("delete with maxSurge, step 3", set(5, int(0), int(0), int(1)), vec![ND, N, N, N, N, N], diffs!(delete_ready_limit: 1, use_surge: 1)),
        ("delete with maxSurge, step 4", set(5, int(0), int(0), int(1)), vec![N; 5], NONE),
        ("in-place partition 3 with maxSurge, step 1", set(5, int(3), int(1), int(1)), vec![O; 5], diffs!(scale_up: 1, scale_up_limit: 1, use_surge: 1, update: 2, update_max_unavailable: 1)),
        ("in-place partition 3 with maxSurge, step 2", set(5, int(3), int(1), int(1)), vec![O, O, O, O, O, NU], diffs!(use_surge: 1, update: 1, update_max_unavailable: 2)),
        ("in-place partition 3 with maxSurge, step 3", set(5, int(3), int(1), int(1)), vec![O, O, O, O, NU, NU], diffs!(scale_down: 1, scale_down_old_revision: 1)),
        ("in-place partition 3 with maxSurge, step 4", set(5, int(3), int(1), int(1)), vec![O, O, O, O, N, NU], diffs!(scale_down: 1, scale_down_old_revision: 1, delete_ready_limit: 1)),
        ("recreate partition 3 with maxSurge, step 3", set(5, int(3), int(1), int(1)), vec![O, O, O, O, OD, NU], diffs!(use_surge: 1, use_surge_old_revision: 1, delete_ready_limit: 1, update: 1, update_max_unavailable: 2)),
        ("recreate partition 3 with maxSurge, step 4", set(5, int(3), int(1), int(1)), vec![O, O, O, O, NU], diffs!(scale_up: 1, scale_up_limit: 1, use_surge: 1, update: 1, update_max_unavailable: 1)),
        ("recreate partition 3 with maxSurge, step 5", set(5, int(3), int(1), int(1)), vec![O, O, O, O, NU, NU], diffs!(scale_down: 1, scale_down_old_revision: 1)),
        ("recreate partition 3 with maxSurge, step 7", set(5, int(3), int(1), int(1)), vec![O, O, O, N, N], NONE),
        ("partition 99%, maxUnavailable 3, maxSurge 2, step 1", set(5, pct("99%"), int(3), int(2)), vec![O; 5], diffs!(scale_up: 1, scale_up_limit: 1, use_surge: 1, update: 1, update_max_unavailable: 3)),
        ("partition 99%, maxUnavailable 3, maxSurge 2, step 2", set(5, pct("99%"), int(3), int(2)), vec![O, O, O, O, O, NU], diffs!(scale_down: 1, scale_down_old_revision: 1, delete_ready_limit: 3)),
        ("partition 99%, maxUnavailable 3, maxSurge 2, step 3", set(5, pct("99%"), int(3), int(2)), vec![O, O, O, O, NU], NONE),
        ("partition 99%, 40%/30%, step 1", set(5, pct("99%"), pct("40%"), pct("30%")), vec![O; 5], diffs!(scale_up: 1, scale_up_limit: 1, use_surge: 1, update: 1, update_max_unavailable: 2)),
        ("partition 99%, 40%/30%, step 2", set(5, pct("99%"), pct("40%"), pct("30%")), vec![O, O, O, O, O, NU], diffs!(scale_down: 1, scale_down_old_revision: 1, delete_ready_limit: 2)),
        ("partition 99%, 30%/30%: maxUnavailable rounds down", set(5, pct("99%"), pct("30%"), pct("30%")), vec![O; 5], diffs!(scale_up: 1, scale_up_limit: 1, use_surge: 1, update: 1, update_max_unavailable: 1)),
        ("partition 99%, 30%/30%, step 2", set(5, pct("99%"), pct("30%"), pct("30%")), vec![O, O, O, O, O, NU], diffs!(scale_down: 1, scale_down_old_revision: 1, delete_ready_limit: 1)),
        ("consistent, all updated", consistent(set(5, int(0), int(1), int(0))), vec![N; 5], NONE),
        ("consistent, partition 3 but all new: no rollback", consistent(set(5, int(3), int(1), int(0))), vec![N; 5], NONE),
        ("consistent, more new than partition allows", consistent(set(5, int(3), int(1), int(0))), vec![O, O, N, N, N], NONE),
        ("consistent, partition 1", consistent(set(5, int(1), int(1), int(0))), vec![O, O, O, N, N], diffs!(update: 2, update_max_unavailable: 1)),
        ("update while scale-out fails", consistent(set(5, int(1), int(2), int(0))), vec![O, O, N, N], diffs!(scale_up: 1, scale_up_limit: 1, update: 1, update_max_unavailable: 1)),
        ("update while scale-in fails", consistent(set(5, int(1), int(1), int(0))), vec![O, O, O, N, N, N], diffs!(scale_down: 1, scale_down_old_revision: 2, delete_ready_limit: 2, update: 1, update_max_unavailable: 2)),
        ("rollback gate off: raised partition does not roll back", RolloutParams { partition_rollback: false, ..set(5, int(4), int(1), int(0)) }, vec![O, N, N, N, N], NONE),
    ];
    for (name, params, pods, want) in &cases {
        assert_eq!(calculate_diffs(params, pods).as_ref(), Ok(want), "{name}");
    }
}

/// Cases beyond OpenKruise's table, computed by hand from the algorithm.
#[rustfmt::skip]
#[test]
fn diffs_edge_cases() {
    let unlimited_scale = set(5, int(0), int(1), int(0));
    let scale_limited = |replicas: i32, limit: IntOrString| RolloutParams {
        scale_max_unavailable: Some(limit),
        ..set(replicas, int(0), int(1), int(0))
    };
    let defaults = |replicas: i32| RolloutParams { replicas, partition_rollback: true, ..RolloutParams::default() };
    let surge_10 = |paused: bool| RolloutParams { max_surge: Some(pct("10%")), paused, ..defaults(7) };
    let cases: Vec<(&str, RolloutParams, Vec<PodView<'_>>, RolloutDiffs)> = vec![
        ("PreparingDelete still counts towards replicas", unlimited_scale.clone(), vec![N, N, N, N, NP], NONE),
        ("excludePreparingDelete replaces it at once", RolloutParams { exclude_preparing_delete: true, ..unlimited_scale.clone() }, vec![N, N, N, N, NP], diffs!(scale_up: 1, scale_up_limit: 1)),
        ("terminating pods are not counted", unlimited_scale.clone(), vec![N, N, N, N, N, NT], NONE),
        ("scale maxUnavailable 2 with 1 unavailable allows 1 create", scale_limited(10, int(2)), vec![NU, N, N, N], diffs!(scale_up: 6, scale_up_limit: 1)),
        ("scale maxUnavailable 25% of 10 rounds up to 3", scale_limited(10, pct("25%")), vec![], diffs!(scale_up: 10, scale_up_limit: 3)),
        ("scale maxUnavailable exhausted", scale_limited(5, int(1)), vec![NU, NU], diffs!(scale_up: 3)),
        ("PreparingDelete uses scale maxUnavailable too", scale_limited(5, int(2)), vec![NP, N], diffs!(scale_up: 3, scale_up_limit: 1)),
        ("default maxUnavailable 20% of 5", defaults(5), vec![O; 5], diffs!(update: 5, update_max_unavailable: 1)),
        ("default maxUnavailable 20% of 7 rounds up", defaults(7), vec![O; 7], diffs!(update: 7, update_max_unavailable: 2)),
        ("maxSurge 10% of 7 rounds up, maxUnavailable then rounds down", surge_10(false), vec![O; 7], diffs!(scale_up: 1, scale_up_limit: 1, use_surge: 1, update: 7, update_max_unavailable: 1)),
        ("paused: no surge, maxUnavailable rounds up again", surge_10(true), vec![O; 7], diffs!(update: 7, update_max_unavailable: 2)),
        ("rollback with surge creates an old-revision pod", set(5, int(4), int(1), int(1)), vec![N; 5], diffs!(scale_up: 1, scale_up_old_revision: 5, scale_up_limit: 1, use_surge: 1, use_surge_old_revision: 1, update: -4, update_max_unavailable: 1)),
        ("unavailable pods use up the delete budget", set(3, int(0), int(1), int(0)), vec![NU, N, N, N], diffs!(scale_down: 1, delete_ready_limit: 1)),
        ("scale down prefers old pods beyond the partition; update computed alongside", set(4, int(2), int(1), int(0)), vec![O, O, O, N, N, N], diffs!(scale_down: 2, scale_down_old_revision: 1, delete_ready_limit: 3, update: 1, update_max_unavailable: 3)),
        ("scale up creates partition pods on the old revision; the update budget goes negative while short of replicas", set(6, int(3), int(1), int(0)), vec![N, N], diffs!(scale_up: 4, scale_up_old_revision: 3, scale_up_limit: 4, update: 1, update_max_unavailable: -3)),
    ];
    for (name, params, pods, want) in &cases {
        assert_eq!(calculate_diffs(params, pods).as_ref(), Ok(want), "{name}");
    }
}

#[test]
fn diffs_refuse_bad_fields() {
    let base = set(5, int(0), int(1), int(0));
    let cases = [
        (
            RolloutParams {
                max_surge: Some(pct("abc%")),
                ..base.clone()
            },
            MAX_SURGE_FIELD,
        ),
        (
            // The kind names where its partition is.
            RolloutParams {
                partition: Some(pct("150%")),
                partition_field: "spec.updateStrategy.rollingUpdate.partition",
                ..base.clone()
            },
            "spec.updateStrategy.rollingUpdate.partition",
        ),
        (
            RolloutParams {
                max_unavailable: Some(pct("5")),
                ..base.clone()
            },
            MAX_UNAVAILABLE_FIELD,
        ),
        (
            RolloutParams {
                scale_max_unavailable: Some(int(-1)),
                ..base.clone()
            },
            SCALE_MAX_UNAVAILABLE_FIELD,
        ),
    ];
    for (params, field) in &cases {
        let err = calculate_diffs(params, &[N])
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.starts_with(field), "{params:?}: {err}");
    }
}

/// int-or-percent against `replicas: 2147483647` (admitted, as OpenKruise and the native
/// kinds admit it): every share stays in range, and the diffs saturate instead of wrapping.
#[rustfmt::skip]
#[test]
fn int32_max_replicas_never_overflow() {
    let max = i32::MAX;
    let field = MAX_UNAVAILABLE_FIELD;
    let shares: &[(IntOrString, bool, i32)] = &[
        (pct("100%"), true, max),
        (pct("100%"), false, max),
        (pct("50%"), true, 1_073_741_824),
        (pct("50%"), false, 1_073_741_823),
        (pct("1%"), true, 21_474_837),
        (pct("0%"), true, 0),
        (int(max), true, max),
    ];
    for (value, round_up, want) in shares {
        assert_eq!(scaled_share(field, value, max, *round_up), Ok(*want), "{value:?}");
    }
    assert_eq!(scaled_fractional_share(PARTITION_FIELD, &pct("99.9%"), max, true), Ok(2_145_336_164));
    assert_eq!(partition_replicas(PARTITION_FIELD, Some(&pct("100%")), max), Ok(max));
    assert_eq!(partition_replicas(PARTITION_FIELD, Some(&pct("99%")), max), Ok(2_126_008_811));
    assert_eq!(partition_replicas(PARTITION_FIELD, Some(&int(max)), max), Ok(max));
    assert_eq!(parallelism(&pct("100%"), usize::MAX), usize::MAX.div_ceil(100));

    let all = set(max, pct("0%"), pct("100%"), pct("100%"));
    let diffs = calculate_diffs(&all, &[]).expect("diffs");
    assert_eq!((diffs.scale_up, diffs.scale_up_limit), (max, max), "replicas + surge saturates");
    let few_old = calculate_diffs(&consistent(set(max, int(max), pct("100%"), pct("100%"))), &[O; 3]).expect("diffs");
    assert_eq!(few_old.scale_up, max - 3);
    assert_eq!(few_old.scale_up_old_revision, max - 3);
}
