//! The history step against a scripted apiserver: which requests a new template, a hash
//! collision and truncation turn into.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use serde_json::{Value, json};

use super::*;
use crate::api::CloneSet;
use crate::api::cloneset::CloneSetSpec;
use crate::workload::scripted_api::{ScriptedApi, failure};

const DATA: &[u8] = br#"{"a":1}"#;

fn revision(name: &str, number: i64, data: &Value) -> ControllerRevision {
    ControllerRevision {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some("default".to_owned()),
            ..ObjectMeta::default()
        },
        data: Some(RawExtension(data.clone())),
        revision: number,
    }
}

fn writer(api: &ScriptedApi) -> HistoryWriter<'static, CloneSet> {
    let client = api.client();
    HistoryWriter {
        revisions: Api::namespaced(client.clone(), "default"),
        owner: Api::namespaced(client, "default"),
        owner_name: "web",
    }
}

fn build(
    name: &str,
    _hash: &str,
    number: i64,
    data: Vec<u8>,
) -> Result<ControllerRevision, RevisionError> {
    let value = serde_json::from_slice(&data).expect("json");
    Ok(revision(name, number, &value))
}

fn cloneset_json() -> Value {
    let mut set = CloneSet::new("web", CloneSetSpec::default());
    set.metadata.namespace = Some("default".to_owned());
    serde_json::to_value(set).expect("json")
}

#[tokio::test]
async fn a_new_template_gets_the_next_revision() {
    let old = revision("web-old", 1, &json!({ "a": 0 }));
    let api = ScriptedApi::new(vec![(201, json!(old))]);
    let step = writer(&api)
        .sync_update_revision(vec![Arc::new(old.clone())], DATA, 0, "web-old", build)
        .await
        .expect("created");
    let HistoryStep::Ready(history) = step else {
        panic!("no collision expected");
    };
    let sent = api.sent();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].method, "POST");
    assert!(
        sent[0]
            .uri
            .starts_with("/apis/apps/v1/namespaces/default/controllerrevisions")
    );
    assert_eq!(sent[0].body["revision"], 2);
    assert_eq!(sent[0].body["data"], json!({ "a": 1 }));
    assert_eq!(
        sent[0].body["metadata"]["name"],
        json!(history.update_revision)
    );
    assert_eq!(history.current_revision, "web-old");
    assert_eq!(history.collision_count, 0);
}

#[tokio::test]
async fn a_name_taken_by_other_data_counts_a_collision() {
    let api = ScriptedApi::new(vec![
        (409, failure(409, "already exists")),
        (200, json!(revision("web-x", 1, &json!({ "a": 2 })))),
        (200, cloneset_json()),
    ]);
    let step = writer(&api)
        .sync_update_revision(Vec::new(), DATA, 3, "", build)
        .await
        .expect("counted");
    assert!(matches!(step, HistoryStep::Collided));
    let sent = api.sent();
    let verbs: Vec<&str> = sent.iter().map(|s| s.method.as_str()).collect();
    assert_eq!(verbs, ["POST", "GET", "PATCH"]);
    assert_eq!(
        sent[2].uri,
        "/apis/apps.kruise.io/v1alpha1/namespaces/default/clonesets/web/status?"
    );
    assert_eq!(sent[2].body, json!({ "status": { "collisionCount": 4 } }));
}

#[tokio::test]
async fn our_own_uncached_revision_is_not_a_collision() {
    let api = ScriptedApi::new(vec![
        (409, failure(409, "already exists")),
        (200, json!(revision("web-x", 1, &json!({ "a": 1 })))),
    ]);
    let step = writer(&api)
        .sync_update_revision(Vec::new(), DATA, 0, "", build)
        .await
        .expect("ready");
    let HistoryStep::Ready(history) = step else {
        panic!("the same data is no collision");
    };
    assert_eq!(history.current_revision, history.update_revision);
    assert_eq!(api.sent().len(), 2, "no status write");
}

#[tokio::test]
async fn truncation_deletes_unused_revisions_beyond_the_limit() {
    let objects: Vec<Arc<ControllerRevision>> =
        [("web-1", 1), ("web-2", 2), ("web-3", 3), ("web-4", 4)]
            .into_iter()
            .map(|(name, n)| Arc::new(revision(name, n, &json!({ "n": n }))))
            .collect();
    let history = History {
        revisions: objects.iter().map(|r| to_revision(r)).collect(),
        objects,
        update_revision: "web-4".into(),
        current_revision: "web-3".into(),
        collision_count: 0,
    };
    // web-1 and web-2 are unused; the limit keeps one of them, the newer.
    let api = ScriptedApi::new(vec![(404, failure(404, "gone"))]);
    writer(&api)
        .truncate(&history, &[Some("web-3")], 1)
        .await
        .expect("a revision already gone is fine");
    let sent = api.sent();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].method, "DELETE");
    assert!(
        sent[0].uri.ends_with("/controllerrevisions/web-1?"),
        "{}",
        sent[0].uri
    );
}

#[tokio::test]
async fn a_rollback_to_an_older_template_renumbers_its_revision() {
    let older = revision("web-a", 1, &json!({ "a": 1 }));
    let newer = revision("web-b", 2, &json!({ "a": 2 }));
    let api = ScriptedApi::new(vec![(200, json!(older))]);
    let cached = vec![Arc::new(older.clone()), Arc::new(newer)];
    let step = writer(&api)
        .sync_update_revision(cached, DATA, 0, "web-b", build)
        .await
        .expect("renumbered");
    let HistoryStep::Ready(history) = step else {
        panic!("no collision expected");
    };
    assert_eq!(history.update_revision, "web-a");
    assert_eq!(history.current_revision, "web-b");
    let sent = api.sent();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].method, "PATCH");
    assert!(
        sent[0].uri.ends_with("/controllerrevisions/web-a?"),
        "{}",
        sent[0].uri
    );
    assert_eq!(sent[0].content_type, "application/merge-patch+json");
    assert_eq!(sent[0].body, json!({ "revision": 3 }));
}
