//! ControllerRevision history as plain data: template hashes, revision names and numbers,
//! which revision a template change (or a rollback) lands on, and which old revisions to
//! prune. The reconciler lists the revisions and pods, asks these functions, and only then
//! creates, updates or deletes ControllerRevisions.
//!
//! Hashing follows Kubernetes (`pkg/controller/history.HashControllerRevision` and
//! `pkg/controller.ComputeHash`); the naming, rollback and pruning rules follow
//! OpenKruise's CloneSet controller (`getActiveRevisions`, `truncateHistory`).

use std::cmp::Ordering;

use serde::Serialize;

#[cfg(test)]
#[path = "revision_tests.rs"]
mod tests;

pub use super::revision_adapter::{
    CONTROLLER_REVISION_HASH_LABEL, POD_TEMPLATE_HASH_LABEL, RevisionAdapter, short_hash,
};

/// Label Kubernetes puts on a ControllerRevision with its hash.
pub const REVISION_HASH_LABEL: &str = "controller.kubernetes.io/hash";

/// `k8s.io/apimachinery/pkg/util/rand`'s alphabet: no vowels (so no words) and no
/// look-alike characters (0, 1, 3).
const SAFE_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// Longest parent-name prefix kept in a revision name, so the name (prefix, dash, hash of
/// at most 10 characters, plus room Kubernetes reserves) stays within 253 bytes.
const MAX_REVISION_PREFIX: usize = 223;

const FNV32_OFFSET: u32 = 0x811c_9dc5;
const FNV32_PRIME: u32 = 0x0100_0193;

/// Errors of this module.
#[derive(Debug, thiserror::Error)]
pub enum RevisionError {
    /// The template could not be serialized for hashing.
    #[error("serializing the pod template for its revision: {source}")]
    Serialize {
        /// Why serde_json failed.
        #[source]
        source: serde_json::Error,
    },
}

/// FNV-1 32 (multiply, then xor), Go's `fnv.New32`, used by `HashControllerRevision`.
pub fn fnv32(bytes: &[u8]) -> u32 {
    bytes.iter().fold(FNV32_OFFSET, |hash, byte| {
        hash.wrapping_mul(FNV32_PRIME) ^ u32::from(*byte)
    })
}

/// FNV-1a 32 (xor, then multiply), Go's `fnv.New32a`, used by `ComputeHash`.
pub fn fnv32a(bytes: &[u8]) -> u32 {
    bytes.iter().fold(FNV32_OFFSET, |hash, byte| {
        (hash ^ u32::from(*byte)).wrapping_mul(FNV32_PRIME)
    })
}

/// `rand.SafeEncodeString`: every byte mapped into the safe alphabet, so a hash placed in
/// a name or label never spells a word.
pub fn safe_encode(value: &str) -> String {
    value
        .bytes()
        .map(|byte| char::from(SAFE_ALPHABET[usize::from(byte) % SAFE_ALPHABET.len()]))
        .collect()
}

/// Kubernetes' `ComputeHash`: FNV-32a over the serialized object, then the collision count
/// as a uint32 little-endian in an eight-byte buffer (Kubernetes allocates 8 bytes and
/// fills 4; the zero padding is part of the hash), encoded as the decimal hash in the safe
/// alphabet. The collision count changes the hash when a different object took the name.
pub fn compute_hash(serialized: &[u8], collision_count: Option<i32>) -> String {
    let mut bytes = serialized.to_vec();
    if let Some(count) = collision_count {
        bytes.extend_from_slice(&count.to_le_bytes());
        bytes.extend_from_slice(&[0; 4]);
    }
    safe_encode(&fnv32a(&bytes).to_string())
}

/// `HashControllerRevision`: FNV-32 (not 32a) over the revision's data, then the collision
/// count written as its decimal digits, encoded in the safe alphabet. This is the hash in a
/// ControllerRevision's name.
pub fn hash_revision_data(data: &[u8], collision_count: Option<i32>) -> String {
    let mut bytes = data.to_vec();
    if let Some(count) = collision_count {
        bytes.extend_from_slice(count.to_string().as_bytes());
    }
    safe_encode(&fnv32(&bytes).to_string())
}

/// The data stored in a CloneSet's ControllerRevision, as OpenKruise builds it: a patch
/// that replaces `spec.template` wholesale, so applying it restores the template exactly.
pub fn template_revision_data<T: Serialize>(template: &T) -> Result<Vec<u8>, RevisionError> {
    let mut template =
        serde_json::to_value(template).map_err(|source| RevisionError::Serialize { source })?;
    if let serde_json::Value::Object(fields) = &mut template {
        fields.insert("$patch".to_owned(), "replace".into());
    }
    let patch = serde_json::json!({ "spec": { "template": template } });
    serde_json::to_vec(&patch).map_err(|source| RevisionError::Serialize { source })
}

/// `ControllerRevisionName`: `<parent>-<hash>`, the parent cut to 223 bytes (at a character
/// boundary) so the name stays a valid object name.
pub fn revision_name(parent: &str, hash: &str) -> String {
    let mut end = parent.len().min(MAX_REVISION_PREFIX);
    while !parent.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}-{hash}", &parent[..end])
}

/// One ControllerRevision, as far as the planners need it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Revision {
    /// Object name, `<parent>-<hash>`.
    pub name: String,
    /// Revision number; the highest is the newest.
    pub number: i64,
    /// The `controller.kubernetes.io/hash` label, if present.
    pub hash_label: Option<String>,
    /// The revision's `data` (raw JSON).
    pub data: Vec<u8>,
    /// Creation time in Unix seconds, the first tie-breaker between equal numbers.
    pub created: Option<i64>,
}

