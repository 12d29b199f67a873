use k8s_openapi::api::core::v1::{PodCondition, PodStatus};
use serde_json::json;

use super::*;

fn resources(v: Value) -> ResourceRequirements {
    serde_json::from_value(v).unwrap()
}

#[test]
fn which_resource_changes_resize_in_place() {
    let base =
        json!({ "requests": { "cpu": "100m", "memory": "64Mi" }, "limits": { "memory": "128Mi" } });
    let cases = [
        ("unchanged", Some(base.clone()), ResourcesChange::Unchanged),
        (
            "cpu request up",
            Some(
                json!({ "requests": { "cpu": "200m", "memory": "64Mi" }, "limits": { "memory": "128Mi" } }),
            ),
            ResourcesChange::Resize(resources(
                json!({ "requests": { "cpu": "200m", "memory": "64Mi" }, "limits": { "memory": "128Mi" } }),
            )),
        ),
        (
            "cpu limit added",
            Some(
                json!({ "requests": { "cpu": "100m", "memory": "64Mi" }, "limits": { "cpu": "1", "memory": "128Mi" } }),
            ),
            ResourcesChange::Resize(resources(
                json!({ "requests": { "cpu": "100m", "memory": "64Mi" }, "limits": { "cpu": "1", "memory": "128Mi" } }),
            )),
        ),
        (
            "memory limit removed",
            Some(json!({ "requests": { "cpu": "100m", "memory": "64Mi" } })),
            ResourcesChange::NotResizable,
        ),
        (
            "ephemeral storage",
            Some(
                json!({ "requests": { "cpu": "100m", "memory": "64Mi", "ephemeral-storage": "1Gi" }, "limits": { "memory": "128Mi" } }),
            ),
            ResourcesChange::NotResizable,
        ),
        (
            "claims",
            Some(
                json!({ "requests": { "cpu": "100m", "memory": "64Mi" }, "limits": { "memory": "128Mi" }, "claims": [{ "name": "gpu" }] }),
            ),
            ResourcesChange::NotResizable,
        ),
        ("all removed", None, ResourcesChange::NotResizable),
    ];
    for (case, new, want) in cases {
        assert_eq!(resources_change(Some(&base), new.as_ref()), want, "{case}");
    }
    assert_eq!(
        resources_change(None, Some(&json!({ "requests": { "cpu": "1" } }))),
        ResourcesChange::Resize(resources(json!({ "requests": { "cpu": "1" } }))),
        "added to a container without resources"
    );
}

#[test]
fn qos_classes() {
    let spec = |containers: Value| json!({ "containers": containers });
    let cases = [
        (
            "no resources",
            spec(json!([{ "name": "a" }])),
            QosClass::BestEffort,
        ),
        (
            "zero request",
            spec(json!([{ "name": "a", "resources": { "requests": { "cpu": "0" } } }])),
            QosClass::BestEffort,
        ),
        (
            "requests only",
            spec(json!([{ "name": "a", "resources": { "requests": { "cpu": "1" } } }])),
            QosClass::Burstable,
        ),
        (
            "limits only (requests default to them)",
            spec(
                json!([{ "name": "a", "resources": { "limits": { "cpu": "1", "memory": "1Gi" } } }]),
            ),
            QosClass::Guaranteed,
        ),
        (
            "equal in another notation",
            spec(json!([{ "name": "a", "resources": {
                "requests": { "cpu": "1000m", "memory": "1024Mi" },
                "limits": { "cpu": "1", "memory": "1Gi" } } }])),
            QosClass::Guaranteed,
        ),
        (
            "one container short of a memory limit",
            spec(json!([
                { "name": "a", "resources": { "limits": { "cpu": "1", "memory": "1Gi" } } },
                { "name": "b", "resources": { "limits": { "cpu": "1" } } }
            ])),
            QosClass::Burstable,
        ),
        (
            "an init container counts",
            json!({
                "containers": [{ "name": "a", "resources": { "limits": { "cpu": "1", "memory": "1Gi" } } }],
                "initContainers": [{ "name": "i" }]
            }),
            QosClass::Burstable,
        ),
    ];
    for (case, spec, want) in cases {
        assert_eq!(qos_class(&spec), want, "{case}");
    }
}

