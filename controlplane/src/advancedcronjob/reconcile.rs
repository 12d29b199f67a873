//! The AdvancedCronJob reconciler: reads the cron and its runs from the shared caches,
//! plans with `plan::plan`, and carries the plan out: deletes replaced and pruned runs
//! (background propagation, UID precondition), creates the due run under its
//! scheduled-minute name (an AlreadyExists answer means another leader or an earlier sync
//! created it: nothing to do), publishes Events, writes status, and looks again at the
//! next scheduled time.

use std::str::FromStr as _;
use std::sync::Arc;
use std::time::Duration;

use chrono_tz::Tz;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use kube::Resource as _;
use kube::api::{Api, DeleteParams, PostParams, Preconditions};
use kube::runtime::reflector::Store;

use super::children::{broadcast_child, facts, job_child, reference, run_meta};
use super::plan::{self, Child, CronPlan, Notice, Run, RunState};
use super::schedule::Schedule;
use crate::api::advancedcronjob::{AdvancedCronJobStatus, TemplateKind};
use crate::api::{AdvancedCronJob, BroadcastJob};
use crate::caches::Stores;
use crate::controller::ObjectKey;
use crate::controller::api_error::{ApiError, api_error, status_code};
use crate::controller::events::EventSink;
use crate::controller::expectations::{EXPECTATION_TIMEOUT, Expectation, Expectations};
use crate::controller::object::ObjectReconciler;
use crate::controller::runner::Outcome;
use crate::controller::status_patch::write_changed_status;
use crate::runtime::stores::SyncState;
use crate::workload::ownership::is_controlled_by;

const ACTION: &str = "Schedule";

/// Why an AdvancedCronJob sync failed; it is retried with backoff.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    #[error(transparent)]
    Api(#[from] ApiError),
}

/// The AdvancedCronJob controller's state, shared by its workers.
pub struct AdvancedCronJobController {
    client: kube::Client,
    stores: Stores,
    events: EventSink,
    expectations: Expectations<ObjectKey>,
    /// The zone of a schedule without `timeZone`: the control plane's (`TZ`), else UTC.
    default_zone: Tz,
}

impl AdvancedCronJobController {
    pub fn new(client: kube::Client, stores: Stores, events: EventSink) -> Self {
        let default_zone = std::env::var("TZ")
            .ok()
            .and_then(|zone| Tz::from_str(zone.trim_start_matches(':')).ok())
            .unwrap_or(Tz::UTC);
        Self {
            client,
            stores,
            events,
            expectations: Expectations::new(EXPECTATION_TIMEOUT),
            default_zone,
        }
    }
}

impl ObjectReconciler for AdvancedCronJobController {
    type Object = AdvancedCronJob;
    type Error = SyncError;
    const KIND: &'static str = "AdvancedCronJob";
    const READS: &'static [&'static str] = &["Job", "BroadcastJob", "AdvancedCronJob"];
    const EXPECTATIONS_RECHECK: Duration = Duration::from_secs(1);

    fn objects(&self) -> &Store<AdvancedCronJob> {
        &self.stores.advancedcronjobs
    }

    fn expectations(&self) -> &Expectations<ObjectKey> {
        &self.expectations
    }

    fn caches(&self) -> &SyncState {
        &self.stores.sync
    }

    fn needs_no_sync(&self, cron: &AdvancedCronJob) -> bool {
        cron.metadata.deletion_timestamp.is_some()
    }

    async fn sync(
        &self,
        key: &ObjectKey,
        cron: Arc<AdvancedCronJob>,
    ) -> Result<Outcome, SyncError> {
        let spec = &cron.spec;
        let schedule =
            match Schedule::parse(&spec.schedule, spec.time_zone.as_deref(), self.default_zone) {
                Ok(schedule) => schedule,
                Err(err) => {
                    let reference = cron.object_ref(&());
                    self.events
                        .warning(&reference, "InvalidSchedule", ACTION, err.to_string())
                        .await;
                    // A spec change triggers the next sync.
                    return Ok(Outcome::Done);
                }
            };
        let kind = template_kind(&cron);
        let runs = self.runs(key, &cron, kind);
        let children: Vec<Child> = runs.iter().map(|(child, _)| child.clone()).collect();
        let now = Timestamp::now();
        let planned = plan::plan(&facts(&cron), &schedule, &children, now);
        tracing::debug!(create = ?planned.create, delete = ?planned.delete, "planned");
        self.delete_runs(key, kind, &runs, &planned).await?;
        if let Some(run) = &planned.create {
            self.create_run(key, &cron, kind, run).await?;
        }
        self.publish(&cron, &planned.notices).await;
        self.write_status(key, &cron, kind, &runs, &planned).await?;
        Ok(planned
            .requeue_at
            .and_then(|at| Duration::try_from(at.duration_since(now)).ok())
            .map_or(Outcome::Done, |wait| {
                Outcome::RequeueAfter(wait.max(Duration::from_secs(1)))
            }))
    }
}

