//! The image records that end a pull, written all or none: CRI creates three per pull
//! (image ID, repo tag, repo digest), and a pull whose second or third record fails
//! must not leave the first behind, pointing kubelet at an image the pull reported
//! as failed. The records' earlier states are read (together, one round trip's wait)
//! before the first is written, so the undo of a failed set deletes the records it
//! created and restores the ones it repointed.

use super::image_store::{ImageRecord, ImageStore, StoreError};

/// How to take back one record write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Undo {
    /// The record did not exist before: delete it.
    Delete(String),
    /// The record existed: put it back as it was.
    Restore(ImageRecord),
}

impl Undo {
    /// The undo of writing `name` over what was there (`before`).
    pub fn of(name: &str, before: Option<ImageRecord>) -> Self {
        before.map_or_else(|| Self::Delete(name.to_owned()), Self::Restore)
    }
}

/// Writes `records` in order; if one fails, undoes those written before it (latest
/// first) and returns the failure.
pub async fn put_all<S: ImageStore>(
    store: &S,
    records: Vec<ImageRecord>,
) -> Result<(), StoreError> {
    let mut reads = Vec::with_capacity(records.len());
    for record in &records {
        reads.push(store.get_image(&record.name));
    }
    let befores = futures::future::try_join_all(reads).await?;
    let mut undo = Vec::with_capacity(records.len());
    for (record, before) in records.into_iter().zip(befores) {
        let step = Undo::of(&record.name, before);
        if let Err(error) = store.put_image(record).await {
            roll_back(store, undo).await;
            return Err(error);
        }
        undo.push(step);
    }
    Ok(())
}

/// Best effort: a record that cannot be taken back is logged, and the pull still
/// reports its original failure.
async fn roll_back<S: ImageStore>(store: &S, undo: Vec<Undo>) {
    for step in undo.into_iter().rev() {
        let (name, result) = match step {
            Undo::Delete(name) => {
                let result = store.delete_image(&name, false).await;
                (name, result)
            }
            Undo::Restore(record) => {
                let name = record.name.clone();
                (name, store.put_image(record).await)
            }
        };
        match result {
            Ok(()) => {
                tracing::debug!(image = %name, "rolled back an image record of a failed pull");
            }
            Err(error) => {
                tracing::warn!(image = %name, %error, "could not roll back an image record of a failed pull");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::collections::HashMap;

    use super::*;
    use crate::images::{oci::Descriptor, testing::FakeStore};

    fn record(name: &str, digest: &str) -> ImageRecord {
        ImageRecord {
            name: name.to_owned(),
            target: Descriptor::new("application/vnd.oci.image.manifest.v1+json", digest, 10),
            labels: HashMap::new(),
        }
    }

    #[test]
    fn the_undo_deletes_a_new_record_and_restores_an_old_one() {
        assert_eq!(Undo::of("a", None), Undo::Delete("a".to_owned()));
        let old = record("a", "sha256:old");
        assert_eq!(Undo::of("a", Some(old.clone())), Undo::Restore(old));
    }

    #[tokio::test]
    async fn all_records_are_written_when_none_fails() {
        let store = FakeStore::default();
        let records = vec![record("id", "sha256:new"), record("tag", "sha256:new")];
        put_all(&store, records).await.unwrap();
        assert_eq!(store.state().images.len(), 2);
    }

    #[tokio::test]
    async fn a_failed_record_takes_back_the_ones_written_before_it() {
        let store = FakeStore::default();
        let old_tag = record("repo:v1", "sha256:old");
        store
            .state()
            .images
            .insert(old_tag.name.clone(), old_tag.clone());
        store
            .state()
            .refused_images
            .insert("repo@sha256:new".into());

        let records = vec![
            record("sha256:config", "sha256:new"),
            record("repo:v1", "sha256:new"),
            record("repo@sha256:new", "sha256:new"),
            record("never-reached", "sha256:new"),
        ];
        let error = put_all(&store, records).await.unwrap_err();

        assert_eq!(error.code, tonic::Code::Unavailable);
        let state = store.state();
        assert!(
            !state.images.contains_key("sha256:config"),
            "a new record was kept"
        );
        assert_eq!(
            state.images.get("repo:v1"),
            Some(&old_tag),
            "the tag was not restored"
        );
        assert!(!state.images.contains_key("never-reached"));
        assert_eq!(state.images.len(), 1);
    }
}
