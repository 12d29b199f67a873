#![allow(clippy::unwrap_used)]

use super::*;
use crate::images::{
    service::{image_list::ListPhase, manager::RetryPolicy},
    testing::{FakeRegistry, FakeStore, test_image},
};

const UID: &str = "uid-1";

fn controller() -> (ImageListController, FakeRegistry) {
    let (controller, registry, _) = controller_and_store();
    (controller, registry)
}

fn controller_and_store() -> (ImageListController, FakeRegistry, FakeStore) {
    let store = FakeStore::default();
    let registry = FakeRegistry::default();
    let (image, blobs) = test_image("a");
    registry.serve("team/a", "v1", &image, blobs);
    let manager = PullManager::new(
        registry.clone(),
        store.clone(),
        2,
        Duration::from_secs(60),
        RetryPolicy::default(),
        CancellationToken::new(),
    );
    (
        ImageListController::spawn(manager, CancellationToken::new()),
        registry,
        store,
    )
}

/// The next update of `image` in `phase`; panics if none comes within a (paused) day,
/// so a driver that stops planning pulls fails the test instead of hanging it.
async fn wait_for_phase(
    updates: &mut broadcast::Receiver<ImageStatus>,
    image: &str,
    phase: ListPhase,
) -> ImageStatus {
    let wait = async {
        loop {
            let status = updates.recv().await.unwrap();
            if status.image == image && status.phase == phase {
                return status;
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(24 * 3600), wait)
        .await
        .unwrap_or_else(|_| panic!("{image} never reached {phase:?}"))
}

const A: &str = "registry.test/team/a:v1";
const MISSING: &str = "registry.test/team/a:missing";

#[tokio::test(start_paused = true)]
async fn always_pull_images_are_pulled_again_on_their_interval() {
    let (controller, registry) = controller();
    let (_, mut updates) = controller.watch();
    let spec = DesiredSpec {
        always_pull: true,
        pull_interval: Some(Duration::from_secs(3600)),
        ..DesiredSpec::default()
    };
    controller
        .apply(Epoch::new(UID, 1), BTreeMap::from([(A.to_owned(), spec)]))
        .unwrap();
    let first = wait_for_phase(&mut updates, A, ListPhase::Succeeded).await;
    assert!(first.image_id.starts_with("sha256:"));
    assert_eq!(registry.state().manifest_requests, 1);

    let before = Instant::now();
    wait_for_phase(&mut updates, A, ListPhase::Succeeded).await;
    assert!(before.elapsed() >= Duration::from_secs(3600));
    assert_eq!(registry.state().manifest_requests, 2, "not re-resolved");
}

#[tokio::test(start_paused = true)]
async fn failed_pulls_back_off_until_the_limit() {
    let (controller, registry) = controller();
    let (_, mut updates) = controller.watch();
    let spec = DesiredSpec {
        backoff_limit: 2,
        ..DesiredSpec::default()
    };
    let started = Instant::now();
    controller
        .apply(
            Epoch::new(UID, 1),
            BTreeMap::from([(MISSING.to_owned(), spec)]),
        )
        .unwrap();
    let failed = wait_for_phase(&mut updates, MISSING, ListPhase::Failed).await;
    assert_eq!(failed.attempts, 3);
    assert!(failed.message.contains("not found"), "{}", failed.message);
    // Two retries: backoff of 2 s then 4 s between the three attempts.
    assert!(started.elapsed() >= Duration::from_secs(6));
    assert_eq!(registry.state().manifest_requests, 3);
}

#[tokio::test(start_paused = true)]
async fn a_failed_image_keeps_retrying_and_succeeds_once_the_registry_has_it() {
    let (controller, registry) = controller();
    let (_, mut updates) = controller.watch();
    let spec = DesiredSpec {
        backoff_limit: 0,
        ..DesiredSpec::default()
    };
    controller
        .apply(
            Epoch::new(UID, 1),
            BTreeMap::from([(MISSING.to_owned(), spec)]),
        )
        .unwrap();
    let failed = wait_for_phase(&mut updates, MISSING, ListPhase::Failed).await;
    assert_eq!(failed.attempts, 1);
    let retried = wait_for_phase(&mut updates, MISSING, ListPhase::Failed).await;
    assert_eq!(retried.attempts, 2, "still Failed while it retries");
    assert!(retried.message.contains("not found"), "{}", retried.message);

    let (image, blobs) = test_image("a");
    registry.serve("team/a", "missing", &image, blobs);
    let recovered = wait_for_phase(&mut updates, MISSING, ListPhase::Succeeded).await;
    assert_eq!(recovered.image_id, image.config_digest);
    assert!(recovered.message.is_empty(), "{}", recovered.message);
}

#[tokio::test(start_paused = true)]
async fn watchers_get_the_current_status_then_changes() {
    let (controller, _) = controller();
    controller
        .apply(
            Epoch::new(UID, 7),
            BTreeMap::from([(A.to_owned(), DesiredSpec::default())]),
        )
        .unwrap();
    let (current, mut updates) = controller.watch();
    assert_eq!(current.len(), 1);
    assert_eq!(current[0].generation, 7);
    let done = wait_for_phase(&mut updates, A, ListPhase::Succeeded).await;
    assert_eq!(done.generation, 7);
    assert!(done.last_pull.is_some());
    assert_eq!(
        controller.apply(Epoch::new(UID, 6), BTreeMap::new()),
        Err(StaleGeneration {
            list_uid: UID.to_owned(),
            held: 7,
            offered: 6
        })
    );
}

#[tokio::test(start_paused = true)]
async fn an_image_deleted_out_of_band_is_pulled_again_and_a_present_one_is_left_alone() {
    let (controller, registry, store) = controller_and_store();
    let (_, mut updates) = controller.watch();
    controller
        .apply(
            Epoch::new(UID, 1),
            BTreeMap::from([(A.to_owned(), DesiredSpec::default())]),
        )
        .unwrap();
    wait_for_phase(&mut updates, A, ListPhase::Succeeded).await;
    // Present: checks come and go without a status update or a registry request.
    tokio::time::sleep(PRESENCE_EVERY * 5).await;
    assert!(
        matches!(
            updates.try_recv(),
            Err(broadcast::error::TryRecvError::Empty)
        ),
        "a status update while nothing changed"
    );
    assert_eq!(registry.state().manifest_requests, 1);

    // Deleted out of band (every record, as `crictl rmi` does).
    store.state().images.clear();
    let pulling = wait_for_phase(&mut updates, A, ListPhase::Pulling).await;
    assert_eq!(pulling.attempts, 1);
    wait_for_phase(&mut updates, A, ListPhase::Succeeded).await;
    assert_eq!(registry.state().manifest_requests, 2);
    assert!(!store.state().images.is_empty());
}
