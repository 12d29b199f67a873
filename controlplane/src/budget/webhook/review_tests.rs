use serde_json::json;

use super::*;
use crate::admission::review::respond;

fn exempt() -> Exempt {
    Exempt {
        control_plane: "system:serviceaccount:kube-system:stevedore-controlplane".to_owned(),
    }
}

fn request(operation: &str, sub: Option<&str>, namespace: &str, user: &str) -> AdmissionRequest {
    serde_json::from_value(json!({
        "uid": "u-1",
        "resource": { "group": "", "version": "v1", "resource": "pods" },
        "subResource": sub,
        "name": "web-0",
        "namespace": namespace,
        "operation": operation,
        "userInfo": { "username": user },
        "oldObject": if operation == "DELETE" {
            json!({ "metadata": { "name": "web-0", "uid": "uid-web-0", "labels": { "app": "web" } } })
        } else {
            json!(null)
        },
        "object": if operation == "CREATE" && sub == Some("eviction") {
            json!({ "metadata": { "name": "web-0" } })
        } else {
            json!(null)
        },
    }))
    .expect("a review the apiserver could send")
}

#[test]
fn deletes_and_evictions_by_people_and_other_controllers_are_checked() {
    let cases = [
        ("DELETE", None, "alice", false),
        ("CREATE", Some("eviction"), "alice", true),
        (
            "CREATE",
            Some("eviction"),
            "system:serviceaccount:kube-system:cluster-autoscaler",
            true,
        ),
        (
            "DELETE",
            None,
            "system:serviceaccount:kube-system:replicaset-controller",
            false,
        ),
    ];
    for (operation, sub, user, eviction) in cases {
        match screen(&request(operation, sub, "shop", user), &exempt()) {
            Screen::Check(d) => {
                assert_eq!((d.namespace.as_str(), d.pod.as_str()), ("shop", "web-0"));
                assert_eq!(d.eviction, eviction, "{operation} {sub:?}");
                let uid = (!eviction).then(|| "uid-web-0".to_owned());
                assert_eq!(d.uid, uid, "a delete carries the pod's UID");
                assert!(!d.dry_run);
            }
            other => panic!("{operation} {sub:?} by {user}: {other:?}"),
        }
    }
}

#[test]
fn recovery_work_the_control_plane_and_kube_system_pass_unchecked() {
    let cases = [
        (
            "shop",
            "system:serviceaccount:kube-system:stevedore-controlplane",
        ),
        (
            "shop",
            "system:serviceaccount:kube-system:generic-garbage-collector",
        ),
        (
            "shop",
            "system:serviceaccount:kube-system:namespace-controller",
        ),
        ("shop", "system:serviceaccount:kube-system:node-controller"),
        ("shop", "system:node:worker-1"),
        ("kube-system", "alice"),
    ];
    for (namespace, user) in cases {
        let screened = screen(&request("DELETE", None, namespace, user), &exempt());
        assert!(
            matches!(screened, Screen::Pass(_)),
            "{user} in {namespace}: {screened:?}"
        );
    }
}

#[test]
fn other_operations_and_subresources_pass_unchecked() {
    let cases = [
        ("CREATE", None),
        ("UPDATE", None),
        ("UPDATE", Some("status")),
        ("CREATE", Some("binding")),
    ];
    for (operation, sub) in cases {
        let screened = screen(&request(operation, sub, "shop", "alice"), &exempt());
        assert!(
            matches!(screened, Screen::Pass(_)),
            "{operation} {sub:?}: {screened:?}"
        );
    }
    let mut other = request("DELETE", None, "shop", "alice");
    other.resource.resource = "configmaps".to_owned();
    assert!(matches!(screen(&other, &exempt()), Screen::Pass(_)));
}

#[test]
fn a_terminating_pod_passes_and_a_dry_run_is_checked_as_one() {
    let mut terminating = request("DELETE", None, "shop", "alice");
    terminating.old_object = Some(json!({
        "metadata": { "name": "web-0", "deletionTimestamp": "2026-01-01T00:00:00Z" }
    }));
    assert!(matches!(screen(&terminating, &exempt()), Screen::Pass(_)));

    let mut dry = request("DELETE", None, "shop", "alice");
    dry.dry_run = Some(true);
    assert!(matches!(screen(&dry, &exempt()), Screen::Check(d) if d.dry_run));
}

