//! Leader election on a `coordination.k8s.io/v1` Lease, as a pure decision: what the
//! elector observed (the Lease or its absence, the time, its own last renewal) in, what to
//! do next out. The loop in `elector.rs` only carries the decision out, so every rule —
//! take over an expired lease, wait for a fresh one, give up past the renew deadline — is
//! table-tested here without an apiserver.
//!
//! Expiry is judged as client-go judges it: a candidate remembers when, on its own
//! monotonic clock, it last saw the Lease record change (holder, `renewTime`,
//! `acquireTime`, transitions, duration or `resourceVersion`), and deems the lease expired
//! only once `leaseDurationSeconds` have passed on that clock with no change. The holder's
//! `renewTime` is never compared with the local clock, so replicas' wall clocks may
//! disagree by any amount; what must hold is only that their clocks run at about the same
//! rate, within the margin `lease_duration - renew_deadline` leaves.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use tokio::time::Instant;

/// How long a lease lasts, how long a leader keeps trying to renew, how often to try.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timings {
    /// How long a lease stays valid after its last renewal; others wait this long.
    pub lease_duration: Duration,
    /// A leader that has not renewed for this long stops acting; shorter than the lease
    /// so it stops before anyone else may take over.
    pub renew_deadline: Duration,
    /// Pause between attempts to acquire or renew.
    pub retry_period: Duration,
}

impl Default for Timings {
    /// client-go's defaults: 15 s lease, 10 s renew deadline, 2 s retry.
    fn default() -> Self {
        Self {
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

/// Why `--leader-elect-*` timings cannot work together; the checks are client-go's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TimingsError {
    #[error("--leader-elect-{flag} must be longer than zero")]
    Zero { flag: &'static str },
    #[error(
        "--leader-elect-lease-duration ({lease:?}) must be longer than --leader-elect-renew-deadline ({renew:?}): a leader must stop acting before a standby may take its lease over"
    )]
    LeaseNotAfterRenew { lease: Duration, renew: Duration },
    #[error(
        "--leader-elect-renew-deadline ({renew:?}) must be longer than 1.2 times --leader-elect-retry-period ({retry:?}): a leader needs more than one jittered retry to renew"
    )]
    RenewNotAfterRetry { renew: Duration, retry: Duration },
}

impl Timings {
    /// Timings from the `--leader-elect-*` flags (kube-controller-manager's names), checked
    /// as client-go's `NewLeaderElector` checks them. Shorter timings fail over sooner
    /// after a leader dies without releasing its lease (about one lease duration plus a
    /// retry), at the price of a leader that stops acting whenever renewing takes longer
    /// than the renew deadline, as it may on a busy apiserver.
    pub fn new(
        lease_duration: Duration,
        renew_deadline: Duration,
        retry_period: Duration,
    ) -> Result<Self, TimingsError> {
        for (flag, value) in [
            ("lease-duration", lease_duration),
            ("renew-deadline", renew_deadline),
            ("retry-period", retry_period),
        ] {
            if value.is_zero() {
                return Err(TimingsError::Zero { flag });
            }
        }
        if lease_duration <= renew_deadline {
            return Err(TimingsError::LeaseNotAfterRenew {
                lease: lease_duration,
                renew: renew_deadline,
            });
        }
        if renew_deadline <= retry_period.mul_f64(RETRY_JITTER_FACTOR) {
            return Err(TimingsError::RenewNotAfterRetry {
                renew: renew_deadline,
                retry: retry_period,
            });
        }
        Ok(Self {
            lease_duration,
            renew_deadline,
            retry_period,
        })
    }
}

/// client-go's `JitterFactor`: a retry may come this many retry periods late.
const RETRY_JITTER_FACTOR: f64 = 1.2;

/// The parts of a Lease the decision reads; any difference between two reads counts as
/// the holder being alive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseRecord {
    /// Current holder; `None` (or empty) when the lease was released.
    pub holder: Option<String>,
    pub renew_time: Option<Timestamp>,
    pub acquire_time: Option<Timestamp>,
    pub lease_duration: Duration,
    pub transitions: i32,
    pub resource_version: Option<String>,
}

impl LeaseRecord {
    /// Reads a Lease, including the `resourceVersion` every write moves.
    pub fn from_lease(lease: &Lease) -> Self {
        Self {
            resource_version: lease.metadata.resource_version.clone(),
            ..Self::from_spec(lease.spec.as_ref())
        }
    }

