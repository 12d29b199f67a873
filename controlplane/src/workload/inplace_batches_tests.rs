use k8s_openapi::api::core::v1::{
    ConfigMapKeySelector, ContainerState, ContainerStateRunning, ContainerStateWaiting, EnvVar,
    EnvVarSource, ObjectFieldSelector, Pod, PodSpec, PodStatus, ResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;

use super::*;
use crate::workload::inplace::{
    InPlaceUpdateSpec, InPlaceUpdateState, PodPatch, RefreshStep, STATE_ANNOTATION, begin_update,
    plan_refresh,
};
use crate::workload::revision_adapter::RevisionAdapter;

fn env(name: &str, value: &str) -> EnvVar {
    EnvVar {
        name: name.to_owned(),
        value: Some(value.to_owned()),
        ..EnvVar::default()
    }
}

fn field_env(name: &str, path: &str) -> EnvVar {
    EnvVar {
        name: name.to_owned(),
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                field_path: path.to_owned(),
                ..ObjectFieldSelector::default()
            }),
            ..EnvVarSource::default()
        }),
        ..EnvVar::default()
    }
}

fn barrier_env(key: &str) -> EnvVar {
    EnvVar {
        name: BARRIER_ENV.to_owned(),
        value_from: Some(EnvVarSource {
            config_map_key_ref: Some(ConfigMapKeySelector {
                name: "web-0-barrier".to_owned(),
                key: key.to_owned(),
                ..ConfigMapKeySelector::default()
            }),
            ..EnvVarSource::default()
        }),
        ..EnvVar::default()
    }
}

fn container(name: &str, env: Vec<EnvVar>) -> Container {
    Container {
        name: name.to_owned(),
        image: Some(format!("{name}:1")),
        env: Some(env),
        ..Container::default()
    }
}

fn names(list: &[&str]) -> BTreeSet<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

fn changes(pairs: &[(&str, Option<&str>)]) -> MetadataChanges {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.map(str::to_owned)))
        .collect()
}

/// A case: its name, the containers, the pod's annotations, the priorities of a, b, c.
type PriorityCase<'a> = (
    &'static str,
    Vec<Container>,
    Option<&'a BTreeMap<String, String>>,
    [i64; 3],
);

#[test]
fn launch_priorities() {
    let ordered = BTreeMap::from([(LAUNCH_PRIORITY_ANNOTATION.to_owned(), "Ordered".to_owned())]);
    let other = BTreeMap::from([(LAUNCH_PRIORITY_ANNOTATION.to_owned(), "Random".to_owned())]);
    let three = || {
        vec![
            container("a", vec![env(PRIORITY_ENV, "1")]),
            container("b", vec![env(PRIORITY_ENV, " 7 ")]),
            container("c", vec![]),
        ]
    };
    let cases: Vec<PriorityCase<'_>> = vec![
        ("env, absent is 0", three(), None, [1, 7, 0]),
        (
            "Ordered: declaration order wins over env",
            three(),
            Some(&ordered),
            [0, -1, -2],
        ),
        (
            "another annotation value is ignored",
            three(),
            Some(&other),
            [1, 7, 0],
        ),
        (
            "not an integer is 0",
            vec![
                container("a", vec![env(PRIORITY_ENV, "high")]),
                container("b", vec![env(PRIORITY_ENV, "-3")]),
                container("c", vec![env("OTHER", "9")]),
            ],
            None,
            [0, -3, 0],
        ),
        (
            "OpenKruise's barrier env",
            vec![
                container("a", vec![barrier_env("p_-1")]),
                container("b", vec![barrier_env("p_5")]),
                container("c", vec![barrier_env("junk")]),
            ],
            None,
            [-1, 5, 0],
        ),
    ];
    for (case, containers, annotations, expected) in cases {
        let got = container_priorities(&containers, annotations);
        let want: BTreeMap<String, i64> = ["a", "b", "c"]
            .iter()
            .zip(expected)
            .map(|(n, p)| ((*n).to_owned(), p))
            .collect();
        assert_eq!(got, want, "{case}");
    }
}

