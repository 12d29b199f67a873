//! Per-object decoding of a watch: each kind is watched as [`Decoded<K>`], whose every item
//! of a list or watch event is decoded on its own (through a JSON value held only while that
//! one item decodes), so one stored object that does not fit the kind's Rust type (a field
//! out of its range, a string where a number belongs) costs only that object, never the
//! list of its whole kind. A page of a list holds decoded objects, as a typed watch's does.
//!
//! [`Decoder::step`] is the pure rule: a watch event in, the event the store applies and at
//! most one new [`Undecodable`] report out, or the news that an object reported before
//! decodes again (`Step::readable`), which takes its `Undecodable` condition off. It holds no client; `stores.rs` carries the
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

use std::borrow::Cow;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use serde::de::{Deserialize, DeserializeOwned, Deserializer};

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
    /// The Event's note and the `Undecodable` condition's message: what could not be read,
    /// where, and what the control plane does about it meanwhile. It names no
    /// resourceVersion (the Event's object does): the condition outlives versions, its own
    /// write makes a new one, and a message that changed with each would be written again
    /// on each.
    pub fn note(&self) -> String {
        let kind = self.object.kind.as_deref().unwrap_or("object");
        let what = if self.field == "." {
            format!("The control plane cannot read this {kind}")
        } else {
            format!(
                "The control plane cannot read the field {} of this {kind}",
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
    /// An object that did not decode at its last version seen and decodes now: what was
    /// reported about it (its `Undecodable` condition) no longer holds.
    pub readable: Option<ObjectReference>,
}

impl<K> Step<K> {
    fn apply(event: watcher::Event<K>) -> Self {
        Self {
            event: Some(event),
            report: None,
            readable: None,
        }
    }
}

/// Why one object did not decode.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecodeError {
    pub field: String,
    pub error: String,
}

/// One object of a kind `K` as a list or watch event delivers it: decoded, or not, with
/// what names it. Deserializing it never fails on what `K` refuses.
#[derive(Clone, Debug)]
pub enum Decoded<K> {
    Object(K),
    Undecodable {
        /// The object's namespace, name, uid and resourceVersion only; boxed, as the rare
        /// case should not make every item of a list larger.
        metadata: Box<ObjectMeta>,
        error: DecodeError,
    },
}

impl<'de, K: DeserializeOwned> Deserialize<'de> for Decoded<K> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        serde_json::Value::deserialize(deserializer).map(decode)
    }
}

/// Decodes one object into `K`, naming the field where it fails.
pub fn decode<K: DeserializeOwned>(object: serde_json::Value) -> Decoded<K> {
    // What names the object, taken before the value is consumed.
    let metadata = Box::new(identity(&object));
    match serde_path_to_error::deserialize(object) {
        Ok(decoded) => Decoded::Object(decoded),
        Err(err) => Decoded::Undecodable {
            metadata,
            error: DecodeError {
                field: err.path().to_string(),
                error: err.inner().to_string(),
            },
        },
    }
}

/// The namespace, name, uid and resourceVersion of an object, as far as they are strings.
fn identity(object: &serde_json::Value) -> ObjectMeta {
    let field = |name: &str| {
        object
            .get("metadata")
            .and_then(|metadata| metadata.get(name))
            .and_then(serde_json::Value::as_str)
            .map(str::to_owned)
    };
    ObjectMeta {
        namespace: field("namespace"),
        name: field("name"),
        uid: field("uid"),
        resource_version: field("resourceVersion"),
        ..ObjectMeta::default()
    }
}

/// The watch asks for `K`'s resource and keys objects by their metadata, either way.
impl<K: Resource> Resource for Decoded<K> {
    type DynamicType = K::DynamicType;
    type Scope = K::Scope;

    fn kind(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::kind(dt)
    }

    fn group(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::group(dt)
    }

    fn version(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::version(dt)
    }

    fn api_version(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::api_version(dt)
    }

    fn plural(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::plural(dt)
    }

    fn url_path(dt: &Self::DynamicType, namespace: Option<&str>) -> String {
        K::url_path(dt, namespace)
    }

    fn meta(&self) -> &ObjectMeta {
        match self {
            Self::Object(object) => object.meta(),
            Self::Undecodable { metadata, .. } => metadata,
        }
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        match self {
            Self::Object(object) => object.meta_mut(),
            Self::Undecodable { metadata, .. } => metadata,
        }
    }
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
        event: watcher::Event<Decoded<K>>,
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
                let event = match object {
                    Decoded::Object(object) => Some(object),
                    // Removed by the copy the store holds, if any: the store keys by name.
                    Decoded::Undecodable { .. } => {
                        last_good(&object_ref::<K>(&key)).map(|kept| (*kept).clone())
                    }
                };
                Step {
                    event: event.map(watcher::Event::Delete),
                    report: None,
                    readable: None,
                }
            }
        }
    }

    /// An object listed (`InitApply`) or changed (`Apply`): the decoded object; or, if it
    /// does not decode, the copy the store holds stays: listed again with the rest (else
    /// the list's swap would drop it), or left as it is for a change.
    fn applied(
        &mut self,
        object: Decoded<K>,
        last_good: impl Fn(&ObjectRef<K>) -> Option<Arc<K>>,
        listing: Listing,
    ) -> Step<K> {
        let key = key_of(&object);
        match object {
            Decoded::Object(decoded) => {
                let was_undecodable =
                    self.undecodable.remove(&key).is_some() | self.unlisted.remove(&key).is_some();
                let readable = was_undecodable.then(|| reference::<K>(decoded.meta().clone()));
                let event = match listing {
                    Listing::Yes => watcher::Event::InitApply(decoded),
                    Listing::No => watcher::Event::Apply(decoded),
                };
                Step {
                    readable,
                    ..Step::apply(event)
                }
            }
            Decoded::Undecodable {
                metadata,
                error: DecodeError { field, error },
            } => {
                let version = metadata.resource_version.clone();
                let kept = last_good(&object_ref::<K>(&key));
                let reported = self
                    .unlisted
                    .remove(&key)
                    .or_else(|| self.undecodable.get(&key).cloned());
                let report = (reported.as_ref() != Some(&version)).then(|| Undecodable {
                    object: reference::<K>(*metadata),
                    field,
                    error,
                    last_good_kept: kept.is_some(),
                });
                self.undecodable.insert(key, version);
                let event = match listing {
                    Listing::Yes => kept.map(|kept| watcher::Event::InitApply((*kept).clone())),
                    Listing::No => None,
                };
                Step {
                    event,
                    report,
                    readable: None,
                }
            }
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

fn key_of<K: Resource>(object: &Decoded<K>) -> Key {
    let metadata = object.meta();
    (
        metadata.namespace.clone(),
        metadata.name.clone().unwrap_or_default(),
    )
}

/// The object an Event about it is put on.
fn reference<K: Resource<DynamicType = ()>>(metadata: ObjectMeta) -> ObjectReference {
    ObjectReference {
        api_version: Some(K::api_version(&()).into_owned()),
        kind: Some(K::kind(&()).into_owned()),
        namespace: metadata.namespace,
        name: metadata.name,
        uid: metadata.uid,
        resource_version: metadata.resource_version,
        field_path: None,
    }
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
