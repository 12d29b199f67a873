#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use tokio::sync::Notify;

use super::*;
use crate::images::{
    registry::RegistryError,
    service::failure::FailureKind,
    testing::{FakeRegistry, FakeStore, test_image},
};

fn manager(
    max: usize,
) -> (
    PullManager<FakeRegistry, FakeStore>,
    FakeRegistry,
    FakeStore,
) {
    let registry = FakeRegistry::default();
    for (path, seed) in [("team/a", "a"), ("team/b", "b")] {
        let (image, blobs) = test_image(seed);
        registry.serve(path, "v1", &image, blobs);
    }
    let store = FakeStore::default();
    let manager = PullManager::new(
        registry.clone(),
        store.clone(),
        max,
        Duration::from_secs(60),
        RetryPolicy::default(),
        CancellationToken::new(),
    );
    (manager, registry, store)
}

fn request(image: &str, policy: Policy) -> PullRequest {
    PullRequest {
        image: Reference::parse_normalized(&format!("registry.test/{image}")).unwrap(),
        policy,
        auth: Auth::Anonymous,
        timeout: None,
    }
}

async fn outcome(mut rx: watch::Receiver<PullState>) -> PullState {
    rx.wait_for(|s| s.outcome.is_some()).await.unwrap().clone()
}

#[tokio::test]
async fn concurrent_callers_share_one_pull() {
    let (manager, registry, _) = manager(3);
    let gate = Arc::new(Notify::new());
    registry.state().gate = Some(Arc::clone(&gate));
    let mut receivers = Vec::new();
    for _ in 0..3 {
        receivers.push(manager.pull(request("team/a:v1", Policy::Always)).await);
    }
    assert_eq!(manager.in_flight(), 1);
    let mut first = receivers[0].clone();
    first
        .wait_for(|s| s.progress.phase == Phase::Downloading)
        .await
        .unwrap();
    gate.notify_waiters();
    gate.notify_one();
    for rx in receivers {
        let state = outcome(rx).await;
        assert!(state.outcome.unwrap().is_ok());
    }
    assert_eq!(
        registry.state().manifest_requests,
        1,
        "pulled more than once"
    );
    assert_eq!(manager.in_flight(), 0);
}

#[tokio::test]
async fn callers_with_other_credentials_do_not_join_a_pull() {
    let (manager, registry, _) = manager(3);
    let basic = |username: &str| Auth::Basic {
        username: username.into(),
        password: "pw".into(),
    };
    let gate = Arc::new(Notify::new());
    {
        let mut state = registry.state();
        state.gate = Some(Arc::clone(&gate));
        state.allowed = Some(basic("alice"));
    }
    let with = |auth: Auth| PullRequest {
        auth,
        ..request("team/a:v1", Policy::Always)
    };
    let mut alice = manager.pull(with(basic("alice"))).await;
    alice
        .wait_for(|s| s.progress.phase == Phase::Downloading)
        .await
        .unwrap();
    let mallory = manager.pull(with(basic("mallory"))).await;
    let alice_again = manager.pull(with(basic("alice"))).await;
    assert_eq!(manager.in_flight(), 2, "one pull per credential");
    let refused = outcome(mallory).await.outcome.unwrap().unwrap_err();
    assert_eq!(refused.kind, FailureKind::Unauthenticated, "{refused:?}");
    gate.notify_waiters();
    gate.notify_one();
    assert!(outcome(alice).await.outcome.unwrap().is_ok());
    assert!(outcome(alice_again).await.outcome.unwrap().is_ok());
}

#[tokio::test(start_paused = true)]
async fn retryable_failures_are_retried_with_backoff() {
    let (manager, registry, _) = manager(1);
    let unreachable = || RegistryError::Unreachable {
        url: "u".into(),
        detail: "refused".into(),
    };
    registry
        .state()
        .fail_next
        .extend([unreachable(), unreachable()]);
    let started = tokio::time::Instant::now();
    let state = outcome(manager.pull(request("team/a:v1", Policy::Always)).await).await;
    assert!(state.outcome.unwrap().is_ok());
    assert_eq!(state.attempts, 3);
    // 500 ms then 1 s of backoff (paused time advances exactly).
    assert_eq!(started.elapsed(), Duration::from_millis(1500));
}

#[tokio::test(start_paused = true)]
async fn retries_stop_at_the_attempt_limit_with_the_last_code() {
    let (manager, registry, store) = manager(1);
    for _ in 0..10 {
        registry.state().fail_next.push_back(RegistryError::Server {
            status: 503,
            url: "u".into(),
        });
    }
    let state = outcome(manager.pull(request("team/a:v1", Policy::Always)).await).await;
    let failure = state.outcome.unwrap().unwrap_err();
    assert_eq!(failure.kind, FailureKind::Unavailable);
    assert_eq!(failure.attempts, RetryPolicy::default().attempts);
    assert!(store.state().images.is_empty());
}

