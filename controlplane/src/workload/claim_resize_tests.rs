use k8s_openapi::api::core::v1::PersistentVolumeClaimCondition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use super::*;
use crate::workload::test_pods::sized_claim;

/// A claim (or template) `name` of `class` asking for `request`, with `capacity` when bound,
/// ReadWriteOnce.
fn claim(name: &str, class: &str, request: &str, capacity: Option<&str>) -> PersistentVolumeClaim {
    let mut claim = sized_claim(name, Some(class), request, capacity);
    if let Some(spec) = claim.spec.as_mut() {
        spec.access_modes = Some(vec!["ReadWriteOnce".to_owned()]);
    }
    claim
}

fn template(request: &str) -> PersistentVolumeClaim {
    claim("data", "fast", request, None)
}

fn file_system_pending(mut claim: PersistentVolumeClaim) -> PersistentVolumeClaim {
    let status = claim.status.get_or_insert_default();
    status.conditions = Some(vec![PersistentVolumeClaimCondition {
        type_: "FileSystemResizePending".to_owned(),
        status: "True".to_owned(),
        ..PersistentVolumeClaimCondition::default()
    }]);
    claim
}

fn being_deleted(mut claim: PersistentVolumeClaim) -> PersistentVolumeClaim {
    let at = Timestamp::from_second(1_800_000_000).expect("a valid time");
    claim.metadata.deletion_timestamp = Some(Time(at));
    claim
}

fn grow(to: &str) -> ClaimStep {
    ClaimStep::Expand(vec![ClaimResize {
        claim: "data-web-0".to_owned(),
        pod: "web-0".to_owned(),
        storage_class: Some("fast".to_owned()),
        request: to.to_owned(),
        resource_version: Some("7".to_owned()),
    }])
}

#[test]
fn a_pod_claims_step_follows_openkruise_on_pod_rolling_update() {
    let other_class = claim("data-web-0", "slow", "1Gi", Some("1Gi"));
    let cases: Vec<(&str, &str, Option<PersistentVolumeClaim>, bool, ClaimStep)> = vec![
        (
            "same size, bound: nothing to do",
            "1Gi",
            Some(claim("data-web-0", "fast", "1Gi", Some("1Gi"))),
            true,
            ClaimStep::Complete,
        ),
        (
            "template grew: patch the claim to the template's request",
            "2Gi",
            Some(claim("data-web-0", "fast", "1Gi", Some("1Gi"))),
            true,
            grow("2Gi"),
        ),
        (
            "the units differ, the bytes decide (1024Mi is 1Gi)",
            "1Gi",
            Some(claim("data-web-0", "fast", "1024Mi", Some("1Gi"))),
            true,
            ClaimStep::Complete,
        ),
        (
            "patched, the volume has not grown: wait, and not ready",
            "2Gi",
            Some(claim("data-web-0", "fast", "2Gi", Some("1Gi"))),
            false,
            ClaimStep::Resizing,
        ),
        (
            "only the file system is left to grow: the pod may update (it is not ready yet)",
            "2Gi",
            Some(file_system_pending(claim(
                "data-web-0",
                "fast",
                "2Gi",
                Some("1Gi"),
            ))),
            false,
            ClaimStep::Complete,
        ),
        (
            "template shrank: a claim never shrinks, nothing to do",
            "1Gi",
            Some(claim("data-web-0", "fast", "2Gi", Some("2Gi"))),
            true,
            ClaimStep::Complete,
        ),
        (
            "another storage class: cannot be patched",
            "2Gi",
            Some(other_class),
            false,
            ClaimStep::Incompatible {
                claim: "data-web-0".to_owned(),
            },
        ),
        (
            "no claim yet: left to the scale step",
            "2Gi",
            None,
            true,
            ClaimStep::Complete,
        ),
        (
            "a claim being deleted is skipped",
            "2Gi",
            Some(being_deleted(claim(
                "data-web-0",
                "fast",
                "1Gi",
                Some("1Gi"),
            ))),
            true,
            ClaimStep::Complete,
        ),
        (
            "not bound yet: nothing to grow, but not ready",
            "1Gi",
            Some(claim("data-web-0", "fast", "1Gi", None)),
            false,
            ClaimStep::Resizing,
        ),
    ];
    for (case, want, have, ready, step) in cases {
        let template = template(want);
        let got = pod_claims("web-0", [(&template, have.as_ref())]);
        assert_eq!(got, PodClaims { ready, step }, "{case}");
    }
}

#[test]
fn an_incompatible_claim_wins_over_one_to_grow() {
    let (a, b) = (template("2Gi"), claim("logs", "fast", "1Gi", None));
    let small = claim("data-web-0", "fast", "1Gi", Some("1Gi"));
    let mut other_modes = claim("logs-web-0", "fast", "1Gi", Some("1Gi"));
    other_modes.spec.as_mut().expect("a spec").access_modes = Some(vec!["ReadWriteMany".into()]);
    let got = pod_claims("web-0", [(&a, Some(&small)), (&b, Some(&other_modes))]);
    assert_eq!(
        got.step,
        ClaimStep::Incompatible {
            claim: "logs-web-0".to_owned()
        }
    );
    assert!(!got.ready);
}

#[test]
fn the_status_counts_compatible_and_ready_claims() {
    let t = template("2Gi");
    let cases = [
        (
            "smaller",
            claim("c", "fast", "1Gi", Some("1Gi")),
            (false, false),
        ),
        (
            "grown, volume pending",
            claim("c", "fast", "2Gi", Some("1Gi")),
            (true, false),
        ),
        (
            "grown and ready",
            claim("c", "fast", "2Gi", Some("2Gi")),
            (true, true),
        ),
        (
            "larger",
            claim("c", "fast", "3Gi", Some("3Gi")),
            (true, true),
        ),
        (
            "other class",
            claim("c", "slow", "2Gi", Some("2Gi")),
            (false, false),
        ),
    ];
    for (case, c, want) in cases {
        assert_eq!(claim_status((&t, Some(&c))), want, "{case}");
    }
    assert_eq!(claim_status((&t, None)), (false, false), "no claim");
}

#[test]
fn the_patch_sets_the_storage_request_on_the_planned_version() {
    let resize = ClaimResize {
        claim: "data-web-0".to_owned(),
        pod: "web-0".to_owned(),
        storage_class: None,
        request: "2Gi".to_owned(),
        resource_version: Some("41".to_owned()),
    };
    assert_eq!(
        resize_patch(&resize),
        serde_json::json!({
            "metadata": { "resourceVersion": "41" },
            "spec": { "resources": { "requests": { "storage": "2Gi" } } }
        })
    );
}
