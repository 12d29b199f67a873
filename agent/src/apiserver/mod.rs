//! The agent's Kubernetes client. In a pod it uses the service account (the DaemonSet's
//! case); outside one (the simulated nodes, the benchmarks) the kubeconfig that
//! `KUBECONFIG` names, written in JSON (`kubectl config view --raw -o json`; JSON is YAML
//! too, so every Kubernetes tool reads such a file).
//!
//! Why not `kube::Client::try_default`: its configuration loader and auth layer link a
//! YAML parser, exec credential plugins, JSONPath and regex, ~1 MiB of code the agent
//! never runs, and the agent's idle memory is mostly its own code pages
//! (docs/pull-engine.md, "Memory"). The agent needs a server, a CA, and a client
//! certificate or a bearer token; the requests themselves still go through `kube::Api`.

pub mod access;
mod bearer;

use std::{path::Path, sync::Arc, time::Duration};

use anyhow::Context as _;
use hyper_util::{client::legacy::connect::HttpConnector, rt::TokioExecutor};
use kube::client::middleware::BaseUriLayer;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject as _};

pub use access::{Access, Identity, Token};
use bearer::Bearer;

/// How long a connection to the apiserver may take to open.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a response may go without a byte arriving (or a request without one being
/// sent). The agent makes short calls only (reviews, CSRs, pod status patches), never a
/// watch; kube's own client allows 295 s because of watches.
const IO_TIMEOUT: Duration = Duration::from_secs(60);

/// The client for the apiserver: from `KUBECONFIG` when it is set, else from the pod's
/// service account.
pub fn client() -> anyhow::Result<kube::Client> {
    let read = |path: &Path| std::fs::read(path);
    let access = match std::env::var_os("KUBECONFIG").filter(|p| !p.is_empty()) {
        Some(path) => {
            let path = Path::new(&path);
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading the kubeconfig {}", path.display()))?;
            access::from_kubeconfig(&path.display().to_string(), &text, read)?
        }
        None => access::in_cluster(
            std::env::var("KUBERNETES_SERVICE_HOST").ok().as_deref(),
            std::env::var("KUBERNETES_SERVICE_PORT").ok().as_deref(),
            read,
        )?,
    };
    build(access)
}

/// A client speaking HTTP/1.1 over TLS to `access.server`, trusting only `access.ca_pem`,
/// with the client certificate and the bearer token `access` gives.
pub fn build(access: Access) -> anyhow::Result<kube::Client> {
    let tls = tls_config(&access.ca_pem, access.identity.as_ref())?;
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_connect_timeout(Some(CONNECT_TIMEOUT));
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_only()
        .enable_http1()
        .wrap_connector(http);
    let mut https = hyper_timeout::TimeoutConnector::new(https);
    https.set_read_timeout(Some(IO_TIMEOUT));
    https.set_write_timeout(Some(IO_TIMEOUT));
    let transport: hyper_util::client::legacy::Client<_, kube::client::Body> =
        hyper_util::client::legacy::Client::builder(TokioExecutor::new()).build(https);
    let bearer = access.token.map(Bearer::new).transpose()?.map(Arc::new);
    let service = tower::ServiceBuilder::new()
        .layer(BaseUriLayer::new(access.server))
        .map_request(move |mut request: http::Request<kube::client::Body>| {
            if let Some(bearer) = &bearer {
                (request.headers_mut()).insert(http::header::AUTHORIZATION, bearer.header());
            }
            request
        })
        .service(transport);
    Ok(kube::Client::new(service, access.namespace))
}

fn tls_config(ca_pem: &[u8], identity: Option<&Identity>) -> anyhow::Result<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem) {
        let cert = cert.map_err(|err| anyhow::anyhow!("the apiserver's CA is not PEM: {err}"))?;
        roots
            .add(cert)
            .map_err(|err| anyhow::anyhow!("the apiserver's CA is not usable: {err}"))?;
    }
    if roots.is_empty() {
        anyhow::bail!("the apiserver's CA holds no certificate");
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .context("TLS protocol versions")?
        .with_root_certificates(roots);
    let Some(identity) = identity else {
        return Ok(builder.with_no_client_auth());
    };
    let chain = CertificateDer::pem_slice_iter(&identity.cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|err| anyhow::anyhow!("the client certificate is not PEM: {err}"))?;
    let key = PrivateKeyDer::from_pem_slice(&identity.key_pem)
        .map_err(|err| anyhow::anyhow!("the client key is not PEM: {err}"))?;
    builder
        .with_client_auth_cert(chain, key)
        .map_err(|err| anyhow::anyhow!("the client certificate and key do not fit: {err}"))
}

#[cfg(test)]
mod tests;
