//! ImageList status from the agent's stream, computed purely: updates are collected and
//! written as one merge patch per burst, and entries of an agent that stops answering get
//! a message saying so.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use serde_json::{Map, Value, json};
use stevedore_proto::stevedore::agent::v1::{ImageListPhase, ImageListStatusUpdate};

use crate::api::imagelist::{ImageCounts, ImagePullPhase, ImageStatus};
use crate::api::{ImageListSpec, ImageListStatus};

/// One update from the agent as the status of its image.
pub fn image_status(update: &ImageListStatusUpdate) -> ImageStatus {
    let phase = match update.phase() {
        ImageListPhase::Pulling => ImagePullPhase::Pulling,
        ImageListPhase::Succeeded => ImagePullPhase::Succeeded,
        ImageListPhase::Failed => ImagePullPhase::Failed,
        ImageListPhase::Waiting | ImageListPhase::Unspecified => ImagePullPhase::Waiting,
    };
    ImageStatus {
        phase,
        bytes_done: i64::try_from(update.bytes_done).unwrap_or(i64::MAX),
        bytes_total: i64::try_from(update.bytes_total).unwrap_or(i64::MAX),
        image_id: update.image_id.clone(),
        last_pull_time: update
            .last_pull_time
            .as_ref()
            .and_then(|t| Timestamp::new(t.seconds, t.nanos).ok().map(Time)),
        attempts: i32::try_from(update.attempts).unwrap_or(i32::MAX),
        message: update.message.clone(),
    }
}

/// The status after `pending` lands on `current`: images no longer in spec dropped,
/// counts recomputed, `observedGeneration` the generation the agent acknowledged.
pub fn merged(
    spec: &ImageListSpec,
    current: &ImageListStatus,
    pending: &BTreeMap<String, ImageStatus>,
    generation: i64,
) -> ImageListStatus {
    // Later entries win: `pending` over `current`.
    let images: BTreeMap<String, ImageStatus> = current
        .images
        .iter()
        .chain(pending)
        .filter(|(image, _)| spec.images.contains_key(*image))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let counts = ImageCounts::of(spec, &images);
    ImageListStatus {
        observed_generation: generation.max(current.observed_generation),
        desired: counts.desired,
        succeeded: counts.succeeded,
        failed: counts.failed,
        pulling: counts.pulling,
        waiting: counts.waiting,
        images,
    }
}

/// A JSON merge patch turning `current` into `new` (removed images set to null, and so
/// are fields an image's status no longer has: empty ones are not serialized, so a
/// success's cleared message would otherwise keep the failure's), or `None` when they
/// are equal — so an unchanged burst costs no write.
pub fn status_patch(current: &ImageListStatus, new: &ImageListStatus) -> Option<Value> {
    if current == new {
        return None;
    }
    let mut images = Map::new();
    for image in current.images.keys() {
        if !new.images.contains_key(image) {
            images.insert(image.clone(), Value::Null);
        }
    }
    for (image, status) in &new.images {
        let old = current.images.get(image);
        if old == Some(status) {
            continue;
        }
        let mut value = json!(status);
        if let (Some(Value::Object(old)), Value::Object(fields)) =
            (old.map(|o| json!(o)), &mut value)
        {
            for key in old.keys() {
                fields.entry(key.clone()).or_insert(Value::Null);
            }
        }
        images.insert(image.clone(), value);
    }
    let mut body = serde_json::to_value(new).ok()?;
    body["images"] = Value::Object(images);
    Some(json!({ "status": body }))
}

