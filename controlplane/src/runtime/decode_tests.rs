//! The decode step, through a real reflector store: an object that does not decode is
//! skipped and reported once per resourceVersion, every other object of its kind is served,
//! and a store that held a good copy keeps it (through changes and relists) until the object
//! decodes again or is deleted.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt as _;
use kube::runtime::reflector::{self, Store, store::Writer};
use serde_json::json;

use super::*;

/// A ConfigMap as the apiserver lists it; `data` may hold what a ConfigMap cannot.
fn config_map(name: &str, version: &str, data: serde_json::Value) -> Decoded<ConfigMap> {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}"),
                     "resourceVersion": version},
        "data": data,
    }))
    .expect("deserializing never fails on what the type refuses")
}

fn good(name: &str, version: &str) -> Decoded<ConfigMap> {
    config_map(name, version, json!({"key": version}))
}

/// `data.key` holds a number where a ConfigMap holds strings.
fn poison(name: &str, version: &str) -> Decoded<ConfigMap> {
    config_map(name, version, json!({"key": 1}))
}

/// The decoder and the store it feeds, as `stores.rs` runs them.
struct Pipeline {
    decoder: Decoder<ConfigMap>,
    writer: Writer<ConfigMap>,
    store: Store<ConfigMap>,
    reports: Vec<Undecodable>,
    /// The names of the objects announced readable again, in order.
    readable: Vec<String>,
}

impl Pipeline {
    fn new() -> Self {
        let (store, writer) = reflector::store();
        Self {
            decoder: Decoder::new(),
            writer,
            store,
            reports: Vec::new(),
            readable: Vec::new(),
        }
    }

    /// Feeds `event`; returns what the store applied.
    fn feed(
        &mut self,
        event: watcher::Event<Decoded<ConfigMap>>,
    ) -> Option<watcher::Event<ConfigMap>> {
        let store = self.store.clone();
        let step = self.decoder.step(event, |key| store.get(key));
        if let Some(event) = &step.event {
            self.writer.apply_watcher_event(event);
        }
        self.reports.extend(step.report);
        self.readable
            .extend(step.readable.and_then(|object| object.name));
        step.event
    }

    fn list(&mut self, objects: Vec<Decoded<ConfigMap>>) {
        self.feed(watcher::Event::Init);
        for object in objects {
            self.feed(watcher::Event::InitApply(object));
        }
        self.feed(watcher::Event::InitDone);
    }

    /// Name → the `data.key` of each object served.
    fn served(&self) -> Vec<(String, String)> {
        let mut served: Vec<_> = self
            .store
            .state()
            .iter()
            .map(|cm| {
                let key = cm
                    .data
                    .as_ref()
                    .and_then(|data| data.get("key").cloned())
                    .unwrap_or_default();
                (cm.name_any(), key)
            })
            .collect();
        served.sort();
        served
    }

    /// (name, resourceVersion, field, kept) of each report so far.
    fn reported(&self) -> Vec<(String, String, String, bool)> {
        self.reports
            .iter()
            .map(|r| {
                (
                    r.object.name.clone().unwrap_or_default(),
                    r.object.resource_version.clone().unwrap_or_default(),
                    r.field.clone(),
                    r.last_good_kept,
                )
            })
            .collect()
    }
}

fn served(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(name, key)| ((*name).to_owned(), (*key).to_owned()))
        .collect()
}

fn report(name: &str, version: &str, kept: bool) -> (String, String, String, bool) {
    (
        name.to_owned(),
        version.to_owned(),
        "data.key".to_owned(),
        kept,
    )
}

#[test]
fn a_list_with_one_poison_object_serves_the_others_and_reports_it_once() {
    let mut pipeline = Pipeline::new();
    pipeline.list(vec![good("a", "1"), poison("b", "2"), good("c", "3")]);

    assert_eq!(pipeline.served(), served(&[("a", "1"), ("c", "3")]));
    assert_eq!(pipeline.reported(), [report("b", "2", false)]);
    let only = &pipeline.reports[0];
    assert_eq!(
        only.object,
        ObjectReference {
            api_version: Some("v1".to_owned()),
            kind: Some("ConfigMap".to_owned()),
            namespace: Some("default".to_owned()),
            name: Some("b".to_owned()),
            uid: Some("uid-b".to_owned()),
            resource_version: Some("2".to_owned()),
            field_path: None,
        }
    );
    assert_eq!(only.error, "invalid type: integer `1`, expected a string");
    assert_eq!(pipeline.decoder.undecodable(), 1);

    // Listed again (a new leadership term) at the same version: served the same, not
    // reported again.
    pipeline.list(vec![good("a", "1"), poison("b", "2"), good("c", "3")]);
    assert_eq!(pipeline.served(), served(&[("a", "1"), ("c", "3")]));
    assert_eq!(pipeline.reports.len(), 1, "{:?}", pipeline.reported());

    // Changed, still poison: reported at its new version.
    pipeline.feed(watcher::Event::Apply(poison("b", "7")));
    assert_eq!(
        pipeline.reported(),
        [report("b", "2", false), report("b", "7", false)]
    );

    // Fixed: served, and no longer counted.
    pipeline.feed(watcher::Event::Apply(good("b", "8")));
    assert_eq!(
        pipeline.served(),
        served(&[("a", "1"), ("b", "8"), ("c", "3")])
    );
    assert_eq!(pipeline.decoder.undecodable(), 0);
}

