//! The node's desired image list as a pure state machine: which images to hold, what
//! each one's status is, and when each is next due for a pull. The driver
//! ([`super::list_runner`]) feeds it the clock and pull results and acts on what it
//! says; nothing here does I/O, so every rule is tested with plain values.
//!
//! Rules: lists are ordered by their epoch, the ImageList's UID and generation. A list
//! with another UID (the ImageList was deleted and created again, its generation back at
//! one) replaces the held one whatever its generation; within one UID a newer generation
//! replaces the list, the same one changes nothing, an older one is refused as stale. New images are due at once. A success makes an image Succeeded and,
//! for `always_pull` with an interval, due again after it. A failure makes it due again
//! after an exponential backoff (2 s, 4 s, ... up to 5 min): Waiting while it has
//! retries left (`backoff_limit` retries, as the CRD's field counts them: 0 means Failed
//! at the first failure), Failed (with the failure's message) from then on. A Failed image keeps retrying on that backoff, like kubelet's ImagePullBackOff, so
//! it recovers when the registry does; it stays Failed, message kept, while a retry runs,
//! until one succeeds. A later generation that changes a Failed image's spec makes it due
//! at once, its attempts counted afresh. A Succeeded image found gone from the node is
//! due at once.

use std::{
    collections::BTreeMap,
    time::{Duration, SystemTime},
};

use tokio::time::Instant;

use crate::images::registry::Auth;

const INITIAL_BACKOFF: Duration = Duration::from_secs(2);
const MAX_BACKOFF: Duration = Duration::from_secs(300);

/// What the list says about one image.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DesiredSpec {
    pub always_pull: bool,
    /// Re-pull interval for `always_pull`; `None` pulls once.
    pub pull_interval: Option<Duration>,
    pub timeout: Option<Duration>,
    /// Retries after a failed attempt before the image shows as Failed (0: Failed at
    /// the first failure); it keeps retrying after that.
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
    /// UID of the ImageList this status was computed for.
    pub list_uid: String,
}

/// A pull's result as the list needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PullResult {
    Succeeded { image_id: String },
    Failed { message: String },
}

/// Which version of which ImageList a desired list is: its `metadata.uid` and
/// `metadata.generation`. Generations are compared only within one UID, because a
/// recreated ImageList starts again at 1.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Epoch {
    /// Empty from a control plane that does not send it; such lists are then ordered by
    /// generation alone, as before.
    pub list_uid: String,
    pub generation: i64,
}

impl Epoch {
    pub fn new(list_uid: impl Into<String>, generation: i64) -> Self {
        Self {
            list_uid: list_uid.into(),
            generation,
        }
    }
}

/// Why an apply was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "generation {offered} of image list {list_uid:?} is older than the generation {held} the agent holds"
)]
pub struct StaleGeneration {
    pub list_uid: String,
    pub held: i64,
    pub offered: i64,
}

/// What an accepted apply did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    Replaced,
    Unchanged,
}

/// What is planned for one image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Next {
    /// No pull: Succeeded, without a re-pull interval.
    Idle,
    /// A pull may start at this instant.
    At(Instant),
    /// A pull is running; its result is awaited.
    Running,
}

#[derive(Debug, Clone)]
struct Entry {
    spec: DesiredSpec,
    status: ImageStatus,
    next: Next,
}

/// The desired list and the status of each of its images.
#[derive(Debug, Clone, Default)]
pub struct ImageList {
    epoch: Option<Epoch>,
    entries: BTreeMap<String, Entry>,
}

impl ImageList {
    /// The epoch held, if any list was applied.
    pub fn epoch(&self) -> Option<&Epoch> {
        self.epoch.as_ref()
    }

