//! A test image of its own for pulls that must really move bytes: one uncompressed layer
//! of deterministic noise that no other image shares, so removing it from containerd
//! leaves no blob of it behind for a pull to find, whatever other tests do with theirs.
//! Pushed to the local registry (distribution API, plain HTTP) on first use.
//!
//! Each suite asks for its own (`ensure(registry, owner)`): the noise is seeded by the
//! owner, so two suites that run at once never share a blob in the node's containerd. One
//! image for all let a suite's unthrottled pull put the layer in containerd while another
//! suite's throttled pull of it ran, which then ended at once with no progress to see.

use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

use crate::oci_image::{MANIFEST_MEDIA_TYPE, OciImage};

/// The images' repositories in the local registry are this followed by `-<owner>`.
pub const REPOSITORY_PREFIX: &str = "stevedore/faults-slow";
pub const TAG: &str = "v1";
/// Size of its one layer's file.
pub const LAYER_BYTES: usize = 24 << 20;

/// The image as pushed.
#[derive(Clone, Debug)]
pub struct SlowImage {
    /// `stevedore/faults-slow-<owner>`, the repository in the registry.
    pub repository: String,
    /// `repository:TAG`, to put behind a registry's `host:port/`.
    pub name: String,
    /// The image ID (its config's digest), also the name of one of its containerd records.
    pub image_id: String,
}

impl SlowImage {
    /// Whether containerd image record `name` is of this image, under any registry's name
    /// or its ID: a suite removes them all so its pull has every blob to fetch.
    pub fn is_record(&self, name: &str) -> bool {
        name == self.image_id || name.contains(&format!("/{}:", self.repository))
    }
}

/// Makes sure `registry` (`host:port`) holds `owner`'s image (`owner`: a suite's name,
/// lower-case letters, digits and dashes).
pub async fn ensure(registry: &str, owner: &str) -> Result<SlowImage> {
    ensure!(
        !owner.is_empty()
            && (owner.bytes()).all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'),
        "slow image owner {owner:?}: use lower-case letters, digits and dashes"
    );
    let repository = format!("{REPOSITORY_PREFIX}-{owner}");
    let layer = tar_of_one_file("faults-slow.bin", &noise(seed_of(owner), LAYER_BYTES));
    let oci = OciImage::of_layers(vec![layer])?;
    let image = SlowImage {
        name: format!("{repository}:{TAG}"),
        image_id: oci.image_id().to_owned(),
        repository,
    };
    let repository = &image.repository;
    let manifest_path = format!("/v2/{repository}/manifests/{TAG}");
    let accept = format!("Accept: {MANIFEST_MEDIA_TYPE}");
    let (status, _) = request(registry, "HEAD", &manifest_path, &[&accept], &[]).await?;
    if status == 200 {
        return Ok(image);
    }
    for blob in oci.layers.iter().chain([&oci.config]) {
        push_blob(registry, repository, &blob.digest, &blob.body).await?;
    }
    let content_type = format!("Content-Type: {MANIFEST_MEDIA_TYPE}");
    let (status, head) = request(
        registry,
        "PUT",
        &manifest_path,
        &[&content_type],
        &oci.manifest.body,
    )
    .await?;
    ensure!(status == 201, "pushing the manifest: {head}");
    Ok(image)
}

/// A monolithic upload: POST for a session, PUT the bytes with their digest.
async fn push_blob(registry: &str, repository: &str, digest: &str, body: &[u8]) -> Result<()> {
    let (status, head) = request(
        registry,
        "POST",
        &format!("/v2/{repository}/blobs/uploads/"),
        &[],
        &[],
    )
    .await?;
    ensure!(status == 202, "starting an upload: {head}");
    let location = header(&head, "location").context("upload without a Location")?;
    // The Location may be absolute; only its path and query matter here.
    let path = match location.find("/v2/") {
        Some(i) => &location[i..],
        None => bail!("unexpected upload location {location}"),
    };
    let separator = if path.contains('?') { '&' } else { '?' };
    let (status, head) = request(
        registry,
        "PUT",
        &format!("{path}{separator}digest={digest}"),
        &["Content-Type: application/octet-stream"],
        body,
    )
    .await?;
    ensure!(status == 201, "uploading {digest}: {head}");
    Ok(())
}