#[test]
fn quantities() {
    let cases = [
        ("500m", Some(0.5)),
        ("2", Some(2.0)),
        ("1.5", Some(1.5)),
        ("64Mi", Some(67_108_864.0)),
        ("1Gi", Some(1_073_741_824.0)),
        ("1G", Some(1e9)),
        ("1k", Some(1e3)),
        ("1E", Some(1e18)),
        ("1e3", Some(1e3)),
        ("5E-1", Some(0.5)),
        ("12x", None),
        ("", None),
    ];
    for (q, want) in cases {
        assert_eq!(quantity_value(q), want, "{q}");
    }
}

#[test]
fn unapplied_resources() {
    let spec = resources(
        json!({ "requests": { "cpu": "200m", "memory": "64Mi" }, "limits": { "memory": "128Mi" } }),
    );
    let cases = [
        (
            "applied, in other notation",
            json!({ "requests": { "cpu": "0.2", "memory": "67108864" }, "limits": { "memory": "128Mi" } }),
            None,
        ),
        (
            "old cpu",
            json!({ "requests": { "cpu": "100m", "memory": "64Mi" }, "limits": { "memory": "128Mi" } }),
            Some("cpu request 100m (wants 200m)"),
        ),
        (
            "no memory limit reported",
            json!({ "requests": { "cpu": "200m", "memory": "64Mi" } }),
            Some("no memory limit (wants 128Mi)"),
        ),
        (
            "extra reported values do not matter",
            json!({ "requests": { "cpu": "200m", "memory": "64Mi" }, "limits": { "cpu": "1", "memory": "128Mi" } }),
            None,
        ),
    ];
    for (case, status, want) in cases {
        let status = resources(status);
        assert_eq!(
            unapplied_resource(Some(&spec), Some(&status)).as_deref(),
            want,
            "{case}"
        );
    }
    assert_eq!(
        unapplied_resource(Some(&spec), None).as_deref(),
        Some("no cpu request (wants 200m)"),
        "no resources in the status yet"
    );
}

fn pod_with(conditions: &[(&str, &str, Option<&str>)]) -> Pod {
    Pod {
        status: Some(PodStatus {
            conditions: Some(
                conditions
                    .iter()
                    .map(|(type_, status, reason)| PodCondition {
                        type_: (*type_).into(),
                        status: (*status).into(),
                        reason: reason.map(Into::into),
                        message: Some("node says so".into()),
                        ..PodCondition::default()
                    })
                    .collect(),
            ),
            ..PodStatus::default()
        }),
        ..Pod::default()
    }
}

#[test]
fn resize_statuses() {
    let cases = [
        ("none", vec![("Ready", "True", None)], ResizeStatus::Idle),
        (
            "deferred",
            vec![(RESIZE_PENDING, "True", Some("Deferred"))],
            ResizeStatus::Busy("resize pending: node says so".into()),
        ),
        (
            "infeasible",
            vec![(RESIZE_PENDING, "True", Some(REASON_INFEASIBLE))],
            ResizeStatus::Infeasible("node says so".into()),
        ),
        (
            "in progress",
            vec![(RESIZE_IN_PROGRESS, "True", None)],
            ResizeStatus::Busy("resize in progress: node says so".into()),
        ),
        (
            "a False condition is no condition",
            vec![(RESIZE_IN_PROGRESS, "False", None)],
            ResizeStatus::Idle,
        ),
    ];
    for (case, conditions, want) in cases {
        assert_eq!(resize_status(&pod_with(&conditions)), want, "{case}");
    }
}

