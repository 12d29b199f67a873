//! Hot upgrade of a sidecar (pure), OpenKruise's names and steps: a sidecar with
//! `upgradeStrategy.upgradeType: HotUpgrade` runs as two containers, `<name>-1` and
//! `<name>-2`, one *working* (the sidecar's image) and one *idle* (`hotUpgradeEmptyImage`,
//! which does nothing). The pod records the working one in [`WORKING_SLOT_ANNOTATION`]
//! (JSON: sidecar name → container name), and each container's version in the
//! annotations its `SIDECARSET_VERSION` / `SIDECARSET_VERSION_ALT` variables read (its own
//! version and the other container's; `0` for an idle container), so a sidecar can tell at
//! start whether it takes over from a running one.
//!
//! An upgrade is two steps, each one pod patch:
//! 1. *swap*: the idle container gets the new image and becomes the working one (the
//!    annotation flips in this same patch, as OpenKruise's controller writes it: it names
//!    the container that serves from now on);
//! 2. *reset*: once the new container runs and is ready, the old one is set to the empty
//!    image.
//!
//! So at every moment one of the two runs the sidecar, and the pod stays ready.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, EnvVar, EnvVarSource, ObjectFieldSelector, Pod};
use serde_json::Value;

use super::marks::recorded;
use crate::api::sidecarset::SidecarContainer;

/// Which container of each hot sidecar is working (JSON: sidecar → container).
pub const WORKING_SLOT_ANNOTATION: &str = "kruise.io/sidecarset-working-hotupgrade-container";
/// The variable holding the container's own version (`0`: the idle container).
pub const VERSION_ENV: &str = "SIDECARSET_VERSION";
/// The variable holding the other container's version (`0`: no upgrade under way).
pub const VERSION_ALT_ENV: &str = "SIDECARSET_VERSION_ALT";
/// The version a sidecar's first working container starts at.
pub const FIRST_VERSION: &str = "1";
/// The version of an idle container, and the other version when none is running.
pub const IDLE_VERSION: &str = "0";

/// The two containers of hot sidecar `name`: `<name>-1`, `<name>-2`.
pub fn slot_names(name: &str) -> (String, String) {
    (format!("{name}-1"), format!("{name}-2"))
}

/// The annotation holding container `slot`'s version.
pub fn version_annotation(slot: &str) -> String {
    format!("version.sidecarset.kruise.io/{slot}")
}

/// The annotation holding the version of the other container of `slot`'s sidecar.
pub fn version_alt_annotation(slot: &str) -> String {
    format!("versionalt.sidecarset.kruise.io/{slot}")
}

/// The working and the idle container of hot sidecar `name` in a pod with `annotations`:
/// `<name>-2` works when the annotation says so, `<name>-1` otherwise (OpenKruise's
/// reading).
pub fn working_and_idle(name: &str, annotations: &BTreeMap<String, String>) -> (String, String) {
    let (first, second) = slot_names(name);
    let working = recorded(annotations, WORKING_SLOT_ANNOTATION);
    if working.get(name).and_then(Value::as_str) == Some(second.as_str()) {
        (second, first)
    } else {
        (first, second)
    }
}

/// The two containers injected for hot sidecar `container` (already built: variables and
/// mounts added): the first working with the image, the second idle with `empty_image`,
/// each reading its versions from the pod's annotations.
pub fn slot_containers(container: &Container, empty_image: &str) -> [Container; 2] {
    let (first, second) = slot_names(&container.name);
    let slot = |name: String, image: &str| {
        let mut slot = container.clone();
        let mut env = slot.env.take().unwrap_or_default();
        env.push(annotation_variable(VERSION_ENV, &version_annotation(&name)));
        env.push(annotation_variable(
            VERSION_ALT_ENV,
            &version_alt_annotation(&name),
        ));
        slot.env = Some(env);
        slot.image = Some(image.to_owned());
        slot.name = name;
        slot
    };
    let image = container.image.clone().unwrap_or_default();
    [slot(first, &image), slot(second, empty_image)]
}

fn annotation_variable(name: &str, annotation: &str) -> EnvVar {
    EnvVar {
        name: name.to_owned(),
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                field_path: format!("metadata.annotations['{annotation}']"),
                ..ObjectFieldSelector::default()
            }),
            ..EnvVarSource::default()
        }),
        ..EnvVar::default()
    }
}

