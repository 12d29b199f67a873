//! The rolling update under `volumeClaimUpdateStrategy` (OpenKruise 1.9's
//! `rollingUpdateStatefulsetPods` with `StatefulSetAutoResizePVCGate`): a pod's claims
//! are grown to the template's request before the pod moves, the pod waits until the volume
//! grew, a pod with claims still growing counts as unavailable, a claim-template change
//! alone grows claims without restarting pods, a smaller request asks nothing, a claim of
//! another class stops the update; OnDelete patches nothing.

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, PersistentVolumeClaimCondition, Pod};

use super::tests::{V1, V2, running, sync_with, web};
use super::*;
use crate::api::statefulset::{VolumeClaimUpdateStrategy, VolumeClaimUpdateStrategyType};
use crate::workload::actions::DeleteReason;
use crate::workload::test_pods::sized_claim;
use crate::workload::update_hold::{UpdateHold, UpdateHoldSeen};

/// A claim of class `fast` asking for `request`, with `capacity` once bound.
fn sized(name: &str, request: &str, capacity: Option<&str>) -> PersistentVolumeClaim {
    sized_claim(name, Some("fast"), request, capacity)
}

fn file_system_pending(mut claim: PersistentVolumeClaim) -> PersistentVolumeClaim {
    claim.status.get_or_insert_default().conditions = Some(vec![PersistentVolumeClaimCondition {
        type_: "FileSystemResizePending".to_owned(),
        status: "True".to_owned(),
        ..PersistentVolumeClaimCondition::default()
    }]);
    claim
}

fn of_class(mut claim: PersistentVolumeClaim, class: &str) -> PersistentVolumeClaim {
    claim.spec.get_or_insert_default().storage_class_name = Some(class.to_owned());
    claim
}

/// `web` with 2 pods (OrderedReady: one pod at a time), its `www` template asking for
/// `request` on class `fast`, under `strategy`.
fn set(request: &str, strategy: VolumeClaimUpdateStrategyType) -> StatefulSet {
    let mut set = web(2, PodManagementPolicy::OrderedReady);
    set.spec.volume_claim_templates = vec![sized("www", request, None)];
    set.spec.volume_claim_update_strategy = Some(VolumeClaimUpdateStrategy {
        type_: Some(strategy),
    });
    set
}

/// What the sync did: claims grown (name, request), pods deleted, and the refusal.
type Outcome = (Vec<(String, String)>, Vec<String>, Option<String>);

fn outcome(out: &StatefulSetPlan) -> Outcome {
    let grown = (out.plan.claim_resizes.iter())
        .map(|r| (r.claim.clone(), r.request.clone()))
        .collect();
    let deleted = (out.plan.deletes.iter())
        .inspect(|d| assert_eq!(d.reason, DeleteReason::RecreateUpdate))
        .map(|d| d.pod.clone())
        .collect();
    (grown, deleted, out.plan.claim_refusal.clone())
}

/// (case, set, pods, claims, update revision, outcome)
type Case = (
    &'static str,
    StatefulSet,
    Vec<Pod>,
    Vec<PersistentVolumeClaim>,
    &'static str,
    Outcome,
);

fn grow(claim: &str) -> (String, String) {
    (claim.to_owned(), "2Gi".to_owned())
}

