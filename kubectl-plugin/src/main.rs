//! `kubectl stevedore`: rollouts of Stevedore's workloads and image pulls at a glance.

mod apiserver;
mod change;
mod cli;
mod create;
mod expose;
mod node_info;
mod output;
mod pulls;
mod rollout;
mod rollout_state;
mod workload;
mod workload_api;

use std::process::ExitCode;

use clap::Parser as _;

#[tokio::main]
async fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    match run(cli).await {
        Ok(code) => ExitCode::from(code),
        Err(error) => {
            let mut message = format!("error: {error}");
            for cause in error.chain().skip(1) {
                // The apiserver's own sentence, not the client's dump of its Status.
                if let Some(kube::Error::Api(status)) = cause.downcast_ref::<kube::Error>() {
                    message.push_str(&format!(": the apiserver said \"{}\"", status.message));
                    break;
                }
                message.push_str(&format!(": {cause}"));
            }
            let _ = std::io::Write::write_all(
                &mut std::io::stderr(),
                format!("{message}\n").as_bytes(),
            );
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: cli::Cli) -> anyhow::Result<u8> {
    let client = kube::Client::try_default().await?;
    let namespace = cli
        .namespace
        .clone()
        .unwrap_or_else(|| client.default_namespace().to_owned());
    match cli.command {
        cli::Command::Rollout(command) => {
            rollout::run(&client, &namespace, command, cli.output).await
        }
        cli::Command::Pulls(args) => {
            pulls::run(&client, args, cli.namespace.as_deref(), cli.output).await
        }
        cli::Command::DescribeNode(args) => node_info::run(&client, args, cli.output).await,
        cli::Command::Set(command) => change::set(&client, &namespace, command, cli.output).await,
        cli::Command::Scale {
            workload,
            replicas,
            current_replicas,
        } => {
            let counts = (replicas, current_replicas);
            change::scale(&client, &namespace, &workload, counts, cli.output).await
        }
        cli::Command::Scaledown { cloneset, pods } => {
            change::scaledown(&client, &namespace, &cloneset, &pods, cli.output).await
        }
        cli::Command::Expose(args) => expose::run(&client, &namespace, args, cli.output).await,
        cli::Command::Create(command) => {
            create::run(&client, &namespace, command, cli.output).await
        }
    }
}