    /// Reads a Lease spec; a missing duration counts as zero, i.e. already expired.
    pub fn from_spec(spec: Option<&LeaseSpec>) -> Self {
        let spec = spec.cloned().unwrap_or_default();
        Self {
            holder: spec.holder_identity.filter(|h| !h.is_empty()),
            renew_time: spec.renew_time.map(|t| t.0),
            acquire_time: spec.acquire_time.map(|t| t.0),
            lease_duration: Duration::from_secs(
                u64::try_from(spec.lease_duration_seconds.unwrap_or(0)).unwrap_or(0),
            ),
            transitions: spec.lease_transitions.unwrap_or(0),
            resource_version: None,
        }
    }
}

/// The Lease as this candidate last saw it, and since when (on its own monotonic clock) it
/// has looked exactly so.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observation {
    pub record: LeaseRecord,
    pub since: Instant,
}

impl Observation {
    /// What is known after reading `record` at `now`: the same observation when nothing
    /// changed, so the lease keeps ageing; a new one, starting now, when anything did.
    pub fn next(previous: Option<&Self>, record: LeaseRecord, now: Instant) -> Self {
        match previous {
            Some(previous) if previous.record == record => previous.clone(),
            _ => Self { record, since: now },
        }
    }

    /// Whether the holder's claim has lapsed at `now`: a whole lease duration with no
    /// change seen.
    pub fn expired(&self, now: Instant) -> bool {
        now.saturating_duration_since(self.since) >= self.record.lease_duration
    }
}

/// What the elector should do next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// No Lease exists: create it with me as holder.
    Create,
    /// The lease is free or expired: take it over, counting one more transition.
    Acquire { transitions: i32 },
    /// I hold it: renew it.
    Renew,
    /// Someone else holds a fresh lease: retry later.
    Wait,
    /// I was leading but no longer am (another holder, or the renew deadline passed):
    /// stop acting at once.
    Lost,
}

/// Decides the next step from what I know of the Lease (`None` when it does not exist),
/// the current monotonic time, my identity, and when I last renewed successfully (`None`
/// when I am not leading).
pub fn decide(
    observed: Option<&Observation>,
    now: Instant,
    me: &str,
    my_last_renew: Option<Instant>,
    timings: &Timings,
) -> Decision {
    if let Some(renewed) = my_last_renew
        && renew_deadline_passed(renewed, now, timings)
    {
        return Decision::Lost;
    }
    let Some(observed) = observed else {
        return Decision::Create;
    };
    // An empty holder is how client-go releases a lease; treat it like none.
    match observed.record.holder.as_deref().filter(|h| !h.is_empty()) {
        Some(holder) if holder == me => Decision::Renew,
        Some(_) if my_last_renew.is_some() => Decision::Lost,
        Some(_) if !observed.expired(now) => Decision::Wait,
        _ => Decision::Acquire {
            transitions: observed.record.transitions.saturating_add(1),
        },
    }
}

/// Whether a leader that last renewed at `renewed` must stop acting at `now`.
pub fn renew_deadline_passed(renewed: Instant, now: Instant, timings: &Timings) -> bool {
    now.saturating_duration_since(renewed) >= timings.renew_deadline
}

/// The Lease spec written when `me` acquires or renews at `now`.
pub fn held_spec(
    me: &str,
    now: Timestamp,
    acquired: Timestamp,
    transitions: i32,
    timings: &Timings,
) -> LeaseSpec {
    LeaseSpec {
        holder_identity: Some(me.to_owned()),
        acquire_time: Some(MicroTime(acquired)),
        renew_time: Some(MicroTime(now)),
        lease_duration_seconds: Some(duration_seconds(timings.lease_duration)),
        lease_transitions: Some(transitions),
        ..LeaseSpec::default()
    }
}

/// The Lease spec written on graceful shutdown: no holder and a 1 s duration so a standby
/// takes over at its next retry, as client-go's `ReleaseOnCancel` does.
pub fn released_spec(previous: &LeaseSpec, now: Timestamp) -> LeaseSpec {
    LeaseSpec {
        holder_identity: None,
        renew_time: Some(MicroTime(now)),
        lease_duration_seconds: Some(1),
        ..previous.clone()
    }
}

/// Whole seconds, rounded up and at least 1, as `leaseDurationSeconds` needs.
fn duration_seconds(duration: Duration) -> i32 {
    let secs = duration.as_secs() + u64::from(duration.subsec_nanos() > 0);
    i32::try_from(secs.max(1)).unwrap_or(i32::MAX)
}

#[cfg(test)]
#[path = "leader_tests.rs"]
mod tests;
