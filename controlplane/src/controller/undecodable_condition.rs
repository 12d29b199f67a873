//! The `Undecodable` status condition: on an object of a kind whose status has
//! `conditions` (CloneSet, Advanced StatefulSet, Advanced DaemonSet, BroadcastJob; the
//! wiring marks them in `caches.rs`) that the caches cannot decode, `True`, its reason the
//! kind of problem (`InvalidValue`, `InvalidType`, ...) and its message the Event's note,
//! which names the field; removed once the object decodes again. OpenKruise has no such
//! condition: a Go controller reads such an object into its wider types, or fails on the
//! whole list. Kinds without status conditions get only the Event.
//!
//! One writer for every kind, while this replica leads ([`run`]): it takes what the stores
//! put in the [`ConditionOutbox`] and writes each object's status without decoding it into
//! its Rust type (it cannot), as raw JSON through the status subresource, keeping every
//! other condition and field as it is. Each write is a merge patch carrying the
//! resourceVersion it was computed from, so a status another writer changed meanwhile is
//! read again, never overwritten. A kind's own status writer never writes this condition
//! (`status_patch` leaves it out), so it neither keeps a stale one nor brings one back.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::api_error::{api_message, status_code};
use super::conditions::MESSAGE_MAX_BYTES;
use super::events::truncate;
use crate::runtime::condition_outbox::{ConditionChange, ConditionOutbox};
use crate::runtime::decode::Undecodable;

/// The condition's type, and the Event's reason.
pub const UNDECODABLE: &str = "Undecodable";

/// How often a write that met a conflict reads the object again before it waits.
const CONFLICT_ATTEMPTS: usize = 3;

/// How long the writer waits after a failed write before it tries again.
const RETRY_AFTER: Duration = Duration::from_secs(5);

/// The condition an undecodable object carries: its reason and its message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Wanted {
    pub reason: &'static str,
    pub message: String,
}

impl Wanted {
    pub fn of(undecodable: &Undecodable) -> Self {
        Self {
            reason: reason(&undecodable.error),
            message: truncate(undecodable.note(), MESSAGE_MAX_BYTES),
        }
    }
}

/// The reason for serde's `error`: the kind of problem, as serde's messages begin.
pub fn reason(error: &str) -> &'static str {
    const REASONS: [(&str, &str); 7] = [
        ("invalid value", "InvalidValue"),
        ("invalid type", "InvalidType"),
        ("invalid length", "InvalidLength"),
        ("missing field", "MissingField"),
        ("unknown variant", "UnknownVariant"),
        ("unknown field", "UnknownField"),
        ("duplicate field", "DuplicateField"),
    ];
    REASONS
        .iter()
        .find(|(start, _)| error.starts_with(start))
        .map_or("Unreadable", |(_, reason)| reason)
}

/// `status.conditions` once the object carries `wanted` (`None`: no `Undecodable`
/// condition), or `None` when `current` already says so. Every other condition stays as it
/// is, in its place; an emptied list is `null`, which a merge patch reads as removing it.
/// `now` is the transition time of a condition that turns `True`.
pub fn conditions_after(
    current: Option<&Value>,
    wanted: Option<&Wanted>,
    now: &str,
) -> Option<Value> {
    let mut conditions: Vec<Value> = current
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let is_undecodable = |c: &Value| c.get("type").and_then(Value::as_str) == Some(UNDECODABLE);
    let position = conditions.iter().position(is_undecodable);
    match (wanted, position) {
        (None, None) => None,
        (None, Some(_)) => {
            conditions.retain(|c| !is_undecodable(c));
            Some(if conditions.is_empty() {
                Value::Null
            } else {
                Value::Array(conditions)
            })
        }
        (Some(wanted), position) => {
            let existing = position.map(|at| &conditions[at]);
            let field =
                |c: &Value, name: &str| c.get(name).and_then(Value::as_str).map(str::to_owned);
            let was_true = existing.is_some_and(|c| field(c, "status").as_deref() == Some("True"));
            if was_true
                && existing.is_some_and(|c| {
                    field(c, "reason").as_deref() == Some(wanted.reason)
                        && field(c, "message").as_deref() == Some(wanted.message.as_str())
                })
            {
                return None;
            }
            let transition = match existing.and_then(|c| field(c, "lastTransitionTime")) {
                Some(since) if was_true => since,
                _ => now.to_owned(),
            };
            let condition = json!({
                "type": UNDECODABLE,
                "status": "True",
                "reason": wanted.reason,
                "message": wanted.message,
                "lastTransitionTime": transition,
            });
            match position {
                Some(at) => conditions[at] = condition,
                None => conditions.push(condition),
            }
            Some(Value::Array(conditions))
        }
    }
}

