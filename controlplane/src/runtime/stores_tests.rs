//! A store against an in-process fake apiserver that can hold a list back: a new term
//! makes the store list again, and until that list lands the store does not count as
//! synced, although it still holds what the previous term listed. A list and a watch with
//! objects that do not decode: the others are served, each is reported and counted, and a
//! good copy turned poison stays. And a kind no store was started for: never synced, and
//! refused by `require`, by name.

use std::sync::Mutex;
use std::time::Duration;

use http::{Request, Response, StatusCode};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::client::Body;
use serde_json::json;
use tokio::sync::Semaphore;

use super::*;

/// What the fake apiserver lists, and how many lists it may answer.
struct Fake {
    /// Names of the ConfigMaps the next list returns.
    names: Mutex<Vec<&'static str>>,
    lists_started: watch::Sender<usize>,
    /// One permit per list it may answer; a list without one waits.
    answers: Semaphore,
}

async fn serve(
    fake: Arc<Fake>,
    request: Request<Body>,
) -> Result<Response<Body>, std::convert::Infallible> {
    if request.uri().query().unwrap_or("").contains("watch=true") {
        // Watches never deliver anything; only lists matter here.
        std::future::pending::<()>().await;
    }
    fake.lists_started.send_modify(|n| *n += 1);
    if let Ok(permit) = fake.answers.acquire().await {
        permit.forget();
    }
    let names = fake.names.lock().expect("fake lock").clone();
    let items: Vec<_> = names
        .iter()
        .map(|name| json!({"metadata": {"name": name, "namespace": "default", "resourceVersion": "5"}}))
        .collect();
    let body = json!({"kind": "ConfigMapList", "apiVersion": "v1",
                      "metadata": {"resourceVersion": "5"}, "items": items});
    let mut response = Response::new(Body::from(body.to_string().into_bytes()));
    *response.status_mut() = StatusCode::OK;
    Ok(response)
}

/// A client of the fake apiserver.
fn fake_client(fake: &Arc<Fake>) -> kube::Client {
    let fake = fake.clone();
    kube::Client::new(
        tower::service_fn(move |request| serve(fake.clone(), request)),
        "default",
    )
}

/// A ConfigMap store's follower on the fake apiserver with default options, its store,
/// and the sync state it reports to, whose terms come from `term`.
fn configmap_follower(
    fake: &Arc<Fake>,
    term: watch::Receiver<u64>,
) -> (Follower<ConfigMap>, Store<ConfigMap>, SyncState) {
    let listed = Arc::new(AtomicU64::new(0));
    let sync = SyncState::new(vec![("ConfigMap".into(), listed.clone())], term);
    let (reader, writer) = reflector::store();
    let follower = Follower::new(
        fake_client(fake),
        WatchOptions::default(),
        writer,
        broadcast::channel(16).0,
        sync.clone(),
        listed,
        reporter().0,
    );
    (follower, reader, sync)
}

/// A reporter and the receiving end of its reports.
fn reporter() -> (Reporter, mpsc::Receiver<Undecodable>) {
    let (reports, received) = mpsc::channel(Reporter::BACKLOG);
    let reporter = Reporter {
        metrics: Metrics::new(),
        reports,
        conditions: Default::default(),
    };
    (reporter, received)
}

fn names(store: &Store<ConfigMap>) -> Vec<String> {
    let mut names: Vec<String> = store.state().iter().map(|cm| cm.name_any()).collect();
    names.sort();
    names
}

#[tokio::test(start_paused = true)]
async fn a_new_term_is_not_synced_until_a_list_made_in_it_lands() {
    let fake = Arc::new(Fake {
        names: Mutex::new(vec!["before"]),
        lists_started: watch::Sender::new(0),
        answers: Semaphore::new(1),
    });
    let (terms, term) = watch::channel(0);
    let (follower, reader, sync) = configmap_follower(&fake, term);
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(follower.run(shutdown.clone()));
    let guard = Duration::from_secs(60);

    tokio::time::timeout(guard, sync.wait_synced(&["ConfigMap"]))
        .await
        .expect("the first list lands");
    assert_eq!(names(&reader), ["before"]);

    // Another replica led meanwhile and changed things; this replica now wins the Lease.
    *fake.names.lock().expect("fake lock") = vec!["after"];
    terms.send_replace(1);
    assert!(
        !sync.synced(&["ConfigMap"]),
        "a cache listed in an earlier term counts as synced for the new one"
    );
    let mut started = fake.lists_started.subscribe();
    tokio::time::timeout(guard, started.wait_for(|n| *n >= 2))
        .await
        .expect("no list for the new term")
        .expect("fake alive");
    tokio::task::yield_now().await;
    assert!(
        !sync.synced(&["ConfigMap"]),
        "synced while the new term's list is still outstanding"
    );
    assert_eq!(
        names(&reader),
        ["before"],
        "the old contents stay until then"
    );

    fake.answers.add_permits(1);
    tokio::time::timeout(guard, sync.wait_synced(&["ConfigMap"]))
        .await
        .expect("the new term's list lands");
    assert_eq!(names(&reader), ["after"]);
    assert_eq!(sync.report(), [("ConfigMap", true)]);

    shutdown.cancel();
    task.await.expect("the store task ends");
}

