//! An image no one else has: layers of random bytes made at run time, written as an OCI
//! image layout for `skopeo copy oci:<dir>:<tag> ...`. Nothing of it is in containerd
//! before a test pulls it, so the pull fetches every blob, whatever other tests did.

use std::path::{Path, PathBuf};

use anyhow::Result;
use ring::rand::{SecureRandom as _, SystemRandom};
use serde_json::json;
use stevedore_agent::images::oci::sha256_digest;

use crate::slow_image::tar_of_one_file;

const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";

/// Writes an image of `layers` layers of `layer_bytes` random bytes each, tagged `tag`,
/// as an OCI layout in `dir`, and returns `dir`.
pub fn write_layout(dir: &Path, tag: &str, layers: usize, layer_bytes: usize) -> Result<PathBuf> {
    let blobs = dir.join("blobs/sha256");
    std::fs::create_dir_all(&blobs)?;
    let put = |body: &[u8]| -> Result<(String, usize)> {
        let digest = sha256_digest(body);
        let hex = digest.trim_start_matches("sha256:");
        std::fs::write(blobs.join(hex), body)?;
        Ok((digest, body.len()))
    };
    let rng = SystemRandom::new();
    let mut layer_descriptors = Vec::new();
    let mut diff_ids = Vec::new();
    for i in 0..layers {
        let mut data = vec![0u8; layer_bytes];
        rng.fill(&mut data)
            .map_err(|err| anyhow::anyhow!("no random bytes: {err}"))?;
        let (digest, size) = put(&tar_of_one_file(&format!("random-{i}.bin"), &data))?;
        diff_ids.push(digest.clone());
        layer_descriptors.push(json!({
            "mediaType": "application/vnd.oci.image.layer.v1.tar",
            "digest": digest,
            "size": size,
        }));
    }
    let config = json!({
        "architecture": oci_architecture(),
        "os": "linux",
        "config": {},
        "rootfs": { "type": "layers", "diff_ids": diff_ids },
    });
    let (config_digest, config_size) = put(&serde_json::to_vec(&config)?)?;
    let manifest = json!({
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": {
            "mediaType": "application/vnd.oci.image.config.v1+json",
            "digest": config_digest,
            "size": config_size,
        },
        "layers": layer_descriptors,
    });
    let (manifest_digest, manifest_size) = put(&serde_json::to_vec(&manifest)?)?;
    let index = json!({
        "schemaVersion": 2,
        "manifests": [{
            "mediaType": OCI_MANIFEST,
            "digest": manifest_digest,
            "size": manifest_size,
            "annotations": { "org.opencontainers.image.ref.name": tag },
        }],
    });
    std::fs::write(dir.join("index.json"), serde_json::to_vec(&index)?)?;
    std::fs::write(dir.join("oci-layout"), r#"{"imageLayoutVersion":"1.0.0"}"#)?;
    Ok(dir.to_path_buf())
}

/// This machine's architecture as OCI names it.
fn oci_architecture() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    }
}
