//! `kubectl stevedore`: rollouts of Stevedore's workloads and image pulls at a glance.

mod cli;
mod node_info;
mod output;
mod pulls;
mod rollout;
mod workload;

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
    }
}
