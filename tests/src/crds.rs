//! Installing Stevedore's committed CRDs (`deploy/crds/`) from a test, the way a user
//! applies them: server-side, then waiting until the apiserver serves them.

use std::time::Duration;

use anyhow::{Context, Result};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::ResourceExt as _;
use kube::api::{Api, Patch, PatchParams};

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
