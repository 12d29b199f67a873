//! How a read-compute-write of the plugin's changes meets a conflict: which object a try
//! computes its patch from, and whether a conflicting write is tried again.

use serde_json::Value;

/// How often a conflicting write is computed again from a fresh read (kubectl's
/// `RetryOnConflict` tries five times).
pub const WRITE_TRIES: usize = 5;

/// The tries of one change.
#[derive(Debug)]
pub struct Tries {
    made: usize,
    first_read: Option<Value>,
}

impl Tries {
    /// Before the first try; `first_read` is the object if the caller has read it already
    /// (for a check of its own), so the first try needs no GET of its own.
    pub fn new(first_read: Option<Value>) -> Self {
        Self {
            made: 1,
            first_read,
        }
    }

    /// The object this try computes from without reading it: the caller's read on the first
    /// try, none after a conflict (the conflict says the object has changed since).
    pub fn already_read(&mut self) -> Option<Value> {
        self.first_read.take()
    }

    /// After a conflicting write: whether to try again (from a fresh read).
    pub fn again_after_conflict(&mut self) -> bool {
        self.first_read = None;
        if self.made >= WRITE_TRIES {
            return false;
        }
        self.made += 1;
        true
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_first_try_uses_the_callers_read_and_a_retry_reads_again() {
        let object = json!({ "metadata": { "resourceVersion": "7" } });
        let mut tries = Tries::new(Some(object.clone()));
        assert_eq!(tries.already_read(), Some(object));
        assert!(tries.again_after_conflict());
        assert_eq!(
            tries.already_read(),
            None,
            "a conflict means the read is stale"
        );

        let mut unread = Tries::new(None);
        assert_eq!(unread.already_read(), None);
    }

    #[test]
    fn a_conflict_is_tried_again_until_five_tries_are_made() {
        let mut tries = Tries::new(None);
        let retries = std::iter::from_fn(|| tries.again_after_conflict().then_some(())).count();
        assert_eq!(retries, WRITE_TRIES - 1);
    }
}
