//! Which pods a budget protects and how many it expects: its own selector (the selected
//! pods count), or its target's selector and scale. OpenKruise's kinds are read from the
//! shared caches; the native ones (Deployment, ReplicaSet, StatefulSet) from the
//! apiserver.

use k8s_openapi::api::apps::v1 as apps;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::api::Api;
use kube::runtime::reflector::ObjectRef;

use crate::api::podunavailablebudget::{PodUnavailableBudget, TargetReference};
use crate::caches::Stores;
use crate::controller::api_error::status_code;
use crate::workload::selector::selector_matches;

/// The pods a budget protects, and the expected count when a target gives it.
#[derive(Clone, Debug, PartialEq)]
pub struct Protected {
    pub selector: LabelSelector,
    /// The target's replicas; `None` for a selector budget.
    pub replicas: Option<i32>,
}

/// Why a budget's pods could not be told.
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    #[error("spec.targetRef: {kind} {name} was not found")]
    NotFound { kind: String, name: String },
    #[error("spec.targetRef: reading {kind} {name}: {source}")]
    Api {
        kind: String,
        name: String,
        source: kube::Error,
    },
}

/// The pods `budget` protects; `Ok(None)` for a budget with neither selector nor
/// target (admission refuses it; it protects nothing).
pub async fn protected(
    budget: &PodUnavailableBudget,
    stores: &Stores,
    client: &kube::Client,
) -> Result<Option<Protected>, TargetError> {
    if let Some(selector) = &budget.spec.selector {
        return Ok(Some(Protected {
            selector: selector.clone(),
            replicas: None,
        }));
    }
    let Some(target) = &budget.spec.target_ref else {
        return Ok(None);
    };
    let namespace = budget.metadata.namespace.as_deref().unwrap_or_default();
    let found = if target.api_version.starts_with("apps.kruise.io/") {
        match target.kind.as_str() {
            "CloneSet" => stores
                .clonesets
                .get(&ObjectRef::new(&target.name).within(namespace))
                .map(|set| (set.spec.selector.clone(), set.spec.replicas.unwrap_or(1))),
            "StatefulSet" => stores
                .statefulsets
                .get(&ObjectRef::new(&target.name).within(namespace))
                .map(|set| (set.spec.selector.clone(), set.spec.replicas.unwrap_or(1))),
            _ => None,
        }
    } else {
        native(client, namespace, target).await?
    };
    let Some((selector, replicas)) = found else {
        return Err(TargetError::NotFound {
            kind: target.kind.clone(),
            name: target.name.clone(),
        });
    };
    Ok(Some(Protected {
        selector,
        replicas: Some(replicas),
    }))
}

/// A native workload's selector and replicas (default 1), `None` when it is not there.
async fn native(
    client: &kube::Client,
    namespace: &str,
    target: &TargetReference,
) -> Result<Option<(LabelSelector, i32)>, TargetError> {
    let name = target.name.as_str();
    let result = match target.kind.as_str() {
        "Deployment" => Api::<apps::Deployment>::namespaced(client.clone(), namespace)
            .get(name)
            .await
            .map(|d| d.spec.map(|s| (s.selector, s.replicas.unwrap_or(1)))),
        "ReplicaSet" => Api::<apps::ReplicaSet>::namespaced(client.clone(), namespace)
            .get(name)
            .await
            .map(|r| r.spec.map(|s| (s.selector, s.replicas.unwrap_or(1)))),
        "StatefulSet" => Api::<apps::StatefulSet>::namespaced(client.clone(), namespace)
            .get(name)
            .await
            .map(|s| s.spec.map(|s| (s.selector, s.replicas.unwrap_or(1)))),
        _ => Ok(None),
    };
    match result {
        Ok(found) => Ok(found),
        Err(err) if status_code(&err) == Some(404) => Ok(None),
        Err(source) => Err(TargetError::Api {
            kind: target.kind.clone(),
            name: name.to_owned(),
            source,
        }),
    }
}

/// Whether `selector` selects `pod` (an invalid selector selects nothing).
pub fn selects(selector: &LabelSelector, pod: &Pod) -> bool {
    let empty = Default::default();
    let labels = pod.metadata.labels.as_ref().unwrap_or(&empty);
    selector_matches(selector, labels) == Some(true)
}
