//! An AdvancedCronJob's runs (batch/v1 Jobs or BroadcastJobs): where each stands, as the
//! planner reads it, and the run built for a scheduled time. Pure.

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::jiff::Timestamp;
use kube::Resource;

use super::plan::{Child, ConcurrencyPolicy as PlanConcurrency, CronFacts, RunState};
use crate::api::advancedcronjob::ConcurrencyPolicy;
use crate::api::broadcastjob::BroadcastJobPhase;
use crate::api::{AdvancedCronJob, BroadcastJob};

/// The annotation recording a run's scheduled time (the native CronJob controller's).
pub const SCHEDULED_AT_ANNOTATION: &str = "batch.kubernetes.io/cronjob-scheduled-timestamp";

/// The planner's view of the AdvancedCronJob.
pub fn facts(cron: &AdvancedCronJob) -> CronFacts<'_> {
    let spec = &cron.spec;
    CronFacts {
        name: cron.metadata.name.as_deref().unwrap_or_default(),
        created: cron
            .metadata
            .creation_timestamp
            .as_ref()
            .map_or(Timestamp::UNIX_EPOCH, |t| t.0),
        last_schedule: cron
            .status
            .as_ref()
            .and_then(|s| s.last_schedule_time.as_ref())
            .map(|t| t.0),
        starting_deadline_seconds: spec.starting_deadline_seconds,
        concurrency: match spec.concurrency() {
            ConcurrencyPolicy::Allow => PlanConcurrency::Allow,
            ConcurrencyPolicy::Forbid => PlanConcurrency::Forbid,
            ConcurrencyPolicy::Replace => PlanConcurrency::Replace,
        },
        paused: spec.is_paused(),
        successful_history_limit: spec.successful_history(),
        failed_history_limit: spec.failed_history(),
    }
}

fn created_at(meta: &ObjectMeta) -> Timestamp {
    meta.creation_timestamp
        .as_ref()
        .map_or(Timestamp::UNIX_EPOCH, |t| t.0)
}

/// A Job run: finished when its Complete or Failed condition is True.
pub fn job_child(job: &Job) -> Child {
    let status = job.status.as_ref();
    let condition = |type_: &str| {
        status
            .and_then(|s| s.conditions.as_ref())
            .into_iter()
            .flatten()
            .any(|c| c.type_ == type_ && c.status == "True")
    };
    let state = if condition("Complete") {
        RunState::Succeeded
    } else if condition("Failed") {
        RunState::Failed
    } else {
        RunState::Active
    };
    let finished = status.and_then(|s| s.completion_time.as_ref()).map(|t| t.0);
    Child {
        name: job.metadata.name.clone().unwrap_or_default(),
        state,
        finished_or_created: finished.unwrap_or_else(|| created_at(&job.metadata)),
    }
}

/// A BroadcastJob run: finished in phase completed or failed.
pub fn broadcast_child(job: &BroadcastJob) -> Child {
    let status = job.status.as_ref();
    let state = match status.map(|s| s.phase) {
        Some(BroadcastJobPhase::Completed) => RunState::Succeeded,
        Some(BroadcastJobPhase::Failed) => RunState::Failed,
        _ => RunState::Active,
    };
    let finished = status.and_then(|s| s.completion_time.as_ref()).map(|t| t.0);
    Child {
        name: job.metadata.name.clone().unwrap_or_default(),
        state,
        finished_or_created: finished.unwrap_or_else(|| created_at(&job.metadata)),
    }
}

