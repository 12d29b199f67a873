//! The command line: `kubectl stevedore <command>` (kubectl runs `kubectl-stevedore`
//! from PATH with the words after `stevedore`).

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};

use crate::workload::WorkloadRef;

#[derive(Parser, Debug)]
#[command(
    name = "kubectl stevedore",
    bin_name = "kubectl stevedore",
    version,
    about = "Stevedore's rollouts and image pulls at a glance"
)]
pub struct Cli {
    /// Namespace of the workload (default: the kubeconfig context's); for `pulls`, the
    /// namespace whose ImagePullJobs are shown (default: all).
    #[arg(short, long, global = true, env = "STEVEDORE_NAMESPACE")]
    pub namespace: Option<String>,

    /// Output format: human (tables, progress bars on a terminal), json or yaml.
    #[arg(short, long, global = true, value_enum, default_value_t = Output::Human, env = "STEVEDORE_OUTPUT")]
    pub output: Output,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Output {
    Human,
    Json,
    Yaml,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Rollouts of CloneSets, Advanced StatefulSets and Advanced DaemonSets.
    #[command(subcommand)]
    Rollout(RolloutCommand),
    /// Image pulls per node (ImageList status) and ImagePullJob progress.
    Pulls(PullsArgs),
    /// The node agent's own description of its node (GetNodeInfo).
    DescribeNode(DescribeNodeArgs),
    /// Change a workload's pod template: image, env or resources (as kubectl set), and say
    /// whether the pods take it in place under the workload's update strategy.
    #[command(subcommand)]
    Set(SetCommand),
    /// Set the replicas of a CloneSet or Advanced StatefulSet.
    Scale {
        workload: WorkloadRef,
        /// The new number of replicas.
        #[arg(long)]
        replicas: i32,
        /// Scale only if the workload has this many replicas now.
        #[arg(long)]
        current_replicas: Option<i32>,
    },
    /// Scale a CloneSet down by deleting the pods named (specified delete: the pods go to
    /// spec.scaleStrategy.podsToDelete and replicas go down by as many).
    Scaledown {
        /// The CloneSet: its name or cloneset/<name>.
        cloneset: String,
        /// The pods to delete, separated by commas.
        #[arg(long)]
        pods: String,
    },
    /// A Service for a workload's pods (its selector's matchLabels), as kubectl expose.
    Expose(ExposeArgs),
    /// Create a Job or BroadcastJob from an AdvancedCronJob, or a ContainerRecreateRequest.
    #[command(subcommand)]
    Create(CreateCommand),
}

#[derive(clap::Args, Debug)]
pub struct ExposeArgs {
    pub workload: WorkloadRef,
    /// The Service's port (default: the pod template's container ports).
    #[arg(long)]
    pub port: Option<i32>,
    /// The pods' port, a number or a name (default: --port).
    #[arg(long)]
    pub target_port: Option<String>,
    /// The Service's name (default: the workload's).
    #[arg(long)]
    pub name: Option<String>,
    #[arg(long, default_value = "TCP")]
    pub protocol: String,
    /// ClusterIP, NodePort or LoadBalancer.
    #[arg(long = "type", default_value = "ClusterIP")]
    pub type_: String,
}

#[derive(Subcommand, Debug)]
pub enum SetCommand {
    /// Set container images: `container=image` (`*=image`: every container).
    Image {
        workload: WorkloadRef,
        #[arg(required = true)]
        images: Vec<String>,
    },
    /// Set (`NAME=value`) or remove (`NAME-`) environment variables.
    Env {
        workload: WorkloadRef,
        #[arg(required = true)]
        env: Vec<String>,
        /// The containers to change (a name, `*` as a wildcard).
        #[arg(short = 'c', long, default_value = "*")]
        containers: String,
    },
    /// Set resource limits and requests, e.g. --limits=cpu=200m,memory=512Mi.
    Resources {
        workload: WorkloadRef,
        /// The containers to change (a name, `*` as a wildcard).
        #[arg(short = 'c', long, default_value = "*")]
        containers: String,
        #[arg(long)]
        limits: Option<String>,
        #[arg(long)]
        requests: Option<String>,
    },
}

impl SetCommand {
    pub fn workload(&self) -> &WorkloadRef {
        match self {
            Self::Image { workload, .. }
            | Self::Env { workload, .. }
            | Self::Resources { workload, .. } => workload,
        }
    }

    /// What the command changes, as its result names it.
    pub fn action(&self) -> &'static str {
        match self {
            Self::Image { .. } => "image",
            Self::Env { .. } => "env",
            Self::Resources { .. } => "resources",
        }
    }
}

