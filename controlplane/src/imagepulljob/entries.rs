//! How one ImagePullJob owns its entry in a node's ImageList: a field manager of its own,
//! ownership read back from `managedFields`, and the server-side apply bodies that set or
//! release the entry. Applying only this job's image key under its own manager leaves a
//! person's entries and other jobs' entries alone; applying a body without `spec` releases
//! every field the manager held, so a key nobody else applies disappears, and the
//! manager's `managedFields` record goes with it.
//!
//! A job over many nodes writes many entries; [`write_bounded`] keeps a few of those
//! writes in flight at once instead of making them one round trip after another.

use std::collections::BTreeSet;
use std::future::Future;

use futures::StreamExt as _;
use futures::stream::FuturesUnordered;
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

/// How many entry writes one reconcile keeps in flight: a job over 500 nodes waits for 32
/// round trips instead of 500, and one reconcile holds at most this many requests open
/// (kube-rs has no client-side rate limit; the apiserver's priority and fairness is the
/// brake).
pub const CONCURRENT_WRITES: usize = 16;

/// Runs `write` for every item, at most `limit` at once (at least one). `write` answers
/// whether its ImageList was still there; the result is whether every one was, or the
/// first error. After an error no further write starts, as in a loop that stops at the
/// first failure, but writes already in flight finish, so each that landed has been
/// recorded by its caller.
pub async fn write_bounded<T, E, F, W>(
    items: impl IntoIterator<Item = T>,
    limit: usize,
    mut write: F,
) -> Result<bool, E>
where
    F: FnMut(T) -> W,
    W: Future<Output = Result<bool, E>>,
{
    let mut items = items.into_iter();
    let mut in_flight = FuturesUnordered::new();
    let mut all_present = true;
    let mut first_error = None;
    loop {
        while first_error.is_none() && in_flight.len() < limit.max(1) {
            let Some(item) = items.next() else { break };
            in_flight.push(write(item));
        }
        match in_flight.next().await {
            None => break,
            Some(Ok(present)) => all_present &= present,
            Some(Err(err)) => {
                first_error.get_or_insert(err);
            }
        }
    }
    first_error.map_or(Ok(all_present), Err)
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

#[cfg(test)]
mod write_bounded_tests {
    use std::sync::Mutex;
    use std::time::Duration;

    use super::*;

    /// A double for the apiserver side of entry writes: counts writes in flight and
    /// records which started and which finished.
    #[derive(Default)]
    struct Writes {
        in_flight: Mutex<usize>,
        max_in_flight: Mutex<usize>,
        started: Mutex<Vec<usize>>,
        finished: Mutex<Vec<usize>>,
    }

    impl Writes {
        /// Writes entry `item`, taking `took`; answers `outcome`.
        async fn write(
            &self,
            item: usize,
            took: Duration,
            outcome: Result<bool, String>,
        ) -> Result<bool, String> {
            self.started.lock().expect("lock").push(item);
            {
                let mut in_flight = self.in_flight.lock().expect("lock");
                *in_flight += 1;
                let mut max = self.max_in_flight.lock().expect("lock");
                *max = (*max).max(*in_flight);
            }
            tokio::time::sleep(took).await;
            *self.in_flight.lock().expect("lock") -= 1;
            self.finished.lock().expect("lock").push(item);
            outcome
        }

        fn max_in_flight(&self) -> usize {
            *self.max_in_flight.lock().expect("lock")
        }

        fn sorted(list: &Mutex<Vec<usize>>) -> Vec<usize> {
            let mut items = list.lock().expect("lock").clone();
            items.sort_unstable();
            items
        }
    }

    const MS: Duration = Duration::from_millis(1);

    #[tokio::test(start_paused = true)]
    async fn writes_run_concurrently_up_to_the_limit_and_all_run() {
        for (items, limit, expected_max) in [(50, 4, 4), (3, 16, 3), (5, 1, 1), (5, 0, 1)] {
            let writes = Writes::default();
            let present =
                write_bounded(0..items, limit, |i| writes.write(i, 10 * MS, Ok(true))).await;
            assert_eq!(present, Ok(true), "{items} items, limit {limit}");
            assert_eq!(
                writes.max_in_flight(),
                expected_max,
                "{items} items, limit {limit}"
            );
            assert_eq!(
                Writes::sorted(&writes.finished),
                (0..items).collect::<Vec<_>>()
            );
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_gone_list_is_reported_and_the_other_writes_still_run() {
        let writes = Writes::default();
        let present = write_bounded(0..10, 3, |i| writes.write(i, MS, Ok(i != 7))).await;
        assert_eq!(present, Ok(false));
        assert_eq!(
            Writes::sorted(&writes.finished),
            (0..10).collect::<Vec<_>>()
        );

        let nothing: Result<bool, String> = write_bounded(std::iter::empty::<usize>(), 3, |i| {
            writes.write(i, MS, Ok(false))
        })
        .await;
        assert_eq!(nothing, Ok(true), "no writes: nothing was gone");
    }

    #[tokio::test(start_paused = true)]
    async fn after_an_error_no_write_starts_and_those_in_flight_finish() {
        let writes = Writes::default();
        let result = write_bounded(0..20, 3, |i| {
            let (took, outcome) = if i == 2 {
                (MS, Err(format!("write {i} refused")))
            } else {
                (10 * MS, Ok(true))
            };
            writes.write(i, took, outcome)
        })
        .await;
        assert_eq!(result, Err("write 2 refused".to_owned()));
        assert_eq!(Writes::sorted(&writes.started), [0, 1, 2]);
        assert_eq!(Writes::sorted(&writes.finished), [0, 1, 2]);
    }
}
