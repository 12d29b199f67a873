//! Command-line and environment configuration of the agent.

use std::{
    net::SocketAddr,
    num::NonZeroUsize,
    path::{Path, PathBuf},
    time::Duration,
};

use clap::{Parser, ValueEnum};

/// Stevedore node agent: pulls images with per-layer progress, restarts containers in
/// place and sets pod conditions on its node, serving a gRPC API to the control plane.
#[derive(Debug, Clone, Parser)]
#[command(name = "stevedore-agent", version)]
pub struct Args {
    /// Name of the node the agent runs on (downward API `spec.nodeName`).
    #[arg(long, env = "NODE_NAME")]
    pub node_name: String,

    /// containerd's gRPC socket.
    #[arg(
        long,
        env = "STEVEDORE_CONTAINERD_SOCKET",
        default_value = "/run/containerd/containerd.sock"
    )]
    pub containerd_socket: PathBuf,

    /// containerd namespace to work in; `k8s.io` is the one kubelet's CRI uses.
    #[arg(long, env = "STEVEDORE_CONTAINERD_NAMESPACE", default_value = "k8s.io")]
    pub containerd_namespace: String,

    /// Address of the gRPC API (TCP).
    #[arg(long, env = "STEVEDORE_GRPC_ADDR", default_value = "0.0.0.0:10350")]
    pub grpc_addr: SocketAddr,

    /// Path of the gRPC API's Unix socket, for local tools on the node.
    #[arg(
        long,
        env = "STEVEDORE_UNIX_SOCKET",
        default_value = "/run/stevedore/agent.sock"
    )]
    pub unix_socket: PathBuf,

    /// Address of the health endpoint (`/healthz`, `/readyz`), which kubelet probes
    /// reach; it tells only whether the agent works.
    #[arg(long, env = "STEVEDORE_HEALTH_ADDR", default_value = "0.0.0.0:10351")]
    pub health_addr: SocketAddr,

    /// Address of the metrics endpoint (`/metrics`). Localhost by default: the metrics
    /// name the node's images and callers. The same address as --health-addr serves all
    /// three paths on one listener.
    #[arg(
        long,
        env = "STEVEDORE_METRICS_ADDR",
        default_value = "127.0.0.1:10353"
    )]
    pub metrics_addr: SocketAddr,

    /// PEM certificate (chain) for serving the gRPC API over TLS; needs --tls-key.
    #[arg(long, env = "STEVEDORE_TLS_CERT", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,

    /// PEM private key for --tls-cert.
    #[arg(long, env = "STEVEDORE_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,

    /// Signer to ask for a serving certificate through the CSR API
    /// (`stevedore.dev/agent-serving`, which the control plane approves and signs): the
    /// agent makes a key in memory, requests a certificate for its own node (the node
    /// name and `--node-ip` addresses), serves it as soon as it is issued (a self-signed
    /// one until then) and renews it at 80% of its lifetime. Not with --tls-cert.
    #[arg(
        long,
        env = "STEVEDORE_CSR_SIGNER",
        conflicts_with = "tls_cert",
        requires = "node_ips"
    )]
    pub csr_signer: Option<String>,

    /// This node's IP addresses (the downward API's `status.hostIPs`), named in the
    /// certificate requested with --csr-signer; repeatable or comma-separated.
    #[arg(
        long = "node-ip",
        env = "STEVEDORE_NODE_IPS",
        value_name = "IP",
        value_delimiter = ','
    )]
    pub node_ips: Vec<std::net::IpAddr>,

    /// Prefix of the audience callers' bearer tokens must be bound to: the agent accepts
    /// only tokens for `<prefix>:<node name>`, so a token for one node's agent is refused
    /// by every other node's agent.
    #[arg(
        long,
        env = "STEVEDORE_TOKEN_AUDIENCE",
        default_value = "stevedore-agent"
    )]
    pub token_audience: String,

    /// Image pulls to run at once; more are queued.
    #[arg(long, env = "STEVEDORE_MAX_CONCURRENT_PULLS", default_value = "3")]
    pub max_concurrent_pulls: NonZeroUsize,

    /// Threads of the agent's async runtime. The work is waiting on sockets (containerd
    /// decompresses and writes), so two suffice; one per CPU of a large node would only
    /// add stacks and allocator arenas.
    #[arg(long, env = "STEVEDORE_WORKER_THREADS", default_value = "2")]
    pub worker_threads: NonZeroUsize,

    /// Default stall timeout of an image pull: seconds it may go without progress.
    #[arg(
        long = "pull-timeout",
        env = "STEVEDORE_PULL_TIMEOUT",
        default_value = "600",
        value_name = "SECONDS",
        value_parser = parse_seconds
    )]
    pub pull_timeout: Duration,

    /// Registry host (`host[:port]`) that may be reached over plain HTTP; repeatable,
    /// or comma-separated in the environment variable. Registries on this machine
    /// (`localhost`, 127.0.0.0/8) are reached over plain HTTP without being named.
    #[arg(
        long = "insecure-registry",
        env = "STEVEDORE_INSECURE_REGISTRIES",
        value_name = "HOST",
        value_delimiter = ','
    )]
    pub insecure_registries: Vec<String>,

    /// containerd's registry host directory (its CRI `config_path`): mirrors, plain
    /// HTTP and TLS settings of a registry come from `<dir>/<host[:port]>/hosts.toml`
    /// (or `<dir>/_default/hosts.toml`), as containerd reads them. Point it at the
    /// `config_path` of the containerd the agent talks to.
    #[arg(
        long,
        env = "STEVEDORE_REGISTRY_CONFIG_DIR",
        default_value = crate::images::registry::hosts::DEFAULT_CONFIG_DIR
    )]
    pub registry_config_dir: std::path::PathBuf,

    /// How often the images of the ImageList that have been pulled are checked for
    /// being still on the node (seconds); one deleted out of band (`crictl rmi`,
    /// kubelet's image GC) is pulled again.
    #[arg(
        long = "image-presence-interval",
        env = "STEVEDORE_IMAGE_PRESENCE_INTERVAL",
        default_value = "30",
        value_name = "SECONDS",
        value_parser = parse_seconds
    )]
    pub image_presence_interval: Duration,

    /// containerd snapshotter images are unpacked into; must be the one CRI uses.
    #[arg(long, env = "STEVEDORE_SNAPSHOTTER", default_value = "overlayfs")]
    pub snapshotter: String,

    /// In-place restart operations to run at once; more are queued.
    #[arg(long, env = "STEVEDORE_MAX_CONCURRENT_RESTARTS", default_value = "4")]
    pub max_concurrent_restarts: NonZeroUsize,

    /// Log output format.
    #[arg(long, env = "STEVEDORE_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

