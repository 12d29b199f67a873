//! A small, bounded, time-limited memory of recent decisions, keyed by a digest of the
//! token (never the token itself) and the permission asked for.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::Access;

/// A decision about one token and one permission.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Allowed,
    /// The token is not valid (for the audience).
    Unauthenticated,
    /// Valid token, but no permission.
    Denied,
}

type Key = ([u8; 32], Access);

/// Decisions kept for `ttl`, at most `capacity` of them.
#[derive(Debug)]
pub struct DecisionCache {
    ttl: Duration,
    capacity: usize,
    entries: HashMap<Key, (Decision, Instant)>,
}

/// The SHA-256 of a token.
pub fn token_digest(token: &str) -> [u8; 32] {
    let digest = ring::digest::digest(&ring::digest::SHA256, token.as_bytes());
    let mut out = [0u8; 32];
    out.copy_from_slice(digest.as_ref());
    out
}

impl DecisionCache {
    pub fn new(ttl: Duration, capacity: usize) -> Self {
        Self {
            ttl,
            capacity,
            entries: HashMap::new(),
        }
    }

    pub fn get(&self, token: &[u8; 32], access: Access, now: Instant) -> Option<Decision> {
        self.entries
            .get(&(*token, access))
            .filter(|(_, at)| now.duration_since(*at) < self.ttl)
            .map(|(decision, _)| *decision)
    }

    pub fn insert(&mut self, token: [u8; 32], access: Access, decision: Decision, now: Instant) {
        if self.entries.len() >= self.capacity {
            let ttl = self.ttl;
            self.entries
                .retain(|_, (_, at)| now.duration_since(*at) < ttl);
        }
        if self.entries.len() >= self.capacity {
            // Still full of fresh entries: forget them all rather than grow; the cost
            // is only extra reviews.
            self.entries.clear();
        }
        self.entries.insert((token, access), (decision, now));
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GET: Access = Access {
        subresource: "pods",
        verb: "get",
    };
    const UPDATE: Access = Access {
        subresource: "pods",
        verb: "update",
    };

    #[test]
    fn remembers_per_token_and_permission_until_the_ttl() {
        let t0 = Instant::now();
        let mut cache = DecisionCache::new(Duration::from_secs(30), 10);
        let a = token_digest("a");
        cache.insert(a, GET, Decision::Allowed, t0);
        assert_eq!(
            cache.get(&a, GET, t0 + Duration::from_secs(29)),
            Some(Decision::Allowed)
        );
        assert_eq!(cache.get(&a, GET, t0 + Duration::from_secs(30)), None);
        assert_eq!(cache.get(&a, UPDATE, t0), None);
        assert_eq!(cache.get(&token_digest("b"), GET, t0), None);
    }

    #[test]
    fn stays_within_capacity() {
        let t0 = Instant::now();
        let mut cache = DecisionCache::new(Duration::from_secs(30), 3);
        for i in 0..10 {
            cache.insert(token_digest(&i.to_string()), GET, Decision::Denied, t0);
            assert!(cache.len() <= 3);
        }
        // Expired entries are dropped first.
        let mut cache = DecisionCache::new(Duration::from_secs(30), 2);
        cache.insert(token_digest("old"), GET, Decision::Denied, t0);
        let later = t0 + Duration::from_secs(31);
        cache.insert(token_digest("new"), GET, Decision::Allowed, later);
        cache.insert(token_digest("newer"), GET, Decision::Allowed, later);
        assert_eq!(cache.len(), 2);
        assert_eq!(
            cache.get(&token_digest("new"), GET, later),
            Some(Decision::Allowed)
        );
    }

    #[test]
    fn digests_differ_per_token() {
        assert_ne!(token_digest("a"), token_digest("b"));
        assert_eq!(token_digest("a"), token_digest("a"));
    }
}