/// One HTTP/1.1 request on its own connection: the status and the response head.
async fn request(
    registry: &str,
    method: &str,
    path: &str,
    headers: &[&str],
    body: &[u8],
) -> Result<(u16, String)> {
    let mut conn = tokio::time::timeout(Duration::from_secs(10), TcpStream::connect(registry))
        .await
        .with_context(|| format!("connecting to {registry}"))??;
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {registry}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for h in headers {
        head.push_str(h);
        head.push_str("\r\n");
    }
    head.push_str("\r\n");
    conn.write_all(head.as_bytes()).await?;
    conn.write_all(body).await?;
    let mut response = Vec::new();
    tokio::time::timeout(Duration::from_secs(60), conn.read_to_end(&mut response))
        .await
        .with_context(|| format!("{method} {path}: no answer"))??;
    let text = String::from_utf8_lossy(&response);
    let head = text.split("\r\n\r\n").next().unwrap_or_default().to_owned();
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .with_context(|| format!("{method} {path}: not an HTTP response: {head}"))?;
    Ok((status, head))
}

fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().find_map(|line| {
        let (key, value) = line.split_once(':')?;
        key.trim().eq_ignore_ascii_case(name).then(|| value.trim())
    })
}

/// A nonzero xorshift seed of the owner's name (FNV-1a), the same on every run.
fn seed_of(owner: &str) -> u64 {
    let hash = (owner.bytes()).fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    });
    (hash ^ 0x5eed_fa17_5eed_fa17).max(1)
}

/// `len` bytes of xorshift noise from `seed`: the same image on every run.
fn noise(seed: u64, len: usize) -> Vec<u8> {
    let mut state = seed;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        out.extend_from_slice(&state.to_le_bytes());
    }
    out.truncate(len);
    out
}

/// A ustar archive holding one regular file at the root.
pub(crate) fn tar_of_one_file(name: &str, data: &[u8]) -> Vec<u8> {
    let mut header = [0u8; 512];
    header[..name.len()].copy_from_slice(name.as_bytes());
    octal(&mut header[100..108], 0o644);
    octal(&mut header[108..116], 0);
    octal(&mut header[116..124], 0);
    octal(&mut header[124..136], data.len() as u64);
    octal(&mut header[136..148], 0);
    header[148..156].fill(b' ');
    header[156] = b'0';
    header[257..263].copy_from_slice(b"ustar\0");
    header[263..265].copy_from_slice(b"00");
    let sum: u32 = header.iter().map(|b| u32::from(*b)).sum();
    header[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
    let padding = (512 - data.len() % 512) % 512;
    let mut out = Vec::with_capacity(512 + data.len() + padding + 1024);
    out.extend_from_slice(&header);
    out.extend_from_slice(data);
    out.resize(out.len() + padding + 1024, 0);
    out
}

/// Writes `value` as zero-padded octal ending in NUL, filling `field`.
fn octal(field: &mut [u8], value: u64) {
    let text = format!("{value:0width$o}\0", width = field.len() - 1);
    field.copy_from_slice(text.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_archive_is_a_ustar_file_entry_padded_to_blocks() {
        let tar = tar_of_one_file("f.bin", b"hello");
        assert_eq!(tar.len(), 512 + 512 + 1024);
        assert_eq!(&tar[..5], b"f.bin");
        assert_eq!(&tar[124..136], b"00000000005\0");
        assert_eq!(&tar[257..263], b"ustar\0");
        let mut blank = tar[..512].to_vec();
        blank[148..156].fill(b' ');
        let sum: u32 = blank.iter().map(|b| u32::from(*b)).sum();
        let written = std::str::from_utf8(&tar[148..154]).expect("octal");
        assert_eq!(u32::from_str_radix(written, 8).expect("octal"), sum);
        assert_eq!(&tar[512..517], b"hello");
        assert!(tar[517..].iter().all(|b| *b == 0));
    }

    #[test]
    fn the_noise_is_the_same_every_time_and_not_constant() {
        let a = noise(seed_of("a"), 4096);
        assert_eq!(a, noise(seed_of("a"), 4096));
        assert_eq!(a.len(), 4096);
        assert!(a.windows(2).any(|w| w[0] != w[1]));
    }

    #[test]
    fn each_owner_has_noise_of_its_own() {
        let owners = [
            "imagelistpulljob",
            "kubectl-plugin",
            "imagelist-faults",
            "a",
            "b",
        ];
        let layers: Vec<Vec<u8>> = (owners.iter())
            .map(|owner| noise(seed_of(owner), 4096))
            .collect();
        for (i, a) in layers.iter().enumerate() {
            for b in &layers[i + 1..] {
                assert_ne!(a, b);
            }
        }
    }

    #[test]
    fn headers_are_found_by_name_in_any_case() {
        let head = "HTTP/1.1 202 Accepted\r\nLocation: /v2/x/blobs/uploads/1?_state=a\r\n";
        assert_eq!(
            header(head, "location"),
            Some("/v2/x/blobs/uploads/1?_state=a")
        );
        assert_eq!(header(head, "range"), None);
    }
}
