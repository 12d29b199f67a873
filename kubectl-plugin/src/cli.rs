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
}
