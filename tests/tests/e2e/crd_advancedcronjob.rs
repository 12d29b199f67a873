//! The AdvancedCronJob CRD against the real apiserver: a schedule outside robfig/cron's
//! standard language, a zero `@every`, or a time zone the controller cannot resolve is
//! refused when applied, naming the field; every form robfig accepts applies.

use anyhow::{Result, bail, ensure};
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};
use stevedore_api::AdvancedCronJob;
use stevedore_tests::{TestContext, run_in_namespace};

const CRD_YAML: &str = include_str!("../../../deploy/crds/apps.kruise.io_advancedcronjobs.yaml");

/// A paused cron (it never runs) with `schedule` and, if given, `timeZone`.
fn cron(name: &str, schedule: &str, zone: Option<&str>) -> Value {
    let mut spec = json!({
        "schedule": schedule,
        "paused": true,
        "template": { "jobTemplate": { "spec": { "template": { "spec": {
            "restartPolicy": "Never",
            "containers": [{ "name": "run", "image": "none.invalid/none" }],
        } } } } },
    });
    if let Some(zone) = zone {
        spec["timeZone"] = json!(zone);
    }
    json!({
        "apiVersion": "apps.kruise.io/v1alpha1",
        "kind": "AdvancedCronJob",
        "metadata": { "name": name },
        "spec": spec,
    })
}

async fn apply(ctx: &TestContext, object: &Value) -> Result<AdvancedCronJob, kube::Error> {
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    let pp = PatchParams::apply("stevedore-tests").force();
    ctx.api::<AdvancedCronJob>()
        .patch(name, &pp, &Patch::Apply(object))
        .await
}

#[tokio::test]
async fn schedules_and_time_zones_are_checked_at_admission() -> Result<()> {
    run_in_namespace("crd-acj-schedule", |ctx| async move {
        stevedore_tests::crds::install(&ctx.client, &[CRD_YAML]).await?;
        let accepted = [
            ("*/1 * * * *", None),
            (
                "5,10-20/5 1-23/2 1,15 JAN-MAR mon-fri",
                Some("Europe/Berlin"),
            ),
            ("0 12 ? * SUN", Some("UTC")),
            ("@hourly", None),
            ("@every 1h30m", Some("America/Argentina/Buenos_Aires")),
            ("@every 0.5s", Some("US/Eastern")),
        ];
        for (i, (schedule, zone)) in accepted.into_iter().enumerate() {
            if let Err(e) = apply(&ctx, &cron(&format!("ok-{i}"), schedule, zone)).await {
                bail!("{schedule:?} in {zone:?} was refused: {e}");
            }
        }
        let refused = [
            ("61 * * * *", None, "spec.schedule must be a cron schedule"),
            ("* * * * 7", None, "spec.schedule must be a cron schedule"),
            ("* * * *", None, "spec.schedule must be a cron schedule"),
            ("0 0 L * *", None, "spec.schedule must be a cron schedule"),
            (
                "@fortnightly",
                None,
                "spec.schedule must be a cron schedule",
            ),
            ("TZ=UTC 0 * * * *", None, "use spec.timeZone"),
            ("0 * * * *", Some("Local"), "spec.timeZone must be the name"),
            (
                "0 * * * *",
                Some("Europe/Berlin Time"),
                "spec.timeZone must be",
            ),
            // Issue 28: a zero @every would start a Job every second, and a zone the
            // controller cannot resolve would leave the cron never running.
            ("@every 0s", None, "the @every duration must be above zero"),
            (
                "@every 0h0m",
                None,
                "the @every duration must be above zero",
            ),
            ("@every -1s", None, "spec.schedule must be a cron schedule"),
            (
                "0 * * * *",
                Some("Mars/Olympus"),
                "spec.timeZone: Mars/Olympus is not a time zone",
            ),
            (
                "0 * * * *",
                Some("europe/berlin"),
                "spec.timeZone: europe/berlin is not a time zone",
            ),
        ];
        for (i, (schedule, zone, words)) in refused.into_iter().enumerate() {
            match apply(&ctx, &cron(&format!("bad-{i}"), schedule, zone)).await {
                Ok(_) => bail!("{schedule:?} in {zone:?} was accepted"),
                Err(e) => ensure!(
                    e.to_string().contains(words),
                    "refusal of {schedule:?} in {zone:?} does not say {words:?}: {e}"
                ),
            }
        }
        Ok(())
    })
    .await
}
