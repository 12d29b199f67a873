//! containerd's distribution source labels: every blob a pull fetched is labelled
//! `containerd.io/distribution.source.<registry host>` with the repositories it came
//! from, as containerd's own pull (and so CRI's) does. containerd reads them to mount
//! blobs across repositories on push and to tell which registry content is from; with
//! them, content the agent pulled looks like content CRI pulled.
//!
//! The rules follow containerd's `remotes/docker` handler: the key names the registry's
//! host without its port; the value is the sorted, de-duplicated, comma-separated list
//! of repository paths; a label that would exceed containerd's 4096-byte limit on key
//! and value together is not written (a very common layer keeps the sources it has).

use std::collections::HashMap;

use super::image_store::{ImageStore, StoreError};
use crate::reference::Reference;

/// Prefix of the label key; the registry host follows.
pub const PREFIX: &str = "containerd.io/distribution.source.";
/// containerd refuses a label whose key and value are longer than this together.
const MAX_LABEL_BYTES: usize = 4096;

/// The label key for `image`'s registry: its host, without the port (the reference
/// grammar admits no IPv6 literal, so the first ':' starts the port).
pub fn key(image: &Reference) -> String {
    let domain = image.domain();
    let host = domain.split_once(':').map_or(domain, |(host, _)| host);
    format!("{PREFIX}{host}")
}

/// The label value once `repository` is added to `existing`: sorted and without
/// duplicates. `None` when the label would be over containerd's limit.
pub fn merged(key: &str, existing: Option<&str>, repository: &str) -> Option<String> {
    let mut repositories: Vec<&str> = existing
        .unwrap_or_default()
        .split(',')
        .filter(|r| !r.is_empty())
        .chain(std::iter::once(repository))
        .collect();
    repositories.sort_unstable();
    repositories.dedup();
    let value = repositories.join(",");
    (key.len() + value.len() <= MAX_LABEL_BYTES).then_some(value)
}

/// The source label of a blob `image`'s pull commits: its repository alone (none when
/// over the limit). Given at the commit, it saves reading and updating the blob after.
pub fn for_new_blob(image: &Reference) -> HashMap<String, String> {
    let key = key(image);
    merged(&key, None, image.path())
        .map(|value| HashMap::from([(key, value)]))
        .unwrap_or_default()
}

/// Adds `image`'s repository to the source label of each blob in `digests`. A label
/// over the limit is left as it is, as containerd does.
pub async fn label<S: ImageStore>(
    store: &S,
    image: &Reference,
    digests: impl IntoIterator<Item = &str>,
) -> Result<(), StoreError> {
    let key = key(image);
    for digest in digests {
        let labels = store.blob_labels(digest).await?;
        let existing = labels.get(&key).map(String::as_str);
        let Some(value) = merged(&key, existing, image.path()) else {
            tracing::debug!(digest, %key, "distribution source label at its size limit; left as it is");
            continue;
        };
        if existing == Some(value.as_str()) {
            continue;
        }
        store
            .label_blob(digest, HashMap::from([(key.clone(), value)]))
            .await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn the_key_names_the_registry_host_without_port() {
        let cases = [
            ("docker.io/library/redis:7", "docker.io"),
            ("redis", "docker.io"),
            ("127.0.0.1:5000/team/web:v1", "127.0.0.1"),
            (
                "registry.example:443/a/b@sha256:0000000000000000000000000000000000000000000000000000000000000000",
                "registry.example",
            ),
            ("localhost/web", "localhost"),
        ];
        for (image, host) in cases {
            let image = Reference::parse_normalized(image).unwrap();
            assert_eq!(key(&image), format!("{PREFIX}{host}"), "{image:?}");
        }
    }

    #[test]
    fn the_value_is_the_sorted_set_of_repositories() {
        let k = "containerd.io/distribution.source.docker.io";
        let cases: [(Option<&str>, &str, &str); 5] = [
            (None, "library/redis", "library/redis"),
            (Some(""), "library/redis", "library/redis"),
            (Some("library/redis"), "library/redis", "library/redis"),
            (Some("library/redis"), "a/b", "a/b,library/redis"),
            (Some("z/z,a/a"), "m/m", "a/a,m/m,z/z"),
        ];
        for (existing, repository, expected) in cases {
            assert_eq!(
                merged(k, existing, repository).as_deref(),
                Some(expected),
                "{existing:?} + {repository}"
            );
        }
    }

    #[test]
    fn a_new_blob_is_labelled_with_the_pulls_repository_alone() {
        let image = Reference::parse_normalized("127.0.0.1:5000/team/web:v1").unwrap();
        let labels = for_new_blob(&image);
        assert_eq!(labels.len(), 1);
        assert_eq!(labels[&format!("{PREFIX}127.0.0.1")], "team/web");
    }

    #[test]
    fn a_label_over_containerds_limit_is_not_written() {
        let k = "containerd.io/distribution.source.docker.io";
        let long = "r".repeat(MAX_LABEL_BYTES - k.len());
        assert_eq!(merged(k, None, &long).as_deref(), Some(long.as_str()));
        assert_eq!(merged(k, Some(&long), "a/b"), None);
    }
}
