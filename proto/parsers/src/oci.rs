//! The OCI / Docker image formats the pull engine reads: descriptors, manifests,
//! indexes and the config's rootfs, platform selection and containerd's chain IDs.
//! Pure data and functions, no I/O.

use serde::Deserialize;
use sha2::{Digest as _, Sha256};

pub const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
pub const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
pub const DOCKER_LIST: &str = "application/vnd.docker.distribution.manifest.list.v2+json";
pub const DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";

/// What the agent asks registries for, best first.
pub const MANIFEST_ACCEPT: &str = "application/vnd.oci.image.index.v1+json, \
     application/vnd.oci.image.manifest.v1+json, \
     application/vnd.docker.distribution.manifest.list.v2+json, \
     application/vnd.docker.distribution.manifest.v2+json";

/// Largest manifest or index accepted: containerd's resolver refuses larger ones too
/// (`MaxManifestSize`, 4 MiB, in `core/remotes/docker/resolver.go`).
pub const MAX_MANIFEST_BYTES: u64 = 4 << 20;

/// Largest image config accepted. The config is the one other document the agent reads
/// into memory (for its diff IDs); containerd has no cap of its own there (it reads the
/// config whole with `content.ReadBlob`), so this takes twice the manifest limit: real
/// configs, history and labels included, are tens of KiB.
pub const MAX_CONFIG_BYTES: u64 = 8 << 20;

/// Why a manifest, index or config could not be used.
#[derive(Debug, thiserror::Error)]
pub enum FormatError {
    #[error("malformed {what}: {source}")]
    Json {
        what: &'static str,
        #[source]
        source: serde_json::Error,
    },
    #[error("unsupported manifest media type {media_type:?}")]
    UnsupportedMediaType { media_type: String },
    #[error(
        "the image index has no manifest for this node's platform {wanted} (it has {available})"
    )]
    NoMatchingPlatform { wanted: String, available: String },
    #[error("config lists {diff_ids} diff IDs but the manifest has {layers} layers")]
    LayerCountMismatch { diff_ids: usize, layers: usize },
    #[error("unsupported layer media type {media_type:?}")]
    UnsupportedLayer { media_type: String },
}

/// A content descriptor: what a blob is, its digest and size.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Descriptor {
    #[serde(default)]
    pub media_type: String,
    pub digest: String,
    pub size: u64,
    #[serde(default)]
    pub platform: Option<Platform>,
}

impl Descriptor {
    pub fn new(media_type: impl Into<String>, digest: impl Into<String>, size: u64) -> Self {
        Self {
            media_type: media_type.into(),
            digest: digest.into(),
            size,
            platform: None,
        }
    }
}

pub use crate::platform::Platform;

/// An image manifest (OCI or Docker schema 2).
#[derive(Debug, Clone, Deserialize)]
pub struct Manifest {
    pub config: Descriptor,
    pub layers: Vec<Descriptor>,
}

#[derive(Debug, Clone, Deserialize)]
struct Index {
    manifests: Vec<Descriptor>,
}

#[derive(Debug, Clone, Deserialize)]
struct ImageConfig {
    rootfs: RootFs,
}

#[derive(Debug, Clone, Deserialize)]
struct RootFs {
    diff_ids: Vec<String>,
}

/// Whether `media_type` is a multi-platform index.
pub fn is_index(media_type: &str) -> bool {
    media_type == OCI_INDEX || media_type == DOCKER_LIST
}

/// Whether `media_type` is a single-platform manifest.
pub fn is_manifest(media_type: &str) -> bool {
    media_type == OCI_MANIFEST || media_type == DOCKER_MANIFEST
}

/// The media type of a manifest body, from its `mediaType` field when the registry's
/// header is missing or generic.
pub fn sniff_media_type(body: &[u8]) -> Option<String> {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Probe {
        media_type: Option<String>,
        manifests: Option<serde_json::Value>,
    }
    let probe: Probe = serde_json::from_slice(body).ok()?;
    probe.media_type.or_else(|| {
        Some(if probe.manifests.is_some() {
            OCI_INDEX.to_owned()
        } else {
            OCI_MANIFEST.to_owned()
        })
    })
}

