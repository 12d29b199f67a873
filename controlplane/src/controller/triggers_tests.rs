use std::time::Duration;

use tokio::sync::broadcast;
use tokio::time::timeout;

use super::*;
use crate::controller::queue::Backoff;

/// Long enough for the loop to act on what was sent; a test that waits this long for a
/// key that should not come fails, it does not hang.
const PATIENCE: Duration = Duration::from_secs(5);

fn queue() -> WorkQueue<String> {
    WorkQueue::new(Backoff::default())
}

/// The next `n` keys the loop queues, sorted.
async fn next_keys(queue: &WorkQueue<String>, n: usize) -> Vec<String> {
    let mut keys = Vec::new();
    for _ in 0..n {
        let key = timeout(PATIENCE, queue.next())
            .await
            .expect("a key in time");
        let key = key.expect("an open queue");
        queue.done(&key);
        keys.push(key);
    }
    keys.sort();
    keys
}

fn named(object: &Arc<String>) -> Vec<String> {
    vec![object.as_ref().clone()]
}

fn word(text: &str) -> Arc<String> {
    Arc::new(text.to_owned())
}

#[tokio::test]
async fn a_change_is_queued_as_the_keys_its_own_watch_maps_it_to() {
    let (words, _) = broadcast::channel::<Arc<String>>(8);
    let (numbers, _) = broadcast::channel::<Arc<u32>>(8);
    let queue = queue();
    let triggers = Triggers::new("Toy", queue.clone(), || unreachable!("no lag"))
        .watch(&words, named)
        .watch(&numbers, |n| vec![format!("n{n}"), format!("m{n}")]);
    let running = tokio::spawn(triggers.run(CancellationToken::new()));

    words.send(word("a")).expect("send");
    assert_eq!(next_keys(&queue, 1).await, ["a"]);
    numbers.send(Arc::new(7)).expect("send");
    assert_eq!(next_keys(&queue, 2).await, ["m7", "n7"]);
    assert!(queue.is_empty());
    running.abort();
}

#[tokio::test]
async fn a_lagged_watch_queues_every_key_then_goes_on() {
    let (words, _) = broadcast::channel::<Arc<String>>(1);
    let queue = queue();
    let triggers =
        Triggers::new("Toy", queue.clone(), || vec!["x".into(), "y".into()]).watch(&words, named);
    // Two changes in a broadcast that keeps one: the receiver has lost "a".
    words.send(word("a")).expect("send");
    words.send(word("b")).expect("send");
    let running = tokio::spawn(triggers.run(CancellationToken::new()));

    assert_eq!(next_keys(&queue, 3).await, ["b", "x", "y"]);
    running.abort();
}

#[tokio::test]
async fn a_mapping_keeps_its_state_from_one_change_to_the_next() {
    let (words, _) = broadcast::channel::<Arc<String>>(8);
    let queue = queue();
    let mut calls = 0;
    let triggers = Triggers::new("Toy", queue.clone(), Vec::new).watch(&words, move |_| {
        calls += 1;
        vec![format!("call {calls}")]
    });
    let running = tokio::spawn(triggers.run(CancellationToken::new()));
    for text in ["a", "b", "c"] {
        words.send(word(text)).expect("send");
    }
    assert_eq!(next_keys(&queue, 3).await, ["call 1", "call 2", "call 3"]);
    running.abort();
}

#[tokio::test]
async fn shutdown_ends_the_loop() {
    let (words, _) = broadcast::channel::<Arc<String>>(8);
    let shutdown = CancellationToken::new();
    let triggers = Triggers::new("Toy", queue(), Vec::new).watch(&words, named);
    let running = tokio::spawn(triggers.run(shutdown.clone()));
    shutdown.cancel();
    timeout(PATIENCE, running)
        .await
        .expect("the loop ends on shutdown")
        .expect("no panic");
}