#[test]
fn batches_take_the_highest_priority_first() {
    let priorities: BTreeMap<String, i64> = BTreeMap::from([
        ("a".into(), 5),
        ("b".into(), 5),
        ("c".into(), 0),
        ("d".into(), -2),
    ]);
    let cases = [
        (names(&["a", "b", "c", "d"]), names(&["a", "b"])),
        (names(&["c", "d"]), names(&["c"])),
        (names(&["d"]), names(&["d"])),
        (names(&["x", "d"]), names(&["x"])), // unknown: 0
        (names(&[]), names(&[])),
    ];
    for (waiting, expected) in cases {
        assert_eq!(next_batch(&waiting, &priorities), expected, "{waiting:?}");
    }
}

#[test]
fn field_paths_that_read_metadata() {
    let label = |k: &str| Some(MetaKey::Label(k.to_owned()));
    let annotation = |k: &str| Some(MetaKey::Annotation(k.to_owned()));
    let cases = [
        ("metadata.labels['tier']", label("tier")),
        (
            "metadata.labels['apps.kruise.io/x']",
            label("apps.kruise.io/x"),
        ),
        ("metadata.annotations['note']", annotation("note")),
        ("metadata.name", None),
        ("metadata.labels", None),
        ("metadata.labels[tier]", None),
        ("status.podIP", None),
        ("metadata.labelsX['tier']", None),
    ];
    for (path, expected) in cases {
        assert_eq!(meta_key(path), expected, "{path}");
    }
}

#[test]
fn env_readers_name_the_containers_and_keys() {
    let containers = vec![
        container("app", vec![field_env("TIER", "metadata.labels['tier']")]),
        container(
            "sidecar",
            vec![
                field_env("NOTE", "metadata.annotations['note']"),
                field_env("NAME", "metadata.name"),
            ],
        ),
        container("log", vec![field_env("ZONE", "metadata.labels['zone']")]),
    ];
    let read = |labels: &[(&str, &str)], annotations: &[(&str, &str)]| RefMetadata {
        labels: labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
        annotations: annotations
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
    };
    let cases = [
        (
            "a label read by one container",
            changes(&[("tier", Some("back"))]),
            changes(&[]),
            BTreeMap::from([("app".to_owned(), read(&[("tier", "back")], &[]))]),
        ),
        (
            "an annotation of the same name as a label is not the label",
            changes(&[]),
            changes(&[("tier", Some("back"))]),
            BTreeMap::new(),
        ),
        (
            "an annotation and a removed label",
            changes(&[("zone", None)]),
            changes(&[("note", Some("hi"))]),
            BTreeMap::from([
                ("log".to_owned(), read(&[("zone", "")], &[])),
                ("sidecar".to_owned(), read(&[], &[("note", "hi")])),
            ]),
        ),
        (
            "a key no env reads",
            changes(&[("other", Some("1"))]),
            changes(&[("note2", Some("1"))]),
            BTreeMap::new(),
        ),
    ];
    for (case, labels, annotations, expected) in cases {
        assert_eq!(
            env_readers(&containers, &labels, &annotations),
            expected,
            "{case}"
        );
    }
}

#[test]
fn failures_that_stop_later_batches() {
    let waiting = |reason: &str, message: &str| ContainerStatus {
        name: "app".into(),
        state: Some(ContainerState {
            waiting: Some(ContainerStateWaiting {
                reason: Some(reason.into()),
                message: Some(message.into()),
            }),
            ..ContainerState::default()
        }),
        ..ContainerStatus::default()
    };
    let cases = [
        (
            waiting("ImagePullBackOff", "Back-off pulling image"),
            Some("ImagePullBackOff: Back-off pulling image"),
        ),
        (waiting("CrashLoopBackOff", ""), Some("CrashLoopBackOff")),
        (waiting("ContainerCreating", ""), None),
        (waiting("PodInitializing", ""), None),
        (ContainerStatus::default(), None),
    ];
    for (status, expected) in cases {
        assert_eq!(
            container_failure(&status).as_deref(),
            expected,
            "{status:?}"
        );
    }
}

// ---- the whole protocol over a pod: begin, agent restarts, batches, completion ----

fn ts(secs: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + secs).expect("a timestamp")
}

