//! `completionPolicy.ttlSecondsAfterFinished` of the job kinds (BroadcastJob, ImagePullJob,
//! ImageListPullJob): one rule for when a finished job is deleted, as the upstream
//! TTL-after-finished controller has it; and the look-again arithmetic the job plans share.

use std::time::Duration;

use k8s_openapi::jiff::{SignedDuration, Timestamp};

use super::events::PlannedEvent;

/// What a finished job's TTL decides at one reconcile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JobTtl {
    /// No TTL: the job stays.
    Keep,
    /// The TTL is over: delete the job, saying so in this event.
    Delete(PlannedEvent),
    /// Look again once the TTL is over.
    LookAgainIn(Duration),
}

/// The TTL of `seconds` for a job that finished at `finished`, seen at `now`; `deleted`
/// says what goes with the job in the event ("the job", "the job and its pods").
pub fn job_ttl(seconds: Option<i32>, finished: Timestamp, now: Timestamp, deleted: &str) -> JobTtl {
    let Some(seconds) = seconds else {
        return JobTtl::Keep;
    };
    let Ok(expiry) = finished.saturating_add(SignedDuration::from_secs(i64::from(seconds))) else {
        return JobTtl::Keep;
    };
    if expiry <= now {
        return JobTtl::Delete(PlannedEvent {
            warning: false,
            reason: "Deleting",
            note: format!(
                "deleting {deleted} {seconds}s after it finished (ttlSecondsAfterFinished)"
            ),
        });
    }
    until(now, expiry).map_or(JobTtl::Keep, JobTtl::LookAgainIn)
}

/// How long from `now` until `then`; `None` when `then` has come.
pub fn until(now: Timestamp, then: Timestamp) -> Option<Duration> {
    Duration::try_from(then.duration_since(now)).ok()
}

/// The sooner of a look again already asked for (`current`) and `other`.
pub fn earlier(current: Option<Duration>, other: Duration) -> Option<Duration> {
    Some(current.map_or(other, |c| c.min(other)))
}

/// The fields of a job kind's plan that the TTL decides.
pub struct JobPlanFields<'a> {
    pub delete_job: &'a mut bool,
    pub events: &'a mut Vec<PlannedEvent>,
    pub requeue_after: &'a mut Option<Duration>,
}

/// A job kind's plan, which a finished job's TTL writes into.
pub trait JobPlan {
    fn job_fields(&mut self) -> JobPlanFields<'_>;
}

/// Implements [`JobPlan`] for a job plan type with the fields `delete_job`, `events` and
/// `requeue_after` (every job kind's plan names them so).
macro_rules! impl_job_plan {
    ($plan:ty) => {
        impl $crate::controller::job_ttl::JobPlan for $plan {
            fn job_fields(&mut self) -> $crate::controller::job_ttl::JobPlanFields<'_> {
                $crate::controller::job_ttl::JobPlanFields {
                    delete_job: &mut self.delete_job,
                    events: &mut self.events,
                    requeue_after: &mut self.requeue_after,
                }
            }
        }
    };
}
pub(crate) use impl_job_plan;

impl JobTtl {
    /// Carries the decision into a job plan: the deletion and its event, or a look again
    /// no later than any the plan already asks for.
    pub fn apply(self, plan: &mut impl JobPlan) {
        let fields = plan.job_fields();
        match self {
            Self::Keep => {}
            Self::Delete(event) => {
                *fields.delete_job = true;
                fields.events.push(event);
            }
            Self::LookAgainIn(wait) => {
                *fields.requeue_after = earlier(*fields.requeue_after, wait);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + secs).unwrap()
    }

    #[test]
    fn a_finished_job_goes_once_its_ttl_is_over() {
        let delete = |seconds: i32| {
            JobTtl::Delete(PlannedEvent {
                warning: false,
                reason: "Deleting",
                note: format!(
                    "deleting the job {seconds}s after it finished (ttlSecondsAfterFinished)"
                ),
            })
        };
        let cases = [
            ("no TTL", None, 100, JobTtl::Keep),
            ("TTL 0: at once", Some(0), 0, delete(0)),
            ("TTL over", Some(30), 31, delete(30)),
            ("TTL just over", Some(30), 30, delete(30)),
            (
                "TTL running: look again when it ends",
                Some(30),
                10,
                JobTtl::LookAgainIn(Duration::from_secs(20)),
            ),
            (
                "the longest TTL: look again when it ends",
                Some(i32::MAX),
                0,
                JobTtl::LookAgainIn(Duration::from_secs(u64::from(i32::MAX.unsigned_abs()))),
            ),
        ];
        for (name, seconds, now, want) in cases {
            assert_eq!(job_ttl(seconds, at(0), at(now), "the job"), want, "{name}");
        }
    }

    #[derive(Default)]
    struct ToyPlan {
        delete_job: bool,
        events: Vec<PlannedEvent>,
        requeue_after: Option<Duration>,
    }

    impl_job_plan!(ToyPlan);

    #[test]
    fn applying_keeps_the_earliest_look_again() {
        let mut plan = ToyPlan {
            requeue_after: Some(Duration::from_secs(5)),
            ..ToyPlan::default()
        };
        JobTtl::LookAgainIn(Duration::from_secs(20)).apply(&mut plan);
        assert_eq!(plan.requeue_after, Some(Duration::from_secs(5)));
        JobTtl::LookAgainIn(Duration::from_secs(2)).apply(&mut plan);
        assert_eq!(plan.requeue_after, Some(Duration::from_secs(2)));
        assert!(!plan.delete_job && plan.events.is_empty());

        let event = PlannedEvent {
            warning: false,
            reason: "Deleting",
            note: "gone".to_owned(),
        };
        JobTtl::Delete(event.clone()).apply(&mut plan);
        assert!(plan.delete_job);
        assert_eq!(plan.events, [event]);
    }
}
