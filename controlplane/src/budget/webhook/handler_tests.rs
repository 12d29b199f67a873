//! The budget webhook's second defence against a forged review, with a scripted
//! apiserver: a review naming a pod that does not exist with that UID is decided without
//! reading or writing any budget.

use serde_json::json;

use super::*;
use crate::workload::scripted_api::{ScriptedApi, failure};

fn disruption(uid: Option<&str>, eviction: bool) -> Disruption {
    Disruption {
        namespace: "shop".to_owned(),
        pod: "web-0".to_owned(),
        uid: uid.map(str::to_owned),
        dry_run: false,
        eviction,
    }
}

fn pod(uid: &str) -> serde_json::Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": { "name": "web-0", "namespace": "shop", "uid": uid, "labels": { "app": "web" } },
    })
}

#[tokio::test]
async fn the_pod_a_review_names_is_read_from_the_apiserver_and_must_match() {
    // A made-up pod: one read, nothing else (no budget is read, none written).
    let not_found = json!({
        "kind": "Status", "apiVersion": "v1", "status": "Failure",
        "message": "pods \"web-0\" not found", "reason": "NotFound", "code": 404,
    });
    let api = ScriptedApi::new(vec![(404, not_found)]);
    let decided = pod_to_decide(&api.client(), &disruption(Some("u-forged"), false))
        .await
        .expect("read");
    assert_eq!(
        decided.expect_err("unconfirmed").to_string(),
        "there is no pod web-0 in namespace shop"
    );
    let sent = api.sent();
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(
        (sent[0].method.as_str(), sent[0].uri.as_str()),
        ("GET", "/api/v1/namespaces/shop/pods/web-0")
    );

    // A pod of that name with another UID: a forged or stale review.
    let api = ScriptedApi::new(vec![(200, pod("u-real"))]);
    let decided = pod_to_decide(&api.client(), &disruption(Some("u-forged"), false))
        .await
        .expect("read");
    assert!(
        matches!(decided, Err(Unconfirmed::OtherUid { .. })),
        "{decided:?}"
    );

    // The pod itself: decided with the apiserver's copy.
    let api = ScriptedApi::new(vec![(200, pod("u-real"))]);
    let decided = pod_to_decide(&api.client(), &disruption(None, true))
        .await
        .expect("read")
        .expect("confirmed");
    assert_eq!(decided.metadata.uid.as_deref(), Some("u-real"));

    // The apiserver cannot be read: an error, which the handler answers with a refusal.
    let api = ScriptedApi::new(vec![(500, failure(500, "etcd is down"))]);
    let err = pod_to_decide(&api.client(), &disruption(Some("u-real"), false))
        .await
        .expect_err("an error");
    assert!(err.to_string().contains("etcd is down"), "{err}");
}
