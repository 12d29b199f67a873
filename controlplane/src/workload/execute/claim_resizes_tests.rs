//! Growing claims through the executor: the patch and its expectation, and an apiserver
//! refusal reported (FailedUpdate problem, Warning event naming claim and class) rather
//! than returned as an error the queue would retry at once.

use serde_json::json;

use super::super::recording::{RecordingWrites, Write};
use super::super::tests::Fixture;
use super::*;

fn resize(claim: &str, class: Option<&str>) -> ClaimResize {
    ClaimResize {
        claim: claim.to_owned(),
        pod: "web-1".to_owned(),
        storage_class: class.map(str::to_owned),
        request: "2Gi".to_owned(),
        resource_version: Some("9".to_owned()),
    }
}

fn plan_growing(resizes: Vec<ClaimResize>) -> Plan {
    Plan {
        claim_resizes: resizes,
        ..Plan::default()
    }
}

#[tokio::test]
async fn a_claim_is_patched_to_the_request_and_expected_in_the_cache() {
    let fixture = Fixture::new(RecordingWrites::default());
    let (result, problems) = fixture
        .run(&plan_growing(vec![resize("www-web-1", Some("fast"))]))
        .await;
    assert!(matches!(result, Ok(None)), "{result:?}");
    assert_eq!(problems, Problems::default());
    assert_eq!(
        fixture.writes.calls(),
        vec![Write::PatchClaim {
            name: "www-web-1".to_owned(),
            body: json!({
                "metadata": { "resourceVersion": "9" },
                "spec": { "resources": { "requests": { "storage": "2Gi" } } }
            }),
        }]
    );
    assert_eq!(
        fixture.expected(),
        vec![Expectation::Update {
            kind: "PersistentVolumeClaim",
            name: "www-web-1".to_owned(),
            resource_version: 43,
        }]
    );
    let events = fixture.writes.events();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].reason, SUCCESSFUL_RESIZE);
    assert_eq!(events[0].pod.as_deref(), Some("web-1"));
}

#[tokio::test]
async fn a_refused_resize_names_the_claim_and_class_and_is_no_sync_error() {
    let writes = RecordingWrites {
        failures: [("www-web-1".to_owned(), 403)].into(),
        ..RecordingWrites::default()
    };
    let fixture = Fixture::new(writes);
    let plan = plan_growing(vec![resize("www-web-1", Some("stevedore-fixed"))]);
    let (result, problems) = fixture.run(&plan).await;
    assert!(matches!(result, Ok(None)), "{result:?}");
    let message = problems.update.expect("the FailedUpdate problem");
    assert!(message.contains("claim www-web-1"), "{message}");
    assert!(
        message.contains("storage class stevedore-fixed"),
        "{message}"
    );
    assert!(
        message.contains("www-web-1 refused with 403"),
        "the apiserver's message: {message}"
    );
    let events = fixture.writes.events();
    assert_eq!(events.len(), 1);
    assert!(events[0].warning);
    assert_eq!(events[0].reason, FAILED_RESIZE);
    assert_eq!(events[0].note, message);
    assert!(fixture.expected().is_empty());
}

#[tokio::test]
async fn a_conflict_waits_for_the_next_sync_and_an_unreachable_apiserver_is_an_error() {
    for (code, is_error) in [(409, false), (404, false), (500, true), (429, true)] {
        let writes = RecordingWrites {
            failures: [("www-web-1".to_owned(), code)].into(),
            ..RecordingWrites::default()
        };
        let fixture = Fixture::new(writes);
        let (result, problems) = fixture
            .run(&plan_growing(vec![resize("www-web-1", None)]))
            .await;
        assert_eq!(result.is_err(), is_error, "{code}");
        assert_eq!(problems.update, None, "{code}");
        assert!(fixture.writes.events().is_empty(), "{code}");
    }
}

#[tokio::test]
async fn a_claim_that_cannot_be_patched_is_reported_once_per_sync() {
    let fixture = Fixture::new(RecordingWrites::default());
    let plan = Plan {
        claim_refusal: Some("claim www-web-1 of pod web-1 differs".to_owned()),
        ..Plan::default()
    };
    let (result, problems) = fixture.run(&plan).await;
    assert!(matches!(result, Ok(None)), "{result:?}");
    assert_eq!(
        problems.update.as_deref(),
        Some("claim www-web-1 of pod web-1 differs")
    );
    let events = fixture.writes.events();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].reason, FAILED_UPDATE_PVC);
    assert!(fixture.writes.calls().is_empty());
}

#[test]
fn the_default_storage_class_is_said_so() {
    let message = resize_refused(&resize("www-web-0", None), "forbidden");
    assert_eq!(
        message,
        "claim www-web-0 of pod web-1 (the default storage class) cannot grow to 2Gi; the pod keeps its revision until it can: forbidden"
    );
}
