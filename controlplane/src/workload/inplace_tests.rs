use k8s_openapi::api::core::v1::{
    Container, ContainerState, ContainerStateWaiting, EnvVar, PodCondition, PodReadinessGate,
    PodSpec, PodStatus, Volume,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::*;
use crate::workload::deletion::REVISION_LABEL;
use crate::workload::test_pods::{at as ts, container_running};

fn container(name: &str, image: &str) -> Container {
    Container {
        name: name.to_owned(),
        image: Some(image.to_owned()),
        ..Container::default()
    }
}

fn template(containers: Vec<Container>) -> PodTemplateSpec {
    PodTemplateSpec {
        metadata: Some(ObjectMeta {
            labels: Some(BTreeMap::from([("app".to_owned(), "web".to_owned())])),
            ..ObjectMeta::default()
        }),
        spec: Some(PodSpec {
            containers,
            ..PodSpec::default()
        }),
    }
}

fn base() -> PodTemplateSpec {
    template(vec![
        container("app", "nginx:1.25"),
        container("sidecar", "envoy:1.30"),
    ])
}

fn edit(f: impl FnOnce(&mut PodTemplateSpec)) -> PodTemplateSpec {
    let mut t = base();
    f(&mut t);
    t
}

fn spec_mut(t: &mut PodTemplateSpec) -> &mut PodSpec {
    t.spec.get_or_insert_default()
}

fn images(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn in_place(container_images: &[(&str, &str)]) -> UpdateMethod {
    UpdateMethod::InPlace(InPlaceUpdateSpec {
        container_images: images(container_images),
        ..InPlaceUpdateSpec::default()
    })
}

fn recreate(changed: &[&str]) -> UpdateMethod {
    UpdateMethod::Recreate {
        changed: changed.iter().map(|c| (*c).to_owned()).collect(),
    }
}

#[test]
fn update_method_under_in_place_if_possible() {
    let cases: Vec<(&str, PodTemplateSpec, UpdateMethod)> = vec![
        ("no change", base(), in_place(&[])),
        (
            "one image",
            edit(|t| spec_mut(t).containers[0].image = Some("nginx:1.26".into())),
            in_place(&[("app", "nginx:1.26")]),
        ),
        (
            "two images",
            edit(|t| {
                spec_mut(t).containers[0].image = Some("nginx:1.26".into());
                spec_mut(t).containers[1].image = Some("envoy@sha256:00ff".into());
            }),
            in_place(&[("app", "nginx:1.26"), ("sidecar", "envoy@sha256:00ff")]),
        ),
        (
            "env changed",
            edit(|t| {
                spec_mut(t).containers[0].env = Some(vec![EnvVar {
                    name: "A".into(),
                    ..EnvVar::default()
                }]);
            }),
            recreate(&["spec.containers[app].env"]),
        ),
        (
            "image and env: only env is named",
            edit(|t| {
                spec_mut(t).containers[0].image = Some("nginx:1.26".into());
                spec_mut(t).containers[0].env = Some(vec![EnvVar {
                    name: "A".into(),
                    ..EnvVar::default()
                }]);
            }),
            recreate(&["spec.containers[app].env"]),
        ),
        (
            "volume added",
            edit(|t| {
                spec_mut(t).volumes = Some(vec![Volume {
                    name: "data".into(),
                    ..Volume::default()
                }]);
            }),
            recreate(&["spec.volumes"]),
        ),
        (
            "container added",
            edit(|t| spec_mut(t).containers.push(container("extra", "busybox"))),
            recreate(&["spec.containers"]),
        ),
        (
            "container removed",
            edit(|t| {
                spec_mut(t).containers.pop();
            }),
            recreate(&["spec.containers"]),
        ),
        (
            "container renamed",
            edit(|t| spec_mut(t).containers[1].name = "proxy".into()),
            recreate(&["spec.containers"]),
        ),
        (
            "containers reordered",
            edit(|t| spec_mut(t).containers.reverse()),
            recreate(&["spec.containers"]),
        ),
        (
            "image removed",
            edit(|t| spec_mut(t).containers[0].image = None),
            recreate(&["spec.containers[app].image"]),
        ),
        (
            "init container image",
            edit(|t| spec_mut(t).init_containers = Some(vec![container("init", "busybox:2")])),
            recreate(&["spec.initContainers"]),
        ),
        (
            "several fields, sorted",
            edit(|t| {
                spec_mut(t).node_selector = Some(images(&[("zone", "a")]));
                spec_mut(t).containers[1].args = Some(vec!["-v".into()]);
                spec_mut(t).hostname = Some("h".into());
            }),
            recreate(&[
                "spec.containers[sidecar].args",
                "spec.hostname",
                "spec.nodeSelector",
            ]),
        ),
        (
            "metadata other than labels and annotations",
            edit(|t| t.metadata.get_or_insert_default().finalizers = Some(vec!["f".into()])),
            recreate(&["metadata.finalizers"]),
        ),
        ("spec removed", edit(|t| t.spec = None), recreate(&["spec"])),
    ];
    for (case, new, want) in cases {
        let got = choose_update_method(PodUpdatePolicy::InPlaceIfPossible, &base(), &new).unwrap();
        assert_eq!(got, want, "{case}");
    }
}

#[test]
fn metadata_changes_are_in_place() {
    let new = edit(|t| {
        let meta = t.metadata.get_or_insert_default();
        meta.labels = Some(images(&[("tier", "front")]));
        meta.annotations = Some(images(&[("note", "x")]));
        spec_mut(t).containers[0].image = Some("nginx:1.26".into());
    });
    let want = InPlaceUpdateSpec {
        container_images: images(&[("app", "nginx:1.26")]),
        container_resources: BTreeMap::new(),
        labels: BTreeMap::from([
            ("app".to_owned(), None),
            ("tier".to_owned(), Some("front".to_owned())),
        ]),
        annotations: BTreeMap::from([("note".to_owned(), Some("x".to_owned()))]),
    };
    assert_eq!(
        choose_update_method(PodUpdatePolicy::InPlaceOnly, &base(), &new).unwrap(),
        UpdateMethod::InPlace(want)
    );
}

#[test]
fn recreate_policy_never_updates_in_place() {
    let image_only = edit(|t| spec_mut(t).containers[0].image = Some("nginx:1.26".into()));
    assert_eq!(
        choose_update_method(PodUpdatePolicy::ReCreate, &base(), &image_only).unwrap(),
        recreate(&[])
    );
}

#[test]
fn only_in_place_if_possible_recreates_for_changed_claim_templates() {
    use PodUpdatePolicy::{InPlaceIfPossible, InPlaceOnly, ReCreate};
    // (policy, claim templates changed, recreated for them)
    let cases = [
        (InPlaceIfPossible, true, true),
        (InPlaceIfPossible, false, false),
        // OpenKruise's IgnoreVolumeClaimTemplatesHashDiff: in place, the claims kept.
        (InPlaceOnly, true, false),
        (InPlaceOnly, false, false),
        // Recreated for the template change itself, not for the claims.
        (ReCreate, true, false),
        (ReCreate, false, false),
    ];
    for (policy, changed, want) in cases {
        assert_eq!(
            claim_templates_recreate(policy, changed),
            want,
            "{policy:?}, claim templates changed: {changed}"
        );
    }
}

#[test]
fn in_place_only_refuses_and_names_the_fields() {
    let new = edit(|t| {
        spec_mut(t).containers[0].env = Some(vec![EnvVar {
            name: "A".into(),
            ..EnvVar::default()
        }]);
        spec_mut(t).volumes = Some(vec![Volume {
            name: "data".into(),
            ..Volume::default()
        }]);
    });
    let err = choose_update_method(PodUpdatePolicy::InPlaceOnly, &base(), &new).unwrap_err();
    assert_eq!(
        err.to_string(),
        "updateStrategy.type is InPlaceOnly but the template change cannot be applied in place: \
         spec.containers[app].env, spec.volumes changed; only container images, container cpu/memory resources (keeping the pod's QoS class) and pod labels/annotations can change in place"
    );
    assert!(matches!(err, InPlaceError::InPlaceOnlyRefused { changed } if changed.len() == 2));
}

const KRUISE_STATE: &str = r#"{"revision":"web-6d5f9c","updateTimestamp":"2027-01-15T08:00:05Z","lastContainerStatuses":{"app":{"imageID":"docker.io/library/nginx@sha256:aaa"}}}"#;

#[test]
fn state_annotation_round_trips_openkruise_json() {
    let state = InPlaceUpdateState::parse(KRUISE_STATE).unwrap();
    assert_eq!(state.revision, "web-6d5f9c");
    assert_eq!(state.update_timestamp.0.to_string(), "2027-01-15T08:00:05Z");
    assert_eq!(
        state.last_container_statuses["app"].image_id,
        "docker.io/library/nginx@sha256:aaa"
    );
    assert_eq!(state.to_annotation().unwrap(), KRUISE_STATE);
}

#[test]
fn state_annotation_keeps_fields_of_newer_versions() {
    let json = r#"{"revision":"r","updateTimestamp":"2027-01-15T08:00:05Z","lastContainerStatuses":{"app":{}},"nextContainerImages":{"sidecar":"envoy:2"},"updateEnvFromMetadata":true}"#;
    let state = InPlaceUpdateState::parse(json).unwrap();
    assert!(state.has_next_batch());
    assert_eq!(
        state.last_container_statuses["app"],
        InPlaceUpdateContainerStatus::default()
    );
    let back: Value = serde_json::from_str(&state.to_annotation().unwrap()).unwrap();
    assert_eq!(back, serde_json::from_str::<Value>(json).unwrap());
}

#[test]
fn state_annotation_edge_cases() {
    let null_statuses =
        r#"{"revision":"r","updateTimestamp":"2027-01-15T08:00:05Z","lastContainerStatuses":null}"#;
    assert!(
        InPlaceUpdateState::parse(null_statuses)
            .unwrap()
            .last_container_statuses
            .is_empty()
    );
    let missing = r#"{"revision":"r","updateTimestamp":"2027-01-15T08:00:05Z"}"#;
    assert!(!InPlaceUpdateState::parse(missing).unwrap().has_next_batch());
    let empty_next =
        r#"{"revision":"r","updateTimestamp":"2027-01-15T08:00:05Z","nextContainerImages":{}}"#;
    assert!(
        !InPlaceUpdateState::parse(empty_next)
            .unwrap()
            .has_next_batch()
    );
    for bad in [
        "",
        "{",
        r#"{"revision":"r"}"#,
        r#"{"revision":"r","updateTimestamp":"yesterday"}"#,
    ] {
        let err = InPlaceUpdateState::parse(bad).unwrap_err();
        assert!(
            err.to_string().starts_with(
                "pod annotation apps.kruise.io/inplace-update-state is not valid JSON"
            ),
            "{bad:?}: {err}"
        );
    }
}

#[test]
fn grace_annotation_round_trips() {
    let json = r#"{"revision":"web-2","containerImages":{"app":"nginx:1.26"},"metaDataPatch":"e30=","graceSeconds":30}"#;
    let grace = GraceSpec::parse(json).unwrap();
    assert_eq!(grace.grace_seconds, 30);
    assert_eq!(grace.to_annotation().unwrap(), json);
    assert!(
        GraceSpec::parse("[]")
            .unwrap_err()
            .to_string()
            .contains(GRACE_ANNOTATION)
    );
}

/// The container `name` running `image` (`image_id`), since `started` seconds if known.
fn running(
    name: &str,
    image: &str,
    image_id: &str,
    started: Option<i64>,
    ready: bool,
) -> ContainerStatus {
    let mut status = container_running(name, image, image_id, ts(0), ready);
    if let Some(state) = status.state.as_mut().and_then(|s| s.running.as_mut()) {
        state.started_at = started.map(|s| Time(ts(s)));
    }
    status
}

/// A pod on revision `web-1` running nginx:1.25 (image ID sha256:aaa) since t=0.
fn pod(gate: bool) -> Pod {
    Pod {
        metadata: ObjectMeta {
            labels: Some(images(&[(REVISION_LABEL, "web-1")])),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            containers: vec![
                container("app", "nginx:1.25"),
                container("sidecar", "envoy:1.30"),
            ],
            readiness_gates: gate.then(|| {
                vec![PodReadinessGate {
                    condition_type: INPLACE_UPDATE_READY.into(),
                }]
            }),
            ..PodSpec::default()
        }),
        status: Some(PodStatus {
            container_statuses: Some(vec![
                running("app", "nginx:1.25", "sha256:aaa", Some(0), true),
                running("sidecar", "envoy:1.30", "sha256:eee", Some(0), true),
            ]),
            ..PodStatus::default()
        }),
    }
}

fn update_spec() -> InPlaceUpdateSpec {
    InPlaceUpdateSpec {
        container_images: images(&[("app", "nginx:1.26")]),
        container_resources: BTreeMap::new(),
        labels: BTreeMap::from([("tier".to_owned(), Some("front".to_owned()))]),
        annotations: BTreeMap::new(),
    }
}

#[test]
fn begin_without_grace_patches_images_now() {
    let begin = begin_update(
        RevisionAdapter::FullName,
        "web-2",
        &update_spec(),
        &pod(true),
        0,
        ts(100),
    )
    .unwrap();
    assert!(begin.mark_not_ready);
    assert_eq!(begin.requeue_after_seconds, None);
    assert_eq!(
        begin.patch.container_images,
        images(&[("app", "nginx:1.26")])
    );
    assert_eq!(
        begin.patch.labels,
        BTreeMap::from([
            (REVISION_LABEL.to_owned(), Some("web-2".to_owned())),
            ("tier".to_owned(), Some("front".to_owned()))
        ])
    );
    assert_eq!(begin.patch.annotations[GRACE_ANNOTATION], None);
    let state = InPlaceUpdateState::parse(
        begin.patch.annotations[STATE_ANNOTATION]
            .as_deref()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(state.revision, "web-2");
    assert_eq!(state.update_timestamp, Time(ts(100)));
    assert_eq!(
        state.last_container_statuses.keys().collect::<Vec<_>>(),
        ["app"]
    );
    assert_eq!(state.last_container_statuses["app"].image_id, "sha256:aaa");
}

#[test]
fn begin_with_grace_defers_images() {
    let begin = begin_update(
        RevisionAdapter::FullName,
        "web-2",
        &update_spec(),
        &pod(false),
        15,
        ts(100),
    )
    .unwrap();
    assert!(!begin.mark_not_ready, "no readiness gate, nothing to flip");
    assert_eq!(begin.requeue_after_seconds, Some(15));
    assert!(begin.patch.container_images.is_empty());
    assert_eq!(begin.patch.labels.len(), 1, "only the revision label now");
    let grace = GraceSpec::parse(
        begin.patch.annotations[GRACE_ANNOTATION]
            .as_deref()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        (grace.revision.as_str(), grace.grace_seconds),
        ("web-2", 15)
    );
    assert_eq!(grace.container_images, images(&[("app", "nginx:1.26")]));
    let state = InPlaceUpdateState::parse(
        begin.patch.annotations[STATE_ANNOTATION]
            .as_deref()
            .unwrap(),
    )
    .unwrap();
    assert!(
        state.last_container_statuses.is_empty(),
        "recorded when the images are patched"
    );
}

/// The pod after `begin_update` with a grace period, with its patch applied.
fn pod_in_grace(grace_seconds: i32) -> Pod {
    let mut pod = pod(true);
    let begin = begin_update(
        RevisionAdapter::FullName,
        "web-2",
        &update_spec(),
        &pod,
        grace_seconds,
        ts(100),
    )
    .unwrap();
    let annotations = begin
        .patch
        .annotations
        .into_iter()
        .filter_map(|(k, v)| Some((k, v?)))
        .collect();
    pod.metadata.annotations = Some(annotations);
    pod.metadata.labels = Some(images(&[(REVISION_LABEL, "web-2")]));
    pod
}

#[test]
fn grace_steps() {
    let millis = |ms: i64| ts(100) + SignedDuration::from_millis(ms);
    let cases: Vec<(&str, Pod, Timestamp, GraceStep)> = vec![
        (
            "no annotations",
            pod(true),
            millis(0),
            GraceStep::NotInGrace,
        ),
        (
            "just started",
            pod_in_grace(10),
            millis(0),
            GraceStep::Wait {
                requeue_after_seconds: 10,
            },
        ),
        (
            "rounds up",
            pod_in_grace(10),
            millis(2_500),
            GraceStep::Wait {
                requeue_after_seconds: 8,
            },
        ),
        (
            "last millisecond",
            pod_in_grace(10),
            millis(9_999),
            GraceStep::Wait {
                requeue_after_seconds: 1,
            },
        ),
        (
            "clock behind the timestamp",
            pod_in_grace(10),
            millis(-3_000),
            GraceStep::Wait {
                requeue_after_seconds: 13,
            },
        ),
        (
            "revision moved on",
            {
                let mut p = pod_in_grace(10);
                p.metadata.labels = Some(images(&[(REVISION_LABEL, "web-3")]));
                p
            },
            millis(0),
            GraceStep::Drop,
        ),
    ];
    for (case, pod, now, want) in cases {
        assert_eq!(grace_step(&pod, now).unwrap(), want, "{case}");
    }
}

#[test]
fn grace_over_patches_images_and_metadata() {
    for now in [ts(110), ts(500)] {
        let GraceStep::PatchNow(patch) = grace_step(&pod_in_grace(10), now).unwrap() else {
            panic!("grace should be over at {now}");
        };
        assert_eq!(patch.container_images, images(&[("app", "nginx:1.26")]));
        assert_eq!(
            patch.labels,
            BTreeMap::from([("tier".to_owned(), Some("front".to_owned()))])
        );
        assert_eq!(patch.annotations[GRACE_ANNOTATION], None);
        let state =
            InPlaceUpdateState::parse(patch.annotations[STATE_ANNOTATION].as_deref().unwrap())
                .unwrap();
        assert_eq!(
            state.update_timestamp,
            Time(ts(100)),
            "the timestamp is the start of the update"
        );
        assert_eq!(state.last_container_statuses["app"].image_id, "sha256:aaa");
    }
}

#[test]
fn grace_of_a_workload_writing_short_hashes_still_finishes() {
    // Begun by a workload that writes only the hash: the pod's label and the grace
    // annotation name the same revision in different forms.
    let mut pod = pod(true);
    let begin = begin_update(
        RevisionAdapter::ShortHash,
        "web-2",
        &update_spec(),
        &pod,
        10,
        ts(100),
    )
    .unwrap();
    assert_eq!(begin.patch.labels[REVISION_LABEL], Some("2".to_owned()));
    pod.metadata.annotations = Some(
        begin
            .patch
            .annotations
            .into_iter()
            .filter_map(|(k, v)| Some((k, v?)))
            .collect(),
    );
    pod.metadata.labels = Some(images(&[(REVISION_LABEL, "2")]));
    assert!(matches!(
        grace_step(&pod, ts(110)).unwrap(),
        GraceStep::PatchNow(_)
    ));
}

#[test]
fn grace_with_malformed_annotation_is_an_error() {
    let mut pod = pod_in_grace(10);
    pod.metadata
        .annotations
        .get_or_insert_default()
        .insert(GRACE_ANNOTATION.into(), "not json".into());
    assert!(matches!(
        grace_step(&pod, ts(100)),
        Err(InPlaceError::Annotation(_))
    ));
}

fn recorded(image_ids: &[(&str, &str)]) -> InPlaceUpdateState {
    InPlaceUpdateState {
        revision: "web-2".into(),
        update_timestamp: Time(ts(100)),
        last_container_statuses: image_ids
            .iter()
            .map(|(n, id)| {
                (
                    (*n).to_owned(),
                    InPlaceUpdateContainerStatus {
                        image_id: (*id).to_owned(),
                        ..Default::default()
                    },
                )
            })
            .collect(),
        other: BTreeMap::new(),
    }
}

fn observed<'a>(
    spec_images: BTreeMap<String, String>,
    statuses: &'a [ContainerStatus],
) -> PodObservation<'a> {
    PodObservation {
        spec_images,
        statuses,
        ..PodObservation::default()
    }
}