#[tokio::test]
async fn a_watch_that_is_gone_ends_the_loop() {
    let (words, _) = broadcast::channel::<Arc<String>>(8);
    let (numbers, _) = broadcast::channel::<Arc<u32>>(8);
    let triggers = Triggers::new("Toy", queue(), Vec::new)
        .watch(&words, named)
        .watch(&numbers, |_| Vec::new());
    let running = tokio::spawn(triggers.run(CancellationToken::new()));
    drop(words);
    timeout(PATIENCE, running)
        .await
        .expect("the loop ends once a watch is gone")
        .expect("no panic");
}

#[tokio::test]
async fn the_own_watch_maps_an_object_to_its_key_and_a_lag_to_every_stored_key() {
    use k8s_openapi::api::core::v1::ConfigMap;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use kube::runtime::reflector::store::Writer;
    use kube::runtime::watcher;

    let map = |name: &str| ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some("ns".to_owned()),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    };
    let mut writer = Writer::<ConfigMap>::default();
    writer.apply_watcher_event(&watcher::Event::Apply(map("stored")));
    let (maps, _) = broadcast::channel::<Arc<ConfigMap>>(1);
    let queue = WorkQueue::new(Backoff::default());
    let triggers = Triggers::of(&writer.as_reader(), queue.clone()).watch_own(&maps);
    assert_eq!(triggers.kind, "ConfigMap");
    let running = tokio::spawn(triggers.run(CancellationToken::new()));

    maps.send(Arc::new(map("changed"))).expect("send");
    let key = timeout(PATIENCE, queue.next()).await.expect("in time");
    assert_eq!(key, Some(ObjectKey::new("ns", "changed")));
    queue.done(&ObjectKey::new("ns", "changed"));
    running.abort();

    // A lag, with the loop stopped: on its next start it queues every stored key.
    let triggers = Triggers::of(&writer.as_reader(), queue.clone()).watch_own(&maps);
    maps.send(Arc::new(map("lost"))).expect("send");
    maps.send(Arc::new(map("kept"))).expect("send");
    let running = tokio::spawn(triggers.run(CancellationToken::new()));
    let mut keys = Vec::new();
    for _ in 0..2 {
        let key = timeout(PATIENCE, queue.next()).await.expect("in time");
        keys.push(key.expect("a key").name);
    }
    keys.sort();
    assert_eq!(keys, ["kept", "stored"]);
    running.abort();
}

#[test]
fn a_receive_maps_to_keys_a_lag_or_a_close() {
    let cases = [
        (
            Ok(word("a")),
            Received::Keys {
                keys: vec!["a".to_owned()],
                after: Duration::from_secs(1),
            },
        ),
        (Err(RecvError::Lagged(3)), Received::Lagged),
        (Err(RecvError::Closed), Received::Closed),
    ];
    for (got, want) in cases {
        assert_eq!(received(got, Duration::from_secs(1), named), want);
    }
}

#[tokio::test(start_paused = true)]
async fn changes_within_a_coalescing_window_bring_one_sync_after_it() {
    let (lists, _) = broadcast::channel::<Arc<String>>(64);
    let (own, _) = broadcast::channel::<Arc<String>>(8);
    let queue = queue();
    let window = Duration::from_millis(250);
    let triggers = Triggers::new("Toy", queue.clone(), || unreachable!("no lag"))
        .watch_coalesced(&lists, window, |_| vec!["job".to_owned()])
        .watch(&own, named);
    let running = tokio::spawn(triggers.run(CancellationToken::new()));

    // Ten changes, 10 ms apart: nothing is due before the window ends.
    for _ in 0..10 {
        lists.send(word("node")).expect("send");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(queue.is_empty(), "nothing before the window ends");
    tokio::time::sleep(window).await;
    assert_eq!(next_keys(&queue, 1).await, ["job"]);
    tokio::time::sleep(window * 2).await;
    assert!(queue.is_empty(), "the ten changes brought one sync");

    // A change after that sync opens a new window; an uncoalesced watch is not delayed.
    lists.send(word("node")).expect("send");
    own.send(word("other")).expect("send");
    assert_eq!(next_keys(&queue, 1).await, ["other"]);
    tokio::time::sleep(window).await;
    assert_eq!(next_keys(&queue, 1).await, ["job"]);
    running.abort();
}