#[test]
fn a_good_object_turned_poison_keeps_its_last_good_copy_through_relists_until_deleted() {
    let mut pipeline = Pipeline::new();
    pipeline.list(vec![good("budget", "1"), good("other", "2")]);

    let applied = pipeline.feed(watcher::Event::Apply(poison("budget", "5")));
    assert!(applied.is_none(), "the store changed: {applied:?}");
    assert_eq!(
        pipeline.served(),
        served(&[("budget", "1"), ("other", "2")])
    );
    assert_eq!(pipeline.reported(), [report("budget", "5", true)]);

    // A new term lists again: the last good copy is listed with the rest, not dropped by
    // the list's swap, and not reported again.
    pipeline.list(vec![poison("budget", "5"), good("other", "2")]);
    assert_eq!(
        pipeline.served(),
        served(&[("budget", "1"), ("other", "2")])
    );
    assert_eq!(pipeline.reports.len(), 1);

    // Deleted while undecodable: its copy goes.
    let applied = pipeline.feed(watcher::Event::Delete(poison("budget", "9")));
    assert!(
        matches!(&applied, Some(watcher::Event::Delete(cm)) if cm.name_any() == "budget"),
        "{applied:?}"
    );
    assert_eq!(pipeline.served(), served(&[("other", "2")]));
    assert_eq!(pipeline.decoder.undecodable(), 0);
    assert_eq!(pipeline.reports.len(), 1, "a delete is never reported");
}

#[test]
fn an_undecodable_object_gone_by_the_next_list_is_no_longer_counted() {
    let mut pipeline = Pipeline::new();
    pipeline.list(vec![poison("gone", "1"), good("kept", "2")]);
    assert_eq!(pipeline.decoder.undecodable(), 1);

    // A list interrupted after its start and begun again keeps what it knew.
    pipeline.feed(watcher::Event::Init);
    pipeline.feed(watcher::Event::InitApply(good("kept", "2")));
    assert_eq!(pipeline.decoder.undecodable(), 1);
    pipeline.list(vec![good("kept", "2")]);

    assert_eq!(pipeline.decoder.undecodable(), 0);
    assert_eq!(pipeline.served(), served(&[("kept", "2")]));
    // Deleted poison never seen good: nothing to remove.
    assert!(
        pipeline
            .feed(watcher::Event::Delete(poison("never", "3")))
            .is_none()
    );
}

#[test]
fn decode_names_the_field_and_serdes_message() {
    let deployment = |max_unavailable: serde_json::Value| -> serde_json::Value {
        json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {
                "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}},
                             "spec": {"containers": [{"name": "c", "image": "busybox"}]}},
                "strategy": {"rollingUpdate": {"maxUnavailable": max_unavailable}},
            },
        })
    };
    // What decoding gives: nothing to say, or the field and serde's message.
    type Outcome = Result<(), (&'static str, &'static str)>;
    let cases: [(serde_json::Value, Outcome); 5] = [
        (deployment(json!(1)), Ok(())),
        (deployment(json!("25%")), Ok(())),
        (deployment(json!(2_147_483_647_i64)), Ok(())),
        (
            deployment(json!(2_147_483_648_i64)),
            Err((
                "spec.strategy.rollingUpdate.maxUnavailable",
                "invalid value: integer `2147483648`, expected a 32-bit integer",
            )),
        ),
        (
            deployment(json!(true)),
            Err((
                "spec.strategy.rollingUpdate.maxUnavailable",
                "invalid type: boolean `true`, expected IntOrString",
            )),
        ),
    ];
    for (object, expected) in cases {
        let got = match decode::<Deployment>(object.clone()) {
            Decoded::Object(deployment) => {
                assert_eq!(deployment.name_any(), "web", "metadata is kept");
                Ok(())
            }
            Decoded::Undecodable { metadata, error } => {
                assert_eq!(metadata.name.as_deref(), Some("web"), "named: {metadata:?}");
                assert_eq!(metadata.namespace.as_deref(), Some("default"));
                Err((error.field, error.error))
            }
        };
        let expected = expected.map_err(|(field, error)| (field.to_owned(), error.to_owned()));
        assert_eq!(got, expected, "{object}");
    }
}