fn with_container_id(mut status: ContainerStatus, id: &str) -> ContainerStatus {
    status.container_id = Some(id.to_owned());
    status
}

#[test]
fn completion_checks() {
    let spec = images(&[("app", "nginx:1.26"), ("sidecar", "envoy:1.30")]);
    let sidecar = running("sidecar", "envoy:1.30", "sha256:eee", Some(0), true);
    let waiting = ContainerStatus {
        name: "app".into(),
        image_id: "sha256:bbb".into(),
        state: Some(ContainerState {
            waiting: Some(ContainerStateWaiting::default()),
            ..ContainerState::default()
        }),
        ..ContainerStatus::default()
    };
    let done = Completion::Done;
    let pending = |r: &str| Completion::Pending(r.to_owned());
    let cases: Vec<(&str, BTreeMap<String, String>, ContainerStatus, Completion)> = vec![
        (
            "new image ID, restarted, ready",
            spec.clone(),
            running("app", "nginx:1.26", "sha256:bbb", Some(120), true),
            done.clone(),
        ),
        (
            "started in the update's second",
            spec.clone(),
            running("app", "nginx:1.26", "sha256:bbb", Some(100), true),
            done.clone(),
        ),
        (
            "old image ID, kubelet not there yet",
            spec.clone(),
            running("app", "nginx:1.25", "sha256:aaa", Some(0), true),
            pending("container app has not restarted since the update (image ID sha256:aaa)"),
        ),
        (
            "same digest, new tag, restarted",
            spec.clone(),
            running("app", "nginx:1.26", "sha256:aaa", Some(101), true),
            done.clone(),
        ),
        (
            // containerd 1.6 reports the image's first tag, not the spec's: the restart
            // on the same digest is what tells (OpenKruise #2297, nginx:alpine →
            // nginx:mainline-alpine).
            "same digest, new tag, restarted, status shows the old tag",
            images(&[("app", "nginx:mainline-alpine")]),
            running("app", "nginx:alpine", "sha256:aaa", Some(101), true),
            done.clone(),
        ),
        (
            "same digest, new tag, not restarted",
            spec.clone(),
            running("app", "nginx:1.26", "sha256:aaa", Some(0), true),
            pending("container app has not restarted since the update (image ID sha256:aaa)"),
        ),
        (
            "restarted on the old image ID, the spec names another digest",
            images(&[("app", "nginx@sha256:fff")]),
            running("app", "nginx:1.25", "sha256:aaa", Some(101), true),
            pending("container app still runs image ID sha256:aaa"),
        ),
        (
            "new image ID but old start time",
            spec.clone(),
            running("app", "nginx:1.26", "sha256:bbb", Some(99), true),
            pending("container app has not restarted since the update (image ID sha256:bbb)"),
        ),
        (
            // kwok's simulated kubelet reports no image ID: the spec's image string and a
            // start after the update are the evidence.
            "no image ID, the spec's image restarted",
            spec.clone(),
            running("app", "nginx:1.26", "", Some(120), true),
            done.clone(),
        ),
        (
            "no image ID, another image",
            spec.clone(),
            running("app", "nginx:1.25", "", Some(120), true),
            pending("container app reports no image ID yet"),
        ),
        (
            "no image ID, not restarted",
            spec.clone(),
            running("app", "nginx:1.26", "", Some(99), true),
            pending("container app reports no image ID yet"),
        ),
        (
            "not running",
            spec.clone(),
            waiting,
            pending("container app is not running"),
        ),
        (
            "no start time",
            spec.clone(),
            running("app", "nginx:1.26", "sha256:bbb", None, true),
            pending("container app has no start time"),
        ),
        (
            "not ready",
            spec.clone(),
            running("app", "nginx:1.26", "sha256:bbb", Some(120), false),
            pending("container app is not ready"),
        ),
        (
            "no status",
            spec,
            running("other", "x", "y", Some(120), true),
            pending("container app has no status yet"),
        ),
    ];
    for (case, spec_images, app, want) in cases {
        let statuses = [app, sidecar.clone()];
        assert_eq!(
            check_completion(
                &recorded(&[("app", "sha256:aaa")]),
                &observed(spec_images, &statuses)
            ),
            want,
            "{case}"
        );
    }
}