#[test]
fn resize_patch_names_each_container() {
    assert_eq!(resize_patch(&BTreeMap::new()), None);
    let wanted = BTreeMap::from([(
        "app".to_owned(),
        resources(json!({ "requests": { "cpu": "200m" }, "limits": { "memory": "1Gi" } })),
    )]);
    assert_eq!(
        resize_patch(&wanted),
        Some(
            json!({ "spec": { "containers": [{ "name": "app", "resources": {
            "requests": { "cpu": "200m" }, "limits": { "memory": "1Gi" } } }] } })
        )
    );
}

// Resize through the in-place protocol: planning, start and completion.

mod protocol {
    use std::collections::BTreeMap;

    use k8s_openapi::api::core::v1::{
        Container, ContainerState, ContainerStateRunning, ContainerStatus, Pod, PodCondition,
        PodSpec, PodStatus, PodTemplateSpec, ResourceRequirements,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
    use k8s_openapi::jiff::Timestamp;
    use serde_json::{Value, json};

    use crate::api::common::PodUpdatePolicy;
    use crate::workload::inplace::resize::{REASON_INFEASIBLE, RESIZE_IN_PROGRESS, RESIZE_PENDING};
    use crate::workload::inplace::{
        Completion, GRACE_ANNOTATION, GraceStep, InPlaceUpdateSpec, InPlaceUpdateState,
        PodObservation, RefreshStep, RevisionAdapter, STATE_ANNOTATION, UpdateMethod, begin_update,
        check_completion, choose_update_method, grace_step, plan_refresh,
    };

    fn ts(secs: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + secs).unwrap()
    }

    fn resources(v: Value) -> ResourceRequirements {
        serde_json::from_value(v).unwrap()
    }

    fn burstable(cpu: &str) -> ResourceRequirements {
        resources(
            json!({ "requests": { "cpu": cpu, "memory": "64Mi" }, "limits": { "memory": "128Mi" } }),
        )
    }

    fn container(image: &str, r: ResourceRequirements) -> Container {
        Container {
            name: "app".into(),
            image: Some(image.into()),
            resources: Some(r),
            ..Container::default()
        }
    }

    fn template(image: &str, r: ResourceRequirements) -> PodTemplateSpec {
        PodTemplateSpec {
            metadata: Some(ObjectMeta::default()),
            spec: Some(PodSpec {
                containers: vec![container(image, r)],
                ..PodSpec::default()
            }),
        }
    }

