//! The launch-priority route on the shared webhook server (`crate::admission`): a pod
//! create that asks for a launch order (`plan::asks_for_order`) gets the barrier env on
//! every container below the highest priority (`plan::barrier_patch`), or is refused when
//! a `KRUISE_CONTAINER_PRIORITY` is not a priority. Every other pod is allowed as it is
//! before anything is decoded: pod creates are the busiest admission path of a cluster.
//!
//! A pod created with only `generateName` is named here, as OpenKruise's webhook names it
//! (`plan::generated_name`, the apiserver's alphabet and length): the apiserver names a
//! pod only after the webhooks, and the barrier env must name the ConfigMap `<pod>-barrier`.
//! A generated name that is taken fails the create with AlreadyExists, which the pod's
//! controller retries with a new name, as for any name collision.
//!
//! Decisions read only the request (no cache, no call), so every replica answers the same.

use axum::Router;
use axum::body::Bytes;
use axum::response::Response;
use axum::routing::post;
use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

use super::plan::{asks_for_order, barrier_patch, generated_name, priorities};
use crate::admission::pod_create::answer_pod_create;
use crate::admission::review::{Decision, Refusal};

/// The path the MutatingWebhookConfiguration sends pod creates to.
pub const MUTATE_PATH: &str = "/mutate-pod-launch-priority";

/// The route giving pod creates their launch barriers.
pub fn routes() -> Router {
    Router::new().route(MUTATE_PATH, post(review))
}

async fn review(body: Bytes) -> Response {
    answer_pod_create(
        &body,
        "its launch priority cannot be read",
        async |_, pod, raw| decide(&pod, raw, fastrand::usize),
    )
    .await
}

/// The answer to the creation of `pod` (`raw` as sent); `random` draws below its
/// argument (a generated name).
fn decide(
    pod: &Pod,
    raw: &Value,
    random: impl FnMut(std::ops::RangeTo<usize>) -> usize,
) -> Decision {
    if !asks_for_order(raw) {
        return Decision::Allow;
    }
    let priorities = match priorities(pod) {
        Ok(priorities) => priorities,
        Err(err) => return Decision::Refuse(Refusal::bad_request(format!("{err}."))),
    };
    let mut patch = Vec::new();
    let given = pod.metadata.name.clone().filter(|n| !n.is_empty());
    let generate = pod.metadata.generate_name.clone().filter(|n| !n.is_empty());
    let name = match (given, generate) {
        (Some(name), _) => name,
        // Nothing waits on a barrier: no name is needed.
        (None, _) if priorities.is_none() => String::new(),
        (None, Some(prefix)) => {
            let mut random = random;
            let name = generated_name(&prefix, |below| random(..below));
            patch.push(json!({ "op": "add", "path": "/metadata/name", "value": name }));
            name
        }
        // No name at all: the apiserver refuses the pod itself.
        (None, None) => return Decision::Allow,
    };
    patch.extend(barrier_patch(pod, &name, priorities.as_deref()));
    Decision::Patch(patch)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::launchpriority::plan::{LAUNCH_PRIORITY_ANNOTATION, PRIORITY_ENV, barrier_env};

    /// A pod created with `metadata` and `containers`, as sent.
    fn create(metadata: Value, containers: Value) -> Value {
        json!({ "metadata": metadata, "spec": { "containers": containers } })
    }

    /// The decision about the creation of `raw`, names drawn as `b`s.
    fn decided(raw: &Value) -> Decision {
        let pod: Pod = serde_json::from_value(raw.clone()).expect("a pod");
        decide(&pod, raw, |_| 0)
    }

    fn ordered(metadata: Value) -> Value {
        let mut metadata = metadata;
        metadata["annotations"] = json!({ LAUNCH_PRIORITY_ANNOTATION: "Ordered" });
        create(metadata, json!([{ "name": "a" }, { "name": "b" }]))
    }

    #[test]
    fn each_pod_gets_its_answer() {
        let plain = create(
            json!({ "name": "web" }),
            json!([{ "name": "a" }, { "name": "b" }]),
        );
        let bad = create(
            json!({ "name": "web" }),
            json!([{ "name": "a" }, { "name": "b", "env": [{ "name": PRIORITY_ENV, "value": "x" }] }]),
        );
        let b_waits = json!({ "op": "add", "path": "/spec/containers/1/env", "value": [barrier_env("web", -1)] });
        let cases = [
            ("asks for nothing", plain, Decision::Allow),
            (
                "Ordered",
                ordered(json!({ "name": "web" })),
                Decision::Patch(vec![b_waits]),
            ),
            (
                "a bad priority",
                bad,
                Decision::Refuse(Refusal::bad_request(
                    "container b has KRUISE_CONTAINER_PRIORITY \"x\", but a launch priority is a whole number from -2147483647 to 2147483647.",
                )),
            ),
            ("no name at all", ordered(json!({})), Decision::Allow),
        ];
        for (case, raw, decision) in cases {
            assert_eq!(decided(&raw), decision, "{case}");
        }
    }

    #[test]
    fn a_pod_with_only_generate_name_is_named_here_and_its_barrier_follows() {
        let decision = decided(&ordered(json!({ "generateName": "web-" })));
        let Decision::Patch(patch) = decision else {
            panic!("expected a patch, got {decision:?}");
        };
        assert_eq!(
            patch,
            [
                json!({ "op": "add", "path": "/metadata/name", "value": "web-bbbbb" }),
                json!({ "op": "add", "path": "/spec/containers/1/env", "value": [barrier_env("web-bbbbb", -1)] }),
            ]
        );
    }

    /// The manifests the apiserver and RBAC read, as shipped (kustomize and the chart).
    const WEBHOOKS: &str = include_str!("../../../deploy/controlplane/webhook.yaml");
    const RBAC: &str = include_str!("../../../deploy/controlplane/rbac.yaml");

    #[test]
    fn the_shipped_configuration_calls_this_route_after_sidecarset_injection() {
        let ours = (WEBHOOKS.split("\n---\n"))
            .find(|doc| doc.contains("\n  name: stevedore-startup-priority\n"))
            .expect("the launch-priority configuration in webhook.yaml");
        for line in [
            &format!("path: {MUTATE_PATH}"),
            "reinvocationPolicy: IfNeeded",
            "failurePolicy: Ignore",
            "operations: [\"CREATE\"]",
        ] {
            assert!(ours.contains(line), "webhook.yaml lacks {line:?}");
        }
        // The control plane may write its caBundle (config.rs checks that the flag's
        // default, this name, sorts after SidecarSet's).
        assert!(RBAC.contains("- stevedore-startup-priority\n"));
    }
}
