//! `pulls --watch`: the pulls live. On a terminal a byte progress bar per node and image
//! (and a percent bar per ImagePullJob); otherwise a line whenever one changes.

use std::collections::BTreeMap;
use std::io::IsTerminal as _;
use std::time::Duration;

use anyhow::Result;
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use kube::Client;

use super::read;
use super::rows::{JobRow, PullRow, all_settled, change_line, job_line};
use crate::cli::Output;
use crate::output;

/// How often the ImageLists are read again. Agents report progress about once a second.
const REFRESH: Duration = Duration::from_millis(500);

enum Live {
    Bars {
        multi: MultiProgress,
        bars: BTreeMap<String, ProgressBar>,
        /// Keys updated in the current refresh.
        seen: Vec<String>,
    },
    Lines(BTreeMap<String, String>),
}

fn byte_style() -> ProgressStyle {
    ProgressStyle::with_template(
        "{prefix:<40} {msg:<9} [{bar:30.cyan/blue}] {bytes}/{total_bytes} {bytes_per_sec}",
    )
    .unwrap_or_else(|_| ProgressStyle::default_bar())
    .progress_chars("=> ")
}

fn percent_style() -> ProgressStyle {
    ProgressStyle::with_template("{prefix:<40} {msg:<9} [{bar:30.magenta/blue}] {pos}%")
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ")
}

impl Live {
    fn bar(
        &mut self,
        key: String,
        style: fn() -> ProgressStyle,
        prefix: String,
    ) -> Option<&ProgressBar> {
        let Self::Bars { multi, bars, seen } = self else {
            return None;
        };
        seen.push(key.clone());
        Some(bars.entry(key).or_insert_with(|| {
            let bar = multi.add(ProgressBar::new(0));
            bar.set_style(style());
            bar.set_prefix(prefix);
            bar
        }))
    }

    fn pull(&mut self, row: &PullRow) -> Result<()> {
        if let Self::Lines(last) = self {
            return changed(last, row.key(), change_line(row));
        }
        if let Some(bar) = self.bar(row.key(), byte_style, format!("{} {}", row.node, row.image)) {
            bar.set_message(row.phase.clone());
            if row.bytes_total > 0 {
                bar.set_length(row.bytes_total.unsigned_abs());
                bar.set_position(row.bytes_done.clamp(0, row.bytes_total).unsigned_abs());
            } else {
                // No total before the manifest is read: an empty bar, not a full one.
                bar.unset_length();
                bar.set_position(row.bytes_done.max(0).unsigned_abs());
            }
        }
        Ok(())
    }

    fn job(&mut self, job: &JobRow) -> Result<()> {
        let key = format!("job\u{0}{}\u{0}{}", job.namespace, job.name);
        if let Self::Lines(last) = self {
            return changed(last, key, job_line(job));
        }
        if let Some(bar) = self.bar(
            key,
            percent_style,
            format!("imagepulljob {}/{}", job.namespace, job.name),
        ) {
            bar.set_message(if job.done { "Done" } else { "Pulling" }.to_owned());
            bar.set_length(100);
            bar.set_position(job.percent.clamp(0, 100).unsigned_abs().into());
        }
        Ok(())
    }

    /// Ends the bars of rows gone from this refresh (an image released from a node's
    /// list when its job completes, a deleted job): they stay, marked as released.
    fn end_refresh(&mut self) {
        if let Self::Bars { bars, seen, .. } = self {
            bars.retain(|key, bar| {
                if seen.contains(key) {
                    return true;
                }
                bar.finish_with_message("Released");
                false
            });
            seen.clear();
        }
    }

    fn finish(&self) -> Result<()> {
        if let Self::Bars { bars, .. } = self {
            bars.values().for_each(ProgressBar::finish);
            // The bars stay on their lines; the shell prompt starts on the next one.
            if !bars.is_empty() {
                output::line("")?;
            }
        }
        Ok(())
    }
}

/// Prints `line` when it differs from the last one printed for `key`.
fn changed(last: &mut BTreeMap<String, String>, key: String, line: String) -> Result<()> {
    if last.get(&key) != Some(&line) {
        output::line(&line)?;
        last.insert(key, line);
    }
    Ok(())
}

pub async fn watch(
    client: &Client,
    node: Option<&str>,
    namespace: Option<&str>,
    until_done: bool,
    out: Output,
) -> Result<u8> {
    let mut live = if out == Output::Human && std::io::stdout().is_terminal() {
        Live::Bars {
            multi: MultiProgress::with_draw_target(ProgressDrawTarget::stdout()),
            bars: BTreeMap::new(),
            seen: Vec::new(),
        }
    } else {
        Live::Lines(BTreeMap::new())
    };
    loop {
        let pulls = read(client, node, namespace).await?;
        if out == Output::Human {
            for row in &pulls.pulls {
                live.pull(row)?;
            }
            for job in &pulls.jobs {
                live.job(job)?;
            }
            live.end_refresh();
        } else {
            // Scripts get one document per refresh in which anything changed.
            let document = serde_json::to_string(&pulls)?;
            changed_document(&mut live, out, document, &pulls)?;
        }
        if until_done && all_settled(&pulls.pulls, &pulls.jobs) {
            live.finish()?;
            return Ok(0);
        }
        tokio::select! {
            () = tokio::time::sleep(REFRESH) => {}
            _ = tokio::signal::ctrl_c() => {
                live.finish()?;
                return Ok(0);
            }
        }
    }
}

fn changed_document(
    live: &mut Live,
    out: Output,
    document: String,
    pulls: &super::Pulls,
) -> Result<()> {
    let Live::Lines(last) = live else {
        return Ok(());
    };
    if last.get("") == Some(&document) {
        return Ok(());
    }
    last.insert(String::new(), document);
    if out == Output::Json {
        output::line(&serde_json::to_string(pulls)?)
    } else {
        output::line("---")?;
        output::structured(out, pulls).map(|_| ())
    }
}
