//! What every command that acts on a workload shares: the dynamic API of its kind, and
//! the report of what it did (a line, or JSON / YAML for scripts).

use anyhow::Result;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject};
use serde::Serialize;
use stevedore_api::{CloneSet, DaemonSet, StatefulSet};

use crate::cli::Output;
use crate::output;
use crate::workload::{Kind, WorkloadRef};

/// The API of `kind`'s objects in `namespace`, read and written as untyped objects.
pub fn dynamic_api(client: &Client, namespace: &str, kind: Kind) -> Api<DynamicObject> {
    let resource = match kind {
        Kind::CloneSet => ApiResource::erase::<CloneSet>(&()),
        Kind::StatefulSet => ApiResource::erase::<StatefulSet>(&()),
        Kind::DaemonSet => ApiResource::erase::<DaemonSet>(&()),
    };
    Api::namespaced_with(client.clone(), namespace, &resource)
}

#[derive(Serialize)]
struct ActionResult<'a> {
    workload: String,
    action: &'a str,
    changed: bool,
    message: String,
}

/// Reports what a command did to `target`; the process's exit code (0).
pub fn report(
    out: Output,
    target: &WorkloadRef,
    action: &str,
    changed: bool,
    message: String,
) -> Result<u8> {
    let result = ActionResult {
        workload: target.to_string(),
        action,
        changed,
        message,
    };
    if !output::structured(out, &result)? {
        output::line(&result.message)?;
    }
    Ok(0)
}