/// The time now as the apiserver writes one (RFC 3339, whole seconds).
fn now() -> String {
    let now = Time(Timestamp::now());
    match serde_json::to_value(now) {
        Ok(Value::String(now)) => now,
        _ => String::new(),
    }
}

/// What became of one change.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    Written,
    AlreadySo,
    /// Deleted, or created again as another object.
    Gone,
}

/// Writes the changes the stores put in `outbox` while `leadership` says this replica
/// leads, until `shutdown`. Changes that arrive while another replica leads wait, so this
/// one writes them if it takes over.
pub async fn run(
    client: kube::Client,
    outbox: ConditionOutbox,
    mut leadership: watch::Receiver<bool>,
    shutdown: CancellationToken,
) {
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            leading = leadership.wait_for(|leading| *leading) => {
                if leading.is_err() {
                    return;
                }
            }
        }
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = outbox.wait_put() => {}
            changed = leadership.changed() => {
                if changed.is_err() {
                    return;
                }
                // Whether this replica still leads is read again at the top; anything put
                // meanwhile keeps its wake-up for then.
                continue;
            }
        }
        let mut failed = false;
        for change in outbox.take_all() {
            if !*leadership.borrow() || shutdown.is_cancelled() {
                outbox.put_back(change);
                continue;
            }
            let written = write(&client, &change).await;
            if let Ok(outcome) = &written {
                tracing::debug!(
                    kind = %change.resource.kind,
                    namespace = change.namespace.as_deref().unwrap_or(""),
                    name = %change.name,
                    ?outcome,
                    "Undecodable condition"
                );
            }
            if let Err(err) = written {
                tracing::warn!(
                    kind = %change.resource.kind,
                    namespace = change.namespace.as_deref().unwrap_or(""),
                    name = %change.name,
                    error = %api_message(&err),
                    "could not write the Undecodable condition; trying again"
                );
                outbox.put_back(change);
                failed = true;
            }
        }
        if failed {
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = tokio::time::sleep(RETRY_AFTER) => {}
            }
        }
    }
}

/// Writes one object's condition, reading it again after a conflict.
async fn write(client: &kube::Client, change: &ConditionChange) -> Result<Outcome, kube::Error> {
    let api: Api<DynamicObject> = match &change.namespace {
        Some(namespace) => Api::namespaced_with(client.clone(), namespace, &change.resource),
        None => Api::all_with(client.clone(), &change.resource),
    };
    let wanted = change.undecodable.as_ref().map(Wanted::of);
    let mut attempt = 0;
    loop {
        attempt += 1;
        let Some(object) = api.get_opt(&change.name).await? else {
            return Ok(Outcome::Gone);
        };
        if change.uid.is_some() && object.metadata.uid != change.uid {
            return Ok(Outcome::Gone);
        }
        let current = object.data.pointer("/status/conditions");
        let Some(conditions) = conditions_after(current, wanted.as_ref(), &now()) else {
            return Ok(Outcome::AlreadySo);
        };
        let patch = json!({
            "metadata": { "resourceVersion": object.metadata.resource_version },
            "status": { "conditions": conditions },
        });
        match api
            .patch_status(&change.name, &PatchParams::default(), &Patch::Merge(patch))
            .await
        {
            Ok(_) => return Ok(Outcome::Written),
            Err(err) if status_code(&err) == Some(404) => return Ok(Outcome::Gone),
            Err(err) if status_code(&err) == Some(409) && attempt < CONFLICT_ATTEMPTS => {}
            Err(err) => return Err(err),
        }
    }
}

#[cfg(test)]
#[path = "undecodable_condition_tests.rs"]
mod tests;
