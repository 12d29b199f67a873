//! Identities for tests of the agent's API: service-account tokens bound to one node
//! agent's audience, and cluster-role bindings that are removed again.

use anyhow::{Context as _, Result};
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, RoleBinding};
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use serde_json::json;

use crate::namespace::TestContext;

/// The prefix of the audience agents accept (their `--token-audience` default).
pub const AGENT_AUDIENCE: &str = "stevedore-agent";

/// The one audience `node`'s agent accepts.
pub fn agent_audience(node: &str) -> String {
    format!("{AGENT_AUDIENCE}:{node}")
}

/// Creates service account `name` in the test namespace (unless it exists) and returns
/// a token for it, bound to the audience of `node`'s agent.
pub async fn token_for(ctx: &TestContext, name: &str, node: &str) -> Result<String> {
    token_with_audience(ctx, name, &agent_audience(node)).await
}

/// Like [`token_for`], with any audience.
pub async fn token_with_audience(ctx: &TestContext, name: &str, audience: &str) -> Result<String> {
    let accounts = ctx.api::<ServiceAccount>();
    if accounts.get_opt(name).await?.is_none() {
        let account: ServiceAccount =
            serde_json::from_value(json!({ "metadata": { "name": name } }))?;
        accounts.create(&PostParams::default(), &account).await?;
    }
    let request = TokenRequest {
        spec: TokenRequestSpec {
            audiences: vec![audience.into()],
            expiration_seconds: Some(600),
            ..Default::default()
        },
        ..Default::default()
    };
    let issued = accounts
        .create_token_request(name, &PostParams::default(), &request)
        .await?;
    issued.status.map(|s| s.token).context("no token issued")
}

/// A request carrying `authorization: Bearer <token>`.
pub fn with_token<T>(message: T, token: &str) -> Result<tonic::Request<T>> {
    let mut request = tonic::Request::new(message);
    request
        .metadata_mut()
        .insert("authorization", format!("Bearer {token}").parse()?);
    Ok(request)
}

/// Binds cluster role `role` to service account `account` of the test namespace; the
/// binding is named after the namespace so `unbind` (or a rerun) finds it.
pub async fn bind_cluster_role(ctx: &TestContext, role: &str, account: &str) -> Result<String> {
    let name = format!("{role}-{}", ctx.namespace).replace(':', "-");
    let binding: ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": { "name": name },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role },
        "subjects": [{ "kind": "ServiceAccount", "name": account, "namespace": ctx.namespace }],
    }))?;
    Api::<ClusterRoleBinding>::all(ctx.client.clone())
        .create(&PostParams::default(), &binding)
        .await?;
    Ok(name)
}

pub async fn unbind(ctx: &TestContext, binding: &str) {
    let bindings = Api::<ClusterRoleBinding>::all(ctx.client.clone());
    let _ = bindings.delete(binding, &DeleteParams::default()).await;
}

/// `GetNodeInfo` with `token`, retried until RBAC sees a freshly created binding (the
/// authorizer's cache may lag a moment behind it).
pub async fn node_info_once_allowed(
    channel: tonic::transport::Channel,
    token: &str,
) -> Result<stevedore_proto::stevedore::agent::v1::GetNodeInfoResponse> {
    use stevedore_proto::stevedore::agent::v1::{
        GetNodeInfoRequest, node_service_client::NodeServiceClient,
    };
    let nodes = NodeServiceClient::new(channel);
    crate::poll_until(
        "the caller allowed",
        std::time::Duration::from_secs(60),
        || {
            let mut nodes = nodes.clone();
            async move {
                match nodes
                    .get_node_info(with_token(GetNodeInfoRequest {}, token)?)
                    .await
                {
                    Ok(info) => Ok(Some(info.into_inner())),
                    Err(status) => anyhow::bail!("{status:?}"),
                }
            }
        },
    )
    .await
}

/// Lets the control plane read pull secrets in the test namespace, as an operator does
/// for a namespace whose ImagePullJobs pull with secrets (README, "Pull secrets"): a
/// RoleBinding of the ClusterRole `stevedore-pull-secret-reader` to the control plane's
/// service account. It goes with the namespace.
pub async fn grant_pull_secrets(ctx: &TestContext) -> Result<()> {
    let binding: RoleBinding = serde_json::from_value(json!({
        "metadata": { "name": "stevedore-pull-secret-reader" },
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": "stevedore-pull-secret-reader",
        },
        "subjects": [{
            "kind": "ServiceAccount",
            "name": "stevedore-controlplane",
            "namespace": "kube-system",
        }],
    }))?;
    ctx.api::<RoleBinding>()
        .create(&PostParams::default(), &binding)
        .await?;
    Ok(())
}

/// The CA bundle (PEM) a deployed agent's serving certificate verifies against: the
/// control plane's signer CA (Secret kube-system/stevedore-agent-ca, for certificates
/// issued through the CSR API) and the cluster CA (certificates made by
/// deploy/local/lib/certs.sh, as the simulated agents use).
pub async fn agent_ca_bundle(ctx: &TestContext) -> Result<Vec<u8>> {
    use k8s_openapi::api::core::v1::Secret;
    let mut bundle = std::fs::read(ctx.cluster.ca_cert())?;
    let secrets = Api::<Secret>::namespaced(ctx.client.clone(), "kube-system");
    let signer_ca = secrets
        .get_opt("stevedore-agent-ca")
        .await?
        .and_then(|secret| secret.data?.remove("ca.crt"));
    if let Some(ca) = signer_ca {
        bundle.push(b'\n');
        bundle.extend_from_slice(&ca.0);
    }
    Ok(bundle)
}

/// A client with a token of the agent's service account bound to `agent_pod`, so the
/// apiserver puts that pod's node into the token's user info, as for the agent itself.
pub async fn client_as_agent_pod(
    ctx: &TestContext,
    agent_pod: &k8s_openapi::api::core::v1::Pod,
) -> Result<kube::Client> {
    use k8s_openapi::api::authentication::v1::BoundObjectReference;
    use kube::config::{AuthInfo, KubeConfigOptions, Kubeconfig};
    let request = TokenRequest {
        spec: TokenRequestSpec {
            audiences: vec![],
            expiration_seconds: Some(600),
            bound_object_ref: Some(BoundObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Pod".into()),
                name: agent_pod.metadata.name.clone(),
                uid: agent_pod.metadata.uid.clone(),
            }),
        },
        ..Default::default()
    };
    let token = Api::<ServiceAccount>::namespaced(ctx.client.clone(), "kube-system")
        .create_token_request("stevedore-agent", &PostParams::default(), &request)
        .await?
        .status
        .context("no token")?
        .token;
    let mut kubeconfig = Kubeconfig::read_from(&ctx.cluster.kubeconfig)?;
    for user in &mut kubeconfig.auth_infos {
        user.auth_info = Some(AuthInfo {
            token: Some(token.clone().into()),
            ..Default::default()
        });
    }
    let config =
        kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?;
    Ok(kube::Client::try_from(config)?)
}
