//! Where the apiserver is and how the agent proves who it is, read from the pod's service
//! account or from a kubeconfig written in JSON. Pure but for reading the files named:
//! `read` is given, so the rules are tested with a table of files.

use std::path::{Path, PathBuf};

use base64::Engine as _;
use kube::config::{AuthInfo, Cluster, Kubeconfig};
use secrecy::ExposeSecret as _;

/// Where a pod's service account credentials are mounted.
pub const SERVICE_ACCOUNT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// What the client needs: the server, the CA to trust, and a client certificate or a
/// bearer token (or both, as a kubeconfig may give).
#[derive(Debug, PartialEq)]
pub struct Access {
    pub server: http::Uri,
    pub ca_pem: Vec<u8>,
    pub identity: Option<Identity>,
    pub token: Option<Token>,
    /// The namespace of requests that name none (the context's, else `default`).
    pub namespace: String,
}

/// A client certificate chain and its key, PEM.
#[derive(PartialEq)]
pub struct Identity {
    pub cert_pem: Vec<u8>,
    pub key_pem: Vec<u8>,
}

impl std::fmt::Debug for Identity {
    /// Never prints the key.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Identity { .. }")
    }
}

/// A bearer token: given, or read from a file that is re-read as it rotates (a projected
/// service account token is replaced before it expires).
#[derive(PartialEq)]
pub enum Token {
    Fixed(String),
    File(PathBuf),
}

impl std::fmt::Debug for Token {
    /// Never prints the token.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Token::Fixed(_) => f.write_str("Token::Fixed(..)"),
            Token::File(path) => write!(f, "Token::File({})", path.display()),
        }
    }
}

/// The apiserver as a pod sees it: `KUBERNETES_SERVICE_HOST` / `_PORT` and the service
/// account's CA, token and namespace.
pub fn in_cluster(
    host: Option<&str>,
    port: Option<&str>,
    read: impl Fn(&Path) -> std::io::Result<Vec<u8>>,
) -> anyhow::Result<Access> {
    let (Some(host), Some(port)) = (host.filter(|h| !h.is_empty()), port) else {
        anyhow::bail!(
            "not in a pod (KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set) \
             and KUBECONFIG is not set: set KUBECONFIG to a kubeconfig in JSON form"
        );
    };
    // An IPv6 address goes in brackets in a URL.
    let host = if host.contains(':') {
        format!("[{host}]")
    } else {
        host.to_owned()
    };
    let dir = Path::new(SERVICE_ACCOUNT_DIR);
    let namespace = read(&dir.join("namespace"))
        .ok()
        .and_then(|bytes| String::from_utf8(bytes).ok())
        .map(|ns| ns.trim().to_owned())
        .filter(|ns| !ns.is_empty())
        .unwrap_or_else(|| "default".to_owned());
    Ok(Access {
        server: uri(&format!("https://{host}:{port}"))?,
        ca_pem: read_file(&read, &dir.join("ca.crt"), "the service account's CA")?,
        identity: None,
        token: Some(Token::File(dir.join("token"))),
        namespace,
    })
}

/// The access a kubeconfig's current context gives. `path` names the file in errors.
/// Exec plugins, auth providers, basic auth and proxies are refused by name: the agent
/// runs in a pod; a kubeconfig is for simulated nodes and benchmarks.
pub fn from_kubeconfig(
    path: &str,
    text: &str,
    read: impl Fn(&Path) -> std::io::Result<Vec<u8>>,
) -> anyhow::Result<Access> {
    let config = parse_json(path, text)?;
    let context_name = (config.current_context.as_deref())
        .filter(|c| !c.is_empty())
        .ok_or_else(|| anyhow::anyhow!("the kubeconfig {path} has no current-context"))?;
    let context = (config.contexts.iter())
        .find(|c| c.name == context_name)
        .and_then(|c| c.context.as_ref())
        .ok_or_else(|| {
            anyhow::anyhow!("the kubeconfig {path} has no context named {context_name:?}")
        })?;
    let cluster = (config.clusters.iter())
        .find(|c| c.name == context.cluster)
        .and_then(|c| c.cluster.as_ref())
        .ok_or_else(|| {
            anyhow::anyhow!(
                "the kubeconfig {path} has no cluster named {:?}",
                context.cluster
            )
        })?;
    let user = match &context.user {
        Some(name) => (config.auth_infos.iter())
            .find(|u| &u.name == name)
            .and_then(|u| u.auth_info.as_ref())
            .ok_or_else(|| anyhow::anyhow!("the kubeconfig {path} has no user named {name:?}"))?,
        None => &AuthInfo::default(),
    };
    let (server, ca_pem) = cluster_access(path, cluster, &read)?;
    let (identity, token) = user_access(path, user, &read)?;
    Ok(Access {
        server,
        ca_pem,
        identity,
        token,
        namespace: (context.namespace.clone())
            .filter(|ns| !ns.is_empty())
            .unwrap_or_else(|| "default".to_owned()),
    })
}

