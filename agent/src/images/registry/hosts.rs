//! containerd's per-registry configuration (`hosts.toml` under its `config_path`, as
//! `ctr` and CRI read it), so a node set up for a mirror pulls from the mirror: for a
//! registry `host[:port]`, `<config dir>/<host[:port]>/hosts.toml` (or
//! `<config dir>/_default/hosts.toml`) lists `[host."<url>"]` endpoints tried in order
//! before the upstream `server`, each with its `capabilities` (`pull`, `resolve`),
//! `skip_verify`, `ca` and `override_path`; an `http://` URL means plain HTTP.
//! Parsing and endpoint selection are pure; reading the directory is one function.

use std::path::{Path, PathBuf};

use toml_edit::{DocumentMut, Item, Table};

/// Where containerd's CRI plugin is conventionally told to look (`config_path`).
pub const DEFAULT_CONFIG_DIR: &str = "/etc/containerd/certs.d";

/// What an endpoint may be asked: `resolve` turns a tag into a digest, `pull` fetches
/// content by digest. `push` is parsed and ignored: the agent never pushes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    pub pull: bool,
    pub resolve: bool,
}

impl Capabilities {
    pub const ALL: Self = Self {
        pull: true,
        resolve: true,
    };
}

/// How to reach an endpoint over TLS.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Tls {
    /// Accept any certificate (`skip_verify`).
    pub skip_verify: bool,
    /// Extra CA files trusted for this endpoint (`ca`).
    pub ca: Vec<PathBuf>,
}

/// One place a registry's content can be fetched from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// `scheme://host[:port]`.
    pub origin: String,
    /// The API root on it: `/v2`, or the configured path as is with `override_path`.
    pub path: String,
    pub capabilities: Capabilities,
    pub tls: Tls,
    /// Whether this is a mirror of the registry rather than the registry itself (it is
    /// then told which registry is meant, as containerd does, with `?ns=`).
    pub mirror_of: Option<String>,
}

impl Endpoint {
    /// The registry itself at `scheme://host`, under `/v2`.
    pub fn upstream(origin: String) -> Self {
        Self {
            origin,
            path: "/v2".to_owned(),
            capabilities: Capabilities::ALL,
            tls: Tls::default(),
            mirror_of: None,
        }
    }

    /// Whether requests go over plain HTTP.
    pub fn plain_http(&self) -> bool {
        self.origin.starts_with("http://")
    }

    /// The URL of `object` (e.g. `manifests/v1`) of `repository` here.
    pub fn url(&self, repository: &str, object: &str) -> String {
        let mut url = format!("{}{}/{repository}/{object}", self.origin, self.path);
        if let Some(registry) = &self.mirror_of {
            url.push_str("?ns=");
            url.push_str(registry);
        }
        url
    }

    /// The repository's root here, which names it in the token cache.
    pub fn repository_base(&self, repository: &str) -> String {
        format!("{}{}/{repository}", self.origin, self.path)
    }
}

/// Why a `hosts.toml` cannot be used.
#[derive(Debug, Clone, thiserror::Error)]
#[error("registry configuration {path} is invalid: {detail}")]
pub struct HostsError {
    pub path: String,
    pub detail: String,
}

/// The endpoints for registry `domain`, in the order to try them, from its `hosts.toml`
/// text (`None` when there is none): the configured hosts, then the upstream `server`
/// (`default_upstream` when the file names none). `path` names the file in errors.
pub fn endpoints(
    domain: &str,
    hosts_toml: Option<&str>,
    path: &str,
    default_upstream: Endpoint,
) -> Result<Vec<Endpoint>, HostsError> {
    let Some(text) = hosts_toml else {
        return Ok(vec![default_upstream]);
    };
    let invalid = |detail: String| HostsError {
        path: path.to_owned(),
        detail,
    };
    let document: DocumentMut = text.parse().map_err(|err| invalid(format!("{err}")))?;
    let mut list = Vec::new();
    if let Some(hosts) = document.get("host") {
        let hosts = hosts
            .as_table_like()
            .ok_or_else(|| invalid("`host` is not a table".to_owned()))?;
        for (url, settings) in hosts.iter() {
            let settings = settings
                .as_table()
                .ok_or_else(|| invalid(format!("host {url:?} is not a table")))?;
            let mut endpoint = endpoint(url, settings).map_err(&invalid)?;
            endpoint.mirror_of = Some(domain.to_owned());
            list.push(endpoint);
        }
    }
    let upstream = match document.get("server").map(Item::as_str) {
        None => Endpoint {
            capabilities: capabilities(document.as_table()).map_err(&invalid)?,
            tls: tls(document.as_table()).map_err(&invalid)?,
            ..default_upstream
        },
        Some(Some(server)) => endpoint(server, document.as_table()).map_err(&invalid)?,
        Some(None) => return Err(invalid("`server` is not a string".to_owned())),
    };
    list.push(upstream);
    Ok(list)
}