fn running(name: &str, image: &str, id: &str, started: i64, ready: bool) -> ContainerStatus {
    ContainerStatus {
        name: name.to_owned(),
        image: image.to_owned(),
        image_id: format!("sha256:{image}"),
        container_id: Some(format!("containerd://{id}")),
        ready,
        state: Some(ContainerState {
            running: Some(ContainerStateRunning {
                started_at: Some(Time(ts(started))),
            }),
            ..ContainerState::default()
        }),
        ..ContainerStatus::default()
    }
}

/// A pod whose containers `app` (reads label `tier`) and `sidecar` run since t=0.
fn pod(sidecar_priority: Option<&str>) -> Pod {
    let mut sidecar_env = vec![];
    if let Some(p) = sidecar_priority {
        sidecar_env.push(env(PRIORITY_ENV, p));
    }
    Pod {
        metadata: ObjectMeta {
            labels: Some(BTreeMap::from([("tier".to_owned(), "front".to_owned())])),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            containers: vec![
                container("app", vec![field_env("TIER", "metadata.labels['tier']")]),
                container("sidecar", sidecar_env),
            ],
            ..PodSpec::default()
        }),
        status: Some(PodStatus {
            container_statuses: Some(vec![
                running("app", "app:1", "app-0", 0, true),
                running("sidecar", "sidecar:1", "sidecar-0", 0, true),
            ]),
            ..PodStatus::default()
        }),
    }
}

/// The pod after the apiserver applied `patch` (labels, annotations, images).
fn apply(pod: &mut Pod, patch: &PodPatch) {
    let merge = |map: &mut Option<BTreeMap<String, String>>, changes: &MetadataChanges| {
        let map = map.get_or_insert_default();
        for (k, v) in changes {
            match v {
                Some(v) => map.insert(k.clone(), v.clone()),
                None => map.remove(k),
            };
        }
    };
    merge(&mut pod.metadata.labels, &patch.labels);
    merge(&mut pod.metadata.annotations, &patch.annotations);
    for c in &mut pod.spec.get_or_insert_default().containers {
        if let Some(image) = patch.container_images.get(&c.name) {
            c.image = Some(image.clone());
        }
    }
}

fn set_status(pod: &mut Pod, status: ContainerStatus) {
    let statuses = pod
        .status
        .get_or_insert_default()
        .container_statuses
        .get_or_insert_default();
    let slot = statuses
        .iter_mut()
        .find(|s| s.name == status.name)
        .expect("a status");
    *slot = status;
}

fn state_of(pod: &Pod) -> InPlaceUpdateState {
    let annotations = pod.metadata.annotations.as_ref().expect("annotations");
    InPlaceUpdateState::parse(&annotations[STATE_ANNOTATION]).expect("a state")
}

fn begin(pod: &Pod, spec: &InPlaceUpdateSpec) -> PodPatch {
    begin_update(RevisionAdapter::FullName, "web-2", spec, pod, 0, ts(100))
        .expect("begins")
        .patch
}

#[test]
fn a_label_read_by_env_restarts_only_its_container_through_the_agent() {
    let mut pod = pod(None);
    let spec = InPlaceUpdateSpec {
        labels: changes(&[("tier", Some("back"))]),
        ..InPlaceUpdateSpec::default()
    };
    let patch = begin(&pod, &spec);
    assert!(patch.container_images.is_empty(), "no image changes");
    apply(&mut pod, &patch);
    let state = state_of(&pod);
    assert_eq!(
        state.last_container_statuses.keys().collect::<Vec<_>>(),
        ["app"]
    );
    assert!(state.batches().update_env_from_metadata);

    // The next sync asks the agent once and records that it did.
    let RefreshStep::RestartContainers { containers, record } =
        plan_refresh(&pod, ts(101)).expect("a step")
    else {
        panic!("expected a restart");
    };
    assert_eq!(containers, ["app"]);
    apply(&mut pod, &record);
    assert!(state_of(&pod).batches().agent_restarts.is_empty());
    assert!(
        matches!(plan_refresh(&pod, ts(102)), Ok(RefreshStep::Wait(r)) if r.contains("app has not restarted")),
    );

    // Done once app runs a new container started after the update; sidecar untouched.
    set_status(&mut pod, running("app", "app:1", "app-1", 103, true));
    assert!(matches!(
        plan_refresh(&pod, ts(104)),
        Ok(RefreshStep::Finish { .. })
    ));
}

