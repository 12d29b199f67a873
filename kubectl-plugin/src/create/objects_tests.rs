use serde_json::json;

use super::*;

fn cronjob(template: Value) -> Value {
    json!({
        "apiVersion": "apps.kruise.io/v1alpha1",
        "kind": "AdvancedCronJob",
        "metadata": { "name": "nightly", "uid": "u-1" },
        "spec": { "schedule": "0 0 * * *", "template": template }
    })
}

#[test]
fn from_names_an_advanced_cronjob() {
    let cases = [
        ("acj/nightly", Ok("nightly")),
        ("AdvancedCronJob/nightly", Ok("nightly")),
        ("advancedcronjobs.apps.kruise.io/nightly", Ok("nightly")),
        (
            "advancedcronjobs.v1alpha1.apps.kruise.io/nightly",
            Ok("nightly"),
        ),
        ("cronjob/nightly", Err("kubectl create job")),
        ("nightly", Err("is not acj/<name>")),
        ("cloneset/web", Err("does not name an AdvancedCronJob")),
    ];
    for (from, expected) in cases {
        match (from_cronjob(from), expected) {
            (Ok(name), Ok(want)) => assert_eq!(name, want),
            (Err(message), Err(words)) => assert!(message.contains(words), "{from}: {message}"),
            (got, _) => panic!("{from}: {got:?}"),
        }
    }
}

#[test]
fn a_job_from_the_job_template() {
    let source = cronjob(json!({
        "jobTemplate": {
            "metadata": { "labels": { "app": "report" }, "annotations": { "team": "a" } },
            "spec": { "template": { "spec": { "containers": [{ "name": "r", "image": "r:1" }] } } }
        }
    }));
    let job = job_from_cronjob(JobKind::Job, &source, "by-hand").expect("a job");
    assert_eq!(job["apiVersion"], "batch/v1");
    assert_eq!(job["kind"], "Job");
    assert_eq!(job["metadata"]["name"], "by-hand");
    assert_eq!(job["metadata"]["labels"], json!({ "app": "report" }));
    assert_eq!(
        job["metadata"]["annotations"],
        json!({ "team": "a", INSTANTIATE: "manual" })
    );
    assert_eq!(job["metadata"]["ownerReferences"][0]["uid"], "u-1");
    assert_eq!(
        job["metadata"]["ownerReferences"][0]["kind"],
        "AdvancedCronJob"
    );
    assert_eq!(
        job["spec"]["template"]["spec"]["containers"][0]["image"],
        "r:1"
    );

    let refused = job_from_cronjob(JobKind::BroadcastJob, &source, "x").unwrap_err();
    assert!(
        refused.contains("has no broadcastJobTemplate; use `create job`"),
        "{refused}"
    );
}

#[test]
fn a_broadcastjob_from_the_broadcastjob_template() {
    let source = cronjob(json!({
        "broadcastJobTemplate": { "spec": { "completionPolicy": { "type": "Always" } } }
    }));
    let job = job_from_cronjob(JobKind::BroadcastJob, &source, "now").expect("a broadcastjob");
    assert_eq!(job["apiVersion"], "apps.kruise.io/v1alpha1");
    assert_eq!(job["kind"], "BroadcastJob");
    assert_eq!(job["spec"]["completionPolicy"]["type"], "Always");
    assert_eq!(
        job["metadata"]["annotations"],
        json!({ INSTANTIATE: "manual" })
    );
    assert!(job_from_cronjob(JobKind::Job, &source, "x").is_err());
}

#[test]
fn a_recreate_request_for_the_named_containers() {
    let pod = json!({
        "metadata": { "name": "web-0" },
        "spec": { "containers": [{ "name": "app" }, { "name": "sidecar" }] }
    });
    let mut args = CrrArgs {
        name: "again".into(),
        containers: vec!["sidecar".into()],
        unready_grace_period_seconds: 3,
        min_started_seconds: 3,
    };
    let crr = container_recreate_request(&pod, &args).expect("a request");
    assert_eq!(crr["kind"], "ContainerRecreateRequest");
    assert_eq!(crr["spec"]["podName"], "web-0");
    assert_eq!(crr["spec"]["containers"], json!([{ "name": "sidecar" }]));
    assert_eq!(crr["spec"]["strategy"]["unreadyGracePeriodSeconds"], 3);
    assert_eq!(crr["spec"]["activeDeadlineSeconds"], 300);
    assert_eq!(crr["spec"]["ttlSecondsAfterFinished"], 1800);

    args.containers.clear();
    let all = container_recreate_request(&pod, &args).expect("every container");
    assert_eq!(
        all["spec"]["containers"],
        json!([{ "name": "app" }, { "name": "sidecar" }])
    );

    args.containers = vec!["db".into()];
    let missing = container_recreate_request(&pod, &args).unwrap_err();
    assert!(
        missing.contains("has no container db (its containers: app, sidecar)"),
        "{missing}"
    );
}