    fn resized(pairs: &[(&str, ResourceRequirements)], images: &[(&str, &str)]) -> UpdateMethod {
        UpdateMethod::InPlace(InPlaceUpdateSpec {
            container_images: images
                .iter()
                .map(|(k, v)| ((*k).into(), (*v).into()))
                .collect(),
            container_resources: pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), v.clone()))
                .collect(),
            ..InPlaceUpdateSpec::default()
        })
    }

    #[test]
    fn resource_changes_under_each_policy() {
        let old = template("web:v1", burstable("100m"));
        let guaranteed = resources(json!({ "limits": { "cpu": "1", "memory": "128Mi" } }));
        let recreate = |f: &str| UpdateMethod::Recreate {
            changed: vec![f.to_owned()],
        };
        let cases = [
            (
                "cpu request",
                template("web:v1", burstable("200m")),
                Ok(resized(&[("app", burstable("200m"))], &[])),
            ),
            (
                "image and cpu request in one update",
                template("web:v2", burstable("200m")),
                Ok(resized(&[("app", burstable("200m"))], &[("app", "web:v2")])),
            ),
            (
                "QoS class would change",
                template("web:v1", guaranteed),
                Err(recreate("spec.containers[app].resources")),
            ),
            (
                "a request removed",
                template(
                    "web:v1",
                    resources(
                        json!({ "requests": { "cpu": "100m" }, "limits": { "memory": "128Mi" } }),
                    ),
                ),
                Err(recreate("spec.containers[app].resources")),
            ),
        ];
        for (case, new, want) in cases {
            let if_possible = choose_update_method(PodUpdatePolicy::InPlaceIfPossible, &old, &new);
            let only = choose_update_method(PodUpdatePolicy::InPlaceOnly, &old, &new);
            match want {
                Ok(method) => {
                    assert_eq!(if_possible.unwrap(), method, "{case}");
                    assert_eq!(only.unwrap(), method, "{case}: InPlaceOnly");
                }
                Err(method) => {
                    assert_eq!(if_possible.unwrap(), method, "{case}");
                    let refused = only.unwrap_err().to_string();
                    assert!(
                        refused.contains("spec.containers[app].resources changed"),
                        "{case}: {refused}"
                    );
                }
            }
        }
        assert_eq!(
            choose_update_method(
                PodUpdatePolicy::ReCreate,
                &old,
                &template("web:v1", burstable("200m"))
            )
            .unwrap(),
            UpdateMethod::Recreate { changed: vec![] },
            "ReCreate never resizes"
        );
    }

    fn running_pod(cpu: &str, status_cpu: &str, conditions: Vec<PodCondition>) -> Pod {
        Pod {
            metadata: ObjectMeta {
                labels: Some(BTreeMap::from([(
                    "controller-revision-hash".to_owned(),
                    "web-1".to_owned(),
                )])),
                ..ObjectMeta::default()
            },
            spec: Some(PodSpec {
                containers: vec![container("web:v1", burstable(cpu))],
                ..PodSpec::default()
            }),
            status: Some(PodStatus {
                container_statuses: Some(vec![ContainerStatus {
                    name: "app".into(),
                    image: "web:v1".into(),
                    image_id: "sha256:aaa".into(),
                    container_id: Some("containerd://c1".into()),
                    ready: true,
                    resources: Some(burstable(status_cpu)),
                    state: Some(ContainerState {
                        running: Some(ContainerStateRunning {
                            started_at: Some(Time(ts(0))),
                        }),
                        ..ContainerState::default()
                    }),
                    ..ContainerStatus::default()
                }]),
                conditions: Some(conditions),
                ..PodStatus::default()
            }),
        }
    }

    #[test]
    fn begin_records_the_old_resources_and_resizes() {
        let spec = InPlaceUpdateSpec {
            container_resources: BTreeMap::from([("app".to_owned(), burstable("200m"))]),
            ..InPlaceUpdateSpec::default()
        };
        let pod = running_pod("100m", "100m", vec![]);
        let begin = begin_update(RevisionAdapter::FullName, "web-2", &spec, &pod, 0, ts(100));
        let begin = begin.unwrap();
        assert_eq!(
            begin.patch.container_resources,
            BTreeMap::from([("app".to_owned(), burstable("200m"))])
        );
        assert!(begin.patch.container_images.is_empty());
        let state = begin.patch.annotations[STATE_ANNOTATION]
            .as_deref()
            .unwrap();
        let state = InPlaceUpdateState::parse(state).unwrap();
        let app = &state.last_container_statuses["app"];
        assert_eq!(app.resources, Some(burstable("100m")));
        assert!(!app.image_changed(), "a resize alone restarts nothing");
        let json: Value = serde_json::from_str(
            begin.patch.annotations[STATE_ANNOTATION]
                .as_deref()
                .unwrap(),
        )
        .unwrap();
        assert_eq!(
            json["lastContainerStatuses"]["app"],
            json!({ "resources": { "requests": { "cpu": "100m", "memory": "64Mi" }, "limits": { "memory": "128Mi" } } }),
            "OpenKruise's field names"
        );
    }

    #[test]
    fn a_grace_period_holds_the_resize_and_releases_it() {
        let spec = InPlaceUpdateSpec {
            container_resources: BTreeMap::from([("app".to_owned(), burstable("200m"))]),
            ..InPlaceUpdateSpec::default()
        };
        let mut pod = running_pod("100m", "100m", vec![]);
        let begin = begin_update(RevisionAdapter::FullName, "web-2", &spec, &pod, 30, ts(100));
        let begin = begin.unwrap();
        assert!(
            begin.patch.container_resources.is_empty(),
            "nothing resized during the grace period"
        );
        let grace = begin.patch.annotations[GRACE_ANNOTATION].clone().unwrap();
        assert!(grace.contains("\"containerResources\""), "{grace}");
        let labels = pod.metadata.labels.get_or_insert_default();
        labels.insert("controller-revision-hash".into(), "web-2".into());
        pod.metadata.annotations = Some(
            begin
                .patch
                .annotations
                .into_iter()
                .filter_map(|(k, v)| Some((k, v?)))
                .collect(),
        );
        match grace_step(&pod, ts(131)).unwrap() {
            GraceStep::PatchNow(patch) => assert_eq!(
                patch.container_resources,
                BTreeMap::from([("app".to_owned(), burstable("200m"))])
            ),
            other => panic!("expected the held resize, got {other:?}"),
        }
    }

    fn condition(type_: &str, reason: Option<&str>) -> PodCondition {
        PodCondition {
            type_: type_.into(),
            status: "True".into(),
            reason: reason.map(Into::into),
            message: Some("Node didn't have enough capacity: cpu".into()),
            ..PodCondition::default()
        }
    }

    /// A pod resized from 100m to 200m at t=100; the kubelet reports `status_cpu`.
    fn resizing(status_cpu: &str, conditions: Vec<PodCondition>) -> Pod {
        let mut pod = running_pod("200m", status_cpu, conditions);
        let state = json!({
            "revision": "web-2",
            "updateTimestamp": "2027-01-15T08:01:40Z",
            "lastContainerStatuses": { "app": { "resources": burstable("100m") } }
        });
        pod.metadata.annotations = Some(BTreeMap::from([(
            STATE_ANNOTATION.to_owned(),
            state.to_string(),
        )]));
        pod
    }

    #[test]
    fn resize_completion() {
        let pending = |r: &str| Completion::Pending(r.to_owned());
        let cases = [
            (
                "applied, no restart needed",
                resizing("200m", vec![]),
                Completion::Done,
            ),
            (
                "kubelet not there yet",
                resizing("100m", vec![]),
                pending("container app still runs with cpu request 100m (wants 200m)"),
            ),
            (
                "deferred",
                resizing("100m", vec![condition(RESIZE_PENDING, Some("Deferred"))]),
                pending("container app still runs with cpu request 100m (wants 200m)"),
            ),
            (
                "status shows it, condition still in progress",
                resizing("200m", vec![condition(RESIZE_IN_PROGRESS, None)]),
                pending("resize in progress: Node didn't have enough capacity: cpu"),
            ),
            (
                "infeasible",
                resizing(
                    "100m",
                    vec![condition(RESIZE_PENDING, Some(REASON_INFEASIBLE))],
                ),
                Completion::Infeasible("Node didn't have enough capacity: cpu".into()),
            ),
        ];
        for (case, pod, want) in cases {
            let state = pod.metadata.annotations.as_ref().unwrap()[STATE_ANNOTATION].clone();
            let state = InPlaceUpdateState::parse(&state).unwrap();
            assert_eq!(
                check_completion(&state, &PodObservation::of(&pod)),
                want,
                "{case}"
            );
        }
        let infeasible = resizing(
            "100m",
            vec![condition(RESIZE_PENDING, Some(REASON_INFEASIBLE))],
        );
        assert_eq!(
            plan_refresh(&infeasible, ts(200)).unwrap(),
            RefreshStep::Infeasible("Node didn't have enough capacity: cpu".into())
        );
    }
}
