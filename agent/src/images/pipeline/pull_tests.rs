#![allow(clippy::unwrap_used)]

use tokio::sync::watch;

use super::*;
use bytes::Bytes;

use crate::images::{
    progress::Progress,
    testing::{FakeRegistry, FakeStore, StoreEvent, TestImage, test_image},
};

const REF: &str = "registry.test/team/app:v1";

fn setup() -> (
    FakeRegistry,
    FakeStore,
    crate::images::testing::TestImage,
    Reference,
) {
    let registry = FakeRegistry::default();
    let (image, blobs) = test_image("a");
    registry.serve("team/app", "v1", &image, blobs);
    (
        registry,
        FakeStore::default(),
        image,
        Reference::parse_normalized(REF).unwrap(),
    )
}

#[tokio::test]
async fn a_pull_stores_labels_unpacks_and_names_the_image_as_cri_does() {
    let (registry, store, image, reference) = setup();
    let (tx, rx) = watch::channel(Progress::default());
    let pulled = pull(&registry, &store, &reference, &Auth::Anonymous, &tx)
        .await
        .unwrap();

    assert_eq!(pulled.image_id, image.config_digest);
    let repo_digest = format!("registry.test/team/app@{}", image.manifest_digest);
    assert_eq!(pulled.repo_digest, repo_digest);
    let state = store.state();
    let mut names: Vec<_> = state.images.keys().cloned().collect();
    names.sort();
    let mut expected = vec![REF.to_owned(), repo_digest, image.config_digest.clone()];
    expected.sort();
    assert_eq!(names, expected);
    for record in state.images.values() {
        assert_eq!(record.target.digest, image.manifest_digest);
        assert_eq!(
            record.labels.get("io.cri-containerd.image").unwrap(),
            "managed"
        );
    }
    let manifest_labels = &state.blobs[&image.manifest_digest].1;
    assert_eq!(
        manifest_labels["containerd.io/gc.ref.content.config"],
        image.config_digest
    );
    assert!(manifest_labels.contains_key("containerd.io/gc.ref.content.l.0"));
    assert!(manifest_labels.contains_key("containerd.io/gc.ref.content.l.1"));
    assert_eq!(
        state.blobs[&image.config_digest].1["containerd.io/gc.ref.snapshot.overlayfs"],
        image.chain_top
    );
    assert!(state.snapshots.contains(&image.chain_top));
    assert!(state.leases.is_empty(), "lease not released");

    let progress = rx.borrow().clone();
    assert_eq!(progress.phase, Phase::Done);
    assert_eq!(progress.blobs.len(), 3);
    assert_eq!(progress.bytes_done(), progress.bytes_total());
    let layer_bytes: u64 = image.layers.iter().map(|l| l.len() as u64).sum();
    assert!(progress.bytes_total() > layer_bytes);
}