fn template_kind(cron: &AdvancedCronJob) -> TemplateKind {
    if cron.spec.template.broadcast_job_template.is_some() {
        TemplateKind::BroadcastJob
    } else {
        TemplateKind::Job
    }
}

impl AdvancedCronJobController {
    fn crons(&self, namespace: &str) -> Api<AdvancedCronJob> {
        Api::namespaced(self.client.clone(), namespace)
    }

    /// The cron's runs of the template's kind, each with its reference and UID.
    fn runs(
        &self,
        key: &ObjectKey,
        cron: &AdvancedCronJob,
        kind: TemplateKind,
    ) -> Vec<(Child, RunRef)> {
        let uid = cron.metadata.uid.clone().unwrap_or_default();
        let ours = |meta: &ObjectMeta| {
            meta.namespace.as_deref() == Some(&key.namespace) && is_controlled_by(meta, &uid)
        };
        match kind {
            TemplateKind::Job => (self.stores.jobs.state().iter())
                .filter(|j| ours(&j.metadata))
                .map(|j| (job_child(j), RunRef::of(j.as_ref())))
                .collect(),
            TemplateKind::BroadcastJob => (self.stores.broadcastjobs.state().iter())
                .filter(|j| ours(&j.metadata))
                .map(|j| (broadcast_child(j), RunRef::of(j.as_ref())))
                .collect(),
        }
    }

    async fn delete_runs(
        &self,
        key: &ObjectKey,
        kind: TemplateKind,
        runs: &[(Child, RunRef)],
        planned: &CronPlan,
    ) -> Result<(), SyncError> {
        for (name, reason) in &planned.delete {
            let Some((_, run)) = runs.iter().find(|(c, _)| &c.name == name) else {
                continue;
            };
            let mut params = DeleteParams::background();
            params.preconditions = Some(Preconditions {
                uid: Some(run.uid.clone()),
                resource_version: None,
            });
            let result = match kind {
                TemplateKind::Job => self.api::<Job>(key).delete(name, &params).await.map(|_| ()),
                TemplateKind::BroadcastJob => self
                    .api::<BroadcastJob>(key)
                    .delete(name, &params)
                    .await
                    .map(|_| ()),
            };
            match result {
                Ok(()) => {}
                Err(err) if matches!(status_code(&err), Some(404 | 409)) => continue,
                Err(err) => {
                    return Err(api_error(format!("deleting run {name} ({reason:?})"))(err).into());
                }
            }
            let kind_name = kind_name(kind);
            self.expectations.expect(
                key,
                Expectation::Delete {
                    kind: kind_name,
                    name: name.clone(),
                    uid: run.uid.clone(),
                },
            );
        }
        Ok(())
    }

    fn api<K>(&self, key: &ObjectKey) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
    {
        Api::namespaced(self.client.clone(), &key.namespace)
    }

    /// Creates the due run; AlreadyExists means it was created before (by this replica
    /// before a restart, or by another leader), never a second run.
    async fn create_run(
        &self,
        key: &ObjectKey,
        cron: &AdvancedCronJob,
        kind: TemplateKind,
        run: &Run,
    ) -> Result<(), SyncError> {
        let template = &cron.spec.template;
        let result = match kind {
            TemplateKind::Job => {
                let job_template = template.job_template.clone().unwrap_or_default();
                let Some(metadata) = run_meta(
                    cron,
                    job_template.metadata.as_ref(),
                    &run.name,
                    run.scheduled,
                ) else {
                    return Ok(());
                };
                let job = Job {
                    metadata,
                    spec: job_template.spec,
                    status: None,
                };
                self.api::<Job>(key)
                    .create(&PostParams::default(), &job)
                    .await
                    .map(|_| ())
            }
            TemplateKind::BroadcastJob => {
                let broadcast = template.broadcast_job_template.clone().unwrap_or_default();
                let Some(metadata) =
                    run_meta(cron, broadcast.metadata.as_ref(), &run.name, run.scheduled)
                else {
                    return Ok(());
                };
                let job = BroadcastJob {
                    metadata,
                    spec: broadcast.spec,
                    status: None,
                };
                self.api::<BroadcastJob>(key)
                    .create(&PostParams::default(), &job)
                    .await
                    .map(|_| ())
            }
        };
        let reference = cron.object_ref(&());
        match result {
            Ok(()) => {
                let kind_name = kind_name(kind);
                self.expectations.expect(
                    key,
                    Expectation::Create {
                        kind: kind_name,
                        name: run.name.clone(),
                    },
                );
                let note = format!(
                    "created {kind_name} {} for the run scheduled at {}",
                    run.name, run.scheduled
                );
                self.events
                    .normal(&reference, "SuccessfulCreate", ACTION, note)
                    .await;
                Ok(())
            }
            Err(err) if status_code(&err) == Some(409) => Ok(()),
            Err(err) => {
                let err = api_error(format!("creating run {}", run.name))(err);
                self.events
                    .warning(&reference, "FailedCreate", ACTION, err.to_string())
                    .await;
                Err(err.into())
            }
        }
    }

