//! Whether a new revision's pod would be accepted, asked of the apiserver with a
//! server-side dry-run create before a rollout disrupts its first pod: a template the
//! apiserver refuses in a Pod (an invalid resource quantity, a forbidden security
//! context) must never cost a running pod. The verdict per workload and revision is kept,
//! so a sync does not ask again; a refusal is asked again after [`RECHECK_REFUSED`],
//! because admission policies and namespace labels can change without a new revision.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

/// How long a refusal is believed before the dry run is repeated.
pub const RECHECK_REFUSED: Duration = Duration::from_secs(300);

/// The apiserver's answer to the dry-run create of a revision's pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The pod would be created: the rollout may disrupt pods.
    Accepted,
    /// The pod itself is refused (invalid, or forbidden by admission): no pod is disrupted.
    /// The apiserver's message.
    Refused(String),
    /// Refused for want of quota, which the rollout's own deletes may free: the rollout
    /// goes on, and the next rollout step asks again.
    QuotaExceeded,
    /// No verdict (the apiserver did not answer, or answered 5xx/429): no pod is
    /// disrupted now; asked again at the next sync.
    Unknown(String),
}

impl Verdict {
    /// Reads the dry run's outcome: `Ok` or the failing status code and message.
    pub fn of(result: Result<(), (Option<u16>, String)>) -> Self {
        let (code, message) = match result {
            Ok(()) => return Self::Accepted,
            Err(failure) => failure,
        };
        match code {
            Some(403) if message.contains("exceeded quota") => Self::QuotaExceeded,
            Some(400 | 403 | 422) => Self::Refused(message),
            _ => Self::Unknown(message),
        }
    }

    /// Whether the rollout may disrupt pods now.
    pub fn allows_disruption(&self) -> bool {
        matches!(self, Self::Accepted | Self::QuotaExceeded)
    }

    fn is_cached(&self) -> bool {
        matches!(self, Self::Accepted | Self::Refused(_))
    }
}

struct Checked {
    revision: String,
    verdict: Verdict,
    at: Instant,
}

/// The last verdict per workload (only the update revision is ever checked, so one entry
/// per workload bounds the memory).
pub struct TemplateChecks<K> {
    checked: Mutex<HashMap<K, Checked>>,
}

impl<K: Clone + Eq + Hash> Default for TemplateChecks<K> {
    fn default() -> Self {
        Self {
            checked: Mutex::new(HashMap::new()),
        }
    }
}

impl<K: Clone + Eq + Hash> TemplateChecks<K> {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<K, Checked>> {
        self.checked.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The verdict on `revision` of `key` still believed at `now`, if any.
    pub fn cached(&self, key: &K, revision: &str, now: Instant) -> Option<Verdict> {
        let checked = self.lock();
        let entry = checked.get(key).filter(|c| c.revision == revision)?;
        let fresh = match entry.verdict {
            Verdict::Refused(_) => now.duration_since(entry.at) < RECHECK_REFUSED,
            _ => true,
        };
        fresh.then(|| entry.verdict.clone())
    }

    /// Keeps `verdict` on `revision` of `key` if it is worth keeping.
    pub fn record(&self, key: &K, revision: &str, verdict: &Verdict, now: Instant) {
        if verdict.is_cached() {
            self.lock().insert(
                key.clone(),
                Checked {
                    revision: revision.to_owned(),
                    verdict: verdict.clone(),
                    at: now,
                },
            );
        }
    }

    /// `key` is gone.
    pub fn forget(&self, key: &K) {
        self.lock().remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failed(code: Option<u16>, message: &str) -> Verdict {
        Verdict::of(Err((code, message.to_owned())))
    }

    #[test]
    fn reads_the_apiserver_answer() {
        let invalid = "Pod \"web-x\" is invalid: spec.containers[0].resources.requests: Invalid value: \"-1\"";
        let cases = [
            (Verdict::of(Ok(())), Verdict::Accepted, true),
            (
                failed(Some(422), invalid),
                Verdict::Refused(invalid.into()),
                false,
            ),
            (
                failed(Some(400), "bad"),
                Verdict::Refused("bad".into()),
                false,
            ),
            (
                failed(Some(403), "violates PodSecurity \"restricted:latest\""),
                Verdict::Refused("violates PodSecurity \"restricted:latest\"".into()),
                false,
            ),
            (
                failed(Some(403), "pods \"x\" is forbidden: exceeded quota: q"),
                Verdict::QuotaExceeded,
                true,
            ),
            (
                failed(Some(503), "unavailable"),
                Verdict::Unknown("unavailable".into()),
                false,
            ),
            (
                failed(Some(429), "slow down"),
                Verdict::Unknown("slow down".into()),
                false,
            ),
            (
                failed(None, "connection refused"),
                Verdict::Unknown("connection refused".into()),
                false,
            ),
        ];
        for (i, (got, want, allows)) in cases.into_iter().enumerate() {
            assert_eq!(got, want, "case {i}");
            assert_eq!(got.allows_disruption(), allows, "case {i}");
        }
    }

    #[test]
    fn verdicts_are_kept_per_revision_and_refusals_expire() {
        let checks = TemplateChecks::<&str>::default();
        let t0 = Instant::now();
        let refused = Verdict::Refused("invalid".into());
        checks.record(&"web", "web-2", &refused, t0);
        assert_eq!(
            checks.cached(&"web", "web-2", t0 + Duration::from_secs(60)),
            Some(refused)
        );
        assert_eq!(checks.cached(&"web", "web-3", t0), None, "another revision");
        assert_eq!(checks.cached(&"db", "web-2", t0), None, "another workload");
        assert_eq!(
            checks.cached(&"web", "web-2", t0 + RECHECK_REFUSED),
            None,
            "asked again"
        );

        checks.record(&"web", "web-3", &Verdict::Accepted, t0);
        assert_eq!(
            checks.cached(&"web", "web-3", t0 + Duration::from_secs(86_400)),
            Some(Verdict::Accepted)
        );
        checks.record(&"web", "web-4", &Verdict::Unknown("timeout".into()), t0);
        assert_eq!(
            checks.cached(&"web", "web-4", t0),
            None,
            "no answer is not kept"
        );
        checks.forget(&"web");
        assert_eq!(checks.cached(&"web", "web-3", t0), None);
    }
}
