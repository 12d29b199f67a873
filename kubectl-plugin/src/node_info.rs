//! `describe-node`: asks a node's agent for GetNodeInfo directly, as an operator with
//! grpcurl would (docs/security.md): at the node's InternalIP and agent port, over TLS
//! verified against the agents' CA, with a bearer token for that node's audience. The
//! apiserver is used to find the node, mint the token and read the CA; the agent's API
//! itself is not proxied by it (its gRPC needs HTTP/2 end to end).

use anyhow::{Context as _, Result, bail};
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Node, Pod, Secret, ServiceAccount};
use kube::api::{ListParams, PostParams};
use kube::{Api, Client};
use serde::Serialize;
use stevedore_api::node_agent::node_agent_address;
use stevedore_proto::stevedore::agent::v1::GetNodeInfoRequest;
use stevedore_proto::stevedore::agent::v1::node_service_client::NodeServiceClient;
use tonic::transport::{Certificate, ClientTlsConfig, Endpoint};

use crate::cli::{DescribeNodeArgs, Output};
use crate::output;

/// The Secret the control plane keeps the agents' CA in (its `--agent-ca-secret`).
const AGENT_CA_SECRET: &str = "stevedore-agent-ca";
/// Where the manifests install Stevedore when no other namespace is chosen.
const DEFAULT_NAMESPACE: &str = "kube-system";
/// The label every agent pod carries, in the manifests and the chart alike.
const AGENT_POD_LABEL: &str = "app.kubernetes.io/name=stevedore-agent";

/// How long a minted token lives: one call needs seconds.
const TOKEN_SECONDS: i64 = 600;

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct NodeInfo {
    node_name: String,
    agent_address: String,
    agent_version: String,
    containerd_version: String,
    snapshotter: String,
    platform: String,
    max_concurrent_pulls: u32,
    max_concurrent_restarts: u32,
}

fn split_ref<'a>(text: &'a str, what: &str) -> Result<(&'a str, &'a str)> {
    match text.split_once('/') {
        Some((namespace, name)) if !namespace.is_empty() && !name.is_empty() => {
            Ok((namespace, name))
        }
        _ => bail!("{what} \"{text}\" is not <namespace>/<name>"),
    }
}

async fn token(client: &Client, args: &DescribeNodeArgs) -> Result<String> {
    if let Some(token) = &args.token {
        return Ok(token.trim().to_owned());
    }
    let Some(account) = &args.service_account else {
        bail!(
            "the agent of {} needs a token: pass --token (audience {}:{}) or --service-account <namespace>/<name> to mint one",
            args.node,
            args.token_audience,
            args.node
        );
    };
    let (namespace, name) = split_ref(account, "--service-account")?;
    let request = TokenRequest {
        spec: TokenRequestSpec {
            audiences: vec![format!("{}:{}", args.token_audience, args.node)],
            expiration_seconds: Some(TOKEN_SECONDS),
            ..TokenRequestSpec::default()
        },
        ..TokenRequest::default()
    };
    let issued = Api::<ServiceAccount>::namespaced(client.clone(), namespace)
        .create_token_request(name, &PostParams::default(), &request)
        .await
        .with_context(|| format!("creating a token for service account {account}"))?;
    issued
        .status
        .map(|s| s.token)
        .with_context(|| format!("the apiserver issued no token for {account}"))
}

async fn ca_bundle(client: &Client, args: &DescribeNodeArgs) -> Result<String> {
    if let Some(path) = &args.ca_file {
        return std::fs::read_to_string(path)
            .with_context(|| format!("reading --ca-file {}", path.display()));
    }
    let ca_secret = match &args.ca_secret {
        Some(explicit) => explicit.clone(),
        None => default_ca_secret(agent_namespace(client, &args.node).await?.as_deref()),
    };
    let (namespace, name) = split_ref(&ca_secret, "--ca-secret")?;
    let secret = Api::<Secret>::namespaced(client.clone(), namespace)
        .get(name)
        .await
        .with_context(|| {
            format!("reading the agents' CA from Secret {namespace}/{name} (or pass --ca-file)")
        })?;
    let ca = secret
        .data
        .as_ref()
        .and_then(|d| d.get("ca.crt"))
        .with_context(|| format!("Secret {namespace}/{name} has no ca.crt"))?;
    let mut bundle = String::from_utf8(ca.0.clone()).context("ca.crt is not PEM text")?;
    // Agents may serve a certificate the cluster CA signed (as the control plane trusts).
    let kubeconfig = kube::Config::infer()
        .await
        .context("reading the kubeconfig")?;
    for der in kubeconfig.root_cert.iter().flatten() {
        bundle.push('\n');
        bundle.push_str(&pem_of(der));
    }
    Ok(bundle)
}

