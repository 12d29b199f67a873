//! A store against an in-process fake apiserver that can hold a list back: a new term
//! makes the store list again, and until that list lands the store does not count as
//! synced, although it still holds what the previous term listed. And a kind no store was
//! started for: never synced, and refused by `require`, by name.

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
    let client = {
        let fake = fake.clone();
        kube::Client::new(
            tower::service_fn(move |request| serve(fake.clone(), request)),
            "default",
        )
    };
    let (terms, term) = watch::channel(0);
    let listed = Arc::new(AtomicU64::new(0));
    let sync = SyncState::new(vec![("ConfigMap".into(), listed.clone())], term);
    let (reader, writer) = reflector::store();
    let follower = Follower {
        api: Api::<ConfigMap>::all(client),
        keep_managed_fields: false,
        writer,
        changes: broadcast::channel(16).0,
        sync: sync.clone(),
        listed,
    };
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
