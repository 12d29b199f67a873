//! Events for pull failures, end to end: an ImageList entry that cannot be pulled on a
//! simulated node (a real agent process) gives one Warning Event on the Node, recorded
//! by the control plane's distributor, naming the image and the registry's message; the
//! agent's retries failing the same way add none (one failing another way is an Event of
//! its own, with its own message).

use std::time::Duration;

use anyhow::{Result, ensure};
use stevedore_api::imagelist::ImagePullPhase;
use stevedore_tests::{poll_until, run_in_namespace};

use crate::imagelist_support;

use imagelist_support::{MissingImage, failure_events, image_status, repeated_failures};

const MANAGER: &str = "stevedore-tests-events";

#[tokio::test(flavor = "multi_thread")]
async fn a_failing_pull_gives_one_event_on_the_node_and_retries_add_none() -> Result<()> {
    run_in_namespace("imagelist-events", |ctx| async move {
        // backoffLimit 2: Failed after the third attempt (2 s and 4 s of backoff).
        let pull = MissingImage::on_sim_node(&ctx, "events", MANAGER, 2).await?;
        let (node, missing) = (&pull.node, &pull.image);

        let events = poll_until(
            "a pull-failure Event on the node",
            Duration::from_secs(120),
            || async {
                let events = failure_events(&ctx.client, node, missing).await?;
                Ok((!events.is_empty()).then_some(events))
            },
        )
        .await?;
        let note = events[0].message.clone().unwrap_or_default();
        ensure!(
            events[0].type_.as_deref() == Some("Warning") && note.contains("not found"),
            "the Event names the image and the registry's answer: {:?}",
            events[0]
        );

        poll_until(
            "three failed attempts",
            Duration::from_secs(120),
            || async {
                let status = image_status(&ctx.client, node, missing).await?;
                Ok(status.filter(|s| s.phase == ImagePullPhase::Failed && s.attempts >= 3))
            },
        )
        .await?;
        // Time for Events of the later attempts to land, were any recorded.
        tokio::time::sleep(Duration::from_secs(3)).await;
        let events = failure_events(&ctx.client, node, missing).await?;
        let repeated = repeated_failures(&events);
        ensure!(
            repeated.is_empty(),
            "one Event per failure message, not one per attempt; repeated: {repeated:?} in {events:?}"
        );

        pull.remove(&ctx.client).await
    })
    .await
}
