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

/// Decisions kept for their time to live, at most `capacity` of them.
#[derive(Debug)]
pub struct DecisionCache {
    ttls: Ttls,
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

/// How long each kind of decision is reused: an allowed caller longer than a refused one,
/// as kubelet's webhook authentication and authorization caches do, so a caller granted
/// access later is not kept out long, while a busy allowed caller (the control plane,
/// calling every agent) costs the apiserver few reviews.
#[derive(Debug, Clone, Copy)]
pub struct Ttls {
    pub allowed: Duration,
    pub refused: Duration,
}

impl Ttls {
    fn of(self, decision: Decision) -> Duration {
        match decision {
            Decision::Allowed => self.allowed,
            Decision::Unauthenticated | Decision::Denied => self.refused,
        }
    }
}

impl DecisionCache {
    pub fn new(ttls: Ttls, capacity: usize) -> Self {
        Self {
            ttls,
            capacity,
            entries: HashMap::new(),
        }
    }

    fn fresh(&self, decision: Decision, at: Instant, now: Instant) -> bool {
        now.duration_since(at) < self.ttls.of(decision)
    }

    pub fn get(&self, token: &[u8; 32], access: Access, now: Instant) -> Option<Decision> {
        self.entries
            .get(&(*token, access))
            .filter(|(decision, at)| self.fresh(*decision, *at, now))
            .map(|(decision, _)| *decision)
    }

    pub fn insert(&mut self, token: [u8; 32], access: Access, decision: Decision, now: Instant) {
        if self.entries.len() >= self.capacity {
            let ttls = self.ttls;
            self.entries
                .retain(|_, (decision, at)| now.duration_since(*at) < ttls.of(*decision));
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

    const TTLS: Ttls = Ttls {
        allowed: Duration::from_secs(120),
        refused: Duration::from_secs(30),
    };

    #[test]
    fn remembers_per_token_and_permission_until_the_ttl() {
        let t0 = Instant::now();
        let mut cache = DecisionCache::new(TTLS, 10);
        let a = token_digest("a");
        cache.insert(a, GET, Decision::Allowed, t0);
        assert_eq!(
            cache.get(&a, GET, t0 + Duration::from_secs(119)),
            Some(Decision::Allowed)
        );
        assert_eq!(cache.get(&a, GET, t0 + Duration::from_secs(120)), None);
        assert_eq!(cache.get(&a, UPDATE, t0), None);
        assert_eq!(cache.get(&token_digest("b"), GET, t0), None);
    }

    #[test]
    fn a_refusal_is_remembered_for_less_time_than_an_allowance() {
        let t0 = Instant::now();
        let at = |s| t0 + Duration::from_secs(s);
        let cases = [
            (Decision::Allowed, 29, true),
            (Decision::Allowed, 31, true),
            (Decision::Denied, 29, true),
            (Decision::Denied, 30, false),
            (Decision::Unauthenticated, 29, true),
            (Decision::Unauthenticated, 30, false),
        ];
        for (decision, after, kept) in cases {
            let mut cache = DecisionCache::new(TTLS, 10);
            cache.insert(token_digest("t"), GET, decision, t0);
            let got = cache.get(&token_digest("t"), GET, at(after));
            assert_eq!(got.is_some(), kept, "{decision:?} after {after} s");
        }
    }

    #[test]
    fn stays_within_capacity() {
        let t0 = Instant::now();
        let mut cache = DecisionCache::new(TTLS, 3);
        for i in 0..10 {
            cache.insert(token_digest(&i.to_string()), GET, Decision::Denied, t0);
            assert!(cache.len() <= 3);
        }
        // Expired entries are dropped first.
        let mut cache = DecisionCache::new(TTLS, 2);
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