/// The agents' CA Secret when --ca-secret is not given: the control plane keeps it in its
/// own namespace, which is the one its agents run in (one install, one namespace).
fn default_ca_secret(agent_namespace: Option<&str>) -> String {
    format!(
        "{}/{AGENT_CA_SECRET}",
        agent_namespace.unwrap_or(DEFAULT_NAMESPACE)
    )
}

/// The namespace of the Stevedore agent pod on `node`, if one runs there.
async fn agent_namespace(client: &Client, node: &str) -> Result<Option<String>> {
    let agents = ListParams::default()
        .labels(AGENT_POD_LABEL)
        .fields(&format!("spec.nodeName={node}"));
    let pods = Api::<Pod>::all(client.clone())
        .list(&agents)
        .await
        .with_context(|| format!("finding the Stevedore agent pod on node {node}"))?;
    Ok(pods
        .items
        .into_iter()
        .find_map(|pod| pod.metadata.namespace))
}

fn pem_of(der: &[u8]) -> String {
    use base64::Engine as _;
    let encoded = base64::engine::general_purpose::STANDARD.encode(der);
    let mut pem = String::from("-----BEGIN CERTIFICATE-----\n");
    for chunk in encoded.as_bytes().chunks(64) {
        pem.push_str(&String::from_utf8_lossy(chunk));
        pem.push('\n');
    }
    pem.push_str("-----END CERTIFICATE-----\n");
    pem
}

pub async fn run(client: &Client, args: DescribeNodeArgs, out: Output) -> Result<u8> {
    let node = Api::<Node>::all(client.clone())
        .get(&args.node)
        .await
        .with_context(|| format!("reading node {}", args.node))?;
    let address = node_agent_address(&node, args.agent_port)?;
    let token = token(client, &args).await?;
    let ca = ca_bundle(client, &args).await?;
    let tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(ca))
        .domain_name(address.ip().to_string());
    let channel = Endpoint::from_shared(format!("https://{address}"))?
        .tls_config(tls)?
        .connect_timeout(std::time::Duration::from_secs(5))
        .timeout(std::time::Duration::from_secs(10))
        .connect()
        .await
        .with_context(|| format!("connecting to the agent of {} at {address}", args.node))?;
    let mut request = tonic::Request::new(GetNodeInfoRequest {});
    request.metadata_mut().insert(
        "authorization",
        format!("Bearer {token}")
            .parse()
            .context("the token is not a header value")?,
    );
    let info = NodeServiceClient::new(channel)
        .get_node_info(request)
        .await
        .map_err(|status| {
            anyhow::anyhow!(
                "the agent of {} refused GetNodeInfo: {}",
                args.node,
                status.message()
            )
        })?
        .into_inner();
    let info = NodeInfo {
        node_name: info.node_name,
        agent_address: address.to_string(),
        agent_version: info.agent_version,
        containerd_version: info.containerd_version,
        snapshotter: info.snapshotter,
        platform: info.platform,
        max_concurrent_pulls: info.max_concurrent_pulls,
        max_concurrent_restarts: info.max_concurrent_restarts,
    };
    if !output::structured(out, &info)? {
        for (label, value) in [
            ("Node:", info.node_name.clone()),
            (
                "Agent:",
                format!("{} at {}", info.agent_version, info.agent_address),
            ),
            ("Containerd:", info.containerd_version.clone()),
            ("Snapshotter:", info.snapshotter.clone()),
            ("Platform:", info.platform.clone()),
            ("Concurrent pulls:", info.max_concurrent_pulls.to_string()),
            (
                "Concurrent restarts:",
                info.max_concurrent_restarts.to_string(),
            ),
        ] {
            output::line(&format!("{label:<21}{value}"))?;
        }
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ca_secret_is_looked_for_where_the_agents_run() {
        let cases = [
            (
                Some("stevedore-system"),
                "stevedore-system/stevedore-agent-ca",
            ),
            (Some("kube-system"), "kube-system/stevedore-agent-ca"),
            (None, "kube-system/stevedore-agent-ca"),
        ];
        for (namespace, expected) in cases {
            assert_eq!(
                default_ca_secret(namespace),
                expected,
                "agents in {namespace:?}"
            );
        }
    }

    #[test]
    fn a_reference_without_namespace_or_name_is_refused_by_flag() {
        for text in ["", "name", "/name", "ns/"] {
            let err = split_ref(text, "--ca-secret").expect_err(text).to_string();
            assert!(
                err.contains("--ca-secret") && err.contains("<namespace>/<name>"),
                "{err}"
            );
        }
        assert_eq!(split_ref("a/b", "--ca-secret").ok(), Some(("a", "b")));
    }
}