/// The metadata of the run `name` scheduled at `scheduled`: the template's labels and
/// annotations, the scheduled time, and the AdvancedCronJob as controller.
pub fn run_meta(
    cron: &AdvancedCronJob,
    template: Option<&ObjectMeta>,
    name: &str,
    scheduled: Timestamp,
) -> Option<ObjectMeta> {
    let mut annotations = template
        .and_then(|m| m.annotations.clone())
        .unwrap_or_default();
    annotations.insert(SCHEDULED_AT_ANNOTATION.to_owned(), scheduled.to_string());
    Some(ObjectMeta {
        name: Some(name.to_owned()),
        namespace: cron.metadata.namespace.clone(),
        labels: template.and_then(|m| m.labels.clone()),
        annotations: Some(annotations),
        owner_references: Some(vec![OwnerReference {
            api_version: AdvancedCronJob::api_version(&()).into_owned(),
            kind: AdvancedCronJob::kind(&()).into_owned(),
            name: cron.metadata.name.clone()?,
            uid: cron.metadata.uid.clone()?,
            controller: Some(true),
            block_owner_deletion: Some(true),
        }]),
        ..ObjectMeta::default()
    })
}

/// A reference to an active run, for `status.active`.
pub fn reference<K: Resource<DynamicType = ()>>(object: &K) -> ObjectReference {
    object.object_ref(&())
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::batch::v1::{JobCondition, JobStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    use super::*;
    use crate::api::AdvancedCronJobSpec;
    use crate::api::broadcastjob::{BroadcastJobSpec, BroadcastJobStatus};

    fn job(conditions: &[(&str, &str)]) -> Job {
        Job {
            metadata: ObjectMeta {
                name: Some("nightly-29000000".to_owned()),
                creation_timestamp: Some(Time(Timestamp::from_second(100).expect("time"))),
                ..ObjectMeta::default()
            },
            status: Some(JobStatus {
                conditions: Some(
                    conditions
                        .iter()
                        .map(|(t, s)| JobCondition {
                            type_: (*t).to_owned(),
                            status: (*s).to_owned(),
                            ..JobCondition::default()
                        })
                        .collect(),
                ),
                ..JobStatus::default()
            }),
            spec: None,
        }
    }

    #[test]
    fn a_job_run_is_finished_by_its_conditions() {
        let cases = [
            (vec![], RunState::Active),
            (vec![("Complete", "True")], RunState::Succeeded),
            (vec![("Failed", "True")], RunState::Failed),
            (vec![("Failed", "False")], RunState::Active),
        ];
        for (conditions, state) in cases {
            let child = job_child(&job(&conditions));
            assert_eq!(child.state, state, "{conditions:?}");
            assert_eq!(child.finished_or_created.as_second(), 100);
        }
    }

    #[test]
    fn a_broadcast_run_is_finished_by_its_phase() {
        let mut run = BroadcastJob::new("b", BroadcastJobSpec::default());
        for (phase, state) in [
            (BroadcastJobPhase::Running, RunState::Active),
            (BroadcastJobPhase::Paused, RunState::Active),
            (BroadcastJobPhase::Completed, RunState::Succeeded),
            (BroadcastJobPhase::Failed, RunState::Failed),
        ] {
            run.status = Some(BroadcastJobStatus {
                phase,
                ..BroadcastJobStatus::default()
            });
            assert_eq!(broadcast_child(&run).state, state, "{phase:?}");
        }
    }

    #[test]
    fn a_run_is_owned_and_records_its_scheduled_time() {
        let mut cron = AdvancedCronJob::new("nightly", AdvancedCronJobSpec::default());
        cron.metadata.namespace = Some("ops".to_owned());
        cron.metadata.uid = Some("cron-uid".to_owned());
        let template = ObjectMeta {
            labels: Some([("team".to_owned(), "infra".to_owned())].into()),
            ..ObjectMeta::default()
        };
        let scheduled = Timestamp::from_second(1_740_000_000).expect("time");
        let meta = run_meta(&cron, Some(&template), "nightly-29000000", scheduled).expect("meta");
        assert_eq!(meta.name.as_deref(), Some("nightly-29000000"));
        assert_eq!(meta.namespace.as_deref(), Some("ops"));
        assert_eq!(meta.labels, template.labels);
        let owner = &meta.owner_references.expect("owner")[0];
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str()),
            ("AdvancedCronJob", "cron-uid")
        );
        assert_eq!(
            meta.annotations
                .expect("annotations")
                .get(SCHEDULED_AT_ANNOTATION),
            Some(&scheduled.to_string())
        );
    }
}
