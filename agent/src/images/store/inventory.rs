//! The images present on the node, as CRI reports them: containerd's image records
//! grouped by target, each group one image with its ID (config digest), repo tags,
//! repo digests and size.

use std::collections::BTreeMap;

use stevedore_parsers::oci::{self, Descriptor};

use super::image_store::{ImageRecord, ImageStore, StoreError, is_pinned};
use crate::reference::{Reference, ReferenceError, is_image_id};

/// Why an image could not be described.
#[derive(Debug, thiserror::Error)]
pub enum InventoryError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("image {digest}: {detail}")]
    Unreadable { digest: String, detail: String },
    #[error(transparent)]
    Reference(#[from] ReferenceError),
}

/// One image on the node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageInfo {
    pub id: String,
    pub repo_tags: Vec<String>,
    pub repo_digests: Vec<String>,
    /// Compressed size of config and layers, as CRI reports it.
    pub size: u64,
    pub target: Descriptor,
    /// Every record name that points at this image (what removal deletes).
    pub names: Vec<String>,
    /// One of those records is pinned by CRI ([`is_pinned`]): kubelet never removes it.
    pub pinned: bool,
}

/// The record name a reference is stored under: `repo@digest` when pinned, else
/// `repo:tag`.
pub fn record_name(image: &Reference) -> String {
    match (image.digest(), image.repo_tag()) {
        (Some(digest), _) => image.repo_digest(digest),
        (None, Some(tag)) => tag,
        (None, None) => image.repository(),
    }
}

/// The linux/amd64 manifest of `target` (an index or a manifest).
pub async fn manifest_of<S: ImageStore>(
    store: &S,
    target: &Descriptor,
) -> Result<oci::Manifest, InventoryError> {
    let unreadable = |detail: String| InventoryError::Unreadable {
        digest: target.digest.clone(),
        detail,
    };
    let mut body = store
        .read_blob(&target.digest, oci::MAX_MANIFEST_BYTES)
        .await?;
    let media_type = if target.media_type.is_empty() {
        oci::sniff_media_type(&body).unwrap_or_default()
    } else {
        target.media_type.clone()
    };
    if oci::is_index(&media_type) {
        let chosen = oci::select_platform(&body, oci::Platform::host())
            .map_err(|e| unreadable(e.to_string()))?;
        body = store
            .read_blob(&chosen.digest, oci::MAX_MANIFEST_BYTES)
            .await?;
    }
    oci::parse_manifest(&body).map_err(|e| unreadable(e.to_string()))
}

/// The image a single record names, with only that name (no listing).
pub async fn describe_record<S: ImageStore>(
    store: &S,
    record: &ImageRecord,
) -> Result<ImageInfo, InventoryError> {
    let names = vec![record.name.clone()];
    describe(
        store,
        record.target.clone(),
        names,
        is_pinned(&record.labels),
    )
    .await
}

async fn describe<S: ImageStore>(
    store: &S,
    target: Descriptor,
    mut names: Vec<String>,
    pinned: bool,
) -> Result<ImageInfo, InventoryError> {
    let manifest = manifest_of(store, &target).await?;
    names.sort();
    let repo_tags = names
        .iter()
        .filter(|n| !is_image_id(n) && !n.contains('@'))
        .cloned()
        .collect();
    let repo_digests = names.iter().filter(|n| n.contains('@')).cloned().collect();
    Ok(ImageInfo {
        id: manifest.config.digest.clone(),
        repo_tags,
        repo_digests,
        size: manifest.config.size + manifest.layers.iter().map(|l| l.size).sum::<u64>(),
        target,
        names,
        pinned,
    })
}

/// Every image on the node; records whose content is unreadable (e.g. partially
/// pulled by another client) are skipped.
pub async fn list<S: ImageStore>(store: &S) -> Result<Vec<ImageInfo>, InventoryError> {
    let mut groups: BTreeMap<String, (Descriptor, Vec<String>, bool)> = BTreeMap::new();
    for record in store.list_images().await? {
        let group = groups
            .entry(record.target.digest.clone())
            .or_insert_with(|| (record.target.clone(), Vec::new(), false));
        group.2 |= is_pinned(&record.labels);
        group.1.push(record.name);
    }
    let mut images = Vec::with_capacity(groups.len());
    for (target, names, pinned) in groups.into_values() {
        match describe(store, target, names, pinned).await {
            Ok(image) => images.push(image),
            Err(error) => tracing::debug!(%error, "skipping an unreadable image"),
        }
    }
    Ok(images)
}