#[derive(Subcommand, Debug)]
pub enum CreateCommand {
    /// A Job from an AdvancedCronJob's jobTemplate.
    Job {
        name: String,
        /// The AdvancedCronJob: acj/<name>.
        #[arg(long)]
        from: String,
    },
    /// A BroadcastJob from an AdvancedCronJob's broadcastJobTemplate.
    #[command(alias = "broadcastJob", alias = "bcj")]
    Broadcastjob {
        name: String,
        /// The AdvancedCronJob: acj/<name>.
        #[arg(long)]
        from: String,
    },
    /// A ContainerRecreateRequest: recreate containers of a pod in place.
    #[command(alias = "ContainerRecreateRequest", alias = "containerrecreaterequest")]
    Crr {
        name: String,
        /// The pod whose containers to recreate.
        #[arg(short = 'p', long)]
        pod: String,
        /// The containers to recreate, separated by commas (default: all of the pod's).
        #[arg(long, value_delimiter = ',')]
        containers: Vec<String>,
        /// Seconds the pod is marked not ready before a container is stopped.
        #[arg(short = 'u', long = "unreadyGracePeriodSeconds", default_value_t = 3)]
        unready_grace_period_seconds: i64,
        /// Seconds a recreated container must run ready to count as recreated.
        #[arg(short = 'm', long = "minStartedSeconds", default_value_t = 3)]
        min_started_seconds: i32,
    },
}

#[derive(Subcommand, Debug)]
pub enum RolloutCommand {
    /// Follow a rollout until it completes (exit 0) or stalls (exit 1, with the reason).
    Status {
        /// `<kind>/<name>`, e.g. cloneset/web, asts/db, ads/agent.
        workload: WorkloadRef,
        /// Give up after this long (e.g. 90s, 5m; 0: wait for ever).
        #[arg(long, value_parser = parse_duration, default_value = "0s", env = "STEVEDORE_ROLLOUT_TIMEOUT")]
        timeout: Duration,
    },
    /// Stop a rollout where it is: no more pods are updated until it is resumed.
    Pause { workload: WorkloadRef },
    /// Let a paused rollout go on.
    Resume { workload: WorkloadRef },
    /// Restore the pod template of an earlier revision (default: the previous one).
    Undo {
        workload: WorkloadRef,
        /// The revision to go back to (0: the previous one).
        #[arg(long, default_value_t = 0)]
        to_revision: i64,
    },
    /// The workload's revisions with their images.
    History { workload: WorkloadRef },
    /// Replace every pod: a new `kubectl.kubernetes.io/restartedAt` template annotation.
    Restart { workload: WorkloadRef },
}

#[derive(clap::Args, Debug)]
pub struct PullsArgs {
    /// Only this node's pulls.
    #[arg(long, env = "STEVEDORE_NODE")]
    pub node: Option<String>,
    /// Follow the pulls live (byte progress bars on a terminal, a line per change
    /// otherwise) until interrupted.
    #[arg(short, long)]
    pub watch: bool,
    /// With --watch: stop once no pull is waiting or running and every job is done.
    #[arg(long, requires = "watch")]
    pub until_done: bool,
}

#[derive(clap::Args, Debug)]
pub struct DescribeNodeArgs {
    /// The node whose agent to ask.
    pub node: String,
    /// A bearer token for the node's agent (audience `stevedore-agent:<node>`).
    #[arg(long, env = "STEVEDORE_AGENT_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Mint the token for this service account (`<namespace>/<name>`) with the
    /// TokenRequest API, as `kubectl create token` does, instead of --token.
    #[arg(long, env = "STEVEDORE_AGENT_SERVICE_ACCOUNT")]
    pub service_account: Option<String>,
    /// CA bundle (PEM) that signed the agents' serving certificates. Default: the
    /// `ca.crt` of the Secret --ca-secret plus the kubeconfig's cluster CA.
    #[arg(long, env = "STEVEDORE_AGENT_CA_FILE")]
    pub ca_file: Option<PathBuf>,
    /// `<namespace>/<name>` of the Secret holding the agents' CA (`ca.crt`). Default:
    /// `stevedore-agent-ca` in the namespace the node's agent pod runs in (where the
    /// control plane of the same install keeps it), else in kube-system.
    #[arg(long, env = "STEVEDORE_AGENT_CA_SECRET")]
    pub ca_secret: Option<String>,
    /// The agents' port (a node's `agent.stevedore.dev/port` annotation wins).
    #[arg(long, default_value_t = 10350, env = "STEVEDORE_AGENT_PORT")]
    pub agent_port: u16,
    /// The prefix of the audience agents accept (their --token-audience).
    #[arg(
        long,
        default_value = "stevedore-agent",
        env = "STEVEDORE_TOKEN_AUDIENCE"
    )]
    pub token_audience: String,
}