/// `SortControllerRevisions`: by number, then older first, then by name.
pub fn sort_revisions(revisions: &mut [Revision]) {
    revisions.sort_by(compare_revisions);
}

fn compare_revisions(a: &Revision, b: &Revision) -> Ordering {
    a.number
        .cmp(&b.number)
        .then_with(|| a.created.cmp(&b.created))
        .then_with(|| a.name.cmp(&b.name))
}

/// The number for a new revision: one above the newest, 1 for an empty history.
pub fn next_revision_number(revisions: &[Revision]) -> i64 {
    revisions
        .iter()
        .map(|revision| revision.number)
        .max()
        .map_or(1, |newest| newest.saturating_add(1))
}

/// `EqualRevision`: equal data (once the schema's template defaults are stripped), unless
/// both carry hash labels that already differ.
pub fn equal_revision(a: &Revision, b: &Revision) -> bool {
    let parse = |label: &Option<String>| label.as_deref().and_then(|h| h.parse::<u32>().ok());
    if let (Some(ha), Some(hb)) = (parse(&a.hash_label), parse(&b.hash_label))
        && ha != hb
    {
        return false;
    }
    super::template_defaults::same_revision_data(&a.data, &b.data)
}

/// Where the update revision for the current template comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UpdateRevisionPlan {
    /// The newest revision already holds this template: nothing to write.
    Unchanged {
        /// The newest revision's name.
        name: String,
    },
    /// An older revision holds this template (a rollback): raise its number to `number`
    /// instead of creating a duplicate, so numbers keep growing on every change.
    Renumber {
        /// The old revision's name.
        name: String,
        /// Its new number.
        number: i64,
    },
    /// No revision holds this template: create one.
    Create {
        /// The new revision's name.
        name: String,
        /// The hash in the name (and in the `controller.kubernetes.io/hash` label).
        hash: String,
        /// Its number.
        number: i64,
        /// The collision count after skipping names taken by other data; goes to
        /// `status.collisionCount`.
        collision_count: i32,
    },
}

impl UpdateRevisionPlan {
    /// The name of the update revision once the plan is carried out.
    pub fn name(&self) -> &str {
        match self {
            Self::Unchanged { name } | Self::Renumber { name, .. } | Self::Create { name, .. } => {
                name
            }
        }
    }
}

/// OpenKruise's `getActiveRevisions` as a decision: given the history and the revision
/// data of the current template, reuse the newest revision, renumber an older equal one
/// (rollback), or create a new one whose name does not collide with a different revision.
pub fn plan_update_revision(
    parent: &str,
    revisions: &[Revision],
    data: &[u8],
    collision_count: i32,
) -> UpdateRevisionPlan {
    let mut sorted = revisions.to_vec();
    sort_revisions(&mut sorted);
    let number = next_revision_number(&sorted);
    let candidate = Revision {
        name: String::new(),
        number,
        hash_label: None,
        data: data.to_vec(),
        created: None,
    };
    let newest_equal = sorted
        .iter()
        .rev()
        .find(|revision| equal_revision(revision, &candidate));
    match (newest_equal, sorted.last()) {
        (Some(equal), Some(newest)) if equal.name == newest.name => UpdateRevisionPlan::Unchanged {
            name: equal.name.clone(),
        },
        (Some(equal), _) => UpdateRevisionPlan::Renumber {
            name: equal.name.clone(),
            number,
        },
        (None, _) => {
            let mut collision_count = collision_count;
            loop {
                let hash = hash_revision_data(data, Some(collision_count));
                let name = revision_name(parent, &hash);
                if !sorted.iter().any(|revision| revision.name == name) {
                    return UpdateRevisionPlan::Create {
                        name,
                        hash,
                        number,
                        collision_count,
                    };
                }
                collision_count = collision_count.saturating_add(1);
            }
        }
    }
}

/// The current revision: the one named in `status.currentRevision` if it still exists,
/// else the update revision (a new set starts its history there).
pub fn current_revision_name<'a>(
    revisions: &'a [Revision],
    status_current: &str,
    update: &'a str,
) -> &'a str {
    revisions
        .iter()
        .find(|revision| revision.name == status_current)
        .map_or(update, |revision| revision.name.as_str())
}

/// OpenKruise's `truncateHistory`: the revisions to delete so that at most `history_limit`
/// revisions remain besides the live ones, oldest first. Live revisions — current, update,
/// and any a pod still carries in `controller-revision-hash` — are never deleted.
pub fn revisions_to_truncate<'a>(
    revisions: &'a [Revision],
    current: &str,
    update: &str,
    pod_revision_labels: &[Option<&str>],
    history_limit: i32,
) -> Vec<&'a Revision> {
    let mut dead: Vec<&Revision> = revisions
        .iter()
        .filter(|revision| revision.name != current && revision.name != update)
        .filter(|revision| {
            !pod_revision_labels
                .iter()
                .any(|label| RevisionAdapter::label_names(*label, &revision.name))
        })
        .collect();
    dead.sort_by(|a, b| compare_revisions(a, b));
    let limit = usize::try_from(history_limit.max(0)).unwrap_or(0);
    let excess = dead.len().saturating_sub(limit);
    dead.truncate(excess);
    dead
}
