//! Command-line and environment configuration of the control plane.

use std::{net::SocketAddr, num::NonZeroUsize, path::PathBuf, time::Duration};

use clap::{Parser, ValueEnum};

use crate::runtime::leader::{Timings, TimingsError};

/// Stevedore control plane: reconciles OpenKruise-compatible workloads and distributes
/// each node's image list to its agent. Runs with one leader among its replicas.
#[derive(Debug, Clone, Parser)]
#[command(name = "stevedore-controlplane", version)]
pub struct Args {
    /// Namespace of the control plane's own objects (the leader-election Lease).
    #[arg(long, env = "POD_NAMESPACE", default_value = "kube-system")]
    pub namespace: String,

    /// Name of the leader-election Lease.
    #[arg(
        long,
        env = "STEVEDORE_LEASE_NAME",
        default_value = "stevedore-controlplane"
    )]
    pub lease_name: String,

    /// Holder identity in the Lease, unique per replica (the pod name via the downward
    /// API); defaults to the host name.
    #[arg(long, env = "POD_NAME")]
    pub identity: Option<String>,

    /// How long the leader's Lease stays valid after its last renewal, as
    /// kube-controller-manager's flag: a standby takes over a leader that died without
    /// releasing its Lease about this long after its last renewal. Go duration (`15s`).
    #[arg(
        long,
        env = "STEVEDORE_LEADER_ELECT_LEASE_DURATION",
        default_value = "15s",
        value_parser = stevedore_parsers::duration::parse_duration
    )]
    pub leader_elect_lease_duration: Duration,

    /// How long the leader keeps trying to renew its Lease before it stops acting; shorter
    /// than the lease duration.
    #[arg(
        long,
        env = "STEVEDORE_LEADER_ELECT_RENEW_DEADLINE",
        default_value = "10s",
        value_parser = stevedore_parsers::duration::parse_duration
    )]
    pub leader_elect_renew_deadline: Duration,

    /// Pause between attempts to acquire or renew the Lease.
    #[arg(
        long,
        env = "STEVEDORE_LEADER_ELECT_RETRY_PERIOD",
        default_value = "2s",
        value_parser = stevedore_parsers::duration::parse_duration
    )]
    pub leader_elect_retry_period: Duration,

    /// Address of the health endpoint (`/healthz`, `/readyz`), which kubelet probes
    /// reach; it tells only whether the replica works.
    #[arg(long, env = "STEVEDORE_HEALTH_ADDR", default_value = "0.0.0.0:10352")]
    pub health_addr: SocketAddr,

    /// Address of the metrics endpoint (`/metrics`). Localhost by default: the metrics
    /// name namespaces, workloads and nodes (`kubectl port-forward` reaches it).
    #[arg(
        long,
        env = "STEVEDORE_METRICS_ADDR",
        default_value = "127.0.0.1:10354"
    )]
    pub metrics_addr: SocketAddr,

    /// Port of the agents' gRPC API on each node's InternalIP.
    #[arg(long, env = "STEVEDORE_AGENT_PORT", default_value_t = 10350)]
    pub agent_port: u16,

    /// Prefix of the audience of the tokens presented to agents: each node's agent gets a
    /// token of its own for `<prefix>:<node>` (TokenRequest on `--service-account`), and
    /// accepts no other, so a token taken from one node is useless on the others.
    #[arg(
        long,
        env = "STEVEDORE_AGENT_TOKEN_AUDIENCE",
        default_value = "stevedore-agent"
    )]
    pub agent_token_audience: String,

    /// The control plane's own service account (in `--namespace`), whose tokens it
    /// requests for the agents.
    #[arg(
        long,
        env = "POD_SERVICE_ACCOUNT",
        default_value = "stevedore-controlplane"
    )]
    pub service_account: String,

    /// UID of the control plane's pod (downward API); with `--identity` it binds the
    /// agent tokens to the pod, so they stop working once the pod is deleted.
    #[arg(long, env = "POD_UID")]
    pub pod_uid: Option<String>,

    /// CA bundle (PEM) trusted for agents' serving certificates besides the control
    /// plane's own CA (`--agent-ca-secret`): by default the cluster CA, which signed the
    /// certificates made by deploy/local/lib/certs.sh. Re-read when it changes.
    #[arg(
        long,
        env = "STEVEDORE_AGENT_CA_FILE",
        default_value = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"
    )]
    pub agent_ca_file: PathBuf,

    /// Secret (in `--namespace`) holding the CA that signs agent serving certificates
    /// (signer stevedore.dev/agent-serving); created by the first replica to start.
    #[arg(
        long,
        env = "STEVEDORE_AGENT_CA_SECRET",
        default_value = "stevedore-agent-ca"
    )]
    pub agent_ca_secret: String,

    /// User name of the agents' service account: the only requester whose CSRs for
    /// stevedore.dev/agent-serving are approved.
    #[arg(
        long,
        env = "STEVEDORE_AGENT_USERNAME",
        default_value = "system:serviceaccount:kube-system:stevedore-agent"
    )]
    pub agent_username: String,

    /// Deadline of one agent call attempt, in seconds.
    #[arg(
        long,
        env = "STEVEDORE_AGENT_RPC_TIMEOUT",
        default_value = "10",
        value_parser = clap::value_parser!(u64).range(1..)
    )]
    pub agent_rpc_timeout: u64,

    /// Agent RPCs in flight at once, across all nodes.
    #[arg(
        long,
        env = "STEVEDORE_MAX_CONCURRENT_AGENT_RPCS",
        default_value = "32"
    )]
    pub max_concurrent_agent_rpcs: NonZeroUsize,

    /// Objects of one kind reconciled at once.
    #[arg(long, env = "STEVEDORE_CONCURRENCY_PER_KIND", default_value = "4")]
    pub concurrency_per_kind: NonZeroUsize,

    /// Which controllers run, as kube-controller-manager's flag: `*` for all, `name` to
    /// turn one on, `-name` to turn it off (`*,-broadcastjob`). Caches are kept either way.
    #[arg(
        long,
        env = "STEVEDORE_CONTROLLERS",
        default_value = "*",
        value_parser = clap::value_parser!(crate::switches::ControllerSwitches)
    )]
    pub controllers: crate::switches::ControllerSwitches,

    /// Address of the webhook server (HTTPS), which the apiserver calls through
    /// `--webhook-service` for pod deletes and evictions (PodUnavailableBudget admission),
    /// ContainerRecreateRequest creates and updates, and PodUnavailableBudget `v1alpha1`
    /// <-> `v1beta1` conversion.
    #[arg(long, env = "STEVEDORE_WEBHOOK_ADDR", default_value = "0.0.0.0:9443")]
    pub webhook_addr: SocketAddr,

    /// The Service (in `--namespace`) in front of the webhook; its DNS names go into the
    /// webhook's serving certificate.
    #[arg(
        long,
        env = "STEVEDORE_WEBHOOK_SERVICE",
        default_value = "stevedore-controlplane-webhook"
    )]
    pub webhook_service: String,

    /// Secret (in `--namespace`) holding the CA of the webhook's serving certificates;
    /// created by the first replica to start.
    #[arg(
        long,
        env = "STEVEDORE_WEBHOOK_CA_SECRET",
        default_value = "stevedore-webhook-ca"
    )]
    pub webhook_ca_secret: String,

    /// The ValidatingWebhookConfiguration whose `caBundle` the control plane sets to its
    /// webhook CA.
    #[arg(
        long,
        env = "STEVEDORE_WEBHOOK_CONFIGURATION",
        default_value = "stevedore-pod-budgets"
    )]
    pub webhook_configuration: String,

    /// The MutatingWebhookConfiguration of ContainerRecreateRequests whose `caBundle` the
    /// control plane sets to its webhook CA.
    #[arg(
        long,
        env = "STEVEDORE_CRR_WEBHOOK_CONFIGURATION",
        default_value = "stevedore-container-recreate-requests"
    )]
    pub crr_webhook_configuration: String,

    /// The MutatingWebhookConfiguration of pod creates (SidecarSet injection) whose
    /// `caBundle` the control plane sets to its webhook CA.
    #[arg(
        long,
        env = "STEVEDORE_SIDECARSET_WEBHOOK_CONFIGURATION",
        default_value = "stevedore-sidecarsets"
    )]
    pub sidecarset_webhook_configuration: String,

    /// The MutatingWebhookConfiguration of pod creates (container launch priority) whose
    /// `caBundle` the control plane sets to its webhook CA. Its name sorts after the
    /// SidecarSet one's, so the apiserver calls it after SidecarSet injection
    /// (deploy/controlplane/webhook.yaml).
    #[arg(
        long,
        env = "STEVEDORE_LAUNCH_PRIORITY_WEBHOOK_CONFIGURATION",
        default_value = "stevedore-startup-priority"
    )]
    pub launch_priority_webhook_configuration: String,

    /// CA bundle (PEM) of the client certificate the apiserver presents to admission
    /// webhooks (its `--admission-control-config-file`, docs/security.md). When given, pod
    /// delete and eviction reviews are answered only for a caller presenting a
    /// certificate this CA signed; others get 403. Unset: any caller is answered (a review
    /// is then still recorded only for a pod that exists with the UID it names).
    #[arg(long, env = "STEVEDORE_WEBHOOK_CLIENT_CA")]
    pub webhook_client_ca: Option<PathBuf>,

    /// Common names admitted among the certificates `--webhook-client-ca` signed, comma
    /// separated; empty admits any of them. Set it when that CA signs other clients too
    /// (a cluster CA signs every kubelet's and administrator's).
    #[arg(
        long,
        env = "STEVEDORE_WEBHOOK_CLIENT_NAMES",
        value_delimiter = ',',
        requires = "webhook_client_ca"
    )]
    pub webhook_client_names: Vec<String>,

    /// Log output format.
    #[arg(long, env = "STEVEDORE_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

