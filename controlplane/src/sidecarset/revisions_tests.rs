//! The revision history of a SidecarSet, and the revision injection restores.

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::json;

use super::*;

fn set(image: &str, limit: Option<i32>) -> SidecarSet {
    let mut set: SidecarSet = serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1alpha1", "kind": "SidecarSet",
        "metadata": { "name": "log", "labels": { CUSTOM_VERSION_LABEL: "v1" } },
        "spec": { "namespace": "shop", "containers": [{ "name": "log-agent", "image": image }] },
    }))
    .expect("a SidecarSet");
    set.spec.revision_history_limit = limit;
    set
}

fn revisions(images: &[&str]) -> Vec<ControllerRevision> {
    (images.iter().enumerate())
        .map(|(i, image)| {
            current_revision(
                &set(image, None),
                "kube-system",
                i64::try_from(i).unwrap_or(0) + 1,
            )
        })
        .collect()
}

#[test]
fn a_new_spec_creates_a_revision_and_an_old_one_reuses_its_own() {
    let history = revisions(&["agent:1", "agent:2"]);
    let refs: Vec<&ControllerRevision> = history.iter().collect();
    let step = history_step(&set("agent:3", None), "kube-system", &refs);
    let created = step.create.expect("a revision to create");
    assert_eq!(created.revision, 3);
    assert_eq!(created.metadata.namespace.as_deref(), Some("kube-system"));
    let labels = created.metadata.labels.clone().unwrap_or_default();
    assert_eq!(
        labels.get(SIDECARSET_NAME_LABEL).map(String::as_str),
        Some("log")
    );
    assert_eq!(
        labels.get(CUSTOM_VERSION_LABEL).map(String::as_str),
        Some("v1")
    );
    assert_eq!(step.latest, created.metadata.name.unwrap_or_default());
    let back = history_step(&set("agent:1", None), "kube-system", &refs);
    assert_eq!(back.create, None);
    assert_eq!(
        back.latest,
        history[0].metadata.name.clone().unwrap_or_default()
    );
}

#[test]
fn the_history_keeps_the_limit_besides_the_latest() {
    let history = revisions(&["a:1", "a:2", "a:3", "a:4"]);
    let refs: Vec<&ControllerRevision> = history.iter().collect();
    let name = |i: usize| history[i].metadata.name.clone().unwrap_or_default();
    let cases = [
        (Some(10), vec![]),
        (Some(2), vec![name(0)]),
        (Some(0), vec![name(0), name(1), name(2)]),
    ];
    for (limit, deleted) in cases {
        let step = history_step(&set("a:4", limit), "kube-system", &refs);
        assert_eq!(step.delete, deleted, "{limit:?}");
        assert_eq!(step.latest, name(3), "{limit:?}");
    }
}

#[test]
fn injection_restores_the_revision_named_or_the_newest_of_a_custom_version() {
    let history = revisions(&["agent:1", "agent:2"]);
    let refs: Vec<&ControllerRevision> = history.iter().collect();
    let mut current = set("agent:3", None);
    current.spec.injection_strategy.revision = Some(
        serde_json::from_value(json!({ "revisionName": history[0].metadata.name }))
            .expect("revision"),
    );
    let picked = pick(&current, &refs).expect("picked by name");
    let restored = restore(&current, picked).expect("restored");
    assert_eq!(
        restored.spec.containers[0].container.image.as_deref(),
        Some("agent:1")
    );
    assert_eq!(
        restored.spec.namespace, "shop",
        "the rest of the spec is today's"
    );
    current.spec.injection_strategy.revision =
        Some(serde_json::from_value(json!({ "customVersion": "v1" })).expect("revision"));
    assert_eq!(pick(&current, &refs).map(|r| r.revision), Some(2));
    current.spec.injection_strategy.revision =
        Some(serde_json::from_value(json!({ "customVersion": "v9" })).expect("revision"));
    assert!(pick(&current, &refs).is_none());
}

#[test]
fn the_injected_version_follows_the_policy() {
    let history = revisions(&["agent:1"]);
    let refs: Vec<&ControllerRevision> = history.iter().collect();
    let image = |set: &SidecarSet| {
        set.spec.containers[0]
            .container
            .image
            .clone()
            .unwrap_or_default()
    };
    let canary = BTreeMap::from([("track".to_owned(), "canary".to_owned())]);
    let stable = BTreeMap::new();
    let with = |policy: &str, partition: Option<&str>, paused: bool| {
        let mut current = set("agent:2", None);
        current.spec.injection_strategy.revision = Some(
            serde_json::from_value(json!({ "customVersion": "v1", "policy": policy }))
                .expect("revision"),
        );
        current.spec.update_strategy.selector = Some(
            serde_json::from_value(json!({ "matchLabels": { "track": "canary" } }))
                .expect("selector"),
        );
        current.spec.update_strategy.partition =
            partition.map(|p| IntOrString::String(p.to_owned()));
        current.spec.update_strategy.paused = paused;
        current
    };
    let cases = [
        (
            "Always: the named one",
            with("Always", None, false),
            &canary,
            0.9,
            "agent:1",
        ),
        (
            "paused: the named one",
            with("Partial", None, true),
            &canary,
            0.9,
            "agent:1",
        ),
        (
            "Partial, not selected: the named one",
            with("Partial", None, false),
            &stable,
            0.9,
            "agent:1",
        ),
        (
            "Partial, selected, no partition: the latest",
            with("Partial", None, false),
            &canary,
            0.0,
            "agent:2",
        ),
        (
            "Partial, selected, drawn under 30%: the named one",
            with("Partial", Some("30%"), false),
            &canary,
            0.2,
            "agent:1",
        ),
        (
            "Partial, selected, drawn over 30%: the latest",
            with("Partial", Some("30%"), false),
            &canary,
            0.5,
            "agent:2",
        ),
    ];
    for (case, current, labels, draw, expected) in cases {
        assert_eq!(
            image(&version_to_inject(&current, &refs, labels, draw)),
            expected,
            "{case}"
        );
    }
    let unnamed = set("agent:2", None);
    assert_eq!(
        image(&version_to_inject(&unnamed, &refs, &canary, 0.0)),
        "agent:2"
    );
}
