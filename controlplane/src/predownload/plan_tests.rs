use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::*;

fn selector() -> LabelSelector {
    LabelSelector {
        match_labels: Some(BTreeMap::from([("app".to_owned(), "web".to_owned())])),
        match_expressions: None,
    }
}

fn images(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(c, i)| ((*c).to_owned(), (*i).to_owned()))
        .collect()
}

/// A 10-replica in-place rollout of container `web` to `web:v2`, nothing ready yet.
fn rollout<'a>(
    annotations: &'a BTreeMap<String, String>,
    changed: &'a BTreeMap<String, String>,
    selector: &'a LabelSelector,
) -> Rollout<'a> {
    Rollout {
        annotations,
        replicas: 10,
        partition: 0,
        max_unavailable: 2,
        updated_ready_replicas: 0,
        current_revision: "web-old",
        update_revision: "web-7f9c",
        update_revision_hash: Some("7f9c"),
        already_created: false,
        in_place_images: Some(changed),
        selector,
        pull_secrets: vec!["regcred".to_owned()],
    }
}

fn annotations(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

#[test]
fn skips_what_is_not_a_multi_batch_in_place_rollout() {
    let none = annotations(&[]);
    let one = images(&[("web", "web:v2")]);
    let nothing = images(&[]);
    let sel = selector();
    type Edit = fn(&mut Rollout<'_>);
    let cases: &[(&str, Edit, &str)] = &[
        (
            "converged",
            |r| r.current_revision = "web-7f9c",
            "the rollout has converged",
        ),
        (
            "already created for this revision",
            |r| r.already_created = true,
            "already pre-downloaded for this revision",
        ),
        (
            "recreate update",
            |r| r.in_place_images = None,
            "pods are recreated, not updated in place",
        ),
        ("3 replicas", |r| r.replicas = 3, "3 replicas or fewer"),
        (
            "maxUnavailable covers every pod",
            |r| r.max_unavailable = 10,
            "every pod updates in one batch",
        ),
    ];
    for (name, edit, reason) in cases {
        let mut r = rollout(&none, &one, &sel);
        edit(&mut r);
        assert_eq!(decide(&r), Ok(Decision::Skip(reason)), "{name}");
    }
    let r = rollout(&none, &nothing, &sel);
    assert_eq!(
        decide(&r),
        Ok(Decision::Skip("no container image changes")),
        "metadata-only change"
    );
}

#[test]
fn a_partition_makes_even_a_full_max_unavailable_more_than_one_batch() {
    let none = annotations(&[]);
    let one = images(&[("web", "web:v2")]);
    let sel = selector();
    let mut r = rollout(&none, &one, &sel);
    r.max_unavailable = 10;
    r.partition = 2;
    assert!(matches!(decide(&r), Ok(Decision::Create(_))));
    r.replicas = 4;
    r.partition = 0;
    r.max_unavailable = 3;
    assert!(
        matches!(decide(&r), Ok(Decision::Create(_))),
        "4 replicas is enough"
    );
}

#[test]
fn waits_for_min_updated_ready_pods() {
    let one = images(&[("web", "web:v2")]);
    let sel = selector();
    // (annotation, replicas, updated ready, expected wait (need, have) or None = create)
    type Case = (&'static str, i32, i32, Option<(i32, i32)>);
    let cases: &[Case] = &[
        ("3", 10, 2, Some((3, 2))),
        ("3", 10, 3, None),
        ("0", 10, 0, None),
        ("25%", 10, 2, Some((3, 2))), // 2.5 rounded up
        ("25%", 10, 3, None),
        ("100%", 8, 7, Some((8, 7))),
    ];
    for (value, replicas, ready, expected) in cases {
        let ann = annotations(&[(MIN_UPDATED_READY_PODS_ANNOTATION, value)]);
        let mut r = rollout(&ann, &one, &sel);
        r.replicas = *replicas;
        r.updated_ready_replicas = *ready;
        let got = decide(&r).unwrap();
        match expected {
            Some((need, have)) => assert_eq!(
                got,
                Decision::Wait {
                    need: *need,
                    have: *have
                },
                "{value} of {replicas}, {ready} ready"
            ),
            None => assert!(
                matches!(got, Decision::Create(_)),
                "{value} of {replicas}, {ready} ready: {got:?}"
            ),
        }
    }
}

#[test]
fn one_job_per_changed_image_on_the_nodes_of_old_pods() {
    let ann = annotations(&[(PARALLELISM_ANNOTATION, "10"), (TIMEOUT_ANNOTATION, "120")]);
    // Two containers share the new sidecar image: it is pulled once.
    let changed = images(&[
        ("web", "registry.example/web:v2"),
        ("sidecar-b", "registry.example/proxy:v9"),
        ("sidecar-a", "registry.example/proxy:v9"),
    ]);
    let sel = selector();
    let Decision::Create(jobs) = decide(&rollout(&ann, &changed, &sel)).unwrap() else {
        panic!("expected jobs");
    };
    let names: Vec<(&str, &str, &str)> = jobs
        .iter()
        .map(|j| (j.name.as_str(), j.container.as_str(), j.spec.image.as_str()))
        .collect();
    assert_eq!(
        names,
        [
            (
                "web-7f9c-sidecar-a",
                "sidecar-a",
                "registry.example/proxy:v9"
            ),
            ("web-7f9c-web", "web", "registry.example/web:v2"),
        ]
    );
    let spec = &jobs[1].spec;
    assert_eq!(spec.parallelism, Some(IntOrString::Int(10)));
    assert_eq!(spec.pull_secrets, ["regcred"]);
    assert_eq!(spec.selector, None);
    let policy = spec.pull_policy.clone().unwrap();
    assert_eq!(policy.timeout_seconds, Some(120));
    assert_eq!(policy.backoff_limit, Some(1));
    assert_eq!(
        spec.completion_policy.policy_type(),
        CompletionPolicyType::Always
    );
    assert!(spec.completion_policy.ttl_seconds_after_finished.is_some());
    let pod_selector = spec.pod_selector.clone().unwrap();
    assert_eq!(pod_selector.match_labels, selector().match_labels);
    let requirement = &pod_selector.match_expressions.unwrap()[0];
    assert_eq!(requirement.key, "controller-revision-hash");
    assert_eq!(requirement.operator, "NotIn");
    assert_eq!(
        requirement.values.as_deref(),
        Some(&["web-7f9c".to_owned(), "7f9c".to_owned()][..])
    );
}

#[test]
fn defaults_parallelism_one_and_timeout_600() {
    let none = annotations(&[]);
    let one = images(&[("web", "web:v2")]);
    let sel = selector();
    let Decision::Create(jobs) = decide(&rollout(&none, &one, &sel)).unwrap() else {
        panic!("expected jobs");
    };
    assert_eq!(jobs[0].spec.parallelism, Some(IntOrString::Int(1)));
    assert_eq!(
        jobs[0].spec.pull_policy.as_ref().unwrap().timeout_seconds,
        Some(DEFAULT_TIMEOUT_SECONDS)
    );
}

#[test]
fn invalid_annotations_name_the_annotation_and_value() {
    let one = images(&[("web", "web:v2")]);
    let sel = selector();
    let cases: &[(&str, &str)] = &[
        (PARALLELISM_ANNOTATION, "ten"),
        (PARALLELISM_ANNOTATION, "0"),
        (PARALLELISM_ANNOTATION, "-2"),
        (PARALLELISM_ANNOTATION, "150%"),
        (TIMEOUT_ANNOTATION, "0"),
        (TIMEOUT_ANNOTATION, "10m"),
        (MIN_UPDATED_READY_PODS_ANNOTATION, "-1"),
        (MIN_UPDATED_READY_PODS_ANNOTATION, "half"),
        (MIN_UPDATED_READY_PODS_ANNOTATION, "120%"),
    ];
    for (annotation, value) in cases {
        let ann = annotations(&[(annotation, value)]);
        let err = decide(&rollout(&ann, &one, &sel)).unwrap_err();
        let message = err.to_string();
        assert!(
            message.contains(annotation) && message.contains(&format!("{value:?}")),
            "{annotation}={value}: {message}"
        );
    }
    let ok: &[(&str, &str)] = &[
        (PARALLELISM_ANNOTATION, "50%"),
        (TIMEOUT_ANNOTATION, " 30 "),
    ];
    for (annotation, value) in ok {
        let ann = annotations(&[(annotation, value)]);
        assert!(
            decide(&rollout(&ann, &one, &sel)).is_ok(),
            "{annotation}={value}"
        );
    }
}

#[test]
fn jobs_of_another_revision_go_and_all_go_on_convergence() {
    let jobs = [
        OwnedJob {
            name: "web-a-web",
            uid: "a",
            revision: Some("web-a"),
        },
        OwnedJob {
            name: "web-b-web",
            uid: "b",
            revision: Some("web-b"),
        },
        OwnedJob {
            name: "stray",
            uid: "s",
            revision: None,
        },
    ];
    let names = |current, update| -> Vec<&str> {
        jobs_to_delete(&jobs, current, update)
            .iter()
            .map(|job| job.name)
            .collect()
    };
    assert_eq!(names("web-old", "web-b"), ["web-a-web", "stray"]);
    assert_eq!(names("web-b", "web-b"), ["web-a-web", "web-b-web", "stray"]);
    assert!(jobs_to_delete(&jobs[1..2], "web-old", "web-b").is_empty());
}

#[test]
fn job_names_stay_valid_object_names() {
    assert_eq!(job_name("web-7f9c", "app"), "web-7f9c-app");
    let long_revision = format!("{}-7f9c", "a".repeat(240));
    let a = job_name(&long_revision, "container-one");
    let b = job_name(&long_revision, "container-two");
    assert!(a.len() <= 253 && b.len() <= 253, "{} {}", a.len(), b.len());
    assert_ne!(a, b, "distinct containers keep distinct names");
    assert_eq!(a, job_name(&long_revision, "container-one"), "stable");
}

#[test]
fn the_selector_without_a_separate_hash_has_one_value() {
    let narrowed = old_pods_selector(&selector(), "web-7f9c", Some("web-7f9c"));
    let values = narrowed.match_expressions.unwrap()[0].values.clone();
    assert_eq!(values, Some(vec!["web-7f9c".to_owned()]));
    let narrowed = old_pods_selector(&selector(), "web-7f9c", None);
    assert_eq!(narrowed.match_expressions.unwrap().len(), 1);
}
