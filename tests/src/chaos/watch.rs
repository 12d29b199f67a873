//! The run's watch of its namespace's pods, feeding every event to the checkers.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt as _;
use kube::api::Api;
use kube::runtime::WatchStreamExt as _;
use kube::runtime::watcher::{self, Event};

use super::faults::lock;
use super::invariants::{Checker, PodView, Violation};

pub async fn watch_pods(
    api: Api<Pod>,
    checker: Arc<Mutex<Checker>>,
    violations: Arc<Mutex<Vec<Violation>>>,
    started: Instant,
) {
    let mut stream = watcher::watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    // The pods of a relist, observed together when it ends (Checker::relisted).
    let mut relisted: Option<Vec<PodView>> = None;
    while let Some(event) = stream.next().await {
        let Ok(event) = event else { continue };
        let at = started.elapsed();
        let Ok(mut checker) = lock(&checker) else {
            return;
        };
        let found = match event {
            Event::Apply(pod) => checker.observe(at, view_of(&pod)),
            Event::Delete(pod) => checker.forget(at, &pod.uid().unwrap_or_default()),
            Event::Init => {
                relisted = Some(Vec::new());
                Vec::new()
            }
            Event::InitApply(pod) => match relisted.as_mut() {
                Some(views) => {
                    views.push(view_of(&pod));
                    Vec::new()
                }
                None => checker.observe(at, view_of(&pod)),
            },
            Event::InitDone => match relisted.take() {
                Some(views) => checker.relisted(at, views),
                None => Vec::new(),
            },
        };
        drop(checker);
        if let Ok(mut all) = lock(&violations) {
            all.extend(found);
        }
    }
}

/// What the checkers read of a pod.
pub fn view_of(pod: &Pod) -> PodView {
    let labels = pod.labels();
    let conditions = pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default();
    let has = |type_: &str, status: &str| {
        conditions
            .iter()
            .any(|c| c.type_ == type_ && c.status == status)
    };
    let controller = pod
        .owner_references()
        .iter()
        .find(|o| o.controller == Some(true));
    PodView {
        uid: pod.uid().unwrap_or_default(),
        name: pod.name_any(),
        app: labels.get("app").cloned(),
        owner_kind: controller.map(|o| o.kind.clone()),
        owner_name: controller.map(|o| o.name.clone()),
        instance_id: labels.get("apps.kruise.io/cloneset-instance-id").cloned(),
        ordinal: labels.get("apps.kubernetes.io/pod-index").cloned(),
        terminating: pod.metadata.deletion_timestamp.is_some(),
        ready: has("Ready", "True"),
        in_place_pending: has("InPlaceUpdateReady", "False"),
        node: pod.spec.as_ref().and_then(|s| s.node_name.clone()),
        finished: pod
            .status
            .as_ref()
            .and_then(|s| s.phase.as_deref())
            .is_some_and(|p| p == "Succeeded" || p == "Failed"),
    }
}
