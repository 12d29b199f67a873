//! Authorisations the registry client has earned, kept until they expire so a pull
//! answers the registry's challenge once per repository rather than once per request.
//! An entry is keyed by the endpoint it was earned at and by the credential that earned
//! it ([`Auth::fingerprint`]), so a caller never borrows another caller's access.

use std::{
    collections::HashMap,
    sync::Mutex,
    time::{Duration, Instant},
};

use super::credentials::Auth;

/// What the distribution spec says a token without `expires_in` lives for.
pub const DEFAULT_TOKEN_LIFETIME: Duration = Duration::from_secs(60);

/// Taken off every lifetime, so a token is not sent in the instant it expires.
const EXPIRY_MARGIN: Duration = Duration::from_secs(5);

/// Entries kept at most; past it expired ones are dropped, then the whole cache.
const MAX_ENTRIES: usize = 1024;

/// Where an authorisation holds: a repository of one endpoint, for one credential.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CacheKey {
    /// The repository's base URL (`scheme://host/v2/path`).
    pub base: String,
    /// [`Auth::fingerprint`] of the caller's credential.
    pub credential: String,
}

impl CacheKey {
    pub fn new(base: &str, auth: &Auth) -> Self {
        Self {
            base: base.to_owned(),
            credential: auth.fingerprint(),
        }
    }
}

/// An `Authorization` header value and when it stops being worth sending.
#[derive(Clone)]
struct Entry {
    authorization: String,
    /// `None`: until the registry refuses it (basic credentials).
    expires: Option<Instant>,
}

/// The cache; the clock is passed in so expiry is testable.
#[derive(Default)]
pub struct TokenCache {
    entries: Mutex<HashMap<CacheKey, Entry>>,
}

impl std::fmt::Debug for TokenCache {
    // The values are secrets.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TokenCache")
    }
}

impl TokenCache {
    /// The authorisation for `key`, unless absent or expired at `now`.
    pub fn get(&self, key: &CacheKey, now: Instant) -> Option<String> {
        let entries = self.entries.lock().ok()?;
        let entry = entries.get(key)?;
        entry
            .expires
            .is_none_or(|expires| now < expires)
            .then(|| entry.authorization.clone())
    }

    /// Keeps `authorization` for `key`, for `lifetime` from `now` (`None`: until
    /// forgotten).
    pub fn put(
        &self,
        key: CacheKey,
        authorization: String,
        lifetime: Option<Duration>,
        now: Instant,
    ) {
        let Ok(mut entries) = self.entries.lock() else {
            return;
        };
        if entries.len() >= MAX_ENTRIES {
            entries.retain(|_, entry| entry.expires.is_none_or(|expires| now < expires));
            if entries.len() >= MAX_ENTRIES {
                entries.clear();
            }
        }
        let expires = lifetime.map(|lifetime| now + lifetime.saturating_sub(EXPIRY_MARGIN));
        entries.insert(
            key,
            Entry {
                authorization,
                expires,
            },
        );
    }

    /// Drops `key`'s authorisation (the registry refused it).
    pub fn forget(&self, key: &CacheKey) {
        if let Ok(mut entries) = self.entries.lock() {
            entries.remove(key);
        }
    }
}

/// A token's lifetime from its `expires_in` (seconds), the spec's default when absent
/// or nonsensical (zero).
pub fn token_lifetime(expires_in: Option<u64>) -> Duration {
    expires_in
        .filter(|seconds| *seconds > 0)
        .map_or(DEFAULT_TOKEN_LIFETIME, Duration::from_secs)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn key(base: &str, auth: &Auth) -> CacheKey {
        CacheKey::new(base, auth)
    }

    #[test]
    fn tokens_are_kept_until_shortly_before_they_expire() {
        let cache = TokenCache::default();
        let now = Instant::now();
        let k = key("http://r/v2/a", &Auth::Anonymous);
        cache.put(
            k.clone(),
            "Bearer t".into(),
            Some(Duration::from_secs(60)),
            now,
        );
        let cases = [(0, true), (54, true), (55, false), (120, false)];
        for (after, kept) in cases {
            let at = now + Duration::from_secs(after);
            assert_eq!(cache.get(&k, at).is_some(), kept, "after {after}s");
        }
        cache.put(k.clone(), "Basic x".into(), None, now);
        assert_eq!(
            cache.get(&k, now + Duration::from_secs(86_400)).as_deref(),
            Some("Basic x")
        );
        cache.forget(&k);
        assert_eq!(cache.get(&k, now), None);
    }

    #[test]
    fn entries_are_per_endpoint_repository_and_credential() {
        let cache = TokenCache::default();
        let now = Instant::now();
        let alice = Auth::Basic {
            username: "alice".into(),
            password: "a".into(),
        };
        let bob = Auth::Basic {
            username: "bob".into(),
            password: "b".into(),
        };
        let alice_again = Auth::Basic {
            username: "alice".into(),
            password: "other".into(),
        };
        cache.put(key("http://r/v2/a", &alice), "Bearer A".into(), None, now);
        let cases = [
            (key("http://r/v2/a", &alice), Some("Bearer A")),
            (key("http://r/v2/a", &bob), None),
            (key("http://r/v2/a", &alice_again), None),
            (key("http://r/v2/a", &Auth::Anonymous), None),
            (key("http://r/v2/b", &alice), None),
            (key("http://mirror/v2/a", &alice), None),
        ];
        for (k, want) in cases {
            assert_eq!(cache.get(&k, now).as_deref(), want, "{k:?}");
        }
    }

    #[test]
    fn lifetimes_default_to_the_specs_minute() {
        assert_eq!(token_lifetime(None), DEFAULT_TOKEN_LIFETIME);
        assert_eq!(token_lifetime(Some(0)), DEFAULT_TOKEN_LIFETIME);
        assert_eq!(token_lifetime(Some(300)), Duration::from_secs(300));
    }

    #[test]
    fn the_cache_is_bounded() {
        let cache = TokenCache::default();
        let now = Instant::now();
        for i in 0..=MAX_ENTRIES {
            let k = key(&format!("http://r/v2/{i}"), &Auth::Anonymous);
            cache.put(k, "Bearer t".into(), None, now);
        }
        let entries = cache.entries.lock().unwrap().len();
        assert!(entries <= MAX_ENTRIES, "{entries}");
    }
}