    async fn publish(&self, cron: &AdvancedCronJob, notices: &[Notice]) {
        let reference = cron.object_ref(&());
        for notice in notices {
            let (reason, note) = match notice {
                Notice::TooManyMissed => (
                    "TooManyMissedTimes",
                    format!(
                        "more than {} start times were missed: check the clock, or set startingDeadlineSeconds",
                        plan::MAX_MISSED
                    ),
                ),
                Notice::MissedDeadline { scheduled } => (
                    "MissSchedule",
                    format!(
                        "the run scheduled at {scheduled} was missed by more than startingDeadlineSeconds and is skipped"
                    ),
                ),
                Notice::AlreadyActive { scheduled } => (
                    "JobAlreadyActive",
                    format!(
                        "the run scheduled at {scheduled} is skipped: a run is still active and concurrencyPolicy is Forbid"
                    ),
                ),
            };
            self.events.warning(&reference, reason, ACTION, note).await;
        }
    }

    /// Writes type, the active runs (after this sync's deletes and create) and
    /// lastScheduleTime, when they changed.
    async fn write_status(
        &self,
        key: &ObjectKey,
        cron: &AdvancedCronJob,
        kind: TemplateKind,
        runs: &[(Child, RunRef)],
        planned: &CronPlan,
    ) -> Result<(), SyncError> {
        let old = cron.status.clone().unwrap_or_default();
        let deleted = |name: &str| planned.delete.iter().any(|(n, _)| n == name);
        let mut active: Vec<_> = runs
            .iter()
            .filter(|(child, _)| child.state == RunState::Active && !deleted(&child.name))
            .map(|(_, run)| run.reference.clone())
            .collect();
        if let Some(run) = &planned.create
            && !active.iter().any(|r| r.name.as_deref() == Some(&run.name))
        {
            active.push(k8s_openapi::api::core::v1::ObjectReference {
                api_version: Some(run_api_version(kind)),
                kind: Some(kind_name(kind).to_owned()),
                name: Some(run.name.clone()),
                namespace: Some(key.namespace.clone()),
                ..Default::default()
            });
        }
        active.sort_by(|a, b| a.name.cmp(&b.name));
        let status = AdvancedCronJobStatus {
            type_: Some(kind),
            active,
            last_schedule_time: planned
                .last_schedule
                .map(Time)
                .or(old.last_schedule_time.clone()),
        };
        let api = self.crons(&key.namespace);
        if let Some(written) = write_changed_status(&api, &key.name, Some(&old), &status).await? {
            self.expect_own_write(key, &written.metadata);
        }
        Ok(())
    }
}

/// A run as the writes need it: its UID and a reference for `status.active`.
pub struct RunRef {
    uid: String,
    reference: k8s_openapi::api::core::v1::ObjectReference,
}

impl RunRef {
    fn of<K: kube::Resource<DynamicType = ()>>(object: &K) -> Self {
        // Without resourceVersion: status.active changes only when the runs do.
        let mut reference = reference(object);
        reference.resource_version = None;
        Self {
            uid: object.meta().uid.clone().unwrap_or_default(),
            reference,
        }
    }
}

fn kind_name(kind: TemplateKind) -> &'static str {
    match kind {
        TemplateKind::Job => "Job",
        TemplateKind::BroadcastJob => "BroadcastJob",
    }
}

fn run_api_version(kind: TemplateKind) -> String {
    match kind {
        TemplateKind::Job => Job::api_version(&()).into_owned(),
        TemplateKind::BroadcastJob => BroadcastJob::api_version(&()).into_owned(),
    }
}
