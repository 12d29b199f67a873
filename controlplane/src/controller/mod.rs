//! Machinery every workload controller shares: the work queue, expectations, the runner
//! that ties a reconciler to leadership, and the key type.

pub mod api_error;
pub mod client;
pub mod conditions;
pub mod create_backoff;
pub mod events;
pub mod expectations;
pub mod finalizer;
pub mod job_ttl;
pub mod object;
pub mod pod_conditions;
pub mod queue;
pub mod runner;
pub mod status_patch;
pub mod triggers;
pub mod undecodable_condition;

use std::fmt;

use kube::ResourceExt as _;

/// A namespaced object's key, `namespace/name`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey {
    pub namespace: String,
    pub name: String,
}

impl ObjectKey {
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    /// The key of a namespaced object.
    pub fn of<K: kube::Resource>(object: &K) -> Self {
        Self::new(object.namespace().unwrap_or_default(), object.name_any())
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}
