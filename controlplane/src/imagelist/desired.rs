//! What the distributor sends an agent, computed purely: the node's ImageList spec as an
//! `ApplyImageListRequest`, with each image's registry credentials taken from its pull
//! secrets (the agent never reads Secrets).

use std::collections::BTreeMap;

use stevedore_parsers::docker_config::{self, RegistryCredentials};
/// The registry of an image and of a pull secret's key, parsed in `stevedore-parsers`.
pub use stevedore_parsers::docker_config::{normalize_registry_key, registry_of};
use stevedore_proto::stevedore::agent::v1::{
    ApplyImageListRequest, BasicAuth, Credentials, DesiredImage, credentials,
};

use crate::api::{ImageList, ImageListSpec};

/// Registry host → credentials as the agent's API carries them, read from a pull secret's
/// data by [`docker_config::credentials_from_secret`]. Unreadable data is an error naming
/// the secret's key, never a panic.
pub fn credentials_from_secret(
    data: &BTreeMap<String, Vec<u8>>,
) -> Result<BTreeMap<String, Credentials>, String> {
    let by_registry = docker_config::credentials_from_secret(data)?;
    Ok(by_registry
        .into_iter()
        .map(|(registry, found)| (registry, agent_credentials(found)))
        .collect())
}

fn agent_credentials(found: RegistryCredentials) -> Credentials {
    let kind = match found {
        RegistryCredentials::Basic { username, password } => {
            credentials::Kind::Basic(BasicAuth { username, password })
        }
        RegistryCredentials::IdentityToken(token) => credentials::Kind::Token(token),
    };
    Credentials { kind: Some(kind) }
}

/// The request for `node`: every image of `list`'s spec with its pull settings, and the
/// credentials of the first of its pull secrets that has any for the image's registry.
/// `secrets` maps `namespace/name` to the registry credentials read from that secret.
/// It carries the list's UID with its generation: the agent compares generations only
/// within one UID, so a recreated ImageList (generation 1 again) is applied.
pub fn apply_request(
    node: &str,
    list: &ImageList,
    secrets: &BTreeMap<String, BTreeMap<String, Credentials>>,
) -> ApplyImageListRequest {
    ApplyImageListRequest {
        node_name: node.to_owned(),
        generation: list.metadata.generation.unwrap_or(0),
        images: desired_images(&list.spec, secrets),
        list_uid: list.metadata.uid.clone().unwrap_or_default(),
    }
}

/// Whether `list` needs a session with its node's agent: something to pull, something
/// in status to settle, or an acknowledged generation older than the spec's (the agent
/// may still hold entries since withdrawn, which only a push of the new list stops).
/// A list that is empty, shows no image and was never acknowledged (a new node's) has
/// nothing to tell an agent — an agent without a list holds none — so no session
/// dials a node that may have no agent at all: 2,000 agentless simulated nodes made
/// 58,000 failed calls in a few minutes and starved the leader's Lease renewal.
pub fn needs_session(list: &ImageList) -> bool {
    let status = list.status.as_ref();
    let observed = status.map_or(0, |s| s.observed_generation);
    let acknowledged_an_older_spec = observed != 0 && Some(observed) != list.metadata.generation;
    !list.spec.images.is_empty()
        || status.is_some_and(|s| !s.images.is_empty())
        || acknowledged_an_older_spec
}