#[tokio::test]
async fn permanent_failures_are_not_retried() {
    let (manager, registry, _) = manager(1);
    let cases = [
        (
            RegistryError::NotFound {
                what: "manifest",
                url: "u".into(),
            },
            FailureKind::NotFound,
        ),
        (
            RegistryError::Unauthorized { url: "u".into() },
            FailureKind::Unauthenticated,
        ),
        (
            RegistryError::Forbidden { url: "u".into() },
            FailureKind::PermissionDenied,
        ),
    ];
    for (error, kind) in cases {
        let before = registry.state().manifest_requests;
        registry.state().fail_next.push_back(error);
        let state = outcome(manager.pull(request("team/a:v1", Policy::Always)).await).await;
        let failure = state.outcome.unwrap().unwrap_err();
        assert_eq!((failure.kind, failure.attempts), (kind, 1));
        assert_eq!(registry.state().manifest_requests, before + 1);
    }
}

#[tokio::test(start_paused = true)]
async fn a_pull_past_its_deadline_fails_and_releases_its_lease() {
    let (manager, registry, store) = manager(1);
    registry.state().gate = Some(Arc::new(Notify::new()));
    let mut req = request("team/a:v1", Policy::Always);
    req.timeout = Some(Duration::from_secs(5));
    let state = outcome(manager.pull(req).await).await;
    let failure = state.outcome.unwrap().unwrap_err();
    assert_eq!(failure.kind, FailureKind::DeadlineExceeded);
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    let state = store.state();
    assert!(state.leases.is_empty() && state.images.is_empty());
}

/// kruise #1406: the timeout is "no progress for N seconds", not a fixed deadline, so an
/// image that takes longer than the timeout keeps pulling while its bytes flow.
#[tokio::test(start_paused = true)]
async fn a_slow_pull_whose_bytes_keep_flowing_outlives_its_timeout() {
    let (manager, registry, _) = manager(1);
    registry.state().chunk_delay = Some(Duration::from_secs(2));
    let mut req = request("team/a:v1", Policy::Always);
    req.timeout = Some(Duration::from_secs(5));
    let started = tokio::time::Instant::now();
    let state = outcome(manager.pull(req).await).await;
    assert!(state.outcome.unwrap().is_ok(), "the pull should succeed");
    assert!(
        started.elapsed() > Duration::from_secs(10),
        "the pull took {:?}: too fast to show the timeout is not a deadline",
        started.elapsed()
    );
}

#[tokio::test(start_paused = true)]
async fn a_pull_that_stops_moving_fails_after_its_timeout_without_progress() {
    let (manager, registry, _) = manager(1);
    registry.state().chunk_delay = Some(Duration::from_secs(6));
    let mut req = request("team/a:v1", Policy::Always);
    req.timeout = Some(Duration::from_secs(5));
    let state = outcome(manager.pull(req).await).await;
    let failure = state.outcome.unwrap().unwrap_err();
    assert_eq!(failure.kind, FailureKind::DeadlineExceeded);
    assert_eq!(failure.message, "pull made no progress for 5s");
}

#[tokio::test]
async fn the_cap_queues_pulls_beyond_it() {
    let (manager, registry, _) = manager(1);
    let gate = Arc::new(Notify::new());
    registry.state().gate = Some(Arc::clone(&gate));
    let mut a = manager.pull(request("team/a:v1", Policy::Always)).await;
    let b = manager.pull(request("team/b:v1", Policy::Always)).await;
    a.wait_for(|s| s.progress.phase == Phase::Downloading)
        .await
        .unwrap();
    tokio::task::yield_now().await;
    assert_eq!(b.borrow().progress.phase, Phase::Queued);
    registry.state().gate = None;
    gate.notify_waiters();
    assert!(outcome(a).await.outcome.unwrap().is_ok());
    assert!(outcome(b).await.outcome.unwrap().is_ok());
}

#[tokio::test]
async fn if_not_present_asks_no_registry_for_a_present_image() {
    let (manager, registry, _) = manager(1);
    let first = outcome(
        manager
            .pull(request("team/a:v1", Policy::IfNotPresent))
            .await,
    )
    .await;
    let pulled = first.outcome.unwrap().unwrap();
    let requests = registry.state().manifest_requests;
    let second = outcome(
        manager
            .pull(request("team/a:v1", Policy::IfNotPresent))
            .await,
    )
    .await;
    assert_eq!(second.outcome.unwrap().unwrap().image_id, pulled.image_id);
    assert_eq!(second.attempts, 0);
    assert_eq!(registry.state().manifest_requests, requests);
    let again = outcome(manager.pull(request("team/a:v1", Policy::Always)).await).await;
    assert!(again.outcome.unwrap().is_ok());
    assert_eq!(
        registry.state().manifest_requests,
        requests + 1,
        "Always re-resolves"
    );
}
