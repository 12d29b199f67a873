//! What the caches drop from each object as it arrives, besides managedFields: parts no
//! reconciler reads that are a large share of the object's memory. The cache holds every
//! pod and node of the cluster, so a few KiB per object is most of the leader's memory at
//! scale (issue 34). Nothing read from the cache is ever written back whole: pods and
//! nodes are only patched, by field, so a trimmed copy never reaches the apiserver.

use k8s_openapi::api::core::v1::{Container, Node, Pod, PodSpec};

/// The prefix the ServiceAccount admission plugin names its token volume with.
const TOKEN_VOLUME_PREFIX: &str = "kube-api-access-";

/// Drops the service-account token volume the apiserver adds to every pod, and its mount
/// in each container: a projected volume of three sources that decodes to about 5 KiB, a
/// third of a cached pod, and one no reconciler looks at (sidecar injection reads the
/// admission request's pod, not the cache).
pub fn trim_pod(pod: &mut Pod) {
    if let Some(spec) = pod.spec.as_mut() {
        drop_token_volume(spec);
    }
}

fn drop_token_volume(spec: &mut PodSpec) {
    let Some(volumes) = spec.volumes.as_mut() else {
        return;
    };
    let tokens: Vec<String> = (volumes.iter())
        .filter(|v| is_token_volume(v))
        .map(|v| v.name.clone())
        .collect();
    if tokens.is_empty() {
        return;
    }
    volumes.retain(|v| !tokens.contains(&v.name));
    let unmount = |containers: &mut Vec<Container>| {
        for container in containers {
            if let Some(mounts) = container.volume_mounts.as_mut() {
                mounts.retain(|m| !tokens.contains(&m.name));
            }
        }
    };
    unmount(&mut spec.containers);
    if let Some(init) = spec.init_containers.as_mut() {
        unmount(init);
    }
}

/// The token volume: named as the admission plugin names it, and projecting a
/// service-account token (a person's volume of that name without one stays).
fn is_token_volume(volume: &k8s_openapi::api::core::v1::Volume) -> bool {
    volume.name.starts_with(TOKEN_VOLUME_PREFIX)
        && (volume.projected.as_ref())
            .and_then(|p| p.sources.as_ref())
            .is_some_and(|sources| sources.iter().any(|s| s.service_account_token.is_some()))
}

/// Drops the node's list of the images it holds (`status.images`, up to 50 entries with
/// every name and size): no reconciler reads it (the agents report images), and it is
/// most of a node's size.
pub fn trim_node(node: &mut Node) {
    if let Some(status) = node.status.as_mut() {
        status.images = None;
    }
}

#[cfg(test)]
#[path = "trim_tests.rs"]
mod tests;