/// The endpoints among `all` that may serve a request needing `resolve` (a tag) or
/// only `pull` (a digest): containerd asks for both capabilities to resolve a tag.
pub fn able_to(all: &[Endpoint], resolve: bool) -> Vec<&Endpoint> {
    all.iter()
        .filter(|e| e.capabilities.pull && (!resolve || e.capabilities.resolve))
        .collect()
}

/// One endpoint from its URL (`https://` assumed without a scheme) and settings.
fn endpoint(server: &str, settings: &Table) -> Result<Endpoint, String> {
    let server = if server.starts_with("http://") || server.starts_with("https://") {
        server.to_owned()
    } else {
        format!("https://{server}")
    };
    let (scheme, rest) = server
        .split_once("://")
        .ok_or_else(|| format!("{server:?} is not a URL"))?;
    let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
    if host.is_empty() || host.contains(['?', '#', '@']) {
        return Err(format!("{server:?} does not name a host"));
    }
    let override_path = flag(settings, "override_path")?;
    // containerd's rule: the API root is `<path>/v2` unless the path is already one or
    // `override_path` says to use it as is.
    let path = path.trim_matches('/');
    let path = if path.is_empty() {
        String::new()
    } else {
        format!("/{path}")
    };
    let path = if override_path || path.ends_with("/v2") {
        path
    } else {
        format!("{path}/v2")
    };
    Ok(Endpoint {
        origin: format!("{scheme}://{host}"),
        path,
        capabilities: capabilities(settings)?,
        tls: tls(settings)?,
        mirror_of: None,
    })
}

fn capabilities(settings: &Table) -> Result<Capabilities, String> {
    let Some(item) = settings.get("capabilities") else {
        return Ok(Capabilities::ALL);
    };
    let list = item
        .as_array()
        .ok_or_else(|| "`capabilities` is not a list".to_owned())?;
    let mut caps = Capabilities {
        pull: false,
        resolve: false,
    };
    for value in list {
        match value.as_str() {
            Some("pull") => caps.pull = true,
            Some("resolve") => caps.resolve = true,
            Some("push") => {}
            Some(other) => return Err(format!("unknown capability {other:?}")),
            None => return Err("`capabilities` holds something other than names".to_owned()),
        }
    }
    Ok(caps)
}

fn tls(settings: &Table) -> Result<Tls, String> {
    let ca = match settings.get("ca") {
        None => Vec::new(),
        Some(item) => match (item.as_str(), item.as_array()) {
            (Some(one), _) => vec![PathBuf::from(one)],
            (None, Some(many)) => many
                .iter()
                .map(|v| v.as_str().map(PathBuf::from))
                .collect::<Option<_>>()
                .ok_or_else(|| "`ca` holds something other than paths".to_owned())?,
            _ => return Err("`ca` is neither a path nor a list of paths".to_owned()),
        },
    };
    Ok(Tls {
        skip_verify: flag(settings, "skip_verify")?,
        ca,
    })
}

fn flag(settings: &Table, name: &str) -> Result<bool, String> {
    settings.get(name).map_or(Ok(false), |item| {
        item.as_bool()
            .ok_or_else(|| format!("`{name}` is not true or false"))
    })
}

/// The `hosts.toml` that applies to `domain` under `config_dir` and its text, if any:
/// the registry's own directory, else `_default`, as containerd looks them up.
pub fn read_hosts_file(
    config_dir: &Path,
    domain: &str,
) -> Result<Option<(String, String)>, HostsError> {
    // A domain is a parsed reference's (no `/`); `..` cannot name a directory here.
    for dir in [domain, "_default"] {
        let path = config_dir.join(dir).join("hosts.toml");
        match std::fs::read_to_string(&path) {
            Ok(text) => return Ok(Some((path.display().to_string(), text))),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
            Err(err) => {
                return Err(HostsError {
                    path: path.display().to_string(),
                    detail: err.to_string(),
                });
            }
        }
    }
    Ok(None)
}

#[cfg(test)]
#[path = "hosts_tests.rs"]
mod tests;
