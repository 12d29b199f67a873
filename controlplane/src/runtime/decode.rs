//! Per-object decoding of a watch: each kind is watched untyped ([`DynamicObject`]) and every
//! object is turned into the kind's Rust type on its own, so one stored object that does not
//! fit the type (a field out of its range, a string where a number belongs) costs only that
//! object, never the list of its whole kind.
//!
//! [`Decoder::step`] is the pure rule: a watch event in, the event the store applies and at
//! most one new [`Undecodable`] report out. It holds no client; `stores.rs` carries the
//! result out (store, broadcast, metric, log, and the report the wiring turns into an Event).
//!
//! What a store holds for an object that stops decoding: **the last copy it could read**,
//! until the object decodes again or is deleted. Dropping it would tell every reader that
//! the object is gone: a PodUnavailableBudget that vanishes from the cache stops protecting
//! its pods (the webhook would allow every disruption it guards against), and a controller
//! would forget a workload it still owns. A stale copy is what a lagging watch shows anyway,
//! which every reader already tolerates; the Warning Event tells the owner that their change
//! is not being acted on. A relist keeps that copy too, so leadership changing hands does
//! not drop it. Only a replica that never read a good copy (started while the object was
//! already undecodable) has none, and then the object is absent from its store.

use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::Arc;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::{ApiResource, DynamicObject};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Resource, ResourceExt as _};
use serde::de::DeserializeOwned;

/// An object of a watched kind that does not decode into its Rust type: skipped, and
/// reported on itself.
#[derive(Clone, Debug, PartialEq)]
pub struct Undecodable {
    /// The object, at the resourceVersion that did not decode.
    pub object: ObjectReference,
    /// Where decoding failed, as serde_path_to_error spells it (`spec.replicas`,
    /// `spec.template.spec.containers[0].ports`); `.` for the object itself.
    pub field: String,
    /// serde's message, e.g. ``invalid type: boolean `true`, expected IntOrString``.
    pub error: String,
    /// Whether the store still serves a copy read before this change.
    pub last_good_kept: bool,
}

impl Undecodable {
    /// The Event's note: what could not be read, where, and what the control plane does
    /// about it meanwhile.
    pub fn note(&self) -> String {
        let kind = self.object.kind.as_deref().unwrap_or("object");
        let version = self.object.resource_version.as_deref().unwrap_or("unknown");
        let what = if self.field == "." {
            format!("The control plane cannot read this {kind} at resourceVersion {version}")
        } else {
            format!(
                "The control plane cannot read the field {} of this {kind} at resourceVersion \
                 {version}",
                self.field
            )
        };
        let meanwhile = if self.last_good_kept {
            "it keeps acting on the last version it could read until the object is fixed"
        } else {
            "it ignores the object until it is fixed"
        };
        format!("{what}: {}; {meanwhile}.", self.error)
    }
}

/// What one watch event becomes.
#[derive(Debug)]
pub struct Step<K> {
    /// What the store applies and the change broadcast sends, if anything.
    pub event: Option<watcher::Event<K>>,
    /// An object seen not to decode at a resourceVersion not reported before.
    pub report: Option<Undecodable>,
}

impl<K> Step<K> {
    fn apply(event: watcher::Event<K>) -> Self {
        Self {
            event: Some(event),
            report: None,
        }
    }
}

/// Why one object did not decode.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecodeError {
    pub field: String,
    pub error: String,
}

/// Decodes one untyped object into `K`, naming the field where it fails.
pub fn decode<K: DeserializeOwned>(object: DynamicObject) -> Result<K, DecodeError> {
    let DynamicObject {
        types,
        metadata,
        data,
    } = object;
    // The flattened rest of the object is always a map; anything else decodes as if empty
    // and is then refused by `K` itself.
    let mut fields = match data {
        serde_json::Value::Object(fields) => fields,
        _ => serde_json::Map::new(),
    };
    if let Some(types) = types {
        fields.insert("apiVersion".to_owned(), types.api_version.into());
        fields.insert("kind".to_owned(), types.kind.into());
    }
    let metadata = serde_json::to_value(metadata).map_err(|err| DecodeError {
        field: "metadata".to_owned(),
        error: err.to_string(),
    })?;
    fields.insert("metadata".to_owned(), metadata);
    serde_path_to_error::deserialize(serde_json::Value::Object(fields)).map_err(|err| DecodeError {
        field: err.path().to_string(),
        error: err.inner().to_string(),
    })
}

/// Whether an object comes from a list (`InitApply`) or a change (`Apply`).
#[derive(Clone, Copy)]
enum Listing {
    Yes,
    No,
}

/// Which object: namespace (none for a cluster-scoped kind) and name.
type Key = (Option<String>, String);

