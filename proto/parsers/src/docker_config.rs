//! Pull secrets as Kubernetes stores them (`.dockerconfigjson`, or the older `.dockercfg`
//! whose top level is the `auths` map) and the registry each image pulls from, decided as
//! Docker decides it, so an image's registry can be looked up among a secret's keys.

use std::collections::BTreeMap;

use base64::Engine as _;
use serde::Deserialize;

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

/// One registry's credentials in a pull secret. `Debug` hides the secrets themselves, so
/// a logged value never carries them.
#[derive(Clone, PartialEq, Eq)]
pub enum RegistryCredentials {
    /// A user name and password (or the base64 `auth` field's `user:password`).
    Basic { username: String, password: String },
    /// An identity token (`identitytoken`), which takes precedence over a password.
    IdentityToken(String),
}

impl std::fmt::Debug for RegistryCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Basic { username, .. } => f
                .debug_struct("Basic")
                .field("username", username)
                .field("password", &"<redacted>")
                .finish(),
            Self::IdentityToken(_) => f.write_str("IdentityToken(<redacted>)"),
        }
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
) -> Result<BTreeMap<String, RegistryCredentials>, String> {
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
        let credentials = if !auth.identity_token.is_empty() {
            RegistryCredentials::IdentityToken(auth.identity_token)
        } else {
            RegistryCredentials::Basic { username, password }
        };
        out.insert(normalize_registry_key(&key), credentials);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

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
            creds["127.0.0.1:5001"],
            RegistryCredentials::Basic {
                username: "u".into(),
                password: "p:w".into()
            }
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
    fn an_identity_token_wins_and_no_secret_is_printed() {
        let config = r#"{"auths":{"r":{"username":"u","password":"hunter2","identitytoken":"refresh-xyz"}}}"#;
        let creds = credentials_from_secret(&data(".dockerconfigjson", config)).expect("reads");
        assert_eq!(
            creds["r"],
            RegistryCredentials::IdentityToken("refresh-xyz".into())
        );
        let basic = RegistryCredentials::Basic {
            username: "u".into(),
            password: "hunter2".into(),
        };
        for printed in [format!("{basic:?}"), format!("{:?}", creds["r"])] {
            assert!(
                !printed.contains("hunter2") && !printed.contains("refresh-xyz"),
                "{printed}"
            );
        }
    }
}
