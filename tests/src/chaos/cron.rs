//! The run's AdvancedCronJob: `@every 2s` (a run is named by its minute, so one run a
//! minute), `concurrencyPolicy: Forbid`, its Jobs' pods on the run's nodes, where kwok
//! completes a batch Job's pods. The checkers hold Forbid from the pod watch
//! ([`super::invariants`]); [`runs_after`] says whether runs kept coming after the last
//! fault.

use anyhow::{Context as _, Result};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt as _;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, PostParams};
use serde_json::{Value, json};

use super::invariants::{SetKind, SetRule};
use super::pool::Placement;
use crate::TestContext;

pub const NAME: &str = "cron";

pub fn rule() -> SetRule {
    SetRule {
        kind: SetKind::ForbidCron,
        name: NAME.into(),
        replicas: 1,
        max_unavailable: 1,
    }
}

pub fn manifest(namespace: &str, placement: &Placement, name: &str, image: &str) -> Value {
    json!({
        "apiVersion": "apps.kruise.io/v1alpha1",
        "kind": "AdvancedCronJob",
        "metadata": { "name": name, "namespace": namespace },
        "spec": {
            "schedule": "@every 2s",
            "concurrencyPolicy": "Forbid",
            // Every run stays, so the report can count them.
            "successfulJobsHistoryLimit": 100,
            "failedJobsHistoryLimit": 100,
            "template": { "jobTemplate": { "spec": {
                "backoffLimit": 6,
                "template": {
                    "metadata": { "labels": { "app": name } },
                    "spec": {
                        "restartPolicy": "Never",
                        "terminationGracePeriodSeconds": 0,
                        "nodeSelector": placement.node_selector(),
                        "tolerations": placement.tolerations(),
                        "containers": [{ "name": "run", "image": image }],
                    },
                },
            } } },
        },
    })
}

pub async fn create(ctx: &TestContext, placement: &Placement, image: &str) -> Result<()> {
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(
        "apps.kruise.io",
        "v1alpha1",
        "AdvancedCronJob",
    ));
    let object: DynamicObject =
        serde_json::from_value(manifest(&ctx.namespace, placement, NAME, image))?;
    Api::<DynamicObject>::namespaced_with(ctx.client.clone(), &ctx.namespace, &resource)
        .create(&PostParams::default(), &object)
        .await
        .context("creating the AdvancedCronJob")?;
    Ok(())
}

/// A run as the checks read it: when its Job was made and whether it completed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Run {
    pub created: Option<Timestamp>,
    pub complete: bool,
}

/// The cron's runs (its Jobs) now.
pub async fn runs(ctx: &TestContext) -> Result<Vec<Run>> {
    let jobs = ctx.api::<Job>().list(&ListParams::default()).await?;
    Ok(jobs
        .items
        .iter()
        .filter(|j| j.owner_references().iter().any(|o| o.name == NAME))
        .map(|j| Run {
            created: j.creation_timestamp().map(|t| t.0),
            complete: is_complete(j),
        })
        .collect())
}

fn is_complete(job: &Job) -> bool {
    let conditions = job.status.as_ref().and_then(|s| s.conditions.as_deref());
    conditions
        .unwrap_or_default()
        .iter()
        .any(|c| c.type_ == "Complete" && c.status == "True")
}

/// Whether a run made after `since` has completed: the cron still runs. Pure.
pub fn runs_after(runs: &[Run], since: Timestamp) -> bool {
    runs.iter()
        .any(|r| r.complete && r.created.is_some_and(|t| t > since))
}

/// How many runs completed. Pure.
pub fn completed(runs: &[Run]) -> usize {
    runs.iter().filter(|r| r.complete).count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_keep_coming_only_when_one_made_after_the_fault_completed() {
        let at = |s: i64| Timestamp::from_second(s).ok();
        let run = |s, complete| Run {
            created: at(s),
            complete,
        };
        let since = Timestamp::from_second(100).unwrap();
        let cases = [
            (vec![], false),
            (vec![run(50, true)], false), // before the fault
            (vec![run(50, true), run(160, false)], false), // after, still active
            (vec![run(50, true), run(160, true)], true),
            (
                vec![Run {
                    created: None,
                    complete: true,
                }],
                false,
            ),
        ];
        for (runs, kept) in cases {
            assert_eq!(runs_after(&runs, since), kept, "{runs:?}");
        }
        assert_eq!(completed(&[run(1, true), run(2, false), run(3, true)]), 2);
    }
}