/// The images of `spec` not yet Succeeded, with `message` saying why nothing moves (the
/// agent does not answer), keeping what was last known about them.
pub fn unreachable(
    spec: &ImageListSpec,
    current: &ImageListStatus,
    message: &str,
) -> BTreeMap<String, ImageStatus> {
    spec.images
        .keys()
        .filter_map(|image| {
            let mut status = current.images.get(image).cloned().unwrap_or_default();
            (status.phase != ImagePullPhase::Succeeded && status.message != message).then(|| {
                status.message = message.to_owned();
                (image.clone(), status)
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::imagelist::ImageListEntry;

    fn spec(images: &[&str]) -> ImageListSpec {
        let mut spec = ImageListSpec::default();
        for image in images {
            spec.images
                .insert((*image).to_owned(), ImageListEntry::default());
        }
        spec
    }

    fn status(phase: ImagePullPhase) -> ImageStatus {
        ImageStatus {
            phase,
            ..ImageStatus::default()
        }
    }

    #[test]
    fn updates_map_to_statuses() {
        let update = ImageListStatusUpdate {
            image: "a".into(),
            phase: ImageListPhase::Succeeded.into(),
            bytes_done: 10,
            bytes_total: 10,
            image_id: "sha256:x".into(),
            last_pull_time: Some(prost_types::Timestamp {
                seconds: 1_700_000_000,
                nanos: 0,
            }),
            attempts: 1,
            message: String::new(),
            generation: 3,
            list_uid: String::new(),
        };
        let s = image_status(&update);
        assert_eq!(s.phase, ImagePullPhase::Succeeded);
        assert_eq!((s.bytes_done, s.bytes_total, s.attempts), (10, 10, 1));
        assert_eq!(s.image_id, "sha256:x");
        assert_eq!(
            s.last_pull_time.map(|t| t.0.as_second()),
            Some(1_700_000_000)
        );
    }

    #[test]
    fn a_burst_becomes_one_patch_with_counts_and_removals() {
        let current = ImageListStatus {
            images: BTreeMap::from([
                ("gone".to_owned(), status(ImagePullPhase::Succeeded)),
                ("a".to_owned(), status(ImagePullPhase::Pulling)),
            ]),
            ..ImageListStatus::default()
        };
        let pending = BTreeMap::from([
            ("a".to_owned(), status(ImagePullPhase::Succeeded)),
            ("b".to_owned(), status(ImagePullPhase::Failed)),
        ]);
        let new = merged(&spec(&["a", "b", "c"]), &current, &pending, 4);
        assert_eq!(
            (
                new.desired,
                new.succeeded,
                new.failed,
                new.waiting,
                new.observed_generation
            ),
            (3, 1, 1, 1, 4)
        );
        let patch = status_patch(&current, &new).expect("changed");
        assert_eq!(patch["status"]["images"]["gone"], Value::Null);
        assert_eq!(patch["status"]["images"]["a"]["phase"], "Succeeded");
        assert_eq!(patch["status"]["succeeded"], 1);
        assert_eq!(status_patch(&new, &new), None, "no change, no write");
    }

    /// RFC 7386, as the apiserver applies a merge patch.
    fn merge(target: &mut Value, patch: &Value) {
        let Value::Object(fields) = patch else {
            *target = patch.clone();
            return;
        };
        if !target.is_object() {
            *target = json!({});
        }
        if let Some(object) = target.as_object_mut() {
            for (key, value) in fields {
                if value.is_null() {
                    object.remove(key);
                } else {
                    merge(object.entry(key.clone()).or_insert(Value::Null), value);
                }
            }
        }
    }

    #[test]
    fn fields_an_image_no_longer_has_are_removed() {
        let failed = ImageStatus {
            phase: ImagePullPhase::Failed,
            attempts: 4,
            message: "registry unreachable".into(),
            ..ImageStatus::default()
        };
        let current = ImageListStatus {
            images: BTreeMap::from([("a".to_owned(), failed)]),
            ..ImageListStatus::default()
        };
        let pulled = ImageStatus {
            phase: ImagePullPhase::Succeeded,
            image_id: "sha256:x".into(),
            attempts: 5,
            ..ImageStatus::default()
        };
        let pending = BTreeMap::from([("a".to_owned(), pulled)]);
        let new = merged(&spec(&["a"]), &current, &pending, 1);
        let patch = status_patch(&current, &new).expect("changed");
        let image = &patch["status"]["images"]["a"];
        assert_eq!(image.get("message"), Some(&Value::Null), "{image}");
        assert_eq!(image["phase"], "Succeeded");
        assert_eq!(image["imageID"], "sha256:x");

        // Applied as a merge patch, the result is the new status.
        let mut stored = json!({ "status": current });
        merge(&mut stored, &patch);
        let landed: ImageListStatus =
            serde_json::from_value(stored["status"].clone()).expect("status");
        assert_eq!(landed.images, new.images);
    }

    #[test]
    fn an_unreachable_agent_marks_what_is_not_done_once() {
        let current = ImageListStatus {
            images: BTreeMap::from([("done".to_owned(), status(ImagePullPhase::Succeeded))]),
            ..ImageListStatus::default()
        };
        let marked = unreachable(&spec(&["done", "new"]), &current, "agent gone");
        assert_eq!(marked.keys().collect::<Vec<_>>(), ["new"]);
        assert_eq!(marked["new"].message, "agent gone");
        let mut again = current;
        again.images.extend(marked);
        assert!(unreachable(&spec(&["done", "new"]), &again, "agent gone").is_empty());
    }
}