fn parse_json(path: &str, text: &str) -> anyhow::Result<Kubeconfig> {
    if !text.trim_start().starts_with('{') {
        anyhow::bail!(
            "the kubeconfig {path} is not JSON; the agent reads kubeconfigs in JSON form \
             (write one with `kubectl config view --raw -o json`)"
        );
    }
    serde_json::from_str(text)
        .map_err(|err| anyhow::anyhow!("the kubeconfig {path} is not a valid kubeconfig: {err}"))
}

fn cluster_access(
    path: &str,
    cluster: &Cluster,
    read: &impl Fn(&Path) -> std::io::Result<Vec<u8>>,
) -> anyhow::Result<(http::Uri, Vec<u8>)> {
    if cluster.proxy_url.is_some() || cluster.insecure_skip_tls_verify == Some(true) {
        anyhow::bail!(
            "the kubeconfig {path} sets proxy-url or insecure-skip-tls-verify, which the agent \
             does not support"
        );
    }
    let server = (cluster.server.as_deref())
        .ok_or_else(|| anyhow::anyhow!("the kubeconfig {path} names no server"))?;
    let ca_pem = pem_from(
        path,
        "certificate-authority",
        cluster.certificate_authority_data.as_deref(),
        cluster.certificate_authority.as_deref(),
        read,
    )?
    .ok_or_else(|| {
        anyhow::anyhow!("the kubeconfig {path} gives no certificate-authority for its server")
    })?;
    let server = uri(server).map_err(|err| anyhow::anyhow!("the kubeconfig {path}: {err}"))?;
    Ok((server, ca_pem))
}

fn user_access(
    path: &str,
    user: &AuthInfo,
    read: &impl Fn(&Path) -> std::io::Result<Vec<u8>>,
) -> anyhow::Result<(Option<Identity>, Option<Token>)> {
    for (set, field) in [
        (user.exec.is_some(), "exec"),
        (user.auth_provider.is_some(), "auth-provider"),
        (
            user.username.is_some() || user.password.is_some(),
            "username/password",
        ),
        (user.impersonate.is_some(), "as (impersonation)"),
    ] {
        if set {
            anyhow::bail!("the kubeconfig {path} uses {field}, which the agent does not support");
        }
    }
    let cert = pem_from(
        path,
        "client-certificate",
        user.client_certificate_data.as_deref(),
        user.client_certificate.as_deref(),
        read,
    )?;
    let key_data = user.client_key_data.as_ref().map(|k| k.expose_secret());
    let key = pem_from(
        path,
        "client-key",
        key_data,
        user.client_key.as_deref(),
        read,
    )?;
    let identity = match (cert, key) {
        (Some(cert_pem), Some(key_pem)) => Some(Identity { cert_pem, key_pem }),
        (None, None) => None,
        _ => anyhow::bail!(
            "the kubeconfig {path} gives a client-certificate without a client-key or the reverse"
        ),
    };
    let token = match (&user.token, &user.token_file) {
        (Some(token), _) => Some(Token::Fixed(token.expose_secret().trim().to_owned())),
        (None, Some(file)) => Some(Token::File(PathBuf::from(file))),
        (None, None) => None,
    };
    Ok((identity, token))
}

/// PEM from a base64 `<field>-data` value, else from the file `<field>` names.
fn pem_from(
    path: &str,
    field: &str,
    data: Option<&str>,
    file: Option<&str>,
    read: &impl Fn(&Path) -> std::io::Result<Vec<u8>>,
) -> anyhow::Result<Option<Vec<u8>>> {
    if let Some(data) = data.filter(|d| !d.is_empty()) {
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(data.trim())
            .map_err(|err| {
                anyhow::anyhow!("the kubeconfig {path}: {field}-data is not base64: {err}")
            })?;
        return Ok(Some(decoded));
    }
    match file.filter(|f| !f.is_empty()) {
        Some(file) => read_file(
            read,
            Path::new(file),
            &format!("the kubeconfig {path}'s {field}"),
        )
        .map(Some),
        None => Ok(None),
    }
}

fn read_file(
    read: &impl Fn(&Path) -> std::io::Result<Vec<u8>>,
    file: &Path,
    what: &str,
) -> anyhow::Result<Vec<u8>> {
    read(file).map_err(|err| anyhow::anyhow!("reading {what} {}: {err}", file.display()))
}

fn uri(server: &str) -> anyhow::Result<http::Uri> {
    let parsed: http::Uri = server
        .parse()
        .map_err(|err| anyhow::anyhow!("the apiserver address {server:?} is not a URL: {err}"))?;
    if parsed.scheme_str() != Some("https") {
        anyhow::bail!("the apiserver address {server:?} is not https");
    }
    Ok(parsed)
}