/// The manifest of an index for `host`: an entry of the best platform it runs
/// ([`Platform::runnable`]); an entry without a platform does not match.
pub fn select_platform(index_body: &[u8], host: &Platform) -> Result<Descriptor, FormatError> {
    let index: Index = serde_json::from_slice(index_body).map_err(|source| FormatError::Json {
        what: "image index",
        source,
    })?;
    let manifests: Vec<&Descriptor> = index
        .manifests
        .iter()
        .filter(|d| is_manifest(&d.media_type))
        .collect();
    for wanted in host.runnable() {
        let found = manifests
            .iter()
            .find(|d| d.platform.as_ref().is_some_and(|p| wanted.matches(p)));
        if let Some(found) = found {
            return Ok((*found).clone());
        }
    }
    let available: Vec<String> = manifests
        .iter()
        .filter_map(|d| d.platform.as_ref().map(ToString::to_string))
        .collect();
    Err(FormatError::NoMatchingPlatform {
        wanted: host.to_string(),
        available: if available.is_empty() {
            "none with a platform".to_owned()
        } else {
            available.join(", ")
        },
    })
}

/// Parses a manifest and checks that containerd's diff service can apply its layers.
pub fn parse_manifest(body: &[u8]) -> Result<Manifest, FormatError> {
    let manifest: Manifest = serde_json::from_slice(body).map_err(|source| FormatError::Json {
        what: "image manifest",
        source,
    })?;
    if let Some(layer) = manifest.layers.iter().find(|l| !is_layer(&l.media_type)) {
        return Err(FormatError::UnsupportedLayer {
            media_type: layer.media_type.clone(),
        });
    }
    Ok(manifest)
}

fn is_layer(media_type: &str) -> bool {
    matches!(
        media_type,
        "application/vnd.oci.image.layer.v1.tar"
            | "application/vnd.oci.image.layer.v1.tar+gzip"
            | "application/vnd.oci.image.layer.v1.tar+zstd"
            | "application/vnd.docker.image.rootfs.diff.tar.gzip"
            | "application/vnd.oci.image.layer.nondistributable.v1.tar+gzip"
            | "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip"
    )
}

/// The uncompressed layer digests (`rootfs.diff_ids`) of an image config, checked
/// against the manifest's layer count.
pub fn diff_ids(config_body: &[u8], layers: usize) -> Result<Vec<String>, FormatError> {
    let config: ImageConfig =
        serde_json::from_slice(config_body).map_err(|source| FormatError::Json {
            what: "image config",
            source,
        })?;
    let diff_ids = config.rootfs.diff_ids;
    if diff_ids.len() != layers {
        return Err(FormatError::LayerCountMismatch {
            diff_ids: diff_ids.len(),
            layers,
        });
    }
    Ok(diff_ids)
}

/// containerd's (and the OCI spec's) chain IDs: `chain(0) = diff(0)`,
/// `chain(n) = sha256(chain(n-1) + " " + diff(n))`. Snapshots are named by them.
pub fn chain_ids(diff_ids: &[String]) -> Vec<String> {
    let mut chain: Vec<String> = Vec::with_capacity(diff_ids.len());
    for diff_id in diff_ids {
        let next = match chain.last() {
            None => diff_id.clone(),
            Some(parent) => sha256_digest(format!("{parent} {diff_id}").as_bytes()),
        };
        chain.push(next);
    }
    chain
}

