//! What the control plane makes at run time in its own namespace (its Lease, the CA
//! Secrets) is owned by its Deployment, so deleting the Deployment — `helm uninstall`,
//! `kubectl delete -k` — lets the garbage collector remove them too, and nothing of
//! Stevedore's is left behind but the CRDs. The Deployment is found by following the
//! replica's own pod up its controller chain (pod → ReplicaSet → Deployment); a replica
//! run outside a Deployment (out of cluster, in tests) owns nothing and makes its objects
//! without an owner, as before.

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::Api;

use super::api_message::api_message;

/// The controller among `meta`'s owners, if it is of `kind` in `api_version`.
pub fn controller_of<'a>(
    meta: &'a ObjectMeta,
    api_version: &str,
    kind: &str,
) -> Option<&'a OwnerReference> {
    meta.owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true) && o.api_version == api_version && o.kind == kind)
}

/// A plain (not controlling, not blocking) reference to `owner`: the garbage collector
/// deletes the dependent after the owner, and nothing else changes. Not `controller`,
/// because a Lease or Secret has no controller in Kubernetes' sense; not
/// `blockOwnerDeletion`, which would need `update` on the Deployment's finalizers.
pub fn plain_reference(owner: &OwnerReference) -> OwnerReference {
    OwnerReference {
        controller: None,
        block_owner_deletion: None,
        ..owner.clone()
    }
}

/// Adds `owner` to `meta`'s owners unless an owner with its UID is there; `true` when it
/// was added (the object needs writing).
pub fn add_owner(meta: &mut ObjectMeta, owner: &OwnerReference) -> bool {
    let owners = meta.owner_references.get_or_insert_with(Vec::new);
    if owners.iter().any(|o| o.uid == owner.uid) {
        return false;
    }
    owners.push(plain_reference(owner));
    true
}

/// The Deployment that runs pod `pod_name` of `namespace`, as an owner reference for the
/// objects the control plane makes there; `None` when the pod has no ReplicaSet
/// controlled by a Deployment, or when it cannot be read (logged: the control plane
/// still runs, its objects just outlive it).
pub async fn own_deployment(
    client: &kube::Client,
    namespace: &str,
    pod_name: Option<&str>,
) -> Option<OwnerReference> {
    let pod_name = pod_name?;
    match find_deployment(client, namespace, pod_name).await {
        Ok(found) => {
            if found.is_none() {
                tracing::info!(
                    pod = pod_name,
                    "this replica's pod is not run by a Deployment; its Lease and CA \
                     Secrets get no owner and outlive it"
                );
            }
            found
        }
        Err(err) => {
            let err = format!(
                "finding the Deployment of pod {pod_name}: {}",
                api_message(&err)
            );
            tracing::warn!(
                pod = pod_name,
                error = %err,
                "could not find the Deployment running this replica; its Lease and CA \
                 Secrets get no owner and outlive it"
            );
            None
        }
    }
}

async fn find_deployment(
    client: &kube::Client,
    namespace: &str,
    pod_name: &str,
) -> Result<Option<OwnerReference>, kube::Error> {
    let Some(pod) = Api::<Pod>::namespaced(client.clone(), namespace)
        .get_opt(pod_name)
        .await?
    else {
        return Ok(None);
    };
    let Some(replica_set) = controller_of(&pod.metadata, "apps/v1", "ReplicaSet") else {
        return Ok(None);
    };
    let replica_set = Api::<ReplicaSet>::namespaced(client.clone(), namespace)
        .get_opt(&replica_set.name)
        .await?;
    Ok(replica_set
        .as_ref()
        .and_then(|rs| controller_of(&rs.metadata, "apps/v1", "Deployment"))
        .map(plain_reference))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reference(kind: &str, uid: &str, controller: Option<bool>) -> OwnerReference {
        OwnerReference {
            api_version: "apps/v1".to_owned(),
            kind: kind.to_owned(),
            name: format!("{}-owner", kind.to_lowercase()),
            uid: uid.to_owned(),
            controller,
            block_owner_deletion: controller,
        }
    }

    fn owned_by(owners: Vec<OwnerReference>) -> ObjectMeta {
        ObjectMeta {
            owner_references: Some(owners),
            ..ObjectMeta::default()
        }
    }

    #[test]
    fn the_controller_is_found_only_when_it_is_of_the_kind_asked_for() {
        let cases = [
            (vec![], None),
            (vec![reference("ReplicaSet", "rs", Some(true))], Some("rs")),
            // An owner that does not control the pod is not its ReplicaSet.
            (vec![reference("ReplicaSet", "rs", None)], None),
            (vec![reference("StatefulSet", "ss", Some(true))], None),
            (
                vec![
                    reference("ReplicaSet", "other", Some(false)),
                    reference("ReplicaSet", "rs", Some(true)),
                ],
                Some("rs"),
            ),
        ];
        for (owners, expected) in cases {
            let meta = owned_by(owners.clone());
            let found = controller_of(&meta, "apps/v1", "ReplicaSet").map(|o| o.uid.as_str());
            assert_eq!(found, expected, "owners {owners:?}");
        }
    }

    #[test]
    fn an_owner_is_added_once_as_a_plain_reference() {
        let deployment = reference("Deployment", "d", Some(true));
        let mut meta = ObjectMeta::default();
        assert!(add_owner(&mut meta, &deployment));
        assert!(!add_owner(&mut meta, &deployment), "added twice");
        let owners = meta.owner_references.as_deref().unwrap_or_default();
        assert_eq!(owners.len(), 1);
        assert_eq!(owners[0].uid, "d");
        assert_eq!(owners[0].controller, None);
        assert_eq!(owners[0].block_owner_deletion, None);
    }

    #[test]
    fn other_owners_are_kept() {
        let mut meta = owned_by(vec![reference("Deployment", "someone", None)]);
        assert!(add_owner(&mut meta, &reference("Deployment", "d", None)));
        let uids: Vec<_> = meta
            .owner_references
            .iter()
            .flatten()
            .map(|o| o.uid.as_str())
            .collect();
        assert_eq!(uids, ["someone", "d"]);
    }
}
