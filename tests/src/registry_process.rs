//! A registry of a test's own: Debian's `docker-registry` (distribution 2.8) serving on a
//! free loopback port, its storage, configuration and access log in a directory the test
//! owns, with the authentication the test asks for. Killed when dropped.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{Context as _, Result, bail};

use crate::poll_until;
use crate::scratch::free_loopback_addr;

/// How the registry authenticates its clients.
pub enum RegistryAuth {
    /// Everyone may pull and push.
    None,
    /// Docker's token authentication: a `Bearer realm=..,service=..,scope=..` challenge,
    /// and JWTs from `issuer` signed by a key certified by `ca_pem`.
    Token {
        realm: String,
        service: String,
        issuer: String,
        ca_pem: String,
    },
}

/// A running registry.
pub struct RegistryProcess {
    child: Child,
    /// `127.0.0.1:<port>`.
    pub addr: String,
    log: PathBuf,
}

impl RegistryProcess {
    /// Starts a registry keeping its files under `dir` and waits until it answers.
    pub async fn start(dir: &Path, auth: &RegistryAuth) -> Result<Self> {
        std::fs::create_dir_all(dir.join("storage"))?;
        let addr = free_loopback_addr()?;
        let auth_yaml = match auth {
            RegistryAuth::None => String::new(),
            RegistryAuth::Token {
                realm,
                service,
                issuer,
                ca_pem,
            } => {
                let bundle = dir.join("token-ca.pem");
                std::fs::write(&bundle, ca_pem)?;
                format!(
                    "auth:\n  token:\n    realm: {realm}\n    service: {service}\n    issuer: {issuer}\n    rootcertbundle: {}\n",
                    bundle.display()
                )
            }
        };
        let config = dir.join("config.yml");
        std::fs::write(
            &config,
            format!(
                "version: 0.1\nlog: {{ level: info }}\nstorage:\n  filesystem: {{ rootdirectory: {} }}\nhttp:\n  addr: {addr}\n{auth_yaml}",
                dir.join("storage").display()
            ),
        )?;
        let log = dir.join("registry.log");
        let log_file = std::fs::File::create(&log)?;
        let child = Command::new("docker-registry")
            .arg("serve")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(log_file.try_clone()?)
            .stderr(log_file)
            .spawn()
            .context("starting docker-registry (Debian's package of distribution)")?;
        let mut registry = Self { child, addr, log };
        let up = poll_until("the registry answering", Duration::from_secs(30), || {
            let exited = registry.child.try_wait();
            let addr = registry.addr.clone();
            async move {
                if let Some(status) = exited? {
                    bail!("docker-registry exited with {status}");
                }
                Ok(crate::metrics::http_get(&addr, "/v2/")
                    .await
                    .ok()
                    .map(|_| ()))
            }
        })
        .await;
        if let Err(err) = up {
            bail!("{err:#}\nregistry log:\n{}", registry.log_text()?);
        }
        Ok(registry)
    }

    /// What the registry logged so far (its access log among it).
    pub fn log_text(&self) -> Result<String> {
        std::fs::read_to_string(&self.log).context("reading the registry's log")
    }

    /// Access-log lines of requests by the agent whose path contains `path_part`,
    /// answered with `status`.
    pub fn agent_requests(&self, path_part: &str, status: u16) -> Result<usize> {
        let status = format!(" HTTP/1.1\" {status} ");
        Ok(self
            .log_text()?
            .lines()
            .filter(|l| l.contains(" /v2/") && l.contains(path_part))
            .filter(|l| l.contains(&status) && l.contains("stevedore-agent/"))
            .count())
    }
}

impl Drop for RegistryProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