impl Args {
    /// The one audience this agent accepts: `<--token-audience>:<node name>`.
    pub fn node_audience(&self) -> String {
        crate::auth::node_audience(&self.token_audience, &self.node_name)
    }

    /// The TLS certificate and key paths, when TLS is configured.
    pub fn tls_files(&self) -> Option<(&Path, &Path)> {
        self.tls_cert.as_deref().zip(self.tls_key.as_deref())
    }
}

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

fn parse_seconds(value: &str) -> Result<Duration, String> {
    match value.parse::<u64>() {
        Ok(0) => Err("must be at least 1 second".to_owned()),
        Ok(secs) => Ok(Duration::from_secs(secs)),
        Err(err) => Err(format!("not a whole number of seconds: {err}")),
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    /// Every variable the CLI reads, so tests can run in a clean environment.
    fn env_vars() -> Vec<String> {
        Args::command()
            .get_arguments()
            .filter_map(|arg| arg.get_env())
            .map(|env| env.to_string_lossy().into_owned())
            .collect()
    }

    /// Runs `f` with every CLI variable unset except `set`.
    fn with_env<R>(set: &[(&str, &str)], f: impl FnOnce() -> R) -> R {
        let mut vars: Vec<(String, Option<String>)> =
            env_vars().into_iter().map(|name| (name, None)).collect();
        vars.extend(
            set.iter()
                .map(|(k, v)| ((*k).to_owned(), Some((*v).to_owned()))),
        );
        temp_env::with_vars(vars, f)
    }

    #[test]
    fn command_is_well_formed() {
        Args::command().debug_assert();
    }

    #[test]
    fn every_flag_has_an_env_fallback() {
        let cmd = Args::command();
        let missing: Vec<_> = cmd
            .get_arguments()
            .filter(|arg| {
                arg.get_long()
                    .is_some_and(|l| l != "help" && l != "version")
            })
            .filter(|arg| arg.get_env().is_none())
            .map(|arg| arg.get_id().to_string())
            .collect();
        assert!(
            missing.is_empty(),
            "flags without env fallback: {missing:?}"
        );
    }

    #[test]
    fn defaults_apply_when_only_the_node_is_given() {
        let args = with_env(&[], || Args::try_parse_from(["agent", "--node-name", "n1"])).unwrap();
        assert_eq!(args.node_name, "n1");
        assert_eq!(
            args.containerd_socket,
            PathBuf::from("/run/containerd/containerd.sock")
        );
        assert_eq!(args.containerd_namespace, "k8s.io");
        assert_eq!(args.grpc_addr, "0.0.0.0:10350".parse().unwrap());
        assert_eq!(args.unix_socket, PathBuf::from("/run/stevedore/agent.sock"));
        assert_eq!(args.health_addr, "0.0.0.0:10351".parse().unwrap());
        assert_eq!(args.metrics_addr, "127.0.0.1:10353".parse().unwrap());
        assert!(
            args.metrics_addr.ip().is_loopback(),
            "metrics on localhost by default"
        );
        assert_eq!(args.tls_files(), None);
        assert_eq!(args.token_audience, "stevedore-agent");
        assert_eq!(args.node_audience(), "stevedore-agent:n1");
        assert_eq!(args.max_concurrent_pulls.get(), 3);
        assert_eq!(args.worker_threads.get(), 2);
        assert_eq!(args.pull_timeout, Duration::from_secs(600));
        assert_eq!(args.image_presence_interval, Duration::from_secs(30));
        assert!(args.insecure_registries.is_empty());
        assert_eq!(
            args.registry_config_dir,
            std::path::Path::new("/etc/containerd/certs.d")
        );
        assert_eq!(args.log_format, LogFormat::Text);
        assert_eq!(args.snapshotter, "overlayfs");
        assert_eq!(args.max_concurrent_restarts.get(), 4);
    }

    #[test]
    fn node_name_is_required() {
        let err = with_env(&[], || Args::try_parse_from(["agent"])).unwrap_err();
        assert_eq!(err.kind(), clap::error::ErrorKind::MissingRequiredArgument);
    }

    #[test]
    fn environment_fills_in_unset_flags() {
        let env = [
            ("NODE_NAME", "node-a"),
            ("STEVEDORE_CONTAINERD_SOCKET", "/tmp/containerd.sock"),
            ("STEVEDORE_GRPC_ADDR", "127.0.0.1:9000"),
            ("STEVEDORE_MAX_CONCURRENT_PULLS", "7"),
            ("STEVEDORE_PULL_TIMEOUT", "30"),
            (
                "STEVEDORE_INSECURE_REGISTRIES",
                "127.0.0.1:5000,registry.local",
            ),
            ("STEVEDORE_LOG_FORMAT", "json"),
        ];
        let args = with_env(&env, || Args::try_parse_from(["agent"])).unwrap();
        assert_eq!(args.node_name, "node-a");
        assert_eq!(
            args.containerd_socket,
            PathBuf::from("/tmp/containerd.sock")
        );
        assert_eq!(args.grpc_addr, "127.0.0.1:9000".parse().unwrap());
        assert_eq!(args.max_concurrent_pulls.get(), 7);
        assert_eq!(args.pull_timeout, Duration::from_secs(30));
        assert_eq!(
            args.insecure_registries,
            ["127.0.0.1:5000", "registry.local"]
        );
        assert_eq!(args.log_format, LogFormat::Json);
    }

    #[test]
    fn flags_override_the_environment() {
        let env = [
            ("NODE_NAME", "from-env"),
            ("STEVEDORE_MAX_CONCURRENT_PULLS", "7"),
        ];
        let argv = [
            "agent",
            "--node-name",
            "from-flag",
            "--max-concurrent-pulls",
            "1",
        ];
        let args = with_env(&env, || Args::try_parse_from(argv)).unwrap();
        assert_eq!(args.node_name, "from-flag");
        assert_eq!(args.max_concurrent_pulls.get(), 1);
    }

    #[test]
    fn the_csr_signer_comes_with_the_node_addresses_and_without_files() {
        let env = [
            ("NODE_NAME", "node-a"),
            ("STEVEDORE_CSR_SIGNER", "stevedore.dev/agent-serving"),
            ("STEVEDORE_NODE_IPS", "10.0.0.1,fd00::1"),
        ];
        let args = with_env(&env, || Args::try_parse_from(["agent"])).unwrap();
        assert_eq!(
            args.csr_signer.as_deref(),
            Some("stevedore.dev/agent-serving")
        );
        assert_eq!(
            args.node_ips,
            [
                "10.0.0.1".parse::<std::net::IpAddr>().unwrap(),
                "fd00::1".parse().unwrap()
            ]
        );

        let signer = ["agent", "--node-name", "n", "--csr-signer", "s"];
        let without_ips = with_env(&[], || Args::try_parse_from(signer));
        assert!(without_ips.is_err(), "a CSR needs the node's addresses");
        let with_files = signer.into_iter().chain([
            "--node-ip",
            "10.0.0.1",
            "--tls-cert",
            "/tmp/c",
            "--tls-key",
            "/tmp/k",
        ]);
        let both = with_env(&[], || Args::try_parse_from(with_files));
        assert!(both.is_err(), "files and CSRs are two ways, not one");
    }

    #[test]
    fn insecure_registry_is_repeatable() {
        let argv = ["agent", "--node-name", "n", "--insecure-registry", "a:5000"];
        let argv = argv.into_iter().chain(["--insecure-registry", "b"]);
        let args = with_env(&[], || Args::try_parse_from(argv)).unwrap();
        assert_eq!(args.insecure_registries, ["a:5000", "b"]);
    }

    #[test]
    fn invalid_values_are_rejected() {
        for argv in [
            ["agent", "--node-name", "n", "--max-concurrent-pulls", "0"],
            ["agent", "--node-name", "n", "--pull-timeout", "0"],
            ["agent", "--node-name", "n", "--pull-timeout", "ten"],
            ["agent", "--node-name", "n", "--tls-cert", "/tmp/cert.pem"],
            ["agent", "--node-name", "n", "--log-format", "xml"],
        ] {
            let result = with_env(&[], || Args::try_parse_from(argv));
            assert!(result.is_err(), "accepted {argv:?}");
        }
    }
}
