use k8s_openapi::api::core::v1::{Pod, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

use super::*;
use crate::api::StatefulSetSpec;
use crate::api::statefulset::{PvcRetentionPolicy, PvcRetentionPolicyType};

fn set(when_deleted: PvcRetentionPolicyType, when_scaled: PvcRetentionPolicyType) -> StatefulSet {
    let mut set = StatefulSet::new(
        "web",
        StatefulSetSpec {
            replicas: Some(2),
            volume_claim_templates: vec![PersistentVolumeClaim {
                metadata: ObjectMeta {
                    name: Some("www".to_owned()),
                    ..ObjectMeta::default()
                },
                ..PersistentVolumeClaim::default()
            }],
            persistent_volume_claim_retention_policy: Some(PvcRetentionPolicy {
                when_deleted: Some(when_deleted),
                when_scaled: Some(when_scaled),
            }),
            ..StatefulSetSpec::default()
        },
    );
    set.metadata.uid = Some("set-uid".to_owned());
    set
}

/// Ordinals 0 to `replicas` - 1.
fn first(replicas: i32) -> WantedOrdinals {
    WantedOrdinals::new(replicas, 0, Default::default())
}

fn pod(ordinal: i32) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(format!("web-{ordinal}")),
            uid: Some(format!("pod-uid-{ordinal}")),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec::default()),
        status: None,
    }
}

fn claim(ordinal: i32, owners: &[&str]) -> PersistentVolumeClaim {
    PersistentVolumeClaim {
        metadata: ObjectMeta {
            name: Some(format!("www-web-{ordinal}")),
            resource_version: Some("7".to_owned()),
            owner_references: (!owners.is_empty()).then(|| {
                (owners.iter())
                    .map(|uid| OwnerReference {
                        uid: (*uid).to_owned(),
                        ..OwnerReference::default()
                    })
                    .collect()
            }),
            ..ObjectMeta::default()
        },
        ..PersistentVolumeClaim::default()
    }
}

/// The owner UIDs each changed claim ends with.
fn owners_after(changes: &[ClaimOwners]) -> Vec<(String, Vec<String>)> {
    (changes.iter())
        .map(|c| {
            let uids = c.owner_references.iter().map(|r| r.uid.clone()).collect();
            (c.claim.clone(), uids)
        })
        .collect()
}

#[test]
fn owner_references_follow_the_native_retention_rules() {
    use PvcRetentionPolicyType::{Delete, Retain};
    // (case, whenDeleted, whenScaled, claims before (ordinal, owners), changes); pods
    // web-0 and web-2 live, the set wants ordinals 0 and 1 (web-2 is being scaled away).
    type Case = (
        &'static str,
        PvcRetentionPolicyType,
        PvcRetentionPolicyType,
        Vec<(i32, Vec<&'static str>)>,
        Vec<(&'static str, Vec<&'static str>)>,
    );
    let cases: Vec<Case> = vec![
        (
            "Retain/Retain leaves unowned claims alone",
            Retain,
            Retain,
            vec![(0, vec![]), (2, vec![])],
            vec![],
        ),
        (
            "Retain/Retain removes a set reference left by an earlier policy",
            Retain,
            Retain,
            vec![(0, vec!["set-uid"]), (2, vec![])],
            vec![("www-web-0", vec![])],
        ),
        (
            "whenDeleted Delete: the set owns every claim, scaled away or not",
            Delete,
            Retain,
            vec![(0, vec![]), (2, vec![])],
            vec![
                ("www-web-0", vec!["set-uid"]),
                ("www-web-2", vec!["set-uid"]),
            ],
        ),
        (
            "whenScaled Delete: the scaled-away pod owns its claim, the kept one is unowned",
            Retain,
            Delete,
            vec![(0, vec![]), (2, vec![])],
            vec![("www-web-2", vec!["pod-uid-2"])],
        ),
        (
            "both Delete: kept claims owned by the set, the scaled-away one by its pod only",
            Delete,
            Delete,
            vec![(0, vec!["set-uid"]), (2, vec!["set-uid"])],
            vec![("www-web-2", vec!["pod-uid-2"])],
        ),
    ];
    for (case, when_deleted, when_scaled, before, want) in cases {
        let set = set(when_deleted, when_scaled);
        let pods = [pod(0), pod(2)];
        let claims: Vec<PersistentVolumeClaim> =
            before.iter().map(|(o, owners)| claim(*o, owners)).collect();
        let want: Vec<(String, Vec<String>)> = (want.iter())
            .map(|(c, uids)| (c.to_string(), uids.iter().map(|u| u.to_string()).collect()))
            .collect();
        let changes = claim_owner_changes(
            &set,
            &pods.iter().collect::<Vec<_>>(),
            &claims.iter().collect::<Vec<_>>(),
            &first(2),
        );
        assert_eq!(owners_after(&changes), want, "{case}");
        assert!(
            changes
                .iter()
                .all(|c| c.resource_version.as_deref() == Some("7")),
            "{case}: writes are conditional on what they were computed from"
        );
    }
}

#[test]
fn a_pod_scaled_back_up_hands_its_claim_back_to_the_set() {
    let set = set(
        PvcRetentionPolicyType::Delete,
        PvcRetentionPolicyType::Delete,
    );
    let claims = [claim(2, &["pod-uid-2"])];
    let changes = claim_owner_changes(&set, &[&pod(2)], &[&claims[0]], &first(3));
    let want = vec![("www-web-2".to_owned(), vec!["set-uid".to_owned()])];
    assert_eq!(owners_after(&changes), want);
}

#[test]
fn terminating_pods_and_missing_claims_change_nothing() {
    let set = set(
        PvcRetentionPolicyType::Delete,
        PvcRetentionPolicyType::Delete,
    );
    let mut leaving = pod(2);
    leaving.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
    let claims = [claim(2, &["set-uid"])];
    let changes = claim_owner_changes(&set, &[&leaving, &pod(1)], &[&claims[0]], &first(2));
    assert!(changes.is_empty(), "{changes:?}");
}

#[test]
fn the_set_reference_is_not_a_controller_reference() {
    let set = set(
        PvcRetentionPolicyType::Delete,
        PvcRetentionPolicyType::Retain,
    );
    let claims = [claim(0, &[])];
    let changes = claim_owner_changes(&set, &[&pod(0)], &[&claims[0]], &first(2));
    let reference = &changes[0].owner_references[0];
    assert_eq!(reference.kind, "StatefulSet");
    assert_eq!(reference.controller, None);
}
