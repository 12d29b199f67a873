//! When to retry an agent call and how long to wait first: pure, so the rules are
//! tested as a table rather than by timing real calls.

use std::time::Duration;

use tonic::Code;

/// How many times to try a call and how the wait between tries grows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Tries in total, the first one included; 1 disables retries.
    pub max_attempts: u32,
    /// Wait before the second try (before jitter); doubles for each further try.
    pub initial_backoff: Duration,
    /// Upper bound of the wait, however many tries have failed.
    pub max_backoff: Duration,
}

impl Default for RetryPolicy {
    /// Four tries over roughly 1.5 s at most: enough to ride out an agent restart's
    /// first moments without holding a reconcile for long; the reconciler's own requeue
    /// covers longer outages.
    fn default() -> Self {
        Self {
            max_attempts: 4,
            initial_backoff: Duration::from_millis(200),
            max_backoff: Duration::from_secs(2),
        }
    }
}

/// Whether a call that failed with `code` may succeed if simply sent again.
///
/// Tonic reports a failed connect (refused, timed out, TLS handshake) as UNAVAILABLE, so
/// transport errors are covered. Only codes that say nothing about the request itself
/// qualify: a rejection (INVALID_ARGUMENT, PERMISSION_DENIED, UNAUTHENTICATED,
/// NOT_FOUND, FAILED_PRECONDITION) would be repeated verbatim and only add load on the
/// apiserver the agent asks. The calls sent through the pool are idempotent, so a retry
/// after DEADLINE_EXCEEDED is safe even if the first try did take effect.
pub fn is_retryable(code: Code) -> bool {
    matches!(
        code,
        Code::Unavailable | Code::DeadlineExceeded | Code::ResourceExhausted
    )
}

/// The wait before the next try after try number `attempt` (1-based) failed with
/// `code`, or `None` when the call should fail now.
///
/// `jitter` is a random number in `[0, 1)`, a parameter so this stays deterministic.
pub fn next_retry(policy: &RetryPolicy, code: Code, attempt: u32, jitter: f64) -> Option<Duration> {
    (is_retryable(code) && attempt < policy.max_attempts).then(|| backoff(policy, attempt, jitter))
}

/// Exponential backoff with "equal jitter": half of the exponential step is fixed and
/// half is random, so retries from many reconciles spread out after an agent restart,
/// yet each still waits at least half a step.
pub fn backoff(policy: &RetryPolicy, attempt: u32, jitter: f64) -> Duration {
    let doublings = attempt.saturating_sub(1).min(31);
    let step = policy
        .initial_backoff
        .saturating_mul(1_u32 << doublings)
        .min(policy.max_backoff);
    let half = step / 2;
    half + half.mul_f64(jitter.clamp(0.0, 1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_transient_codes_are_retried() {
        for (code, retry) in [
            (Code::Unavailable, true),
            (Code::DeadlineExceeded, true),
            (Code::ResourceExhausted, true),
            (Code::Ok, false),
            (Code::InvalidArgument, false),
            (Code::PermissionDenied, false),
            (Code::Unauthenticated, false),
            (Code::NotFound, false),
            (Code::FailedPrecondition, false),
            (Code::AlreadyExists, false),
            (Code::Internal, false),
            (Code::Unknown, false),
            (Code::Cancelled, false),
            (Code::Unimplemented, false),
        ] {
            assert_eq!(is_retryable(code), retry, "{code:?}");
            let policy = RetryPolicy::default();
            assert_eq!(
                next_retry(&policy, code, 1, 0.5).is_some(),
                retry,
                "{code:?}"
            );
        }
    }

    #[test]
    fn delay_doubles_within_jitter_bounds_up_to_the_cap() {
        let policy = RetryPolicy {
            max_attempts: 10,
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_millis(1000),
        };
        let ms = Duration::from_millis;
        // attempt → [smallest, largest] wait
        for (attempt, low, high) in [
            (1, ms(50), ms(100)),
            (2, ms(100), ms(200)),
            (3, ms(200), ms(400)),
            (4, ms(400), ms(800)),
            (5, ms(500), ms(1000)),
            (9, ms(500), ms(1000)),
            (u32::MAX, ms(500), ms(1000)),
        ] {
            assert_eq!(backoff(&policy, attempt, 0.0), low, "attempt {attempt}");
            assert_eq!(backoff(&policy, attempt, 1.0), high, "attempt {attempt}");
            let mid = backoff(&policy, attempt, 0.5);
            assert!(low < mid && mid < high, "attempt {attempt}: {mid:?}");
        }
    }

    #[test]
    fn jitter_outside_the_unit_interval_is_clamped() {
        let policy = RetryPolicy::default();
        assert_eq!(backoff(&policy, 1, -3.0), backoff(&policy, 1, 0.0));
        assert_eq!(backoff(&policy, 1, 7.0), backoff(&policy, 1, 1.0));
    }

    #[test]
    fn gives_up_after_the_last_attempt() {
        let policy = RetryPolicy {
            max_attempts: 3,
            ..RetryPolicy::default()
        };
        assert!(next_retry(&policy, Code::Unavailable, 1, 0.0).is_some());
        assert!(next_retry(&policy, Code::Unavailable, 2, 0.0).is_some());
        assert_eq!(next_retry(&policy, Code::Unavailable, 3, 0.0), None);
        let once = RetryPolicy {
            max_attempts: 1,
            ..RetryPolicy::default()
        };
        assert_eq!(next_retry(&once, Code::Unavailable, 1, 0.0), None);
    }
}
