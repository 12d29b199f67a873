//! Reading the Events the controllers record, as `kubectl describe` shows them.

use anyhow::Result;
use k8s_openapi::api::core::v1::Event;
use kube::api::ListParams;

use crate::TestContext;

/// The message of the first Warning with `reason` on the object `name` in the test's
/// namespace, if there is one yet.
pub async fn warning(ctx: &TestContext, name: &str, reason: &str) -> Result<Option<String>> {
    let events = ctx.api::<Event>().list(&ListParams::default()).await?;
    Ok(events
        .items
        .into_iter()
        .find(|e| {
            e.type_.as_deref() == Some("Warning")
                && e.reason.as_deref() == Some(reason)
                && e.involved_object.name.as_deref() == Some(name)
        })
        .map(|e| e.message.unwrap_or_default()))
}