#[test]
fn an_image_change_of_a_container_whose_env_also_changed_needs_no_agent_restart() {
    let pod = pod(None);
    let spec = InPlaceUpdateSpec {
        container_images: BTreeMap::from([("app".to_owned(), "app:2".to_owned())]),
        labels: changes(&[("tier", Some("back"))]),
        ..InPlaceUpdateSpec::default()
    };
    let patch = begin(&pod, &spec);
    assert_eq!(patch.container_images["app"], "app:2");
    let mut pod = pod;
    apply(&mut pod, &patch);
    assert!(state_of(&pod).batches().agent_restarts.is_empty());
    assert!(matches!(
        plan_refresh(&pod, ts(101)),
        Ok(RefreshStep::Wait(_))
    ));
}

#[test]
fn images_roll_in_priority_batches_and_a_failure_stops_the_rest() {
    // sidecar (priority 10) before app (0).
    let mut pod = pod(Some("10"));
    let spec = InPlaceUpdateSpec {
        container_images: BTreeMap::from([
            ("app".to_owned(), "app:2".to_owned()),
            ("sidecar".to_owned(), "sidecar:2".to_owned()),
        ]),
        ..InPlaceUpdateSpec::default()
    };
    let patch = begin(&pod, &spec);
    assert_eq!(
        patch.container_images,
        BTreeMap::from([("sidecar".to_owned(), "sidecar:2".to_owned())])
    );
    apply(&mut pod, &patch);
    let queued = state_of(&pod).batches();
    assert_eq!(queued.next_container_images["app"], "app:2");
    assert_eq!(
        queued
            .pre_check_before_next
            .expect("a pre-check")
            .containers_required_ready,
        ["sidecar"]
    );

    // Restarted but not ready: app waits.
    set_status(
        &mut pod,
        running("sidecar", "sidecar:2", "sidecar-1", 101, false),
    );
    let Ok(RefreshStep::Wait(reason)) = plan_refresh(&pod, ts(102)) else {
        panic!("expected to wait");
    };
    assert!(
        reason.contains("sidecar is not ready") && reason.contains("app wait"),
        "{reason}"
    );

    // A pull failure is reported once and app is not patched.
    let mut failing = pod.clone();
    set_status(
        &mut failing,
        ContainerStatus {
            name: "sidecar".into(),
            state: Some(ContainerState {
                waiting: Some(ContainerStateWaiting {
                    reason: Some("ErrImagePull".into()),
                    message: Some("not found".into()),
                }),
                ..ContainerState::default()
            }),
            ..ContainerStatus::default()
        },
    );
    let RefreshStep::BatchFailed {
        container,
        message,
        record,
    } = plan_refresh(&failing, ts(103)).expect("a step")
    else {
        panic!("expected a failure");
    };
    assert_eq!(container, "sidecar");
    assert_eq!(
        message,
        "container sidecar failed its in-place update (ErrImagePull: not found), so app are not updated"
    );
    assert!(record.container_images.is_empty());
    apply(&mut failing, &record);
    assert!(matches!(
        plan_refresh(&failing, ts(104)),
        Ok(RefreshStep::Wait(_))
    ));

    // Ready: the next batch patches app and records what it runs.
    set_status(
        &mut pod,
        running("sidecar", "sidecar:2", "sidecar-1", 101, true),
    );
    let Ok(RefreshStep::NextBatch(next)) = plan_refresh(&pod, ts(105)) else {
        panic!("expected the next batch");
    };
    assert_eq!(
        next.container_images,
        BTreeMap::from([("app".to_owned(), "app:2".to_owned())])
    );
    apply(&mut pod, &next);
    let state = state_of(&pod);
    let queued = state.batches();
    assert!(queued.next_container_images.is_empty() && queued.pre_check_before_next.is_none());
    assert_eq!(queued.container_batches_record.len(), 2);
    assert_eq!(
        state.last_container_statuses["app"].container_id,
        "containerd://app-0"
    );

    // Done once app restarted too.
    assert!(matches!(
        plan_refresh(&pod, ts(106)),
        Ok(RefreshStep::Wait(_))
    ));
    set_status(&mut pod, running("app", "app:2", "app-1", 107, true));
    assert!(matches!(
        plan_refresh(&pod, ts(108)),
        Ok(RefreshStep::Finish { .. })
    ));
}