/// The image named by a reference or an image ID, if present.
pub async fn find<S: ImageStore>(
    store: &S,
    name_or_id: &str,
) -> Result<Option<ImageInfo>, InventoryError> {
    let wanted = if is_image_id(name_or_id) {
        name_or_id.to_owned()
    } else {
        record_name(&Reference::parse_normalized(name_or_id)?)
    };
    let Some(record) = store.get_image(&wanted).await? else {
        // An image ID without its own record (pulled by another client).
        if is_image_id(&wanted) {
            return Ok(list(store).await?.into_iter().find(|i| i.id == wanted));
        }
        return Ok(None);
    };
    let same_image: Vec<ImageRecord> = store
        .list_images()
        .await?
        .into_iter()
        .filter(|r| r.target.digest == record.target.digest)
        .collect();
    let pinned = same_image.iter().any(|r| is_pinned(&r.labels));
    let names = same_image.into_iter().map(|r| r.name).collect();
    describe(store, record.target, names, pinned)
        .await
        .map(Some)
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::images::store::{CRI_IMAGE_LABEL, CRI_PINNED_LABEL};
    use crate::images::testing::{FakeStore, test_image};

    type Labels<'a> = &'a [(&'a str, &'a str)];

    /// A store holding one image's manifest under `records`, each with its labels.
    fn store_with(records: &[(&str, Labels<'_>)]) -> FakeStore {
        let (image, _) = test_image("pause");
        let store = FakeStore::default();
        let target = Descriptor::new(
            oci::OCI_MANIFEST.to_owned(),
            image.manifest_digest.clone(),
            image.manifest.len() as u64,
        );
        let mut state = store.state();
        state.blobs.insert(
            image.manifest_digest.clone(),
            (image.manifest.clone(), HashMap::new()),
        );
        for (name, labels) in records {
            let labels = labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect();
            let record = ImageRecord {
                name: (*name).to_owned(),
                target: target.clone(),
                labels,
            };
            state.images.insert((*name).to_owned(), record);
        }
        drop(state);
        store
    }

    /// Records of one image (name, labels) and whether the image counts as pinned.
    struct Case<'a> {
        name: &'a str,
        records: &'a [(&'a str, Labels<'a>)],
        pinned: bool,
    }

    #[tokio::test]
    async fn an_image_is_pinned_when_any_of_its_records_is() {
        let name = "127.0.0.1:5000/stevedore/pause:3.10";
        let id_record = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
        let managed = [CRI_IMAGE_LABEL];
        let pinned = [CRI_IMAGE_LABEL, CRI_PINNED_LABEL];
        let not_the_value = [CRI_IMAGE_LABEL, (CRI_PINNED_LABEL.0, "no")];
        let cases = [
            Case {
                name: "managed only (containerd 1.6)",
                records: &[(name, &managed), (id_record, &managed)],
                pinned: false,
            },
            Case {
                name: "the name pinned (containerd 2.x)",
                records: &[(name, &pinned), (id_record, &managed)],
                pinned: true,
            },
            Case {
                name: "only the ID record pinned",
                records: &[(name, &managed), (id_record, &pinned)],
                pinned: true,
            },
            Case {
                name: "another value of the label",
                records: &[(name, &not_the_value)],
                pinned: false,
            },
        ];
        for case in cases {
            let store = store_with(case.records);
            let found = find(&store, name).await.unwrap().expect("the image");
            assert_eq!(found.pinned, case.pinned, "find: {}", case.name);
            let listed = list(&store).await.unwrap();
            assert_eq!(listed.len(), 1, "{}", case.name);
            assert_eq!(listed[0].pinned, case.pinned, "list: {}", case.name);
        }
    }
}