/// A fake apiserver that lists `list` and then sends `watch` as watch events, once.
async fn serve_list_then_watch(
    list: Arc<serde_json::Value>,
    watch: Arc<Vec<serde_json::Value>>,
    watches: Arc<std::sync::atomic::AtomicUsize>,
    request: Request<Body>,
) -> Result<Response<Body>, std::convert::Infallible> {
    let body = if request.uri().query().unwrap_or("").contains("watch=true") {
        if watches.fetch_add(1, Ordering::AcqRel) > 0 {
            std::future::pending::<()>().await;
        }
        let lines: Vec<String> = watch.iter().map(|event| event.to_string()).collect();
        lines.join("\n") + "\n"
    } else {
        list.to_string()
    };
    Ok(Response::new(Body::from(body.into_bytes())))
}

fn config_map(name: &str, version: &str, key: serde_json::Value) -> serde_json::Value {
    json!({"metadata": {"name": name, "namespace": "default", "resourceVersion": version,
                        "managedFields": [{"manager": "kubectl", "operation": "Apply"}]},
           "data": {"key": key}})
}

#[tokio::test(start_paused = true)]
async fn objects_that_do_not_decode_are_skipped_reported_and_counted_and_the_rest_served() {
    let list = json!({"kind": "ConfigMapList", "apiVersion": "v1",
                      "metadata": {"resourceVersion": "5"},
                      "items": [config_map("budget", "3", json!("1")),
                                config_map("poison", "4", json!(1)),
                                config_map("other", "5", json!("2"))]});
    // `budget` is changed into one that does not decode; `poison` is fixed.
    let events = vec![
        json!({"type": "MODIFIED", "object": config_map("budget", "6", json!(2))}),
        json!({"type": "MODIFIED", "object": config_map("poison", "7", json!("3"))}),
        json!({"type": "BOOKMARK", "object": {"kind": "ConfigMap", "apiVersion": "v1",
                                              "metadata": {"resourceVersion": "8"}}}),
    ];
    let (list, events) = (Arc::new(list), Arc::new(events));
    let watches = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let client = {
        let watches = watches.clone();
        kube::Client::new(
            tower::service_fn(move |request| {
                serve_list_then_watch(list.clone(), events.clone(), watches.clone(), request)
            }),
            "default",
        )
    };
    let listed = Arc::new(AtomicU64::new(0));
    let sync = SyncState::new(
        vec![("ConfigMap".into(), listed.clone())],
        watch::channel(0).1,
    );
    let (reader, writer) = reflector::store::<ConfigMap>();
    let (reporter, mut reports) = reporter();
    let metrics = reporter.metrics.clone();
    let conditions = reporter.conditions.clone();
    let changes = broadcast::channel(16).0;
    let mut changed = changes.subscribe();
    let follower = Follower::new(
        client,
        WatchOptions {
            status_conditions: true,
            ..WatchOptions::default()
        },
        writer,
        changes,
        sync.clone(),
        listed,
        reporter,
    );
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(follower.run(shutdown.clone()));
    let guard = Duration::from_secs(60);

    let mut received = Vec::new();
    for _ in 0..2 {
        let report = tokio::time::timeout(guard, reports.recv())
            .await
            .expect("a report in time")
            .expect("the store is alive");
        received.push(report);
    }
    let summary: Vec<_> = received
        .iter()
        .map(|r| {
            (
                r.object.name.as_deref().unwrap_or(""),
                r.object.resource_version.as_deref().unwrap_or(""),
                r.field.as_str(),
                r.last_good_kept,
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("poison", "4", "data.key", false),
            ("budget", "6", "data.key", true)
        ]
    );
    assert!(
        sync.synced(&["ConfigMap"]),
        "one poison object kept the kind unsynced"
    );
    // Each change reached the broadcast: the list's two good objects, then the fixed one
    // (the budget turned poison changed nothing in the store).
    let mut broadcast = Vec::new();
    for _ in 0..3 {
        let object = tokio::time::timeout(guard, changed.recv())
            .await
            .expect("a change in time")
            .expect("the broadcast is alive");
        broadcast.push((
            object.name_any(),
            object.resource_version().unwrap_or_default(),
        ));
    }
    assert_eq!(
        broadcast,
        [
            ("budget".to_owned(), "3".to_owned()),
            ("other".to_owned(), "5".to_owned()),
            ("poison".to_owned(), "7".to_owned()),
        ]
    );
    let mut served: Vec<_> = reader
        .state()
        .iter()
        .map(|cm| (cm.name_any(), cm.resource_version().unwrap_or_default()))
        .collect();
    served.sort();
    assert_eq!(
        served,
        [
            ("budget".to_owned(), "3".to_owned()),
            ("other".to_owned(), "5".to_owned()),
            ("poison".to_owned(), "7".to_owned()),
        ],
        "the budget's last good copy is served, the fixed object at its new version"
    );
    assert!(
        reader
            .state()
            .iter()
            .all(|cm| cm.managed_fields().is_empty()),
        "managedFields are dropped unless the kind keeps them"
    );
    // The conditions the leader is to write: the budget's names its field, the fixed
    // object's goes.
    let mut wanted: Vec<_> = conditions
        .take_all()
        .into_iter()
        .map(|c| (c.resource.kind, c.name, c.undecodable.map(|u| u.field)))
        .collect();
    wanted.sort();
    assert_eq!(
        wanted,
        [
            (
                "ConfigMap".to_owned(),
                "budget".to_owned(),
                Some("data.key".to_owned())
            ),
            ("ConfigMap".to_owned(), "poison".to_owned(), None),
        ]
    );
    let text = metrics.encode().expect("encodes");
    for line in [
        "stevedore_controlplane_cache_undecodable_reports_total{kind=\"ConfigMap\"} 2",
        "stevedore_controlplane_cache_undecodable_objects{kind=\"ConfigMap\"} 1",
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "missing {line:?} in:\n{text}"
        );
    }

    shutdown.cancel();
    task.await.expect("the store task ends");
}