/// Turns one kind's untyped watch events into typed ones, remembering which objects do not
/// decode (and at which resourceVersion each was last reported) so each is reported once
/// per version, however often it is listed again.
pub struct Decoder<K> {
    resource: ApiResource,
    /// Objects that did not decode at their latest version seen, with that version.
    undecodable: HashMap<Key, Option<String>>,
    /// During a list: those known before it began that it has not shown yet. Dropped when
    /// the list completes, as the objects themselves are gone.
    unlisted: HashMap<Key, Option<String>>,
    kind: PhantomData<fn() -> K>,
}

impl<K> Decoder<K>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned,
{
    pub fn new() -> Self {
        Self {
            resource: ApiResource::erase::<K>(&()),
            undecodable: HashMap::new(),
            unlisted: HashMap::new(),
            kind: PhantomData,
        }
    }

    /// How many objects of the kind do not decode now (as of the last list and the
    /// changes since).
    pub fn undecodable(&self) -> usize {
        self.undecodable.len() + self.unlisted.len()
    }

    /// Decodes `event`; `last_good` looks up the copy the store holds now.
    pub fn step(
        &mut self,
        event: watcher::Event<DynamicObject>,
        last_good: impl Fn(&ObjectRef<K>) -> Option<Arc<K>>,
    ) -> Step<K> {
        match event {
            watcher::Event::Init => {
                // A list interrupted and begun again keeps what the first attempt knew.
                self.unlisted.extend(self.undecodable.drain());
                Step::apply(watcher::Event::Init)
            }
            watcher::Event::InitDone => {
                self.unlisted.clear();
                Step::apply(watcher::Event::InitDone)
            }
            watcher::Event::InitApply(object) => self.applied(object, last_good, Listing::Yes),
            watcher::Event::Apply(object) => self.applied(object, last_good, Listing::No),
            watcher::Event::Delete(object) => {
                let key = key_of(&object);
                self.undecodable.remove(&key);
                self.unlisted.remove(&key);
                let reference = object_ref::<K>(&key);
                let event = match decode::<K>(object) {
                    Ok(object) => Some(object),
                    // Removed by the copy the store holds, if any: the store keys by name.
                    Err(_) => last_good(&reference).map(|kept| (*kept).clone()),
                };
                Step {
                    event: event.map(watcher::Event::Delete),
                    report: None,
                }
            }
        }
    }

    /// An object listed (`InitApply`) or changed (`Apply`): the decoded object; or, if it
    /// does not decode, the copy the store holds stays: listed again with the rest (else
    /// the list's swap would drop it), or left as it is for a change.
    fn applied(
        &mut self,
        object: DynamicObject,
        last_good: impl Fn(&ObjectRef<K>) -> Option<Arc<K>>,
        listing: Listing,
    ) -> Step<K> {
        let key = key_of(&object);
        let version = object.resource_version();
        let reference = self.reference(&object);
        match decode::<K>(object) {
            Ok(decoded) => {
                self.undecodable.remove(&key);
                self.unlisted.remove(&key);
                Step::apply(match listing {
                    Listing::Yes => watcher::Event::InitApply(decoded),
                    Listing::No => watcher::Event::Apply(decoded),
                })
            }
            Err(DecodeError { field, error }) => {
                let kept = last_good(&object_ref::<K>(&key));
                let reported = self
                    .unlisted
                    .remove(&key)
                    .or_else(|| self.undecodable.get(&key).cloned());
                let report = (reported.as_ref() != Some(&version)).then(|| Undecodable {
                    object: reference,
                    field,
                    error,
                    last_good_kept: kept.is_some(),
                });
                self.undecodable.insert(key, version);
                let event = match listing {
                    Listing::Yes => kept.map(|kept| watcher::Event::InitApply((*kept).clone())),
                    Listing::No => None,
                };
                Step { event, report }
            }
        }
    }

    fn reference(&self, object: &DynamicObject) -> ObjectReference {
        ObjectReference {
            api_version: Some(self.resource.api_version.clone()),
            kind: Some(self.resource.kind.clone()),
            namespace: object.metadata.namespace.clone(),
            name: object.metadata.name.clone(),
            uid: object.metadata.uid.clone(),
            resource_version: object.metadata.resource_version.clone(),
            field_path: None,
        }
    }
}

impl<K> Default for Decoder<K>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned,
{
    fn default() -> Self {
        Self::new()
    }
}

fn key_of(object: &DynamicObject) -> Key {
    (object.metadata.namespace.clone(), object.name_any())
}

fn object_ref<K: Resource<DynamicType = ()>>((namespace, name): &Key) -> ObjectRef<K> {
    let reference = ObjectRef::new(name);
    match namespace {
        Some(namespace) => reference.within(namespace),
        None => reference,
    }
}

#[cfg(test)]
#[path = "decode_tests.rs"]
mod tests;