/// The annotations a pod is created with for hot sidecar `name`: the first container
/// working at version 1, the second idle. `working` is the pod's working-slot map, which
/// gains this sidecar.
pub fn injected_annotations(
    name: &str,
    working: &mut serde_json::Map<String, Value>,
) -> Vec<(String, String)> {
    let (first, second) = slot_names(name);
    working.insert(name.to_owned(), Value::String(first.clone()));
    vec![
        (version_annotation(&first), FIRST_VERSION.to_owned()),
        (version_alt_annotation(&first), IDLE_VERSION.to_owned()),
        (version_annotation(&second), IDLE_VERSION.to_owned()),
        (version_alt_annotation(&second), FIRST_VERSION.to_owned()),
    ]
}

/// One hot sidecar to swap: its idle container takes `image` and becomes the working one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Swap {
    pub sidecar: String,
    pub idle: String,
    pub working: String,
    pub image: String,
}

/// The hot sidecars of `sidecars` whose working container in `pod` does not run the
/// wanted image.
pub fn swaps(pod: &Pod, sidecars: &[SidecarContainer]) -> Vec<Swap> {
    let annotations = pod.metadata.annotations.clone().unwrap_or_default();
    (sidecars.iter())
        .filter(|s| s.upgrade_strategy.is_hot())
        .filter_map(|sidecar| {
            let image = sidecar.container.image.clone()?;
            let (working, idle) = working_and_idle(&sidecar.container.name, &annotations);
            // A pod injected before the sidecar was hot has neither container: not ours.
            let running = image_of(pod, &working)?;
            image_of(pod, &idle)?;
            (running != image).then(|| Swap {
                sidecar: sidecar.container.name.clone(),
                idle,
                working,
                image,
            })
        })
        .collect()
}

/// One hot sidecar's old container to set to the empty image, once the new one is ready.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reset {
    pub slot: String,
    pub working: String,
    pub empty_image: String,
}

/// The hot sidecars of `sidecars` whose idle container in `pod` still runs an image other
/// than the empty one (the old sidecar after a swap).
pub fn resets(pod: &Pod, sidecars: &[SidecarContainer]) -> Vec<Reset> {
    let annotations = pod.metadata.annotations.clone().unwrap_or_default();
    (sidecars.iter())
        .filter(|s| s.upgrade_strategy.is_hot())
        .filter_map(|sidecar| {
            let empty_image = &sidecar.upgrade_strategy.hot_upgrade_empty_image;
            let (working, idle) = working_and_idle(&sidecar.container.name, &annotations);
            let image = image_of(pod, &idle)?;
            (image != *empty_image).then(|| Reset {
                slot: idle,
                working,
                empty_image: empty_image.clone(),
            })
        })
        .collect()
}

fn image_of(pod: &Pod, container: &str) -> Option<String> {
    let containers = pod.spec.as_ref().map(|s| s.containers.as_slice())?;
    (containers.iter().find(|c| c.name == container)).map(|c| c.image.clone().unwrap_or_default())
}

/// The annotations the swaps write: the working map flips to each idle container, which
/// takes `version`; each pair's other version points at the other container.
pub fn swap_annotations(
    annotations: &BTreeMap<String, String>,
    swaps: &[Swap],
    version: &str,
) -> BTreeMap<String, String> {
    let mut working = recorded(annotations, WORKING_SLOT_ANNOTATION);
    let mut out = BTreeMap::new();
    for swap in swaps {
        working.insert(swap.sidecar.clone(), Value::String(swap.idle.clone()));
        let old_version = (annotations.get(&version_annotation(&swap.working)).cloned())
            .unwrap_or_else(|| IDLE_VERSION.to_owned());
        out.insert(version_annotation(&swap.idle), version.to_owned());
        out.insert(version_alt_annotation(&swap.idle), old_version);
        out.insert(version_alt_annotation(&swap.working), version.to_owned());
    }
    if !swaps.is_empty() {
        out.insert(
            WORKING_SLOT_ANNOTATION.to_owned(),
            Value::Object(working).to_string(),
        );
    }
    out
}

/// The annotations the resets write: the emptied container and its partner's other
/// version back to `0`.
pub fn reset_annotations(resets: &[Reset]) -> BTreeMap<String, String> {
    (resets.iter())
        .flat_map(|reset| {
            [
                (version_annotation(&reset.slot), IDLE_VERSION.to_owned()),
                (
                    version_alt_annotation(&reset.working),
                    IDLE_VERSION.to_owned(),
                ),
            ]
        })
        .collect()
}

#[cfg(test)]
#[path = "hot_tests.rs"]
mod tests;