    /// Replaces the list with the one of `epoch`, unless it is the one held or older
    /// (see [`order`]).
    pub fn apply(
        &mut self,
        epoch: Epoch,
        desired: BTreeMap<String, DesiredSpec>,
        now: Instant,
    ) -> Result<Applied, StaleGeneration> {
        if let Some(held) = &self.epoch {
            match order(held, &epoch) {
                Order::Stale => {
                    return Err(StaleGeneration {
                        list_uid: epoch.list_uid,
                        held: held.generation,
                        offered: epoch.generation,
                    });
                }
                Order::Same => return Ok(Applied::Unchanged),
                Order::Newer => {}
            }
        }
        let mut old = std::mem::take(&mut self.entries);
        for (image, spec) in desired {
            let entry = match old.remove(&image) {
                Some(mut entry) => {
                    if entry.spec != spec && entry.status.phase == ListPhase::Failed {
                        if entry.next == Next::Running {
                            // The retry under way is the new cycle's first attempt.
                            entry.status.phase = ListPhase::Pulling;
                            entry.status.attempts = 1;
                            entry.status.message.clear();
                        } else {
                            entry.status.phase = ListPhase::Waiting;
                            entry.status.attempts = 0;
                            entry.next = Next::At(now);
                        }
                    }
                    if entry.spec.pull_interval != spec.pull_interval
                        && entry.status.phase == ListPhase::Succeeded
                    {
                        entry.next = repull(&spec, now);
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
                    next: Next::At(now),
                },
            };
            self.entries.insert(image, entry);
        }
        for entry in self.entries.values_mut() {
            entry.status.generation = epoch.generation;
            entry.status.list_uid.clone_from(&epoch.list_uid);
        }
        self.epoch = Some(epoch);
        Ok(Applied::Replaced)
    }

    /// Images whose next pull is due, with their specs; they are not yet marked
    /// started.
    pub fn due(&self, now: Instant) -> Vec<(String, DesiredSpec)> {
        self.entries
            .iter()
            .filter(|(_, e)| matches!(e.next, Next::At(due) if due <= now))
            .map(|(image, e)| (image.clone(), e.spec.clone()))
            .collect()
    }

    /// The earliest planned pull of an image not being pulled.
    pub fn next_due(&self) -> Option<Instant> {
        self.entries
            .values()
            .filter_map(|e| match e.next {
                Next::At(due) => Some(due),
                Next::Idle | Next::Running => None,
            })
            .min()
    }

    /// Marks a pull of `image` started (`None` if it is not listed or already running).
    pub fn start(&mut self, image: &str) -> Option<ImageStatus> {
        let entry = self.entries.get_mut(image)?;
        if entry.next == Next::Running {
            return None;
        }
        match entry.status.phase {
            // A retry of a Failed image shows as Failed, with the reason, until it ends.
            ListPhase::Failed => {}
            ListPhase::Succeeded => {
                entry.status.attempts = 0;
                entry.status.phase = ListPhase::Pulling;
                entry.status.message.clear();
            }
            ListPhase::Waiting | ListPhase::Pulling => {
                entry.status.phase = ListPhase::Pulling;
                entry.status.message.clear();
            }
        }
        entry.status.attempts += 1;
        entry.next = Next::Running;
        Some(entry.status.clone())
    }

    /// Records download progress of a running pull; `None` if nothing changed.
    pub fn progress(&mut self, image: &str, done: u64, total: u64) -> Option<ImageStatus> {
        let entry = self.entries.get_mut(image)?;
        if entry.next != Next::Running
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
        if entry.next != Next::Running {
            return None;
        }
        match result {
            PullResult::Succeeded { image_id } => {
                entry.status.phase = ListPhase::Succeeded;
                entry.status.image_id = image_id;
                entry.status.last_pull = Some(wall);
                entry.status.message.clear();
                entry.next = repull(&entry.spec, now);
            }
            PullResult::Failed { message } => {
                entry.status.message = message;
                let retries = entry.status.attempts.saturating_sub(1);
                entry.status.phase = if retries >= entry.spec.backoff_limit {
                    ListPhase::Failed
                } else {
                    ListPhase::Waiting
                };
                entry.next = Next::At(now + backoff(entry.status.attempts));
            }
        }
        Some(entry.status.clone())
    }

    /// The images that are Succeeded and not being pulled: the ones whose presence on
    /// the node is worth checking.
    pub fn succeeded(&self) -> Vec<String> {
        self.entries
            .iter()
            .filter(|(_, e)| e.status.phase == ListPhase::Succeeded && e.next != Next::Running)
            .map(|(image, _)| image.clone())
            .collect()
    }

    /// Records that a Succeeded `image` is gone from the node (deleted out of band:
    /// `crictl rmi`, kubelet's image GC): it is due for a pull at once. Whether it
    /// changed anything; the status itself changes only when that pull starts.
    pub fn gone(&mut self, image: &str, now: Instant) -> bool {
        let Some(entry) = self.entries.get_mut(image) else {
            return false;
        };
        if entry.status.phase != ListPhase::Succeeded || entry.next == Next::Running {
            return false;
        }
        entry.next = Next::At(now);
        true
    }

    /// The status of every image, in image order.
    pub fn statuses(&self) -> Vec<ImageStatus> {
        self.entries.values().map(|e| e.status.clone()).collect()
    }
}

/// How an offered epoch relates to the held one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// Replaces the held list: another ImageList (UID), or a later generation of it.
    Newer,
    /// The list held: applying it changes nothing.
    Same,
    /// An earlier generation of the ImageList held: refused.
    Stale,
}

/// Orders `offered` against `held`: by generation within one UID; a different UID is
/// always newer, since generations of different objects say nothing about each other
/// (a deleted and recreated ImageList starts again at 1, and a stray huge generation
/// must not block the next ImageList forever).
pub fn order(held: &Epoch, offered: &Epoch) -> Order {
    if held.list_uid != offered.list_uid {
        return Order::Newer;
    }
    match offered.generation.cmp(&held.generation) {
        std::cmp::Ordering::Less => Order::Stale,
        std::cmp::Ordering::Equal => Order::Same,
        std::cmp::Ordering::Greater => Order::Newer,
    }
}

/// What follows a success: a re-pull after the interval for `always_pull`, else nothing.
fn repull(spec: &DesiredSpec, now: Instant) -> Next {
    match spec.pull_interval.filter(|_| spec.always_pull) {
        Some(interval) => Next::At(now + interval),
        None => Next::Idle,
    }
}

/// Wait after the `attempts`-th failed attempt: 2 s, 4 s, 8 s, ... up to 5 min.
pub fn backoff(attempts: u32) -> Duration {
    let factor = 2u32.saturating_pow(attempts.saturating_sub(1));
    INITIAL_BACKOFF.saturating_mul(factor).min(MAX_BACKOFF)
}

#[cfg(test)]
#[path = "image_list_tests.rs"]
mod tests;
