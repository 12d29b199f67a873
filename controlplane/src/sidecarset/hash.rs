//! The two versions of a SidecarSet a pod records (pure): the hash of its sidecar
//! containers, and the same without their images. OpenKruise keeps both in the SidecarSet's
//! own annotations (its SidecarSet webhook writes them); Stevedore has no SidecarSet
//! webhook and computes them from the spec wherever they are needed, in the same shape:
//! sha256 of the JSON `{"containers": [...]}`, hex, mapped into Kubernetes' safe alphabet.
//! Two pods agree on a version when their hashes are equal; a hash equal except for the
//! images means only images changed, which an in-place upgrade can carry.

use sha2::{Digest as _, Sha256};

use crate::api::SidecarSet;
use crate::api::sidecarset::SidecarContainer;
use crate::workload::revision::safe_encode;

/// The hash of the SidecarSet's sidecar containers (images included).
pub fn sidecarset_hash(set: &SidecarSet) -> String {
    hash_containers(&set.spec.containers)
}

/// The hash of the SidecarSet's sidecar containers with their images left out.
pub fn sidecarset_hash_without_image(set: &SidecarSet) -> String {
    let mut containers = set.spec.containers.clone();
    for sidecar in &mut containers {
        sidecar.container.image = None;
    }
    hash_containers(&containers)
}

fn hash_containers(containers: &[SidecarContainer]) -> String {
    // serde_json writes a struct's fields in declaration order and maps sorted (BTreeMap),
    // so equal specs always give equal bytes.
    let encoded = serde_json::json!({ "containers": containers }).to_string();
    safe_encode(&hex::encode(Sha256::digest(encoded.as_bytes())))
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{Container, EnvVar};

    use super::*;

    fn set(image: &str, env: &str) -> SidecarSet {
        let mut set = SidecarSet::new("log", Default::default());
        set.spec.containers = vec![SidecarContainer {
            container: Container {
                name: "log-agent".into(),
                image: Some(image.into()),
                env: Some(vec![EnvVar {
                    name: "LEVEL".into(),
                    value: Some(env.into()),
                    ..EnvVar::default()
                }]),
                ..Container::default()
            },
            ..SidecarContainer::default()
        }];
        set
    }

    #[test]
    fn an_image_change_moves_one_hash_and_any_other_change_both() {
        let base = set("agent:1", "info");
        let cases = [
            ("same spec", set("agent:1", "info"), true, true),
            ("new image", set("agent:2", "info"), false, true),
            ("new env", set("agent:1", "debug"), false, false),
        ];
        for (case, other, same_hash, same_without_image) in cases {
            assert_eq!(
                sidecarset_hash(&base) == sidecarset_hash(&other),
                same_hash,
                "{case}"
            );
            assert_eq!(
                sidecarset_hash_without_image(&base) == sidecarset_hash_without_image(&other),
                same_without_image,
                "{case}"
            );
        }
    }

    #[test]
    fn a_hash_is_64_characters_of_the_safe_alphabet() {
        let hash = sidecarset_hash(&set("agent:1", "info"));
        assert_eq!(hash.len(), 64);
        assert!(
            hash.chars()
                .all(|c| "bcdfghjklmnpqrstvwxz2456789".contains(c)),
            "{hash}"
        );
    }
}
