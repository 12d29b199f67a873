//! HotUpgrade's names, the working container and the two steps, one rule per case.

use serde_json::json;

use super::*;

fn sidecar(image: &str) -> SidecarContainer {
    serde_json::from_value(json!({
        "name": "envoy", "image": image,
        "upgradeStrategy": { "upgradeType": "HotUpgrade", "hotUpgradeEmptyImage": "empty:1" }
    }))
    .expect("a sidecar")
}

/// A pod whose `envoy-1` and `envoy-2` run `first` and `second`, `working` named in the
/// working-slot annotation (none: no annotation).
fn pod(first: &str, second: &str, working: Option<&str>) -> Pod {
    let mut annotations =
        json!({ version_annotation("envoy-1"): "7", version_annotation("envoy-2"): "0" });
    if let Some(working) = working {
        annotations[WORKING_SLOT_ANNOTATION] = json!(json!({ "envoy": working }).to_string());
    }
    serde_json::from_value(json!({
        "metadata": { "name": "web-1", "annotations": annotations },
        "spec": { "containers": [
            { "name": "envoy-1", "image": first },
            { "name": "envoy-2", "image": second },
            { "name": "web", "image": "web:1" },
        ] },
    }))
    .expect("a pod")
}

#[test]
fn the_working_container_is_the_annotated_one_and_the_first_by_default() {
    let cases = [
        (None, "envoy-1"),
        (Some("envoy-1"), "envoy-1"),
        (Some("envoy-2"), "envoy-2"),
        (Some("something-else"), "envoy-1"),
    ];
    for (annotated, expected) in cases {
        let pod = pod("a", "b", annotated);
        let annotations = pod.metadata.annotations.clone().unwrap_or_default();
        let (working, idle) = working_and_idle("envoy", &annotations);
        assert_eq!(working, expected, "{annotated:?}");
        assert_ne!(working, idle);
    }
}

#[test]
fn the_slots_are_injected_working_then_idle_reading_their_versions() {
    let container = Container {
        name: "envoy".into(),
        image: Some("envoy:1".into()),
        ..Container::default()
    };
    let [first, second] = slot_containers(&container, "empty:1");
    assert_eq!(
        (first.name.as_str(), first.image.as_deref()),
        ("envoy-1", Some("envoy:1"))
    );
    assert_eq!(
        (second.name.as_str(), second.image.as_deref()),
        ("envoy-2", Some("empty:1"))
    );
    let env = serde_json::to_value(&second.env).expect("JSON");
    assert_eq!(
        env,
        json!([
            { "name": "SIDECARSET_VERSION", "valueFrom": { "fieldRef": { "fieldPath": "metadata.annotations['version.sidecarset.kruise.io/envoy-2']" } } },
            { "name": "SIDECARSET_VERSION_ALT", "valueFrom": { "fieldRef": { "fieldPath": "metadata.annotations['versionalt.sidecarset.kruise.io/envoy-2']" } } },
        ])
    );
}

#[test]
fn a_swap_targets_the_idle_container_when_the_working_one_runs_another_image() {
    let cases = [
        (
            "up to date",
            pod("envoy:1", "empty:1", Some("envoy-1")),
            None,
        ),
        (
            "first works",
            pod("envoy:0", "empty:1", Some("envoy-1")),
            Some(("envoy-2", "envoy-1")),
        ),
        (
            "second works",
            pod("empty:1", "envoy:0", Some("envoy-2")),
            Some(("envoy-1", "envoy-2")),
        ),
    ];
    for (case, pod, expected) in cases {
        let found = swaps(&pod, &[sidecar("envoy:1")]);
        let found: Option<(&str, &str)> =
            found.first().map(|s| (s.idle.as_str(), s.working.as_str()));
        assert_eq!(found, expected, "{case}");
    }
    let cold: SidecarContainer =
        serde_json::from_value(json!({ "name": "envoy", "image": "envoy:1" })).expect("cold");
    assert!(
        swaps(&pod("envoy:0", "empty:1", None), &[cold]).is_empty(),
        "a cold sidecar is no swap"
    );
}

#[test]
fn a_reset_empties_the_idle_container_still_running_the_old_sidecar() {
    let cases = [
        (
            "idle is empty",
            pod("envoy:1", "empty:1", Some("envoy-1")),
            None,
        ),
        (
            "swapped, old still runs",
            pod("envoy:0", "envoy:1", Some("envoy-2")),
            Some("envoy-1"),
        ),
    ];
    for (case, pod, expected) in cases {
        let found = resets(&pod, &[sidecar("envoy:1")]);
        assert_eq!(found.first().map(|r| r.slot.as_str()), expected, "{case}");
        if let Some(reset) = found.first() {
            assert_eq!(reset.empty_image, "empty:1");
        }
    }
}

#[test]
fn a_swap_flips_the_working_container_and_cross_links_the_versions() {
    let pod = pod("envoy:0", "empty:1", Some("envoy-1"));
    let annotations = pod.metadata.annotations.clone().unwrap_or_default();
    let swaps = swaps(&pod, &[sidecar("envoy:1")]);
    let written = swap_annotations(&annotations, &swaps, "9");
    let working: Value = serde_json::from_str(&written[WORKING_SLOT_ANNOTATION]).expect("JSON");
    assert_eq!(working, json!({ "envoy": "envoy-2" }));
    assert_eq!(written[&version_annotation("envoy-2")], "9");
    assert_eq!(
        written[&version_alt_annotation("envoy-2")],
        "7",
        "the old one's version"
    );
    assert_eq!(written[&version_alt_annotation("envoy-1")], "9");
    assert!(swap_annotations(&annotations, &[], "9").is_empty());
}

#[test]
fn a_reset_sets_the_emptied_versions_to_zero() {
    let pod = pod("envoy:0", "envoy:1", Some("envoy-2"));
    let written = reset_annotations(&resets(&pod, &[sidecar("envoy:1")]));
    assert_eq!(
        written,
        BTreeMap::from([
            (version_annotation("envoy-1"), "0".to_owned()),
            (version_alt_annotation("envoy-2"), "0".to_owned()),
        ])
    );
}
