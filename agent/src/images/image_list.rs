//! The node's desired image list as a pure state machine: which images to hold, what
//! each one's status is, and when each is next due for a pull. The driver
//! ([`super::list_runner`]) feeds it the clock and pull results and acts on what it
//! says; nothing here does I/O, so every rule is tested with plain values.
//!
//! Rules: a newer generation replaces the list, the same one changes nothing, an older
//! one is refused. New images are due at once. A success makes an image Succeeded and,
//! for `always_pull` with an interval, due again after it. A failure makes it Waiting
//! with exponential backoff until `backoff_limit` attempts have failed, then Failed
//! until a later generation changes its spec.

use std::{
    collections::BTreeMap,
    time::{Duration, SystemTime},
};

use tokio::time::Instant;

use super::registry::Auth;

/// Attempts before an image is Failed when the spec does not say.
pub const DEFAULT_BACKOFF_LIMIT: u32 = 3;
const INITIAL_BACKOFF: Duration = Duration::from_secs(2);
const MAX_BACKOFF: Duration = Duration::from_secs(300);

/// What the list says about one image.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DesiredSpec {
    pub always_pull: bool,
    /// Re-pull interval for `always_pull`; `None` pulls once.
    pub pull_interval: Option<Duration>,
    pub timeout: Option<Duration>,
    /// Failed attempts before Failed (0 in the request means the default).
    pub backoff_limit: u32,
    pub auth: Auth,
}

/// Phase of one desired image.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ListPhase {
    #[default]
    Waiting,
    Pulling,
    Succeeded,
    Failed,
}

/// Status of one desired image.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImageStatus {
    pub image: String,
    pub phase: ListPhase,
    pub bytes_done: u64,
    pub bytes_total: u64,
    pub image_id: String,
    pub last_pull: Option<SystemTime>,
    /// Attempts of the current (or last) pull cycle.
    pub attempts: u32,
    pub message: String,
    pub generation: i64,
}

/// A pull's result as the list needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PullResult {
    Succeeded { image_id: String },
    Failed { message: String },
}

/// Why an apply was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("generation {offered} is older than the generation {held} the agent holds")]
pub struct StaleGeneration {
    pub held: i64,
    pub offered: i64,
}

/// What an accepted apply did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    Replaced,
    Unchanged,
}

#[derive(Debug, Clone)]
struct Entry {
    spec: DesiredSpec,
    status: ImageStatus,
    /// When the next pull may start; `None` when none is planned.
    due: Option<Instant>,
}

/// The desired list and the status of each of its images.
#[derive(Debug, Clone, Default)]
pub struct ImageList {
    generation: Option<i64>,
    entries: BTreeMap<String, Entry>,
}

impl ImageList {
    /// The generation held, if any list was applied.
    pub fn generation(&self) -> Option<i64> {
        self.generation
    }

    /// Replaces the list with generation `generation`.
    pub fn apply(
        &mut self,
        generation: i64,
        desired: BTreeMap<String, DesiredSpec>,
        now: Instant,
    ) -> Result<Applied, StaleGeneration> {
        match self.generation {
            Some(held) if generation < held => {
                return Err(StaleGeneration {
                    held,
                    offered: generation,
                });
            }
            Some(held) if generation == held => return Ok(Applied::Unchanged),
            _ => {}
        }
        self.generation = Some(generation);
        let mut old = std::mem::take(&mut self.entries);
        for (image, spec) in desired {
            let entry = match old.remove(&image) {
                Some(mut entry) => {
                    if entry.spec != spec && entry.status.phase == ListPhase::Failed {
                        entry.status.phase = ListPhase::Waiting;
                        entry.status.attempts = 0;
                        entry.due = Some(now);
                    }
                    if entry.spec.pull_interval != spec.pull_interval
                        && entry.status.phase == ListPhase::Succeeded
                    {
                        entry.due = repull_due(&spec, now);
                    }
                    entry.spec = spec;
                    entry
                }
                None => Entry {
                    spec,
                    status: ImageStatus {
                        image: image.clone(),
                        ..ImageStatus::default()
                    },
                    due: Some(now),
                },
            };
            self.entries.insert(image, entry);
        }
        for entry in self.entries.values_mut() {
            entry.status.generation = generation;
        }
        Ok(Applied::Replaced)
    }

