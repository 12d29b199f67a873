//! The pull secrets an ImageList names, read only where an operator granted it: the
//! control plane has no cluster-wide Secret access, only `get` in the namespaces that bind
//! the ClusterRole `stevedore-pull-secret-reader` to its service account. A secret the
//! apiserver refuses to hand over (403) refuses its images: they are not sent to the
//! agent, and their status says which secret, in which namespace, and how to grant it. A
//! secret that is absent or unusable is logged and the pull goes without it, as kubelet
//! does.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use stevedore_proto::stevedore::agent::v1::Credentials;

use super::desired::credentials_from_secret;
use crate::api::ImageListSpec;
use crate::api::imagelist::PullSecretReference;
use crate::api::imagelist::{ImagePullPhase, ImageStatus};

/// The ClusterRole a namespace binds to let the control plane read its pull secrets.
pub const READER_ROLE: &str = "stevedore-pull-secret-reader";

/// What reading an ImageList's pull secrets found, keyed by `namespace/name`.
#[derive(Debug, Default)]
pub struct PullSecrets {
    /// Registry host → credentials, of each secret read.
    pub credentials: BTreeMap<String, BTreeMap<String, Credentials>>,
    /// Why each refused secret could not be read.
    pub refused: BTreeMap<String, String>,
}

fn key(secret: &PullSecretReference) -> String {
    format!("{}/{}", secret.namespace, secret.name)
}

/// The message on an image whose pull secret the apiserver refused to the control plane.
pub fn refusal_message(secret: &PullSecretReference, apiserver: &str) -> String {
    format!(
        "pull secret {name} in namespace {ns} is refused: namespace {ns} has not granted the \
         control plane access to its pull secrets (bind the ClusterRole {READER_ROLE} to the \
         service account kube-system/stevedore-controlplane in namespace {ns}); the apiserver \
         said: {apiserver}",
        name = secret.name,
        ns = secret.namespace,
    )
}

/// Reads every pull secret `spec` names, once each.
pub async fn read(client: &kube::Client, spec: &ImageListSpec) -> PullSecrets {
    let mut out = PullSecrets::default();
    for secret in spec.images.values().flat_map(|e| &e.pull_secrets) {
        let key = key(secret);
        if out.credentials.contains_key(&key) || out.refused.contains_key(&key) {
            continue;
        }
        let api: Api<Secret> = Api::namespaced(client.clone(), &secret.namespace);
        match api.get(&secret.name).await {
            Ok(object) => {
                let data: BTreeMap<String, Vec<u8>> = object
                    .data
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(k, v)| (k, v.0))
                    .collect();
                match credentials_from_secret(&data) {
                    Ok(creds) => {
                        out.credentials.insert(key, creds);
                    }
                    Err(err) => tracing::warn!(secret = key, error = err, "unusable pull secret"),
                }
            }
            Err(kube::Error::Api(status)) if status.code == 403 => {
                let message = refusal_message(secret, &status.message);
                tracing::warn!(secret = key, %message, "pull secret refused");
                out.refused.insert(key, message);
            }
            Err(kube::Error::Api(status)) => {
                tracing::warn!(secret = key, error = %status.message, "cannot read pull secret");
            }
            Err(err) => tracing::warn!(secret = key, error = %err, "cannot read pull secret"),
        }
    }
    out
}

/// `spec` without the images that name a refused secret, and a Failed status for each of
/// those, carrying the first refusal's message.
pub fn without_refused(
    spec: &ImageListSpec,
    refused: &BTreeMap<String, String>,
) -> (ImageListSpec, BTreeMap<String, ImageStatus>) {
    let mut allowed = spec.clone();
    let mut failed = BTreeMap::new();
    allowed.images.retain(|image, entry| {
        let refusal = entry.pull_secrets.iter().find_map(|s| refused.get(&key(s)));
        if let Some(message) = refusal {
            failed.insert(
                image.clone(),
                ImageStatus {
                    phase: ImagePullPhase::Failed,
                    message: message.clone(),
                    ..ImageStatus::default()
                },
            );
        }
        refusal.is_none()
    });
    (allowed, failed)
}

#[cfg(test)]
mod tests {
    use crate::api::imagelist::ImageListEntry;

    use super::*;

    fn secret(namespace: &str, name: &str) -> PullSecretReference {
        PullSecretReference {
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    fn entry(secrets: &[PullSecretReference]) -> ImageListEntry {
        ImageListEntry {
            pull_secrets: secrets.to_vec(),
            ..ImageListEntry::default()
        }
    }

    #[test]
    fn images_naming_a_refused_secret_fail_with_its_message_and_are_not_sent() {
        let mut spec = ImageListSpec::default();
        spec.images.insert("public:v1".into(), entry(&[]));
        spec.images
            .insert("granted:v1".into(), entry(&[secret("team-a", "regcred")]));
        spec.images.insert(
            "refused:v1".into(),
            entry(&[secret("team-a", "regcred"), secret("other", "regcred")]),
        );
        let message = refusal_message(&secret("other", "regcred"), "forbidden");
        let refused = BTreeMap::from([("other/regcred".to_owned(), message.clone())]);

        let (allowed, failed) = without_refused(&spec, &refused);

        let sent: Vec<&str> = allowed.images.keys().map(String::as_str).collect();
        assert_eq!(sent, ["granted:v1", "public:v1"]);
        assert_eq!(failed.len(), 1);
        assert_eq!(failed["refused:v1"].phase, ImagePullPhase::Failed);
        assert_eq!(failed["refused:v1"].message, message);
        assert!(
            message.contains("pull secret regcred in namespace other"),
            "{message}"
        );
        assert!(message.contains(READER_ROLE), "{message}");
    }

    #[test]
    fn nothing_refused_changes_nothing() {
        let mut spec = ImageListSpec::default();
        spec.images
            .insert("a:v1".into(), entry(&[secret("ns", "s")]));
        let (allowed, failed) = without_refused(&spec, &BTreeMap::new());
        assert_eq!(allowed, spec);
        assert!(failed.is_empty());
    }
}