/// A sync state whose Pod store has listed in term 0 and whose Node store never listed.
fn pods_listed_nodes_not() -> SyncState {
    let pods = Arc::new(AtomicU64::new(0));
    let nodes = Arc::new(AtomicU64::new(0));
    let sync = SyncState::new(
        vec![("Pod".into(), pods.clone()), ("Node".into(), nodes)],
        watch::channel(0).1,
    );
    sync.mark_listed(&pods, 0);
    sync
}

#[test]
fn a_kind_no_store_was_started_for_is_never_synced() {
    let sync = pods_listed_nodes_not();
    let cases: [(&[&str], bool); 6] = [
        (&[], true),
        (&["Pod"], true),
        (&["Node"], false),
        (&["Widget"], false),
        (&["Pod", "Widget"], false),
        (&["Widget", "Pod"], false),
    ];
    for (kinds, synced) in cases {
        assert_eq!(sync.synced(kinds), synced, "synced({kinds:?})");
    }
}

#[test]
fn require_refuses_the_first_kind_no_store_was_started_for_by_name() {
    let sync = pods_listed_nodes_not();
    assert_eq!(sync.require(&["Pod", "Node"]), Ok(()));
    let refused = sync.require(&["Pod", "Widget", "Gizmo"]);
    assert_eq!(
        refused,
        Err(UnknownStore {
            kind: "Widget".to_owned(),
            started: "Pod, Node".to_owned(),
        })
    );
    assert_eq!(
        refused.map_err(|e| e.to_string()),
        Err(
            "no store for the kind Widget is started (the stores started are Pod, Node)".to_owned()
        )
    );
    assert_eq!(
        SyncState::default()
            .require(&["Pod"])
            .map_err(|e| e.started),
        Err("none".to_owned())
    );
}

/// Every object the store holds went through the kind's trim first.
#[tokio::test(start_paused = true)]
async fn a_trimmed_watch_stores_only_trimmed_objects() {
    let fake = Arc::new(Fake {
        names: Mutex::new(vec!["a", "b"]),
        lists_started: watch::Sender::new(0),
        answers: Semaphore::new(1),
    });
    let (follower, reader, sync) = configmap_follower(&fake, watch::channel(0).1);
    let follower = follower.trimming(|cm: &mut ConfigMap| {
        cm.data = Some([("trimmed".to_owned(), "yes".to_owned())].into());
    });
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(follower.run(shutdown.clone()));
    tokio::time::timeout(Duration::from_secs(60), sync.wait_synced(&["ConfigMap"]))
        .await
        .expect("the list lands");
    let trimmed: Vec<bool> = (reader.state().iter())
        .map(|cm| cm.data.as_ref().is_some_and(|d| d.contains_key("trimmed")))
        .collect();
    assert_eq!(trimmed, [true, true]);
    shutdown.cancel();
    task.await.expect("the store task ends");
}