#[test]
fn claims_grow_before_their_pod_moves_as_openkruise_rolls() {
    use VolumeClaimUpdateStrategyType::{OnDelete, OnPodRollingUpdate};
    let s = |request| set(request, OnPodRollingUpdate);
    let old = |set: &StatefulSet| vec![running(set, 0, V1), running(set, 1, V1)];
    let new = |set: &StatefulSet| vec![running(set, 0, V2), running(set, 1, V2)];
    let small = || {
        vec![
            sized("www-web-0", "1Gi", Some("1Gi")),
            sized("www-web-1", "1Gi", Some("1Gi")),
        ]
    };
    let none: Vec<String> = Vec::new();
    #[rustfmt::skip]
    let cases: Vec<Case> = vec![
        ("image and size change: the highest ordinal's claim grows first, its pod waits",
            s("2Gi"), old(&s("2Gi")), small(), V2, (vec![grow("www-web-1")], none.clone(), None)),
        ("patched, the volume is growing: the pod waits and holds the budget",
            s("2Gi"), old(&s("2Gi")),
            vec![sized("www-web-0", "1Gi", Some("1Gi")), sized("www-web-1", "2Gi", Some("1Gi"))],
            V2, (vec![], none.clone(), None)),
        ("the volume grew: the pod is updated (recreated), the next claim waits for it",
            s("2Gi"), old(&s("2Gi")),
            vec![sized("www-web-0", "1Gi", Some("1Gi")), sized("www-web-1", "2Gi", Some("2Gi"))],
            V2, (vec![], vec!["web-1".to_owned()], None)),
        ("only the file system is left to grow: the pod is updated",
            s("2Gi"), old(&s("2Gi")),
            vec![sized("www-web-0", "1Gi", Some("1Gi")), file_system_pending(sized("www-web-1", "2Gi", Some("1Gi")))],
            V2, (vec![], vec!["web-1".to_owned()], None)),
        ("a claim-template change alone grows claims and restarts no pod",
            s("2Gi"), new(&s("2Gi")), small(), V2, (vec![grow("www-web-1")], none.clone(), None)),
        ("an updated pod whose claims still grow is unavailable: the next pod waits",
            s("2Gi"), vec![running(&s("2Gi"), 0, V1), running(&s("2Gi"), 1, V2)],
            vec![sized("www-web-0", "1Gi", Some("1Gi")), sized("www-web-1", "2Gi", Some("1Gi"))],
            V2, (vec![], none.clone(), None)),
        ("a smaller request asks nothing of the claims: the pod is updated",
            s("1Gi"), old(&s("1Gi")),
            vec![sized("www-web-0", "2Gi", Some("2Gi")), sized("www-web-1", "2Gi", Some("2Gi"))],
            V2, (vec![], vec!["web-1".to_owned()], None)),
        ("a claim of another class cannot be patched: the update stops and says why",
            s("2Gi"), old(&s("2Gi")),
            vec![sized("www-web-0", "1Gi", Some("1Gi")), of_class(sized("www-web-1", "1Gi", Some("1Gi")), "slow")],
            V2, (vec![], none.clone(), Some("claim www-web-1 of pod web-1 differs from its template in more than its storage request (storage class or access modes), so it cannot be updated; delete the claim to have it made again from the template".to_owned()))),
        ("OnDelete: no claim is patched, the pod is updated as before",
            set("2Gi", OnDelete), old(&set("2Gi", OnDelete)), small(), V2,
            (vec![], vec!["web-1".to_owned()], None)),
        ("OnDelete and a claim-template change alone: nothing happens",
            set("2Gi", OnDelete), new(&set("2Gi", OnDelete)), small(), V2, (vec![], none.clone(), None)),
    ];
    for (case, set, pods, claims, update, want) in cases {
        let out = sync_with(&set, &pods, &claims, update);
        assert_eq!(outcome(&out), want, "{case}");
    }
}

#[test]
fn pods_below_the_partition_keep_their_claims() {
    let mut set = set("2Gi", VolumeClaimUpdateStrategyType::OnPodRollingUpdate);
    super::tests::rolling(
        &mut set,
        crate::api::statefulset::RollingUpdateStatefulSetStrategy {
            partition: Some(1),
            ..Default::default()
        },
    );
    let pods = [running(&set, 0, V2), running(&set, 1, V2)];
    let claims = [
        sized("www-web-0", "1Gi", Some("1Gi")),
        sized("www-web-1", "2Gi", Some("2Gi")),
    ];
    let out = sync_with(&set, &pods, &claims, V2);
    assert_eq!(outcome(&out), (vec![], vec![], None));
}

#[test]
fn a_pod_growing_its_claims_holds_the_next_pod_within_max_unavailable_and_says_so() {
    let set = set("2Gi", VolumeClaimUpdateStrategyType::OnPodRollingUpdate);
    let pods = [running(&set, 0, V1), running(&set, 1, V2)];
    let claims = [
        sized("www-web-0", "1Gi", Some("1Gi")),
        sized("www-web-1", "1Gi", Some("1Gi")),
    ];
    let out = sync_with(&set, &pods, &claims, V2);
    assert_eq!(outcome(&out), (vec![grow("www-web-1")], vec![], None));
    assert_eq!(
        out.plan.update_hold,
        UpdateHoldSeen::Held(UpdateHold::MaxUnavailable {
            limit: 1,
            unavailable: vec!["web-1".to_owned()],
            waiting: 1,
        }),
        "web-0 waits for web-1's claims"
    );
}

#[test]
fn a_claim_template_change_alone_grows_as_many_pods_as_max_unavailable_allows() {
    let mut set = set("2Gi", VolumeClaimUpdateStrategyType::OnPodRollingUpdate);
    set.spec.pod_management_policy = Some(PodManagementPolicy::Parallel);
    set.spec.replicas = Some(3);
    let pods = [
        running(&set, 0, V2),
        running(&set, 1, V2),
        running(&set, 2, V2),
    ];
    let claims = [
        sized("www-web-0", "1Gi", Some("1Gi")),
        sized("www-web-1", "1Gi", Some("1Gi")),
        sized("www-web-2", "1Gi", Some("1Gi")),
    ];
    for (max_unavailable, grown) in [(1, vec!["www-web-2"]), (2, vec!["www-web-2", "www-web-1"])] {
        super::tests::rolling(
            &mut set,
            crate::api::statefulset::RollingUpdateStatefulSetStrategy {
                max_unavailable: Some(IntOrString::Int(max_unavailable)),
                ..Default::default()
            },
        );
        let out = sync_with(&set, &pods, &claims, V2);
        let want = grown.into_iter().map(grow).collect();
        assert_eq!(
            outcome(&out),
            (want, vec![], None),
            "maxUnavailable {max_unavailable}"
        );
    }
}