#[tokio::test(start_paused = true)]
async fn a_layer_unpacks_while_the_layers_above_it_still_download() {
    let (registry, store, image, reference) = setup();
    let top = oci::sha256_digest(image.layers.last().unwrap());
    let gate = std::sync::Arc::new(tokio::sync::Notify::new());
    registry.state().held.insert(top.clone(), gate.clone());
    // The layers are their own uncompressed form, so the bottom one's chain ID is its
    // digest.
    let bottom = oci::sha256_digest(&image.layers[0]);
    let (tx, rx) = watch::channel(Progress::default());
    let pulling = {
        let (registry, store, reference) = (registry.clone(), store.clone(), reference.clone());
        tokio::spawn(
            async move { pull(&registry, &store, &reference, &Auth::Anonymous, &tx).await },
        )
    };
    // A pull that unpacks only once every blob is in never gets there: the paused clock
    // runs out the wait at once.
    let bottom_unpacked = async {
        while !store.state().snapshots.contains(&bottom) {
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
    };
    let early = tokio::time::timeout(std::time::Duration::from_secs(10), bottom_unpacked).await;
    let phase_meanwhile = rx.borrow().phase;
    gate.notify_one();
    pulling.await.unwrap().unwrap();

    assert!(
        early.is_ok(),
        "the bottom layer waited for the top one's download"
    );
    assert_eq!(
        phase_meanwhile,
        Phase::Downloading,
        "bytes were still to come"
    );
    let events = store.state().events.clone();
    let at = |event: StoreEvent| events.iter().position(|e| *e == event);
    let unpacked = at(StoreEvent::Unpacked(bottom.clone())).unwrap();
    let committed = at(StoreEvent::Committed(top.clone())).unwrap();
    assert!(unpacked < committed, "{events:?}");
    assert!(store.state().snapshots.contains(&image.chain_top));
}

#[tokio::test]
async fn blobs_already_stored_are_not_downloaded_again() {
    let (registry, store, _, reference) = setup();
    let (tx, _rx) = watch::channel(Progress::default());
    pull(&registry, &store, &reference, &Auth::Anonymous, &tx)
        .await
        .unwrap();
    let fetched = registry.state().blob_requests;
    assert_eq!(fetched, 3);
    // Without its records (removed by name), the image's content is still there.
    store.state().images.clear();
    pull(&registry, &store, &reference, &Auth::Anonymous, &tx)
        .await
        .unwrap();
    assert_eq!(registry.state().blob_requests, fetched);
}

/// Kubelet's Always: resolved every time, pulled only when the node lacks the digest.
#[tokio::test]
async fn a_pull_of_a_digest_the_node_has_writes_nothing_and_a_new_digest_is_pulled() {
    let (registry, store, image, reference) = setup();
    let (tx, rx) = watch::channel(Progress::default());
    let first = pull(&registry, &store, &reference, &Auth::Anonymous, &tx)
        .await
        .unwrap();
    let events = store.state().events.len();
    let leases = store.state().leases_created;
    let manifests = registry.state().manifest_requests;

    let again = pull(&registry, &store, &reference, &Auth::Anonymous, &tx)
        .await
        .unwrap();
    assert_eq!(again, first);
    assert_eq!(
        registry.state().manifest_requests,
        manifests + 1,
        "resolved again"
    );
    assert_eq!(store.state().events.len(), events, "nothing written");
    assert_eq!(store.state().leases_created, leases, "no lease");
    assert_eq!(rx.borrow().phase, Phase::Done);

    let (changed, blobs) = test_image("b");
    registry.serve("team/app", "v1", &changed, blobs);
    let pulled = pull(&registry, &store, &reference, &Auth::Anonymous, &tx)
        .await
        .unwrap();
    assert_eq!(pulled.image_id, changed.config_digest);
    assert_ne!(pulled.image_id, image.config_digest);
    assert_eq!(
        store.state().images[REF].target.digest,
        changed.manifest_digest
    );
}

#[tokio::test]
async fn a_blob_committed_by_a_concurrent_pull_counts_as_downloaded() {
    let (registry, store, image, reference) = setup();
    let (tx, _rx) = watch::channel(Progress::default());
    pull(&registry, &store, &reference, &Auth::Anonymous, &tx)
        .await
        .unwrap();
    // Every blob now exists but is reported missing once, as when another image's pull
    // commits a shared layer between this pull's check and its write: containerd
    // refuses opening the write (the 10-pull benchmark found it).
    store.state().images.clear();
    let digests: Vec<String> = store.state().blobs.keys().cloned().collect();
    store.state().committed_concurrently.extend(digests);
    let pulled = pull(&registry, &store, &reference, &Auth::Anonymous, &tx)
        .await
        .expect("AlreadyExists from a concurrent writer is not a failure");
    assert_eq!(pulled.image_id, image.config_digest);
    assert!(store.state().leases.is_empty(), "lease not released");
}

#[tokio::test]
async fn an_index_resolves_to_the_linux_amd64_manifest() {
    let (registry, store, image, _) = setup();
    let index = bytes::Bytes::from(
        serde_json::json!({"schemaVersion": 2, "mediaType": oci::OCI_INDEX, "manifests": [
            {"mediaType": oci::OCI_MANIFEST, "digest": format!("sha256:{}", "0".repeat(64)),
             "size": 1, "platform": {"os": "linux", "architecture": "arm64"}},
            {"mediaType": oci::OCI_MANIFEST, "digest": image.manifest_digest,
             "size": image.manifest.len(), "platform": {"os": "linux", "architecture": "amd64"}}]})
        .to_string(),
    );
    let index_digest = oci::sha256_digest(&index);
    registry.state().manifests.insert(
        "team/app:multi".to_owned(),
        (oci::OCI_INDEX.to_owned(), index),
    );
    let reference = Reference::parse_normalized("registry.test/team/app:multi").unwrap();
    let (tx, _rx) = watch::channel(Progress::default());
    let pulled = pull(&registry, &store, &reference, &Auth::Anonymous, &tx)
        .await
        .unwrap();
    assert_eq!(pulled.target.digest, index_digest);
    assert_eq!(pulled.image_id, image.config_digest);
    let state = store.state();
    assert_eq!(
        state.blobs[&index_digest].1["containerd.io/gc.ref.content.m.0"],
        image.manifest_digest
    );
}

#[tokio::test]
async fn a_failed_pull_leaves_no_record_and_no_lease() {
    let (registry, store, _, reference) = setup();
    store.state().corrupt_layers = true;
    let (tx, _rx) = watch::channel(Progress::default());
    let err = pull(&registry, &store, &reference, &Auth::Anonymous, &tx)
        .await
        .unwrap_err();
    assert!(
        matches!(err, PullError::Store(ref e) if e.code == tonic::Code::DataLoss),
        "{err}"
    );
    let state = store.state();
    assert!(state.images.is_empty());
    assert!(state.leases.is_empty());
    assert_eq!(state.leases_created, 1);
}

#[tokio::test]
async fn every_blob_names_its_registry_and_repository_as_containerd_labels_it() {
    let (registry, store, image, reference) = setup();
    // The config was pulled before from another repository of the same registry.
    let other = Reference::parse_normalized("registry.test/other/app:v1").unwrap();
    let (tx, _rx) = watch::channel(Progress::default());
    pull(&registry, &store, &reference, &Auth::Anonymous, &tx)
        .await
        .unwrap();
    crate::images::store::source_label::label(&store, &other, [image.config_digest.as_str()])
        .await
        .unwrap();
    pull(&registry, &store, &reference, &Auth::Anonymous, &tx)
        .await
        .unwrap();

    let state = store.state();
    let key = "containerd.io/distribution.source.registry.test";
    assert_eq!(state.blobs.len(), 4, "config, two layers, manifest");
    for (digest, (_, labels)) in &state.blobs {
        let expected = if *digest == image.config_digest {
            "other/app,team/app"
        } else {
            "team/app"
        };
        assert_eq!(
            labels.get(key).map(String::as_str),
            Some(expected),
            "{digest}"
        );
    }
}

#[tokio::test]
async fn a_failed_image_record_leaves_none_of_the_pulls_records() {
    let (registry, store, image, reference) = setup();
    let repo_digest = format!("registry.test/team/app@{}", image.manifest_digest);
    store.state().refused_images.insert(repo_digest);
    let (tx, _rx) = watch::channel(Progress::default());
    let err = pull(&registry, &store, &reference, &Auth::Anonymous, &tx)
        .await
        .unwrap_err();
    assert!(matches!(err, PullError::Store(_)), "{err}");
    let state = store.state();
    assert!(state.images.is_empty(), "kept: {:?}", state.images.keys());
    assert!(state.leases.is_empty());
}

#[tokio::test]
async fn a_cancelled_pull_releases_its_lease() {
    let (registry, store, _, reference) = setup();
    registry.state().gate = Some(std::sync::Arc::new(tokio::sync::Notify::new()));
    let (tx, mut rx) = watch::channel(Progress::default());
    let pulling = {
        let (registry, store, reference) = (registry.clone(), store.clone(), reference.clone());
        tokio::spawn(
            async move { pull(&registry, &store, &reference, &Auth::Anonymous, &tx).await },
        )
    };
    rx.wait_for(|p| p.phase == Phase::Downloading)
        .await
        .unwrap();
    assert_eq!(store.state().leases.len(), 1);
    pulling.abort();
    let _ = pulling.await;
    // The guard's deletion runs as a task of its own.
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    let state = store.state();
    assert!(state.leases.is_empty(), "lease leaked");
    assert!(state.images.is_empty());
}

#[tokio::test]
async fn a_missing_tag_is_a_registry_not_found() {
    let (registry, store, _, _) = setup();
    let reference = Reference::parse_normalized("registry.test/team/app:nope").unwrap();
    let (tx, _rx) = watch::channel(Progress::default());
    let err = pull(&registry, &store, &reference, &Auth::Anonymous, &tx)
        .await
        .unwrap_err();
    assert!(matches!(
        err,
        PullError::Registry(RegistryError::NotFound { .. })
    ));
    assert_eq!(store.state().leases_created, 0, "no lease before resolving");
}

/// A pull of `team/a:v1` whose first layer was half downloaded by an earlier attempt
/// (the half in the store's ingest is `prefix`).
async fn pull_with_partial_layer(
    prefix: impl FnOnce(&Bytes) -> Vec<u8>,
    ignores_range: bool,
) -> (
    FakeRegistry,
    FakeStore,
    TestImage,
    Result<PulledImage, PullError>,
) {
    let (image, blobs) = test_image("resume");
    let registry = FakeRegistry::default();
    registry.serve("team/a", "v1", &image, blobs);
    registry.state().ignores_range = ignores_range;
    let store = FakeStore::default();
    let layer = &image.layers[0];
    store
        .state()
        .ingests
        .insert(oci::sha256_digest(layer), prefix(layer));
    let (tx, _rx) = watch::channel(Progress::default());
    let reference = Reference::parse_normalized("registry.test/team/a:v1").unwrap();
    let result = pull(&registry, &store, &reference, &Auth::Anonymous, &tx).await;
    (registry, store, image, result)
}

#[tokio::test]
async fn an_interrupted_layer_resumes_from_the_bytes_in_the_store() {
    let half = |layer: &Bytes| layer[..layer.len() / 2].to_vec();
    let (registry, store, image, result) = pull_with_partial_layer(half, false).await;
    result.unwrap();
    let layer = &image.layers[0];
    let offsets = registry.state().blob_offsets.clone();
    assert!(
        offsets.contains(&(layer.len() as u64 / 2)),
        "no ranged request: {offsets:?}"
    );
    assert_eq!(offsets.iter().filter(|o| **o > 0).count(), 1, "{offsets:?}");
    let state = store.state();
    assert_eq!(state.blobs[&oci::sha256_digest(layer)].0, *layer);
    assert!(state.ingests.is_empty());
}

#[tokio::test]
async fn a_layer_written_whole_but_not_committed_counts_its_bytes_as_done() {
    // A pull cut short between the last write and the commit leaves a full ingest: the
    // next pull commits it without fetching, and its progress must still reach the total
    // (agent_images found the config stuck at 0 bytes in a Done message).
    let (image, blobs) = test_image("resume");
    let registry = FakeRegistry::default();
    registry.serve("team/a", "v1", &image, blobs);
    let store = FakeStore::default();
    let layer = &image.layers[0];
    store
        .state()
        .ingests
        .insert(oci::sha256_digest(layer), layer.to_vec());
    let (tx, rx) = watch::channel(Progress::default());
    let reference = Reference::parse_normalized("registry.test/team/a:v1").unwrap();
    pull(&registry, &store, &reference, &Auth::Anonymous, &tx)
        .await
        .unwrap();
    let progress = rx.borrow();
    for blob in &progress.blobs {
        assert_eq!(blob.done, blob.total, "{}", blob.digest);
    }
    assert_eq!(store.state().blobs[&oci::sha256_digest(layer)].0, *layer);
}

#[tokio::test]
async fn a_registry_ignoring_the_range_sends_the_layer_whole_and_it_still_commits() {
    let half = |layer: &Bytes| layer[..layer.len() / 2].to_vec();
    let (_, store, image, result) = pull_with_partial_layer(half, true).await;
    result.unwrap();
    let layer = &image.layers[0];
    assert_eq!(store.state().blobs[&oci::sha256_digest(layer)].0, *layer);
}

#[tokio::test]
async fn a_corrupt_partial_download_is_discarded_and_downloaded_whole() {
    let garbage = |layer: &Bytes| vec![b'x'; layer.len() / 2];
    let (registry, store, image, result) = pull_with_partial_layer(garbage, false).await;
    result.unwrap();
    let layer = &image.layers[0];
    assert_eq!(store.state().blobs[&oci::sha256_digest(layer)].0, *layer);
    let offsets = registry.state().blob_offsets.clone();
    assert_eq!(offsets.iter().filter(|o| **o > 0).count(), 1, "{offsets:?}");
    assert_eq!(
        offsets.iter().filter(|o| **o == 0).count(),
        3,
        "{offsets:?}"
    );
}