#[test]
fn completion_on_the_same_digest_needs_a_new_container_and_the_spec_digest() {
    let mut state = recorded(&[("app", "docker.io/library/nginx@sha256:aaa")]);
    let entry = state.last_container_statuses.get_mut("app").unwrap();
    entry.container_id = "containerd://c1".into();
    let same = |id: &str, started| {
        with_container_id(
            running(
                "app",
                "nginx:alpine",
                "docker.io/library/nginx@sha256:aaa",
                Some(started),
                true,
            ),
            id,
        )
    };
    let tag = images(&[("app", "nginx:mainline-alpine")]);
    let digest = images(&[("app", "nginx@sha256:aaa")]);
    let other_digest = images(&[("app", "nginx@sha256:fff")]);
    let cases = [
        (
            "new container, new tag",
            tag.clone(),
            same("containerd://c2", 101),
            true,
        ),
        (
            "same container, start time in the update's second",
            tag.clone(),
            same("containerd://c1", 100),
            false,
        ),
        (
            "new container, the spec's digest",
            digest,
            same("containerd://c2", 101),
            true,
        ),
        (
            "new container, another digest in the spec",
            other_digest,
            same("containerd://c2", 101),
            false,
        ),
    ];
    for (case, spec_images, status, done) in cases {
        let statuses = [status];
        let got = check_completion(&state, &observed(spec_images, &statuses));
        assert_eq!(got == Completion::Done, done, "{case}: {got:?}");
    }
}