/// The list a typed watch failed on whole: with `Decoded` items it reads, each item on its
/// own.
#[test]
fn a_list_decodes_item_by_item() {
    let list = json!({
        "kind": "ConfigMapList", "apiVersion": "v1", "metadata": {"resourceVersion": "9"},
        "items": [
            {"metadata": {"name": "a", "namespace": "default", "resourceVersion": "1"},
             "data": {"key": "1"}},
            {"metadata": {"name": "b", "namespace": "default", "resourceVersion": "2",
                          "uid": "uid-b"},
             "data": {"key": 2}},
        ],
    });
    let typed = serde_json::from_value::<kube::core::ObjectList<ConfigMap>>(list.clone());
    assert!(typed.is_err(), "the whole typed list fails: {typed:?}");

    let decoded: kube::core::ObjectList<Decoded<ConfigMap>> =
        serde_json::from_value(list).expect("the list reads");
    let items: Vec<_> = decoded
        .items
        .iter()
        .map(|item| match item {
            Decoded::Object(cm) => (cm.name_any(), None),
            Decoded::Undecodable { metadata, error } => (
                metadata.name.clone().unwrap_or_default(),
                Some((
                    metadata.uid.clone(),
                    metadata.resource_version.clone(),
                    error.field.clone(),
                )),
            ),
        })
        .collect();
    assert_eq!(
        items,
        [
            ("a".to_owned(), None),
            (
                "b".to_owned(),
                Some((
                    Some("uid-b".to_owned()),
                    Some("2".to_owned()),
                    "data.key".to_owned()
                ))
            ),
        ]
    );
}

#[test]
fn the_note_is_a_sentence_naming_the_field_and_what_happens_meanwhile() {
    let undecodable = |field: &str, kept: bool| Undecodable {
        object: ObjectReference {
            kind: Some("CloneSet".to_owned()),
            name: Some("web".to_owned()),
            resource_version: Some("42".to_owned()),
            ..ObjectReference::default()
        },
        field: field.to_owned(),
        error: "invalid value: integer `2147483648`, expected a 32-bit integer".to_owned(),
        last_good_kept: kept,
    };
    let cases = [
        (
            undecodable("spec.updateStrategy.maxUnavailable", false),
            "The control plane cannot read the field spec.updateStrategy.maxUnavailable of \
             this CloneSet: invalid value: integer `2147483648`, expected a 32-bit integer; \
             it ignores the object until it is fixed.",
        ),
        (
            undecodable("spec.replicas", true),
            "The control plane cannot read the field spec.replicas of this CloneSet: invalid \
             value: integer `2147483648`, expected a 32-bit integer; it keeps acting on the \
             last version it could read until the object is fixed.",
        ),
        (
            undecodable(".", false),
            "The control plane cannot read this CloneSet: invalid value: integer \
             `2147483648`, expected a 32-bit integer; it ignores the object until it is fixed.",
        ),
    ];
    for (undecodable, note) in cases {
        assert_eq!(undecodable.note(), note);
    }
}

/// The same problem at another resourceVersion (the condition's own write makes one) reads
/// the same: the condition written from it is not written again.
#[test]
fn the_note_does_not_change_with_the_resource_version() {
    let at = |version: &str| Undecodable {
        object: ObjectReference {
            kind: Some("CloneSet".to_owned()),
            resource_version: Some(version.to_owned()),
            ..ObjectReference::default()
        },
        field: "spec.replicas".to_owned(),
        error: "invalid value".to_owned(),
        last_good_kept: false,
    };
    assert_eq!(at("42").note(), at("43").note());
}

/// An object announced readable again is one the decoder last saw undecodable, once, when
/// a change or a list shows it decoding; a delete forgets it.
#[test]
fn an_object_that_decodes_again_after_a_report_is_announced_readable_once() {
    use watcher::Event::{Apply, Delete, Init, InitApply, InitDone};
    /// (case, the events after the list, the names announced readable)
    type Case = (
        &'static str,
        Vec<watcher::Event<Decoded<ConfigMap>>>,
        &'static [&'static str],
    );
    let cases: Vec<Case> = vec![
        (
            "fixed by a change",
            vec![Apply(poison("b", "2")), Apply(good("b", "3"))],
            &["b"],
        ),
        (
            "fixed, then changed again",
            vec![
                Apply(poison("b", "2")),
                Apply(poison("b", "3")),
                Apply(good("b", "4")),
                Apply(good("b", "5")),
            ],
            &["b"],
        ),
        (
            "another object, never undecodable",
            vec![Apply(good("a", "2")), InitApply(good("a", "3"))],
            &[],
        ),
        (
            "fixed by the time of the next list",
            vec![Init, InitApply(good("b", "3")), InitDone],
            &["b"],
        ),
        (
            "fixed during a list begun again",
            vec![Init, Init, InitApply(good("b", "3")), InitDone],
            &["b"],
        ),
        (
            "deleted, then created again good",
            vec![Delete(poison("b", "2")), Apply(good("b", "3"))],
            &[],
        ),
        (
            "gone from the next list, then created again good",
            vec![Init, InitDone, Apply(good("b", "3"))],
            &[],
        ),
    ];
    for (case, events, readable) in cases {
        let mut pipeline = Pipeline::new();
        pipeline.list(vec![good("a", "1"), poison("b", "1")]);
        assert!(pipeline.readable.is_empty(), "{case}: listed");
        for event in events {
            pipeline.feed(event);
        }
        assert_eq!(pipeline.readable, readable, "{case}");
    }
}
