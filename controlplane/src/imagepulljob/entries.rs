//! How one ImagePullJob owns its entry in a node's ImageList: a field manager of its own,
//! ownership read back from `managedFields`, and the server-side apply bodies that set or
//! release the entry. Applying only this job's image key under its own manager leaves a
//! person's entries and other jobs' entries alone; applying a body without `spec` releases
//! every field the manager held, so a key nobody else applies disappears, and the
//! manager's `managedFields` record goes with it.

use std::collections::BTreeSet;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::{Value, json};

use crate::api::imagelist::ImageListEntry;

/// The prefix of every ImagePullJob's field manager.
pub const MANAGER_PREFIX: &str = "imagepulljob.stevedore.dev/";
/// The apiserver refuses field managers longer than this.
const MAX_MANAGER_LEN: usize = 128;

/// The field manager of the job `namespace/name`: `imagepulljob.stevedore.dev/<ns>.<name>`,
/// or, when that is longer than 128 characters, a prefix of it and a hash of the whole.
pub fn field_manager(namespace: &str, name: &str) -> String {
    let full = format!("{MANAGER_PREFIX}{namespace}.{name}");
    if full.len() <= MAX_MANAGER_LEN {
        return full;
    }
    let hash = format!("{:016x}", fnv1a(full.as_bytes()));
    // Namespaces and names are ASCII, so any byte index is a character boundary.
    let keep = MAX_MANAGER_LEN - hash.len() - 1;
    format!("{}-{hash}", &full[..keep])
}

/// FNV-1a, 64 bit: stable across releases and platforms, unlike `DefaultHasher`.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The `spec.images` keys `manager` holds through server-side apply.
pub fn owned_images(meta: &ObjectMeta, manager: &str) -> BTreeSet<String> {
    meta.managed_fields
        .iter()
        .flatten()
        .filter(|m| {
            m.manager.as_deref() == Some(manager) && m.operation.as_deref() == Some("Apply")
        })
        .filter_map(|m| m.fields_v1.as_ref())
        .filter_map(|fields| fields.0.pointer("/f:spec/f:images")?.as_object())
        .flat_map(|images| images.keys())
        .filter_map(|key| key.strip_prefix("f:"))
        .map(str::to_owned)
        .collect()
}

/// The apply body that makes `image` one of this manager's entries on the ImageList
/// `name` (or, with `None`, releases every entry the manager held). The UID makes the
/// apply fail with 409 Conflict instead of creating an ImageList that was deleted (or
/// never existed): ImageLists are the distributor's to create.
pub fn apply_body(name: &str, uid: &str, image: &str, entry: Option<&ImageListEntry>) -> Value {
    let mut body = json!({
        "apiVersion": "stevedore.dev/v1alpha1",
        "kind": "ImageList",
        "metadata": { "name": name, "uid": uid },
    });
    if let Some(entry) = entry {
        body["spec"] = json!({ "images": { image: entry } });
    }
    body
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{FieldsV1, ManagedFieldsEntry};

    use super::*;

    #[test]
    fn managers_are_named_after_the_job_and_hashed_when_too_long() {
        assert_eq!(
            field_manager("ns", "warm"),
            "imagepulljob.stevedore.dev/ns.warm"
        );
        let long = "n".repeat(200);
        let a = field_manager("ns", &long);
        let b = field_manager("ns", &format!("{long}x"));
        assert_eq!(a.len(), 128);
        assert!(a.starts_with("imagepulljob.stevedore.dev/ns.nnn"));
        assert_ne!(a, b, "different jobs keep different managers");
        assert_eq!(a, field_manager("ns", &long), "stable");
    }

    fn managed(manager: &str, operation: &str, fields: Value) -> ManagedFieldsEntry {
        ManagedFieldsEntry {
            manager: Some(manager.into()),
            operation: Some(operation.into()),
            fields_v1: Some(FieldsV1(fields)),
            ..ManagedFieldsEntry::default()
        }
    }

    #[test]
    fn ownership_is_read_from_the_managers_apply_record_only() {
        let meta = ObjectMeta {
            managed_fields: Some(vec![
                managed(
                    "imagepulljob.stevedore.dev/ns.a",
                    "Apply",
                    json!({"f:spec": {"f:images": {"f:busybox:1": {}, "f:reg:5000/x@sha256:ab": {".": {}, "f:alwaysPull": {}}}}}),
                ),
                managed(
                    "kubectl",
                    "Apply",
                    json!({"f:spec": {"f:images": {"f:nginx": {}}}}),
                ),
                managed(
                    "imagepulljob.stevedore.dev/ns.a",
                    "Update",
                    json!({"f:spec": {"f:images": {"f:redis": {}}}}),
                ),
            ]),
            ..ObjectMeta::default()
        };
        let owned = owned_images(&meta, "imagepulljob.stevedore.dev/ns.a");
        assert_eq!(
            owned.into_iter().collect::<Vec<_>>(),
            ["busybox:1", "reg:5000/x@sha256:ab"]
        );
        assert!(owned_images(&meta, "imagepulljob.stevedore.dev/ns.b").is_empty());
        assert!(owned_images(&ObjectMeta::default(), "kubectl").is_empty());
    }

    #[test]
    fn apply_bodies_carry_only_this_image_or_nothing() {
        let entry = ImageListEntry {
            always_pull: true,
            ..ImageListEntry::default()
        };
        assert_eq!(
            apply_body("node-0", "u1", "busybox:1", Some(&entry)),
            json!({
                "apiVersion": "stevedore.dev/v1alpha1",
                "kind": "ImageList",
                "metadata": {"name": "node-0", "uid": "u1"},
                "spec": {"images": {"busybox:1": {"alwaysPull": true}}},
            })
        );
        assert_eq!(
            apply_body("node-0", "u1", "busybox:1", None),
            json!({
                "apiVersion": "stevedore.dev/v1alpha1",
                "kind": "ImageList",
                "metadata": {"name": "node-0", "uid": "u1"},
            })
        );
    }
}