/// `sha256:<hex>` of `data`.
pub fn sha256_digest(data: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(data)))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn chain_ids_match_containerd() {
        // Expected values computed independently (Python hashlib) with the formula of
        // containerd's identity.ChainIDs.
        let a = "sha256:a3ed95caeb02ffe68cdd9fd84406680ae93d633cb16422d00e8a7c22955b46d4";
        let b = "sha256:2ef2f7f4d8e8c2b96e1fbb8c5c3a6a4c0fb4f8ea8bd1e0a5ad2c95bd9b7f1c11";
        let c = format!("sha256:{}", "1".repeat(64));
        let chain = chain_ids(&[a.to_owned(), b.to_owned(), c]);
        assert_eq!(chain[0], a);
        assert_eq!(
            chain[1],
            "sha256:0cac5354afb4e1f62e1dafcd07f9803e39a7bb7d1ca9216f1075bdd025606340"
        );
        assert_eq!(
            chain[2],
            "sha256:e1a7c87f05690d4613e1fe68424a861b5966640884563c9cf2705a64cd2a5ac6"
        );
        assert!(chain_ids(&[]).is_empty());
    }

    #[test]
    fn sha256_of_empty_input() {
        assert_eq!(
            sha256_digest(b""),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    fn entry(digest: &str, platform: &str) -> serde_json::Value {
        let mut parts = platform.split('/');
        let (os, arch, variant) = (parts.next(), parts.next(), parts.next());
        serde_json::json!({"mediaType": OCI_MANIFEST, "digest": digest, "size": 1,
            "platform": {"os": os, "architecture": arch, "variant": variant}})
    }

    #[test]
    fn the_index_entry_of_the_nodes_platform_is_chosen() {
        let multi_arch = serde_json::json!({"schemaVersion": 2, "manifests": [
            entry("sha256:amd", "linux/amd64"),
            entry("sha256:arm64", "linux/arm64/v8"),
            entry("sha256:armv6", "linux/arm/v6"),
            entry("sha256:armv7", "linux/arm/v7"),
            entry("sha256:s390x", "linux/s390x"),
            {"mediaType": "application/vnd.in-toto+json", "digest": "sha256:att", "size": 1,
             "platform": {"os": "unknown", "architecture": "unknown"}},
        ]})
        .to_string();
        let cases = [
            (Platform::new("linux", "amd64", None), "sha256:amd"),
            (Platform::new("linux", "arm64", Some("v8")), "sha256:arm64"),
            (Platform::new("linux", "arm", Some("v7")), "sha256:armv7"),
            (Platform::new("linux", "arm", Some("v6")), "sha256:armv6"),
            (Platform::new("linux", "s390x", None), "sha256:s390x"),
        ];
        for (host, want) in cases {
            let chosen = select_platform(multi_arch.as_bytes(), &host).unwrap();
            assert_eq!(chosen.digest, want, "{host}");
        }
        // An ARMv7 node falls back to the best older variant.
        let older = serde_json::json!({"manifests": [
            entry("sha256:v5", "linux/arm/v5"), entry("sha256:v6", "linux/arm/v6")]})
        .to_string();
        let armv7 = Platform::new("linux", "arm", Some("v7"));
        assert_eq!(
            select_platform(older.as_bytes(), &armv7).unwrap().digest,
            "sha256:v6"
        );
    }

    #[test]
    fn an_index_without_the_nodes_platform_says_what_it_has() {
        let index = serde_json::json!({"manifests": [
            entry("sha256:w", "windows/amd64"), entry("sha256:a", "linux/arm64")]})
        .to_string();
        let host = Platform::new("linux", "amd64", None);
        let err = select_platform(index.as_bytes(), &host)
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "the image index has no manifest for this node's platform linux/amd64 \
             (it has windows/amd64, linux/arm64)"
        );
        assert!(select_platform(b"not json", &host).is_err());
    }

    #[test]
    fn manifests_and_configs_parse_and_are_checked() {
        let manifest = br#"{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json",
          "config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:c","size":3},
          "layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":"sha256:l","size":9}]}"#;
        let parsed = parse_manifest(manifest).unwrap();
        assert_eq!(parsed.config.digest, "sha256:c");
        assert_eq!(parsed.layers.len(), 1);
        let odd = br#"{"config":{"digest":"sha256:c","size":3},
          "layers":[{"mediaType":"application/x-unknown","digest":"sha256:l","size":9}]}"#;
        assert!(matches!(
            parse_manifest(odd),
            Err(FormatError::UnsupportedLayer { .. })
        ));
        let config = br#"{"rootfs":{"type":"layers","diff_ids":["sha256:d"]}}"#;
        assert_eq!(diff_ids(config, 1).unwrap(), ["sha256:d"]);
        assert!(matches!(
            diff_ids(config, 2),
            Err(FormatError::LayerCountMismatch { .. })
        ));
    }

    #[test]
    fn media_types_are_sniffed() {
        assert_eq!(
            sniff_media_type(br#"{"manifests":[]}"#).as_deref(),
            Some(OCI_INDEX)
        );
        assert_eq!(
            sniff_media_type(br#"{"mediaType":"x","config":{}}"#).as_deref(),
            Some("x")
        );
        assert!(is_index(DOCKER_LIST) && is_manifest(DOCKER_MANIFEST));
    }
}
