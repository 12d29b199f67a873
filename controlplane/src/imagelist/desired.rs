//! What the distributor sends an agent, computed purely: the node's ImageList spec as an
//! `ApplyImageListRequest`, with each image's registry credentials taken from its pull
//! secrets (the agent never reads Secrets).

use std::collections::BTreeMap;

use base64::Engine as _;
use serde::Deserialize;
use stevedore_proto::stevedore::agent::v1::{
    ApplyImageListRequest, BasicAuth, Credentials, DesiredImage, credentials,
};

use crate::api::{ImageList, ImageListSpec};

/// The registry host an image reference pulls from, as Docker decides it: the first path
/// component when it has a `.` or `:` or is `localhost`, else Docker Hub.
pub fn registry_of(image: &str) -> &str {
    match image.split_once('/') {
        Some((first, _)) if first.contains(['.', ':']) || first == "localhost" => first,
        _ => "docker.io",
    }
}

/// A `.dockerconfigjson` / `.dockercfg` registry key as a bare host (`https://index.docker.io/v1/`
/// → `docker.io`), so it can be compared with [`registry_of`].
pub fn normalize_registry_key(key: &str) -> String {
    let host = key
        .trim_start_matches("https://")
        .trim_start_matches("http://");
    let host = host.split('/').next().unwrap_or(host);
    match host {
        "index.docker.io" | "registry-1.docker.io" | "registry.hub.docker.com" => {
            "docker.io".to_owned()
        }
        other => other.to_owned(),
    }
}

#[derive(Deserialize)]
struct DockerConfig {
    #[serde(default)]
    auths: BTreeMap<String, DockerAuth>,
}

#[derive(Deserialize, Default)]
struct DockerAuth {
    #[serde(default)]
    username: String,
    #[serde(default)]
    password: String,
    #[serde(default)]
    auth: String,
    #[serde(default, rename = "identitytoken")]
    identity_token: String,
}

/// Registry host → credentials, read from a pull secret's data (`.dockerconfigjson`, or
/// the older `.dockercfg` whose top level is the `auths` map). Unreadable data is an error
/// naming the secret's key, never a panic.
pub fn credentials_from_secret(
    data: &BTreeMap<String, Vec<u8>>,
) -> Result<BTreeMap<String, Credentials>, String> {
    let auths: BTreeMap<String, DockerAuth> = if let Some(bytes) = data.get(".dockerconfigjson") {
        serde_json::from_slice::<DockerConfig>(bytes)
            .map_err(|e| format!(".dockerconfigjson is not a docker config: {e}"))?
            .auths
    } else if let Some(bytes) = data.get(".dockercfg") {
        serde_json::from_slice(bytes)
            .map_err(|e| format!(".dockercfg is not a docker config: {e}"))?
    } else {
        return Err("the secret has neither .dockerconfigjson nor .dockercfg".to_owned());
    };
    let mut out = BTreeMap::new();
    for (key, auth) in auths {
        let (mut username, mut password) = (auth.username, auth.password);
        if username.is_empty() && !auth.auth.is_empty() {
            let decoded = base64::engine::general_purpose::STANDARD
                .decode(auth.auth.trim())
                .map_err(|e| format!("auth of {key} is not base64: {e}"))?;
            let text =
                String::from_utf8(decoded).map_err(|_| format!("auth of {key} is not UTF-8"))?;
            let (u, p) = text
                .split_once(':')
                .ok_or_else(|| format!("auth of {key} is not user:password"))?;
            (username, password) = (u.to_owned(), p.to_owned());
        }
        let kind = if !auth.identity_token.is_empty() {
            credentials::Kind::Token(auth.identity_token)
        } else {
            credentials::Kind::Basic(BasicAuth { username, password })
        };
        out.insert(
            normalize_registry_key(&key),
            Credentials { kind: Some(kind) },
        );
    }
    Ok(out)
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
    fn registry_is_decided_like_docker() {
        for (image, registry) in [
            ("nginx", "docker.io"),
            ("library/nginx:1.25", "docker.io"),
            ("127.0.0.1:5000/stevedore/web:v1", "127.0.0.1:5000"),
            ("registry.example/app@sha256:abc", "registry.example"),
            ("localhost/app", "localhost"),
            ("my_org/app", "docker.io"),
        ] {
            assert_eq!(registry_of(image), registry, "{image}");
        }
        for (key, host) in [
            ("https://index.docker.io/v1/", "docker.io"),
            ("127.0.0.1:5001", "127.0.0.1:5001"),
            ("http://registry.example/v2/", "registry.example"),
        ] {
            assert_eq!(normalize_registry_key(key), host, "{key}");
        }
    }

    fn data(key: &str, json: &str) -> BTreeMap<String, Vec<u8>> {
        BTreeMap::from([(key.to_owned(), json.as_bytes().to_vec())])
    }

    #[test]
    fn reads_both_secret_formats_and_the_auth_field() {
        let auth = base64::engine::general_purpose::STANDARD.encode("u:p:w");
        let config = format!(r#"{{"auths":{{"127.0.0.1:5001":{{"auth":"{auth}"}}}}}}"#);
        let creds = credentials_from_secret(&data(".dockerconfigjson", &config)).expect("reads");
        assert_eq!(
            creds["127.0.0.1:5001"].kind,
            Some(credentials::Kind::Basic(BasicAuth {
                username: "u".into(),
                password: "p:w".into()
            }))
        );
        let old = r#"{"https://index.docker.io/v1/":{"username":"a","password":"b"}}"#;
        let creds = credentials_from_secret(&data(".dockercfg", old)).expect("reads");
        assert!(creds.contains_key("docker.io"));
        for (key, body, want) in [
            (
                ".dockerconfigjson",
                "not json",
                ".dockerconfigjson is not a docker config",
            ),
            ("other", "{}", "neither"),
            (
                ".dockerconfigjson",
                r#"{"auths":{"r":{"auth":"!!"}}}"#,
                "auth of r is not base64",
            ),
        ] {
            let err = credentials_from_secret(&data(key, body)).expect_err(body);
            assert!(err.contains(want), "{err}");
        }
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