#[test]
fn equal_priorities_restart_together_and_ordered_follows_declaration() {
    let spec = InPlaceUpdateSpec {
        container_images: BTreeMap::from([
            ("app".to_owned(), "app:2".to_owned()),
            ("sidecar".to_owned(), "sidecar:2".to_owned()),
        ]),
        ..InPlaceUpdateSpec::default()
    };
    let together = begin(&pod(None), &spec);
    assert_eq!(together.container_images.len(), 2);
    let mut ordered = pod(Some("10"));
    ordered.metadata.annotations = Some(BTreeMap::from([(
        LAUNCH_PRIORITY_ANNOTATION.to_owned(),
        "Ordered".to_owned(),
    )]));
    let first = begin(&ordered, &spec);
    assert_eq!(
        first.container_images,
        BTreeMap::from([("app".to_owned(), "app:2".to_owned())])
    );
}

#[test]
fn env_restarts_of_a_lower_priority_wait_for_the_image_batch() {
    // sidecar's image (priority 10) first; app's env restart after it.
    let mut pod = pod(Some("10"));
    let spec = InPlaceUpdateSpec {
        container_images: BTreeMap::from([("sidecar".to_owned(), "sidecar:2".to_owned())]),
        labels: changes(&[("tier", Some("back"))]),
        ..InPlaceUpdateSpec::default()
    };
    let patch = begin(&pod, &spec);
    assert_eq!(
        patch.labels["tier"].as_deref(),
        Some("back"),
        "metadata lands at once"
    );
    apply(&mut pod, &patch);
    let queued = state_of(&pod).batches();
    assert!(queued.agent_restarts.is_empty());
    assert!(queued.next_container_ref_metadata.contains_key("app"));
    set_status(
        &mut pod,
        running("sidecar", "sidecar:2", "sidecar-1", 101, true),
    );
    let Ok(RefreshStep::NextBatch(next)) = plan_refresh(&pod, ts(102)) else {
        panic!("expected the next batch");
    };
    apply(&mut pod, &next);
    assert_eq!(state_of(&pod).batches().agent_restarts, ["app"]);
    assert!(matches!(
        plan_refresh(&pod, ts(103)),
        Ok(RefreshStep::RestartContainers { containers, .. }) if containers == ["app"]
    ));
}

fn cpu(quantity: &str) -> ResourceRequirements {
    serde_json::from_value(serde_json::json!({ "requests": { "cpu": quantity } }))
        .expect("resources")
}

/// The pod after the kubelet applied `patch`: new images running in new containers
/// started at `at`, and new resources in the spec and the status.
fn run_patched(pod: &mut Pod, patch: &PodPatch, at: i64) {
    apply(pod, patch);
    for (name, image) in &patch.container_images {
        set_status(pod, running(name, image, &format!("{name}-{at}"), at, true));
    }
    for (name, resources) in &patch.container_resources {
        let spec = pod.spec.get_or_insert_default();
        let container = spec.containers.iter_mut().find(|c| &c.name == name);
        container.expect("a container").resources = Some(resources.clone());
        let statuses = pod
            .status
            .get_or_insert_default()
            .container_statuses
            .get_or_insert_default();
        let status = statuses
            .iter_mut()
            .find(|s| &s.name == name)
            .expect("a status");
        status.resources = Some(resources.clone());
    }
}

/// Container → image, or container → cpu request.
fn named<V: Clone>(pairs: &[(&str, V)]) -> BTreeMap<String, V> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.clone()))
        .collect()
}

/// A case: its name, the images and cpu requests the update changes, then what the first
/// and the second batch patch (images, cpu requests).
type ResizeCase = (
    &'static str,
    [Vec<(&'static str, &'static str)>; 2],
    [Vec<(&'static str, &'static str)>; 2],
    [Vec<(&'static str, &'static str)>; 2],
);

