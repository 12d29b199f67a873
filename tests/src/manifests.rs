//! Manifests as the suites apply them: server-side apply of a JSON object (as `kubectl
//! apply --server-side` would), the refusal of an invalid one checked for the words it
//! must name, and one field of a manifest replaced.

use anyhow::{Context as _, Result, bail, ensure};
use k8s_openapi::NamespaceResourceScope;
use kube::api::{Patch, PatchParams};
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::TestContext;

/// Applies `object` (server-side, taking every field) in the test's namespace.
pub async fn apply<K>(ctx: &TestContext, object: &Value) -> Result<K>
where
    K: kube::Resource<Scope = NamespaceResourceScope, DynamicType = ()>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug,
{
    let name = object["metadata"]["name"]
        .as_str()
        .context("the manifest has a name")?;
    let pp = PatchParams::apply("stevedore-tests").force();
    Ok(ctx
        .api::<K>()
        .patch(name, &pp, &Patch::Apply(object))
        .await?)
}

/// Applies `object` and expects a refusal whose message contains every one of `words`.
pub async fn expect_refused<K>(ctx: &TestContext, object: &Value, words: &[&str]) -> Result<()>
where
    K: kube::Resource<Scope = NamespaceResourceScope, DynamicType = ()>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug,
{
    match apply::<K>(ctx, object).await {
        Ok(_) => bail!(
            "the apiserver accepted an invalid {}: {object}",
            K::kind(&())
        ),
        Err(e) => {
            let message = e.to_string();
            for word in words {
                ensure!(
                    message.contains(word),
                    "refusal {message:?} does not name {word:?}"
                );
            }
            Ok(())
        }
    }
}

/// Server-side apply of `object` as a dry run: `Err` with the apiserver's message when it
/// refuses it, and nothing stored either way. For objects a rule under test should refuse
/// whose acceptance would start something on the deployed control plane (huge replicas, a
/// runaway selector).
pub async fn dry_run<K>(
    ctx: &TestContext,
    object: &Value,
) -> Result<std::result::Result<(), String>>
where
    K: kube::Resource<Scope = NamespaceResourceScope, DynamicType = ()>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug,
{
    let name = object["metadata"]["name"]
        .as_str()
        .context("the manifest has a name")?;
    let mut pp = PatchParams::apply("stevedore-tests").force();
    pp.dry_run = true;
    match ctx.api::<K>().patch(name, &pp, &Patch::Apply(object)).await {
        Ok(_) => Ok(Ok(())),
        Err(kube::Error::Api(status)) => Ok(Err(status.message)),
        Err(e) => Err(e.into()),
    }
}

/// [`expect_refused`] as a dry run ([`dry_run`]).
pub async fn expect_refused_dry_run<K>(
    ctx: &TestContext,
    object: &Value,
    words: &[&str],
) -> Result<()>
where
    K: kube::Resource<Scope = NamespaceResourceScope, DynamicType = ()>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug,
{
    match dry_run::<K>(ctx, object).await? {
        Ok(()) => bail!(
            "the apiserver accepted an invalid {}: {object}",
            K::kind(&())
        ),
        Err(message) => {
            for word in words {
                ensure!(
                    message.contains(word),
                    "refusal {message:?} does not name {word:?}"
                );
            }
            Ok(())
        }
    }
}

/// `object` with the field at JSON `pointer` set to `value` (its parent must exist).
pub fn with(mut object: Value, pointer: &str, value: Value) -> Result<Value> {
    let (parent, key) = pointer.rsplit_once('/').context("pointer has a parent")?;
    let parent = object.pointer_mut(parent).context("parent exists")?;
    parent
        .as_object_mut()
        .context("parent is an object")?
        .insert(key.to_owned(), value);
    Ok(object)
}
