use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::*;
use crate::api::StatefulSetSpec;
use crate::workload::test_pods::sized_claim;

fn claim(name: &str, request: &str, capacity: Option<&str>) -> PersistentVolumeClaim {
    sized_claim(name, None, request, capacity)
}

fn pod(name: &str) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        ..Pod::default()
    }
}

#[test]
fn each_template_counts_the_pods_whose_claim_holds_its_request() {
    let set = StatefulSet::new(
        "web",
        StatefulSetSpec {
            replicas: Some(3),
            volume_claim_templates: vec![claim("data", "2Gi", None), claim("logs", "1Gi", None)],
            ..StatefulSetSpec::default()
        },
    );
    let pods = [pod("web-0"), pod("web-1"), pod("web-2")];
    let claims = [
        claim("data-web-0", "2Gi", Some("2Gi")), // grown and ready
        claim("data-web-1", "2Gi", Some("1Gi")), // patched, volume still growing
        claim("data-web-2", "1Gi", Some("1Gi")), // not patched yet
        claim("logs-web-0", "1Gi", Some("1Gi")),
        claim("logs-web-1", "1Gi", Some("1Gi")),
        // logs-web-2 not made yet
        claim("data-other-0", "2Gi", Some("2Gi")), // another set's claim
    ];
    let pods: Vec<&Pod> = pods.iter().collect();
    let claims: Vec<&PersistentVolumeClaim> = claims.iter().collect();
    let entry = |name: &str, compatible, ready| VolumeClaimStatus {
        volume_claim_name: name.to_owned(),
        compatible_replicas: compatible,
        compatible_ready_replicas: ready,
    };
    assert_eq!(
        volume_claims(&set, &pods, &claims),
        vec![entry("data", 2, 1), entry("logs", 2, 2)]
    );
}

#[test]
fn a_set_without_claim_templates_reports_none() {
    let set = StatefulSet::new("web", StatefulSetSpec::default());
    assert!(volume_claims(&set, &[], &[]).is_empty());
}