#[test]
fn completion_waits_for_next_batch_and_ignores_unchanged_containers() {
    let statuses = [
        running("app", "nginx:1.26", "sha256:bbb", Some(120), true),
        running("sidecar", "e", "x", None, false),
    ];
    let mut state = recorded(&[("app", "sha256:aaa")]);
    assert_eq!(
        check_completion(&state, &observed(BTreeMap::new(), &statuses)),
        Completion::Done
    );
    state
        .other
        .insert("nextContainerImages".into(), json!({"sidecar": "envoy:2"}));
    assert_eq!(
        check_completion(&state, &observed(BTreeMap::new(), &statuses)),
        Completion::Pending("containers remain for the next update batch".into())
    );
}

/// A pod whose in-place update to nginx:1.26 (started at t=100) the kubelet has applied.
fn updated_pod(gate: bool, condition: Option<&str>) -> Pod {
    let mut pod = pod(gate);
    let spec = pod.spec.get_or_insert_default();
    spec.containers[0].image = Some("nginx:1.26".into());
    let status = pod.status.get_or_insert_default();
    status.container_statuses.get_or_insert_default()[0] =
        running("app", "nginx:1.26", "sha256:bbb", Some(130), true);
    status.conditions = condition.map(|c| {
        vec![PodCondition {
            type_: INPLACE_UPDATE_READY.into(),
            status: c.into(),
            ..PodCondition::default()
        }]
    });
    pod.metadata.annotations = Some(BTreeMap::from([(
        STATE_ANNOTATION.to_owned(),
        recorded(&[("app", "sha256:aaa")]).to_annotation().unwrap(),
    )]));
    pod
}

