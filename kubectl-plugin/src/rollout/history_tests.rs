use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use kube::api::ObjectMeta;
use serde_json::json;

use super::*;

fn revision(name: &str, number: i64, owner: &str, image: &str) -> ControllerRevision {
    ControllerRevision {
        metadata: ObjectMeta {
            name: Some(name.into()),
            owner_references: Some(vec![OwnerReference {
                uid: owner.into(),
                controller: Some(true),
                ..OwnerReference::default()
            }]),
            ..ObjectMeta::default()
        },
        revision: number,
        data: Some(RawExtension(json!({ "spec": { "template": {
            "$patch": "replace",
            "metadata": { "labels": { "app": "web" } },
            "spec": { "containers": [{ "name": "main", "image": image }] },
        } } }))),
    }
}

fn history() -> Vec<ControllerRevision> {
    owned_revisions(
        vec![
            revision("web-c", 3, "uid-1", "nginx:3"),
            revision("other-a", 1, "uid-2", "busybox"),
            revision("web-a", 1, "uid-1", "nginx:1"),
            revision("web-b", 2, "uid-1", "nginx:2"),
        ],
        "uid-1",
    )
}

#[test]
fn history_keeps_the_owners_revisions_oldest_first() {
    let rows = history_rows(&history(), "web-c");
    let summary: Vec<(i64, &str, &str, bool)> = rows
        .iter()
        .map(|r| (r.revision, r.name.as_str(), r.images[0].as_str(), r.current))
        .collect();
    assert_eq!(
        summary,
        [
            (1, "web-a", "main=nginx:1", false),
            (2, "web-b", "main=nginx:2", false),
            (3, "web-c", "main=nginx:3", true),
        ]
    );
}

#[test]
fn undo_targets() {
    let revisions = history();
    let cases: &[(&str, i64, Result<&str, UndoRefused>)] = &[
        ("previous by default", 0, Ok("web-b")),
        ("a given revision", 1, Ok("web-a")),
        ("an unknown revision", 7, Err(UndoRefused::NotFound(7))),
        (
            "the update revision itself",
            3,
            Err(UndoRefused::AlreadyCurrent(3)),
        ),
    ];
    for (name, to, want) in cases {
        let got =
            undo_target(&revisions, "web-c", *to).map(|r| r.metadata.name.as_deref().unwrap_or(""));
        assert_eq!(got, want.clone(), "{name}");
    }
    // After an undo to 1, the update revision is web-a renumbered; the default
    // "previous" is the second newest by number, which must not be the update revision.
    assert_eq!(
        undo_target(&[], "web-c", 0).err(),
        Some(UndoRefused::NoHistory)
    );
    assert_eq!(
        undo_target(&revisions[..1], "web-a", 0).err(),
        Some(UndoRefused::NoPrevious)
    );
}

#[test]
fn undo_patch_replaces_the_template_without_the_directive() {
    let revisions = history();
    let patch = undo_patch(&revisions[0], "42").expect("patch");
    assert_eq!(
        patch,
        json!([
            { "op": "test", "path": "/metadata/resourceVersion", "value": "42" },
            { "op": "replace", "path": "/spec/template", "value": {
                "metadata": { "labels": { "app": "web" } },
                "spec": { "containers": [{ "name": "main", "image": "nginx:1" }] },
            } },
        ])
    );
    let mut empty = revisions[0].clone();
    empty.data = Some(RawExtension(json!({})));
    assert_eq!(
        undo_patch(&empty, "42").err(),
        Some(UndoRefused::NoTemplate(1))
    );
}

#[test]
fn a_revision_is_named_in_full_or_by_its_hash() {
    let cases = [
        ("web-7468f87856", "web-7468f87856", true),
        ("web-7468f87856", "7468f87856", true),
        ("web-7468f87856", "68f87856", false),
        ("web-7468f87856", "", false),
        ("web-845c57b687", "7468f87856", false),
    ];
    for (name, revision, want) in cases {
        assert_eq!(is_revision(name, revision), want, "{name} {revision}");
    }
    // DaemonSets name their update revision by hash: it is marked and never undone to.
    let revisions = history();
    let current: Vec<i64> = history_rows(&revisions, "c")
        .iter()
        .filter(|r| r.current)
        .map(|r| r.revision)
        .collect();
    assert_eq!(current, [3]);
    assert_eq!(
        undo_target(&revisions, "c", 3).err(),
        Some(UndoRefused::AlreadyCurrent(3))
    );
}