#[test]
fn a_refusal_answers_429_with_the_budget_named_and_an_allowance_carries_the_uid() {
    let denied = respond(
        "u-7",
        &Verdict::Deny("no room in pub web".to_owned()).into(),
    );
    assert_eq!(denied["kind"], "AdmissionReview");
    assert_eq!(denied["response"]["uid"], "u-7");
    assert_eq!(denied["response"]["allowed"], false);
    assert_eq!(denied["response"]["status"]["code"], 429);
    assert_eq!(
        denied["response"]["status"]["message"],
        "no room in pub web"
    );

    let allowed = respond("u-8", &Verdict::Allow.into());
    assert_eq!(allowed["response"]["uid"], "u-8");
    assert_eq!(allowed["response"]["allowed"], true);
    assert!(allowed["response"].get("status").is_none());
}

#[test]
fn a_refusal_says_what_was_refused() {
    let Screen::Check(eviction) = screen(
        &request("CREATE", Some("eviction"), "shop", "alice"),
        &exempt(),
    ) else {
        panic!("checked");
    };
    assert_eq!(
        refusal(
            &eviction,
            "the PodUnavailableBudget web allows no more unavailable pods"
        ),
        "Cannot evict pod web-0: the PodUnavailableBudget web allows no more unavailable pods."
    );
}

#[test]
fn a_collection_delete_is_checked_for_the_pod_it_carries() {
    let mut collection = request("DELETE", None, "shop", "alice");
    collection.name = String::new();
    match screen(&collection, &exempt()) {
        Screen::Check(d) => assert_eq!(d.pod, "web-0"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn an_eviction_names_the_uid_of_its_preconditions() {
    let mut eviction = request("CREATE", Some("eviction"), "shop", "alice");
    eviction.object = Some(json!({
        "metadata": { "name": "web-0" },
        "deleteOptions": { "preconditions": { "uid": "uid-web-0" } },
    }));
    match screen(&eviction, &exempt()) {
        Screen::Check(d) => assert_eq!(d.uid.as_deref(), Some("uid-web-0")),
        other => panic!("{other:?}"),
    }
}

/// The pod `web-0` of namespace `shop` as the apiserver has it.
fn found(uid: &str, terminating: bool) -> Pod {
    serde_json::from_value(json!({
        "metadata": {
            "name": "web-0", "namespace": "shop", "uid": uid,
            "labels": { "app": "web" },
            "deletionTimestamp": terminating.then_some("2026-01-01T00:00:00Z"),
        },
    }))
    .expect("a pod")
}

#[test]
fn only_a_pod_that_exists_with_the_uid_the_review_names_is_decided() {
    let disruption = |uid: Option<&str>, eviction: bool| Disruption {
        namespace: "shop".to_owned(),
        pod: "web-0".to_owned(),
        uid: uid.map(str::to_owned),
        dry_run: false,
        eviction,
    };
    type Case = (
        &'static str,
        Disruption,
        Option<Pod>,
        Result<&'static str, &'static str>,
    );
    let cases: [Case; 7] = [
        (
            "a delete of the pod",
            disruption(Some("u1"), false),
            Some(found("u1", false)),
            Ok("u1"),
        ),
        (
            "an eviction by name",
            disruption(None, true),
            Some(found("u1", false)),
            Ok("u1"),
        ),
        (
            "an eviction with the pod's UID",
            disruption(Some("u1"), true),
            Some(found("u1", false)),
            Ok("u1"),
        ),
        (
            "a made-up pod",
            disruption(Some("u-forged"), false),
            None,
            Err("there is no pod web-0 in namespace shop"),
        ),
        (
            "another pod of the same name",
            disruption(Some("u-old"), false),
            Some(found("u2", false)),
            Err("the pod web-0 has the UID u2, not u-old as the review says"),
        ),
        (
            "a delete without a UID",
            disruption(None, false),
            Some(found("u1", false)),
            Err(
                "the delete review of pod web-0 carries no oldObject UID (the apiserver always sends one)",
            ),
        ),
        (
            "a terminating pod",
            disruption(Some("u1"), false),
            Some(found("u1", true)),
            Err("the pod web-0 is terminating already"),
        ),
    ];
    for (case, disruption, pod, want) in cases {
        let got = confirm(&disruption, pod)
            .map(|p| p.metadata.uid.unwrap_or_default())
            .map_err(|why| why.to_string());
        let want = want.map(str::to_owned).map_err(str::to_owned);
        assert_eq!(got, want, "{case}");
    }
}