/// `90s`, `5m`, `1h`, or plain seconds.
fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let (number, unit) = text
        .find(|c: char| !c.is_ascii_digit())
        .map_or((text, "s"), |at| text.split_at(at));
    let value: u64 = number
        .parse()
        .map_err(|_| format!("\"{text}\" is not a duration such as 90s, 5m or 1h"))?;
    let seconds = match unit {
        "s" => value,
        "m" => value.saturating_mul(60),
        "h" => value.saturating_mul(3600),
        _ => return Err(format!("\"{text}\" has an unknown unit; use s, m or h")),
    };
    Ok(Duration::from_secs(seconds))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("90"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("5d").is_err());
    }

    #[test]
    fn command_lines() {
        let cli = Cli::try_parse_from([
            "kubectl-stevedore",
            "rollout",
            "undo",
            "asts/db",
            "--to-revision",
            "2",
            "-n",
            "prod",
        ])
        .expect("parses");
        assert_eq!(cli.namespace.as_deref(), Some("prod"));
        let Command::Rollout(RolloutCommand::Undo {
            workload,
            to_revision,
        }) = cli.command
        else {
            panic!("not undo: {:?}", cli.command);
        };
        assert_eq!(workload.to_string(), "statefulset.apps.kruise.io/db");
        assert_eq!(to_revision, 2);

        let bad = Cli::try_parse_from(["kubectl-stevedore", "rollout", "status", "deployment/web"])
            .expect_err("deployments are not Stevedore's");
        assert!(
            bad.to_string().contains("is not a kind with rollouts"),
            "{bad}"
        );
        assert!(Cli::try_parse_from(["kubectl-stevedore", "pulls", "--until-done"]).is_err());
    }

    #[test]
    fn kubectl_kruise_style_command_lines() {
        let parse = |words: &[&str]| {
            Cli::try_parse_from(std::iter::once("kubectl-stevedore").chain(words.iter().copied()))
        };
        let env = parse(&["set", "env", "clone/web", "A=1", "B-", "-c", "web"]).expect("set env");
        let Command::Set(SetCommand::Env {
            env, containers, ..
        }) = env.command
        else {
            panic!("not set env");
        };
        assert_eq!(
            (env, containers.as_str()),
            (vec!["A=1".into(), "B-".into()], "web")
        );

        let crr = parse(&[
            "create",
            "crr",
            "again",
            "--pod",
            "web-0",
            "--containers",
            "a,b",
            "-u",
            "5",
        ])
        .expect("create crr");
        let Command::Create(CreateCommand::Crr {
            containers,
            unready_grace_period_seconds,
            min_started_seconds,
            ..
        }) = crr.command
        else {
            panic!("not create crr");
        };
        assert_eq!(containers, vec!["a".to_owned(), "b".to_owned()]);
        assert_eq!((unready_grace_period_seconds, min_started_seconds), (5, 3));

        assert!(parse(&["create", "ContainerRecreateRequest", "x", "-p", "web-0"]).is_ok());
        assert!(parse(&["create", "broadcastJob", "x", "--from=acj/nightly"]).is_ok());
        assert!(parse(&["scaledown", "web", "--pods", "web-a,web-b"]).is_ok());
        assert!(parse(&["scale", "asts/db", "--replicas=3", "--current-replicas=2"]).is_ok());
        assert!(parse(&["rollout", "restart", "ads/agent"]).is_ok());
        let versioned = parse(&[
            "rollout",
            "status",
            "daemonsets.v1beta1.apps.kruise.io/agent",
        ])
        .expect("a kind with its version");
        let Command::Rollout(RolloutCommand::Status { workload, .. }) = versioned.command else {
            panic!("not rollout status");
        };
        assert_eq!(workload.to_string(), "daemonset.apps.kruise.io/agent");
        assert!(
            parse(&["set", "image", "cloneset/web"]).is_err(),
            "an image is required"
        );
        let cs = parse(&["rollout", "status", "cs/web"]).expect_err("cs is ComponentStatus");
        assert!(cs.to_string().contains("cloneset (clone)"), "{cs}");
    }
}