fn desired_images(
    spec: &ImageListSpec,
    secrets: &BTreeMap<String, BTreeMap<String, Credentials>>,
) -> std::collections::HashMap<String, DesiredImage> {
    spec.images
        .iter()
        .map(|(image, entry)| {
            let registry = registry_of(image);
            let credentials = entry
                .pull_secrets
                .iter()
                .filter_map(|s| secrets.get(&format!("{}/{}", s.namespace, s.name)))
                .find_map(|by_registry| by_registry.get(registry).cloned());
            let interval = entry
                .pull_interval()
                .map_or(0, |d| u32::try_from(d.as_secs()).unwrap_or(u32::MAX));
            let desired = DesiredImage {
                always_pull: entry.always_pull,
                pull_interval_seconds: if entry.always_pull { interval } else { 0 },
                timeout_seconds: u32::try_from(entry.timeout().as_secs()).unwrap_or(u32::MAX),
                backoff_limit: entry.backoff_limit(),
                credentials,
            };
            (image.clone(), desired)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::imagelist::{ImageListEntry, PullSecretReference};

    #[test]
    fn a_session_is_needed_only_when_the_agent_has_something_to_learn() {
        use crate::api::ImageListStatus;
        use crate::api::imagelist::ImageStatus;
        let with = |images: &[&str], generation: i64, observed: Option<i64>, shown: &[&str]| {
            let mut list = ImageList::new("node-a", ImageListSpec::default());
            list.metadata.generation = Some(generation);
            for image in images {
                list.spec
                    .images
                    .insert((*image).to_owned(), ImageListEntry::default());
            }
            list.status = observed.map(|observed_generation| ImageListStatus {
                observed_generation,
                images: shown
                    .iter()
                    .map(|i| ((*i).to_owned(), ImageStatus::default()))
                    .collect(),
                ..ImageListStatus::default()
            });
            list
        };
        let cases = [
            ("a new node's empty list", with(&[], 1, None, &[]), false),
            (
                "an empty list acknowledged",
                with(&[], 3, Some(3), &[]),
                false,
            ),
            (
                "an empty list never acknowledged",
                with(&[], 1, Some(0), &[]),
                false,
            ),
            ("an entry to pull", with(&["web:v1"], 1, None, &[]), true),
            (
                "an entry pulled",
                with(&["web:v1"], 2, Some(2), &["web:v1"]),
                true,
            ),
            (
                "a withdrawn entry still shown",
                with(&[], 3, Some(2), &["web:v1"]),
                true,
            ),
            (
                "a withdrawal not acknowledged",
                with(&[], 3, Some(2), &[]),
                true,
            ),
        ];
        for (case, list, needed) in cases {
            assert_eq!(needs_session(&list), needed, "{case}");
        }
    }

    #[test]
    fn secret_credentials_become_the_agents_credentials() {
        let config = r#"{"auths":{
            "https://index.docker.io/v1/":{"username":"u","password":"p"},
            "127.0.0.1:5001":{"identitytoken":"refresh"}}}"#;
        let data = BTreeMap::from([(".dockerconfigjson".to_owned(), config.as_bytes().to_vec())]);
        let creds = credentials_from_secret(&data).expect("reads");
        assert_eq!(
            creds["docker.io"].kind,
            Some(credentials::Kind::Basic(BasicAuth {
                username: "u".into(),
                password: "p".into()
            }))
        );
        assert_eq!(
            creds["127.0.0.1:5001"].kind,
            Some(credentials::Kind::Token("refresh".into()))
        );
        let err = credentials_from_secret(&BTreeMap::new()).expect_err("no docker config");
        assert!(err.contains("neither"), "{err}");
    }

    #[test]
    fn the_request_carries_settings_and_matching_credentials() {
        let mut spec = ImageListSpec::default();
        let secret = PullSecretReference {
            namespace: "ns".into(),
            name: "regcred".into(),
        };
        spec.images.insert(
            "127.0.0.1:5001/private:v1".into(),
            ImageListEntry {
                always_pull: true,
                pull_interval: Some("1h".into()),
                pull_secrets: vec![secret.clone()],
                timeout_seconds: Some(30),
                backoff_limit: Some(1),
                ..ImageListEntry::default()
            },
        );
        spec.images.insert(
            "127.0.0.1:5000/public:v1".into(),
            ImageListEntry {
                pull_secrets: vec![secret],
                ..ImageListEntry::default()
            },
        );
        let creds = Credentials {
            kind: Some(credentials::Kind::Token("t".into())),
        };
        let secrets = BTreeMap::from([(
            "ns/regcred".to_owned(),
            BTreeMap::from([("127.0.0.1:5001".to_owned(), creds.clone())]),
        )]);
        let mut list = ImageList::new("node-a", spec);
        list.metadata.generation = Some(7);
        list.metadata.uid = Some("list-uid".into());
        let request = apply_request("node-a", &list, &secrets);
        assert_eq!(
            (
                request.node_name.as_str(),
                request.generation,
                request.list_uid.as_str()
            ),
            ("node-a", 7, "list-uid")
        );
        let private = &request.images["127.0.0.1:5001/private:v1"];
        assert_eq!(
            (
                private.always_pull,
                private.pull_interval_seconds,
                private.timeout_seconds,
                private.backoff_limit
            ),
            (true, 3600, 30, 1)
        );
        assert_eq!(private.credentials, Some(creds));
        let public = &request.images["127.0.0.1:5000/public:v1"];
        assert_eq!(
            public.credentials, None,
            "no credentials for another registry"
        );
        assert_eq!(
            (
                public.always_pull,
                public.pull_interval_seconds,
                public.timeout_seconds,
                public.backoff_limit
            ),
            (false, 0, 600, 3)
        );
    }
}