#[test]
fn refresh_steps() {
    // The state is kept, as OpenKruise keeps it, and marked finished.
    let mut finished = recorded(&[("app", "sha256:aaa")]);
    finished.mark_completed();
    let cleanup = PodPatch {
        annotations: BTreeMap::from([(
            STATE_ANNOTATION.to_owned(),
            Some(finished.to_annotation().unwrap()),
        )]),
        ..PodPatch::default()
    };
    // A finished update whose container has since restarted (not running) is still done.
    let mut finished_then_crashed = updated_pod(true, Some("True"));
    finished_then_crashed.metadata.annotations = Some(BTreeMap::from([(
        STATE_ANNOTATION.to_owned(),
        finished.to_annotation().unwrap(),
    )]));
    finished_then_crashed
        .status
        .get_or_insert_default()
        .container_statuses
        .get_or_insert_default()[0]
        .state = None;
    let mut still_old = updated_pod(true, Some("False"));
    still_old
        .status
        .get_or_insert_default()
        .container_statuses
        .get_or_insert_default()[0] = running("app", "nginx:1.25", "sha256:aaa", Some(0), true);
    let mut orphan_grace = pod(true);
    orphan_grace.metadata.annotations = Some(images(&[(GRACE_ANNOTATION, "{}")]));
    let cases: Vec<(&str, Pod, RefreshStep)> = vec![
        ("no update", pod(true), RefreshStep::Nothing),
        (
            "in grace",
            pod_in_grace(30),
            RefreshStep::Grace(GraceStep::Wait {
                requeue_after_seconds: 25,
            }),
        ),
        (
            "grace without state",
            orphan_grace,
            RefreshStep::Grace(GraceStep::Drop),
        ),
        (
            "kubelet not done",
            still_old,
            RefreshStep::Wait(
                "container app has not restarted since the update (image ID sha256:aaa)".into(),
            ),
        ),
        (
            "done, gate False",
            updated_pod(true, Some("False")),
            RefreshStep::Finish {
                set_ready: true,
                cleanup: cleanup.clone(),
            },
        ),
        (
            "done, gate missing",
            updated_pod(true, None),
            RefreshStep::Finish {
                set_ready: true,
                cleanup: cleanup.clone(),
            },
        ),
        (
            "done, gate already True",
            updated_pod(true, Some("True")),
            RefreshStep::Finish {
                set_ready: false,
                cleanup: cleanup.clone(),
            },
        ),
        (
            "done, no readiness gate",
            updated_pod(false, Some("False")),
            RefreshStep::Finish {
                set_ready: false,
                cleanup,
            },
        ),
        (
            "finished earlier, kept state",
            finished_then_crashed,
            RefreshStep::Nothing,
        ),
    ];
    for (case, pod, want) in cases {
        assert_eq!(plan_refresh(&pod, ts(105)).unwrap(), want, "{case}");
    }
}

#[test]
fn a_kept_state_is_in_progress_until_marked_finished() {
    let mut state = recorded(&[("app", "sha256:aaa")]);
    let under_way = state.to_annotation().unwrap();
    state.mark_completed();
    let finished = state.to_annotation().unwrap();
    for (case, value, want) in [
        ("recorded, not finished", under_way.as_str(), true),
        ("marked finished", finished.as_str(), false),
        ("malformed", "{not json", true),
        (
            "OpenKruise's finished state without the mark",
            r#"{"revision":"r","updateTimestamp":"2024-01-01T00:00:00Z","lastContainerStatuses":{}}"#,
            true,
        ),
    ] {
        assert_eq!(update_in_progress(value), want, "{case}");
    }
    assert!(
        finished.contains(r#""stevedoreCompleted":true"#),
        "{finished}"
    );
}

#[test]
fn refresh_with_malformed_state_is_an_error() {
    let mut pod = pod(true);
    pod.metadata.annotations = Some(images(&[(STATE_ANNOTATION, "{not json")]));
    let err = plan_refresh(&pod, ts(0)).unwrap_err();
    assert!(err.to_string().contains(STATE_ANNOTATION), "{err}");
}
