//! An OCI image made in memory from uncompressed tar layers: its config (this machine's
//! platform, the layers' diff IDs) and its manifest, each blob with its digest. The test
//! images push it to a registry (`slow_image`) or write it as an OCI layout
//! (`random_image`).

use anyhow::Result;
use serde_json::json;
use stevedore_agent::images::oci::sha256_digest;

pub const MANIFEST_MEDIA_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
const CONFIG_MEDIA_TYPE: &str = "application/vnd.oci.image.config.v1+json";
const LAYER_MEDIA_TYPE: &str = "application/vnd.oci.image.layer.v1.tar";

/// Bytes and their `sha256:` digest.
pub struct Blob {
    pub digest: String,
    pub body: Vec<u8>,
}

impl Blob {
    pub fn of(body: Vec<u8>) -> Self {
        Self {
            digest: sha256_digest(&body),
            body,
        }
    }

    fn descriptor(&self, media_type: &str) -> serde_json::Value {
        json!({ "mediaType": media_type, "digest": self.digest, "size": self.body.len() })
    }
}

/// An image's blobs: its layers (bottom first), config and manifest.
pub struct OciImage {
    pub layers: Vec<Blob>,
    pub config: Blob,
    pub manifest: Blob,
}

impl OciImage {
    /// The image of `layers` (uncompressed tar archives, bottom first) for this machine's
    /// platform. Uncompressed, a layer's diff ID is its digest.
    pub fn of_layers(layers: Vec<Vec<u8>>) -> Result<Self> {
        let layers: Vec<Blob> = layers.into_iter().map(Blob::of).collect();
        let diff_ids: Vec<&str> = layers.iter().map(|l| l.digest.as_str()).collect();
        let config = Blob::of(serde_json::to_vec(&json!({
            "architecture": oci_architecture(),
            "os": "linux",
            "config": {},
            "rootfs": { "type": "layers", "diff_ids": diff_ids },
        }))?);
        let manifest = Blob::of(serde_json::to_vec(&json!({
            "schemaVersion": 2,
            "mediaType": MANIFEST_MEDIA_TYPE,
            "config": config.descriptor(CONFIG_MEDIA_TYPE),
            "layers": layers.iter().map(|l| l.descriptor(LAYER_MEDIA_TYPE)).collect::<Vec<_>>(),
        }))?);
        Ok(Self {
            layers,
            config,
            manifest,
        })
    }

    /// The image ID containerd and kubelet report: the config's digest.
    pub fn image_id(&self) -> &str {
        &self.config.digest
    }

    /// The manifest's descriptor, as an index or an OCI layout's `index.json` names it.
    pub fn manifest_descriptor(&self) -> serde_json::Value {
        self.manifest.descriptor(MANIFEST_MEDIA_TYPE)
    }
}

/// This machine's architecture as OCI names it.
pub fn oci_architecture() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_manifest_names_the_config_and_each_layer_by_digest_and_size() -> Result<()> {
        let image = OciImage::of_layers(vec![b"lower".to_vec(), b"upper layer".to_vec()])?;
        let manifest: serde_json::Value = serde_json::from_slice(&image.manifest.body)?;
        assert_eq!(manifest["config"]["digest"], image.config.digest);
        assert_eq!(manifest["config"]["size"], image.config.body.len());
        assert_eq!(manifest["layers"][0]["digest"], sha256_digest(b"lower"));
        assert_eq!(manifest["layers"][1]["size"], 11);
        assert_eq!(image.image_id(), sha256_digest(&image.config.body));
        Ok(())
    }

    #[test]
    fn the_config_lists_the_layers_bottom_first_for_this_platform() -> Result<()> {
        let image = OciImage::of_layers(vec![b"a".to_vec(), b"b".to_vec()])?;
        let config: serde_json::Value = serde_json::from_slice(&image.config.body)?;
        let diff_ids = [sha256_digest(b"a"), sha256_digest(b"b")];
        assert_eq!(config["rootfs"]["diff_ids"], json!(diff_ids));
        assert_eq!(config["architecture"], oci_architecture());
        assert_eq!(config["os"], "linux");
        Ok(())
    }
}