#[test]
fn resources_are_resized_with_each_containers_batch() {
    // sidecar (priority 10) before app (0), as OpenKruise's
    // defaultPatchUpdateSpecToPodWithVerticalUpdate batches them.
    let cases: [ResizeCase; 3] = [
        (
            "images and resources of both",
            [
                vec![("app", "app:2"), ("sidecar", "sidecar:2")],
                vec![("app", "200m"), ("sidecar", "300m")],
            ],
            [vec![("sidecar", "sidecar:2")], vec![("sidecar", "300m")]],
            [vec![("app", "app:2")], vec![("app", "200m")]],
        ),
        (
            "the later batch only resized",
            [vec![("sidecar", "sidecar:2")], vec![("app", "200m")]],
            [vec![("sidecar", "sidecar:2")], vec![]],
            [vec![], vec![("app", "200m")]],
        ),
        (
            "the first batch only resized",
            [vec![("app", "app:2")], vec![("sidecar", "300m")]],
            [vec![], vec![("sidecar", "300m")]],
            [vec![("app", "app:2")], vec![]],
        ),
    ];
    for (case, [images, cpus], first, second) in cases {
        let mut pod = pod(Some("10"));
        let spec = InPlaceUpdateSpec {
            container_images: named(&images)
                .into_iter()
                .map(|(k, v)| (k, v.to_owned()))
                .collect(),
            container_resources: named(&cpus).into_iter().map(|(k, v)| (k, cpu(v))).collect(),
            ..InPlaceUpdateSpec::default()
        };
        let patch = begin(&pod, &spec);
        let patched = |patch: &PodPatch| {
            let images: BTreeMap<String, String> = patch.container_images.clone();
            let cpus: BTreeMap<String, ResourceRequirements> = patch.container_resources.clone();
            (images, cpus)
        };
        let want = |[images, cpus]: &[Vec<(&str, &str)>; 2]| {
            let images = named(images)
                .into_iter()
                .map(|(k, v)| (k, v.to_owned()))
                .collect();
            let cpus = named(cpus).into_iter().map(|(k, v)| (k, cpu(v))).collect();
            (images, cpus)
        };
        assert_eq!(patched(&patch), want(&first), "{case}: the first batch");
        run_patched(&mut pod, &patch, 101);

        let Ok(RefreshStep::NextBatch(next)) = plan_refresh(&pod, ts(102)) else {
            panic!("{case}: expected the next batch");
        };
        assert_eq!(patched(&next), want(&second), "{case}: the second batch");
        run_patched(&mut pod, &next, 103);
        let state = state_of(&pod);
        let queued = state.batches();
        assert!(
            queued.agent_restarts.is_empty(),
            "{case}: a resize restarts nothing"
        );
        let record: Vec<Vec<String>> = queued
            .container_batches_record
            .iter()
            .map(|b| b.containers.clone())
            .collect();
        assert_eq!(record, [["sidecar"], ["app"]], "{case}");
        for (name, _) in &cpus {
            let before = &state.last_container_statuses[*name];
            assert_eq!(
                before.resources,
                Some(ResourceRequirements::default()),
                "{case}: {name}"
            );
        }
        assert!(
            matches!(plan_refresh(&pod, ts(104)), Ok(RefreshStep::Finish { .. })),
            "{case}: done once both batches ran"
        );
    }
}

#[test]
fn a_resize_the_node_cannot_fit_is_reported_before_the_later_batches() {
    let mut pod = pod(Some("10"));
    let spec = InPlaceUpdateSpec {
        container_images: BTreeMap::from([("app".to_owned(), "app:2".to_owned())]),
        container_resources: BTreeMap::from([("sidecar".to_owned(), cpu("64"))]),
        ..InPlaceUpdateSpec::default()
    };
    let patch = begin(&pod, &spec);
    apply(&mut pod, &patch);
    let infeasible = k8s_openapi::api::core::v1::PodCondition {
        type_: "PodResizePending".into(),
        status: "True".into(),
        reason: Some("Infeasible".into()),
        message: Some("Node didn't have enough capacity: cpu".into()),
        ..Default::default()
    };
    pod.status.get_or_insert_default().conditions = Some(vec![infeasible]);
    let step = plan_refresh(&pod, ts(102)).expect("a step");
    assert_eq!(
        step,
        RefreshStep::Infeasible("Node didn't have enough capacity: cpu".into())
    );
}
