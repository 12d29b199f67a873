use k8s_openapi::api::core::v1::PodStatus;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;

use super::*;
use crate::api::StatefulSetSpec;
use crate::statefulset::ordinals::ReservedOrdinals;

const UPDATE: &str = "web-bbb222";

fn named<T: Default>(name: &str, build: impl FnOnce(ObjectMeta) -> T) -> T {
    build(ObjectMeta {
        name: Some(name.to_owned()),
        ..ObjectMeta::default()
    })
}

/// The `web` set with claim templates named `templates`, 3 replicas from ordinal 0.
fn web(templates: &[&str]) -> StatefulSet {
    let claim = |name: &&str| {
        named(name, |metadata| PersistentVolumeClaim {
            metadata,
            ..PersistentVolumeClaim::default()
        })
    };
    StatefulSet::new(
        "web",
        StatefulSetSpec {
            replicas: Some(3),
            volume_claim_templates: templates.iter().map(claim).collect(),
            ..StatefulSetSpec::default()
        },
    )
}

/// Pod `name` in `phase` (`None`: no status yet), terminating when `terminating`.
fn pod(name: &str, phase: Option<&str>, terminating: bool) -> Pod {
    let mut pod = named(name, |metadata| Pod {
        metadata,
        ..Pod::default()
    });
    pod.status = phase.map(|p| PodStatus {
        phase: Some(p.to_owned()),
        ..PodStatus::default()
    });
    if terminating {
        let at = Timestamp::from_second(1_800_000_000).expect("a valid time");
        pod.metadata.deletion_timestamp = Some(Time(at));
    }
    pod
}

fn claim(name: &str, being_deleted: bool) -> PersistentVolumeClaim {
    let mut claim = named(name, |metadata| PersistentVolumeClaim {
        metadata,
        ..PersistentVolumeClaim::default()
    });
    if being_deleted {
        let at = Timestamp::from_second(1_800_000_000).expect("a valid time");
        claim.metadata.deletion_timestamp = Some(Time(at));
    }
    claim
}

#[test]
fn a_pending_pod_gets_its_missing_claims_made_again() {
    // (case, claim templates, pods, claims (name, being deleted), ordinals whose claims
    // are made again); the set wants ordinals 0, 1 and 2.
    type Case = (
        &'static str,
        Vec<&'static str>,
        Vec<Pod>,
        Vec<(&'static str, bool)>,
        Vec<&'static str>,
    );
    let pending = |name| pod(name, Some("Pending"), false);
    let cases: Vec<Case> = vec![
        (
            "a Pending pod whose claim is gone",
            vec!["www"],
            vec![pending("web-0"), pending("web-1")],
            vec![("www-web-1", false)],
            vec!["0"],
        ),
        (
            "one of two claims gone is enough",
            vec!["www", "logs"],
            vec![pending("web-0")],
            vec![("www-web-0", false)],
            vec!["0"],
        ),
        (
            "every claim there: nothing",
            vec!["www", "logs"],
            vec![pending("web-0")],
            vec![("www-web-0", false), ("logs-web-0", false)],
            vec![],
        ),
        (
            "a claim being deleted counts as there until it is gone",
            vec!["www"],
            vec![pending("web-0")],
            vec![("www-web-0", true)],
            vec![],
        ),
        (
            "a Running pod is left alone",
            vec!["www"],
            vec![pod("web-0", Some("Running"), false)],
            vec![],
            vec![],
        ),
        (
            "a pod with no status yet is not Pending (as the native isPending reads it)",
            vec!["www"],
            vec![pod("web-0", None, false)],
            vec![],
            vec![],
        ),
        (
            "a terminating pod is left alone",
            vec!["www"],
            vec![pod("web-0", Some("Pending"), true)],
            vec![],
            vec![],
        ),
        (
            "a pod on an ordinal the set no longer wants is left alone",
            vec!["www"],
            vec![pending("web-3")],
            vec![],
            vec![],
        ),
        (
            "a pod whose name carries no ordinal of the set is left alone",
            vec!["www"],
            vec![pending("other-0")],
            vec![],
            vec![],
        ),
        (
            "a set without claim templates makes none",
            vec![],
            vec![pending("web-0")],
            vec![],
            vec![],
        ),
    ];
    for (case, templates, pods, claims, expected) in cases {
        let set = web(&templates);
        let pods: Vec<&Pod> = pods.iter().collect();
        let claims: Vec<PersistentVolumeClaim> = claims
            .iter()
            .map(|(n, deleted)| claim(n, *deleted))
            .collect();
        let claims: Vec<&PersistentVolumeClaim> = claims.iter().collect();
        let wanted = WantedOrdinals::new(3, 0, ReservedOrdinals::default());
        let creates = missing_claims(&set, &pods, &claims, &wanted, UPDATE);
        let ids: Vec<&str> = creates.iter().map(|c| c.instance_id.as_str()).collect();
        assert_eq!(ids, expected, "{case}");
        assert!(
            creates.iter().all(|c| c.revision == UPDATE),
            "{case}: the claims are built from the update revision, which the history holds"
        );
    }
}