impl Args {
    /// The Lease holder identity: `--identity`, else the host name, else a name made
    /// unique by the process ID.
    pub fn identity(&self) -> String {
        self.identity
            .clone()
            .or_else(|| {
                let host = std::fs::read_to_string("/proc/sys/kernel/hostname").ok()?;
                Some(host.trim().to_owned()).filter(|h| !h.is_empty())
            })
            .unwrap_or_else(|| format!("stevedore-controlplane-{}", std::process::id()))
    }

    /// The leader-election timings of the `--leader-elect-*` flags, checked together.
    pub fn leader_timings(&self) -> Result<Timings, TimingsError> {
        Timings::new(
            self.leader_elect_lease_duration,
            self.leader_elect_renew_deadline,
            self.leader_elect_retry_period,
        )
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

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    /// Runs `f` with every CLI variable unset except `set`.
    fn with_env<R>(set: &[(&str, &str)], f: impl FnOnce() -> R) -> R {
        let mut vars: Vec<(String, Option<String>)> = Args::command()
            .get_arguments()
            .filter_map(|arg| arg.get_env())
            .map(|env| (env.to_string_lossy().into_owned(), None))
            .collect();
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
    fn defaults_apply_without_flags_or_environment() {
        let args = with_env(&[], || Args::try_parse_from(["controlplane"])).unwrap();
        assert_eq!(args.namespace, "kube-system");
        assert_eq!(args.lease_name, "stevedore-controlplane");
        assert_eq!(args.identity, None);
        assert_eq!(args.health_addr, "0.0.0.0:10352".parse().unwrap());
        assert_eq!(args.metrics_addr, "127.0.0.1:10354".parse().unwrap());
        assert!(
            args.metrics_addr.ip().is_loopback(),
            "metrics on localhost by default"
        );
        assert_eq!(args.agent_port, 10350);
        assert_eq!(args.agent_token_audience, "stevedore-agent");
        assert_eq!(args.service_account, "stevedore-controlplane");
        assert_eq!(args.pod_uid, None);
        assert_eq!(
            args.agent_ca_file,
            PathBuf::from("/var/run/secrets/kubernetes.io/serviceaccount/ca.crt")
        );
        assert_eq!(args.agent_ca_secret, "stevedore-agent-ca");
        assert_eq!(
            args.agent_username,
            "system:serviceaccount:kube-system:stevedore-agent"
        );
        assert_eq!(args.agent_rpc_timeout, 10);
        assert_eq!(args.max_concurrent_agent_rpcs.get(), 32);
        assert_eq!(args.concurrency_per_kind.get(), 4);
        assert_eq!(args.webhook_addr, "0.0.0.0:9443".parse().unwrap());
        assert_eq!(args.webhook_service, "stevedore-controlplane-webhook");
        assert_eq!(args.webhook_ca_secret, "stevedore-webhook-ca");
        assert_eq!(args.webhook_configuration, "stevedore-pod-budgets");
        assert_eq!(
            args.crr_webhook_configuration,
            "stevedore-container-recreate-requests"
        );
        assert_eq!(
            args.sidecarset_webhook_configuration,
            "stevedore-sidecarsets"
        );
        assert_eq!(
            args.launch_priority_webhook_configuration,
            "stevedore-startup-priority"
        );
        // The apiserver calls mutating configurations in name order: launch priority
        // must see the containers SidecarSet injection adds.
        assert!(args.sidecarset_webhook_configuration < args.launch_priority_webhook_configuration);
        assert_eq!(args.webhook_client_ca, None);
        assert!(args.webhook_client_names.is_empty());
        assert_eq!(args.log_format, LogFormat::Text);
        assert_eq!(args.controllers, Default::default());
        assert!(!args.identity().is_empty());
        assert_eq!(args.leader_timings(), Ok(Timings::default()));
    }

    #[test]
    fn leader_election_timings_come_from_their_flags() {
        let argv = [
            "controlplane",
            "--leader-elect-lease-duration=4s",
            "--leader-elect-renew-deadline=3s",
            "--leader-elect-retry-period=500ms",
        ];
        let args = with_env(&[], || Args::try_parse_from(argv)).unwrap();
        let timings = args.leader_timings().unwrap();
        assert_eq!(timings.lease_duration, Duration::from_secs(4));
        assert_eq!(timings.renew_deadline, Duration::from_secs(3));
        assert_eq!(timings.retry_period, Duration::from_millis(500));

        // Each value parses, but a lease no longer than the renew deadline is refused,
        // naming both flags.
        let argv = ["controlplane", "--leader-elect-lease-duration=10s"];
        let args = with_env(&[], || Args::try_parse_from(argv)).unwrap();
        let message = args.leader_timings().unwrap_err().to_string();
        assert!(
            message.contains("--leader-elect-lease-duration (10s)")
                && message.contains("--leader-elect-renew-deadline (10s)"),
            "{message}"
        );
    }

    #[test]
    fn environment_fills_in_unset_flags() {
        let env = [
            ("POD_NAMESPACE", "stevedore-system"),
            ("POD_NAME", "controlplane-0"),
            ("STEVEDORE_AGENT_PORT", "20350"),
            ("STEVEDORE_CONCURRENCY_PER_KIND", "8"),
            ("STEVEDORE_LOG_FORMAT", "json"),
            ("POD_SERVICE_ACCOUNT", "controlplane"),
            ("POD_UID", "uid-1"),
            ("STEVEDORE_AGENT_CA_FILE", "/tmp/ca.crt"),
            ("STEVEDORE_AGENT_RPC_TIMEOUT", "3"),
            ("STEVEDORE_WEBHOOK_CLIENT_CA", "/etc/webhook-client/ca.crt"),
            ("STEVEDORE_WEBHOOK_CLIENT_NAMES", "apiserver-a,apiserver-b"),
        ];
        let args = with_env(&env, || Args::try_parse_from(["controlplane"])).unwrap();
        assert_eq!(args.namespace, "stevedore-system");
        assert_eq!(args.identity(), "controlplane-0");
        assert_eq!(args.agent_port, 20350);
        assert_eq!(args.concurrency_per_kind.get(), 8);
        assert_eq!(args.log_format, LogFormat::Json);
        assert_eq!(args.service_account, "controlplane");
        assert_eq!(args.pod_uid.as_deref(), Some("uid-1"));
        assert_eq!(args.agent_ca_file, PathBuf::from("/tmp/ca.crt"));
        assert_eq!(args.agent_rpc_timeout, 3);
        assert_eq!(
            args.webhook_client_ca,
            Some(PathBuf::from("/etc/webhook-client/ca.crt"))
        );
        assert_eq!(args.webhook_client_names, ["apiserver-a", "apiserver-b"]);
    }

    #[test]
    fn flags_override_the_environment() {
        let env = [("POD_NAMESPACE", "from-env")];
        let argv = ["controlplane", "--namespace", "from-flag"];
        let args = with_env(&env, || Args::try_parse_from(argv)).unwrap();
        assert_eq!(args.namespace, "from-flag");
    }

    #[test]
    fn invalid_values_are_rejected() {
        for argv in [
            ["controlplane", "--concurrency-per-kind", "0"],
            ["controlplane", "--max-concurrent-agent-rpcs", "0"],
            ["controlplane", "--agent-port", "70000"],
            ["controlplane", "--health-addr", "nowhere"],
            ["controlplane", "--metrics-addr", "nowhere"],
            ["controlplane", "--agent-rpc-timeout", "0"],
            ["controlplane", "--leader-elect-lease-duration", "15"],
            ["controlplane", "--leader-elect-retry-period", "-2s"],
            // Names without the CA they are checked against would admit anyone.
            ["controlplane", "--webhook-client-names", "apiserver"],
        ] {
            let result = with_env(&[], || Args::try_parse_from(argv));
            assert!(result.is_err(), "accepted {argv:?}");
        }
    }
}
