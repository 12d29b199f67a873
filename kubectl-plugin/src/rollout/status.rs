//! `rollout status`: follows the workload until its rollout is done or stalls, drawing
//! an indicatif bar on a terminal and a line per change otherwise.

use std::io::IsTerminal as _;
use std::time::Duration;

use anyhow::{Result, bail};
use futures::StreamExt as _;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use kube::Client;
use serde::Serialize;

use super::watch_states;
use crate::cli::Output;
use crate::output;
use crate::rollout_state::{RolloutState, Verdict, assess, bar_position, revision_counts};
use crate::workload::WorkloadRef;

/// How the progress is shown while it moves.
enum Display {
    Bar(ProgressBar),
    /// The last line printed; a line is printed only when it changes.
    Lines(Option<String>),
    /// JSON or YAML: nothing until the end.
    Quiet,
}

impl Display {
    fn new(out: Output, target: &WorkloadRef) -> Self {
        if out != Output::Human {
            return Self::Quiet;
        }
        if !std::io::stdout().is_terminal() {
            return Self::Lines(None);
        }
        // Hidden until the first state sets its length, so no empty 0/0 bar flashes by.
        let bar = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::hidden());
        let style = ProgressStyle::with_template(
            "{prefix} [{bar:30.green/white}] {pos}/{len} ready  {msg}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ");
        bar.set_style(style);
        bar.set_prefix(format!(
            "{}/{}",
            target.kind.name().to_ascii_lowercase(),
            target.name
        ));
        Self::Bar(bar)
    }

    fn show(&mut self, state: &RolloutState, verdict: &Verdict) -> Result<()> {
        match self {
            Self::Bar(bar) => {
                let (length, position) = bar_position(state);
                bar.set_length(length);
                bar.set_position(position);
                bar.set_message(revision_counts(state));
                if bar.is_hidden() {
                    bar.set_draw_target(ProgressDrawTarget::stdout());
                }
            }
            Self::Lines(last) => {
                let text = match verdict {
                    Verdict::Waiting(waiting) => format!("{waiting} ({})", revision_counts(state)),
                    Verdict::Done(_) | Verdict::Stalled(_) => return Ok(()),
                };
                if last.as_deref() != Some(text.as_str()) {
                    output::line(&text)?;
                    *last = Some(text);
                }
            }
            Self::Quiet => {}
        }
        Ok(())
    }

    fn finish(&self) -> Result<()> {
        if let Self::Bar(bar) = self {
            bar.finish();
            // The bar stays on its line; what follows starts on the next one.
            if !bar.is_hidden() {
                output::line("")?;
            }
        }
        Ok(())
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct StatusResult<'a> {
    result: &'static str,
    message: &'a str,
    rollout: &'a RolloutState,
}

/// Follows `target`'s rollout; 0 when it completes, 1 when it stalls or `timeout` (if not
/// zero) passes first, with the reason on stderr.
pub async fn status(
    client: &Client,
    namespace: &str,
    target: &WorkloadRef,
    timeout: Duration,
    out: Output,
) -> Result<u8> {
    let mut display = Display::new(out, target);
    let followed = follow(client, namespace, target, &mut display);
    let outcome = if timeout.is_zero() {
        followed.await
    } else {
        match tokio::time::timeout(timeout, followed).await {
            Ok(outcome) => outcome,
            Err(_) => Ok(Outcome::TimedOut),
        }
    };
    display.finish()?;
    let (code, result, message, state) = match outcome? {
        Outcome::Ended(state, Verdict::Done(message)) => (0, "Done", message, state),
        Outcome::Ended(state, Verdict::Stalled(reason)) => (1, "Stalled", reason, state),
        Outcome::Ended(state, Verdict::Waiting(waiting)) => (1, "Waiting", waiting, state),
        Outcome::TimedOut => bail!(
            "timed out after {}s waiting for the rollout of {target}",
            timeout.as_secs()
        ),
    };
    let structured = output::structured(
        out,
        &StatusResult {
            result,
            message: &message,
            rollout: &state,
        },
    )?;
    if code == 0 && !structured {
        output::line(&message)?;
    } else if code != 0 {
        bail!("the rollout of {target} is stalled: {message}");
    }
    Ok(code)
}

enum Outcome {
    Ended(Box<RolloutState>, Verdict),
    TimedOut,
}

async fn follow(
    client: &Client,
    namespace: &str,
    target: &WorkloadRef,
    display: &mut Display,
) -> Result<Outcome> {
    let mut states = watch_states(client, namespace, target);
    while let Some(event) = states.next().await {
        let Some(state) = event? else {
            bail!("{target} not found in namespace {namespace}");
        };
        let verdict = assess(&state);
        display.show(&state, &verdict)?;
        if !matches!(verdict, Verdict::Waiting(_)) {
            return Ok(Outcome::Ended(Box::new(state), verdict));
        }
    }
    bail!("the watch of {target} ended")
}
