//! An image no one else has: layers of random bytes made at run time, written as an OCI
//! image layout for `skopeo copy oci:<dir>:<tag> ...`. Nothing of it is in containerd
//! before a test pulls it, so the pull fetches every blob, whatever other tests did.

use std::path::{Path, PathBuf};

use anyhow::Result;
use ring::rand::{SecureRandom as _, SystemRandom};
use serde_json::json;

use crate::oci_image::OciImage;
use crate::slow_image::tar_of_one_file;

/// Writes an image of `layers` layers of `layer_bytes` random bytes each, tagged `tag`,
/// as an OCI layout in `dir`, and returns `dir`.
pub fn write_layout(dir: &Path, tag: &str, layers: usize, layer_bytes: usize) -> Result<PathBuf> {
    let rng = SystemRandom::new();
    let mut archives = Vec::new();
    for i in 0..layers {
        let mut data = vec![0u8; layer_bytes];
        rng.fill(&mut data)
            .map_err(|err| anyhow::anyhow!("no random bytes: {err}"))?;
        archives.push(tar_of_one_file(&format!("random-{i}.bin"), &data));
    }
    let image = OciImage::of_layers(archives)?;
    let blobs = dir.join("blobs/sha256");
    std::fs::create_dir_all(&blobs)?;
    for blob in image.layers.iter().chain([&image.config, &image.manifest]) {
        let hex = blob.digest.trim_start_matches("sha256:");
        std::fs::write(blobs.join(hex), &blob.body)?;
    }
    let mut manifest = image.manifest_descriptor();
    manifest["annotations"] = json!({ "org.opencontainers.image.ref.name": tag });
    let index = json!({ "schemaVersion": 2, "manifests": [manifest] });
    std::fs::write(dir.join("index.json"), serde_json::to_vec(&index)?)?;
    std::fs::write(dir.join("oci-layout"), r#"{"imageLayoutVersion":"1.0.0"}"#)?;
    Ok(dir.to_path_buf())
}