    /// Images whose next pull is due, with their specs; they are not yet marked
    /// started.
    pub fn due(&self, now: Instant) -> Vec<(String, DesiredSpec)> {
        self.entries
            .iter()
            .filter(|(_, e)| e.status.phase != ListPhase::Pulling)
            .filter(|(_, e)| e.due.is_some_and(|due| due <= now))
            .map(|(image, e)| (image.clone(), e.spec.clone()))
            .collect()
    }

    /// The earliest planned pull of an image not being pulled.
    pub fn next_due(&self) -> Option<Instant> {
        self.entries
            .values()
            .filter(|e| e.status.phase != ListPhase::Pulling)
            .filter_map(|e| e.due)
            .min()
    }

    /// Marks a pull of `image` started.
    pub fn start(&mut self, image: &str) -> Option<ImageStatus> {
        let entry = self.entries.get_mut(image)?;
        if entry.status.phase == ListPhase::Succeeded {
            entry.status.attempts = 0;
        }
        entry.status.phase = ListPhase::Pulling;
        entry.status.attempts += 1;
        entry.status.message.clear();
        entry.due = None;
        Some(entry.status.clone())
    }

    /// Records download progress of a running pull; `None` if nothing changed.
    pub fn progress(&mut self, image: &str, done: u64, total: u64) -> Option<ImageStatus> {
        let entry = self.entries.get_mut(image)?;
        if entry.status.phase != ListPhase::Pulling
            || (entry.status.bytes_done, entry.status.bytes_total) == (done, total)
        {
            return None;
        }
        entry.status.bytes_done = done;
        entry.status.bytes_total = total;
        Some(entry.status.clone())
    }

    /// Records the end of a pull of `image` (ignored if the image left the list).
    pub fn finish(
        &mut self,
        image: &str,
        result: PullResult,
        now: Instant,
        wall: SystemTime,
    ) -> Option<ImageStatus> {
        let entry = self.entries.get_mut(image)?;
        if entry.status.phase != ListPhase::Pulling {
            return None;
        }
        match result {
            PullResult::Succeeded { image_id } => {
                entry.status.phase = ListPhase::Succeeded;
                entry.status.image_id = image_id;
                entry.status.last_pull = Some(wall);
                entry.status.message.clear();
                entry.due = repull_due(&entry.spec, now);
            }
            PullResult::Failed { message } => {
                entry.status.message = message;
                let limit = match entry.spec.backoff_limit {
                    0 => DEFAULT_BACKOFF_LIMIT,
                    limit => limit,
                };
                if entry.status.attempts >= limit {
                    entry.status.phase = ListPhase::Failed;
                    entry.due = None;
                } else {
                    entry.status.phase = ListPhase::Waiting;
                    entry.due = Some(now + backoff(entry.status.attempts));
                }
            }
        }
        Some(entry.status.clone())
    }

    /// The status of every image, in image order.
    pub fn statuses(&self) -> Vec<ImageStatus> {
        self.entries.values().map(|e| e.status.clone()).collect()
    }
}

fn repull_due(spec: &DesiredSpec, now: Instant) -> Option<Instant> {
    spec.pull_interval
        .filter(|_| spec.always_pull)
        .map(|interval| now + interval)
}

/// Wait after the `attempts`-th failed attempt: 2 s, 4 s, 8 s, ... up to 5 min.
pub fn backoff(attempts: u32) -> Duration {
    let factor = 2u32.saturating_pow(attempts.saturating_sub(1));
    INITIAL_BACKOFF.saturating_mul(factor).min(MAX_BACKOFF)
}

#[cfg(test)]
#[path = "image_list_tests.rs"]
mod tests;
