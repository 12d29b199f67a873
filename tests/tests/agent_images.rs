//! Component tests of the agent's image pulls against the real containerd and registry
//! of the local cluster.

use std::time::Duration;

use anyhow::{Context as _, Result, ensure};
use stevedore_agent::{
    images::{
        containerd::ContainerdStore,
        manager::{Policy, PullManager, PullRequest, PullState, RetryPolicy},
        registry::{Auth, HttpRegistry},
    },
    reference::Reference,
};
use tokio_util::sync::CancellationToken;

type Manager = PullManager<HttpRegistry, ContainerdStore>;

async fn manager() -> Result<Manager> {
    let cluster = stevedore_tests::cluster().await?;
    let store = ContainerdStore::connect(&cluster.containerd_sock, "k8s.io").await?;
    let registry = HttpRegistry::new(std::slice::from_ref(&cluster.registry))?;
    Ok(PullManager::new(
        registry,
        store,
        3,
        Duration::from_secs(120),
        RetryPolicy::default(),
        CancellationToken::new(),
    ))
}

async fn finish(mut rx: tokio::sync::watch::Receiver<PullState>) -> Result<PullState> {
    let state = rx
        .wait_for(|s| s.outcome.is_some())
        .await
        .context("pull task vanished")?
        .clone();
    Ok(state)
}

#[tokio::test]
async fn scratch_pull_web_v1() -> Result<()> {
    let cluster = stevedore_tests::cluster().await?;
    let manager = manager().await?;
    let image = Reference::parse_normalized(&cluster.image("large:v1"))?;
    let rx = manager
        .pull(PullRequest {
            image,
            policy: Policy::Always,
            auth: Auth::Anonymous,
            timeout: None,
        })
        .await;
    let state = finish(rx).await?;
    let pulled = state.outcome.context("no outcome")?;
    ensure!(pulled.is_ok(), "{pulled:?}");
    Ok(())
}
