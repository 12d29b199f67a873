//! Component: a credential for one node's agent is good for that node only. Two
//! simulated nodes with real agents (deploy/local/sim-agents.sh) and the real apiserver:
//! a token minted for node A's audience (`stevedore-agent:<A>`) is accepted by A's agent
//! and refused (UNAUTHENTICATED) by B's, as is a token for the old shared audience.

use std::time::Duration;

use anyhow::{Context as _, Result, ensure};
use k8s_openapi::api::core::v1::Node;
use stevedore_proto::stevedore::agent::v1::{
    GetNodeInfoRequest, node_service_client::NodeServiceClient,
};
use stevedore_tests::auth::{
    AGENT_AUDIENCE, bind_cluster_role, node_info_once_allowed, token_for, token_with_audience,
    unbind, with_token,
};
use stevedore_tests::sim::SimAgents;
use stevedore_tests::{TestContext, run_in_namespace};
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint};

/// A TLS channel to `node`'s agent at the Node's InternalIP and annotated port.
async fn agent_channel(ctx: &TestContext, node: &str) -> Result<Channel> {
    let node: Node = kube::Api::all(ctx.client.clone()).get(node).await?;
    let ip = node
        .status
        .and_then(|s| s.addresses)
        .into_iter()
        .flatten()
        .find(|a| a.type_ == "InternalIP")
        .context("no InternalIP")?
        .address;
    let port = node
        .metadata
        .annotations
        .and_then(|a| a.get("agent.stevedore.dev/port").cloned())
        .context("no agent port annotation")?;
    let tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(std::fs::read(ctx.cluster.ca_cert())?))
        .domain_name(ip.clone());
    let endpoint = Endpoint::from_shared(format!("https://{ip}:{port}"))?
        .tls_config(tls)?
        .connect_timeout(Duration::from_secs(5));
    Ok(endpoint.connect().await?)
}

/// The code `node`'s agent answers `GetNodeInfo` with when called with `token`.
async fn refusal(ctx: &TestContext, node: &str, token: &str) -> Result<tonic::Code> {
    let mut client = NodeServiceClient::new(agent_channel(ctx, node).await?);
    match client
        .get_node_info(with_token(GetNodeInfoRequest {}, token)?)
        .await
    {
        Ok(info) => anyhow::bail!("{node}'s agent accepted the token: {info:?}"),
        Err(status) => Ok(status.code()),
    }
}

#[tokio::test]
async fn a_token_for_one_nodes_agent_is_refused_by_another_nodes_agent() -> Result<()> {
    // Short: the sim agents' Unix socket paths include it and must fit in 108 bytes.
    run_in_namespace("creds", |ctx| async move {
        let prefix = format!("{}-n", ctx.namespace);
        let sim = SimAgents::up(ctx.cluster, &prefix, 2)?;
        let (a, b) = (sim.node(0), sim.node(1));
        let binding = bind_cluster_role(&ctx, "stevedore:agent-client", "operator").await?;
        let result = async {
            let for_a = token_for(&ctx, "operator", &a).await?;
            let for_b = token_for(&ctx, "operator", &b).await?;
            let shared = token_with_audience(&ctx, "operator", AGENT_AUDIENCE).await?;

            let info = node_info_once_allowed(agent_channel(&ctx, &a).await?, &for_a).await?;
            ensure!(info.node_name == a, "{info:?}");
            let info = node_info_once_allowed(agent_channel(&ctx, &b).await?, &for_b).await?;
            ensure!(info.node_name == b, "{info:?}");

            for (node, token, what) in [
                (&b, &for_a, "node A's token at node B"),
                (&a, &for_b, "node B's token at node A"),
                (&a, &shared, "a token for the shared audience"),
            ] {
                let code = refusal(&ctx, node, token).await?;
                ensure!(code == tonic::Code::Unauthenticated, "{what}: {code:?}");
            }
            Ok(())
        }
        .await;
        unbind(&ctx, &binding).await;
        drop(sim);
        result
    })
    .await
}
