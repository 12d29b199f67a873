//! Installing Stevedore's committed CRDs (`deploy/crds/`) from a test, the way a user
//! applies them: server-side, then waiting until the apiserver serves them.

use std::panic::AssertUnwindSafe;
use std::time::Duration;

use anyhow::{Context, Result, anyhow};
use futures::FutureExt as _;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::ResourceExt as _;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::Value;

use crate::poll_until;

/// The lock every test process takes around CRD writes: shared to install the committed
/// CRDs, exclusive while a test runs with a CRD relaxed (`hold_exclusive`), so no install
/// puts the rules back in the middle of that window.
const CRD_LOCK: &str = "stevedore-crd-relax.lock";

/// Takes the CRD lock (shared or exclusive); released when the file is dropped.
pub async fn lock(exclusive: bool) -> Result<std::fs::File> {
    let file = std::fs::File::create(std::env::temp_dir().join(CRD_LOCK))?;
    tokio::task::spawn_blocking(move || {
        if exclusive {
            file.lock()
        } else {
            file.lock_shared()
        }
        .context("locking the CRD lock")?;
        Ok(file)
    })
    .await?
}

/// Applies each CRD (YAML text) and waits until every one is Established, holding the
/// CRD lock shared.
pub async fn install(client: &kube::Client, yamls: &[&str]) -> Result<()> {
    let _shared = lock(false).await?;
    install_holding_lock(client, yamls).await
}

/// [`install`] for a caller that already holds the CRD lock exclusively.
pub async fn install_holding_lock(client: &kube::Client, yamls: &[&str]) -> Result<()> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let pp = PatchParams::apply("stevedore-tests").force();
    for yaml in yamls {
        let crd: CustomResourceDefinition =
            serde_saphyr::from_str(yaml).context("parsing a committed CRD")?;
        let name = crd.name_any();
        crds.patch(&name, &pp, &Patch::Apply(&crd)).await?;
        poll_until(
            &format!("the CRD {name} to be Established"),
            Duration::from_secs(30),
            || {
                let (crds, name) = (crds.clone(), name.clone());
                async move {
                    let crd = crds.get(&name).await?;
                    let established = crd
                        .status
                        .iter()
                        .flat_map(|s| s.conditions.iter().flatten())
                        .any(|c| c.type_ == "Established" && c.status == "True");
                    Ok(established.then_some(()))
                }
            },
        )
        .await?;
    }
    Ok(())
}

/// Creates `object` through `objects` while the CRD `crd_name` runs with the rules `relax`
/// takes out of it (it edits the CRD as JSON), and puts the committed CRD (`crd_yaml`)
/// back before returning, whatever happened. The window is as short as the apiserver
/// allows: until the relaxed schema admits the object. The CRD lock, held exclusively,
/// keeps every other test process's install out of that window (suites that do this run
/// alone, since others check what the CRD refuses).
pub async fn create_with_relaxed_crd(
    client: &kube::Client,
    (crd_name, crd_yaml): (&str, &str),
    relax: impl FnOnce(&mut Value) -> Result<()>,
    objects: &Api<DynamicObject>,
    object: &Value,
) -> Result<()> {
    let lock = lock(true).await?;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let object: DynamicObject = serde_json::from_value(object.clone())?;
    let outcome = AssertUnwindSafe(async {
        let mut crd = serde_json::to_value(crds.get(crd_name).await?)?;
        relax(&mut crd)?;
        let relaxed: CustomResourceDefinition = serde_json::from_value(crd)?;
        crds.replace(crd_name, &PostParams::default(), &relaxed)
            .await?;
        poll_until(
            "the relaxed CRD to admit the object",
            Duration::from_secs(30),
            || async {
                match objects.create(&PostParams::default(), &object).await {
                    Ok(_) => Ok(Some(())),
                    Err(err) => Err(anyhow!("still refused: {err}")),
                }
            },
        )
        .await
    })
    .catch_unwind()
    .await;
    let restored = install_holding_lock(client, &[crd_yaml]).await;
    drop(lock);
    let created = outcome.map_err(|_| anyhow!("relaxing the CRD {crd_name} panicked"))?;
    restored.with_context(|| format!("restoring the CRD {crd_name}"))?;
    created
}

/// Takes every rule that reads `self.selector` out of each version of `crd`.
pub fn without_selector_rules(crd: &mut Value) -> Result<()> {
    let versions = (crd.pointer_mut("/spec/versions"))
        .and_then(Value::as_array_mut)
        .context("the CRD has versions")?;
    for version in versions {
        let rules = version
            .pointer_mut("/schema/openAPIV3Schema/properties/spec/x-kubernetes-validations")
            .and_then(Value::as_array_mut);
        if let Some(rules) = rules {
            rules.retain(|r| {
                !r["rule"]
                    .as_str()
                    .unwrap_or_default()
                    .contains("self.selector")
            });
        }
    }
    Ok(())
}
