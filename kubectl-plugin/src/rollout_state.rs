//! Where a rollout stands, as pure rules: what a workload's status says (a
//! [`RolloutState`]), whether the rollout is done, waiting or stalled ([`assess`]), and
//! the line a person reads about it.

use serde::Serialize;

/// A workload's rollout, the same for every kind.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RolloutState {
    pub kind: &'static str,
    pub namespace: String,
    pub name: String,
    pub generation: i64,
    pub observed_generation: i64,
    /// Pods the workload wants.
    pub desired: i32,
    /// Pods the rollout moves to the update revision (desired minus the partition).
    pub target_updated: i32,
    /// Pods it has now, of any revision.
    pub pods: i32,
    pub updated: i32,
    /// Updated pods that are ready; `None` for kinds whose status does not count them.
    pub updated_ready: Option<i32>,
    pub ready: i32,
    pub available: i32,
    pub current_revision: String,
    pub update_revision: String,
    pub paused: bool,
    /// The update strategy is OnDelete: only pods someone deletes are updated.
    pub on_delete: bool,
    /// Why the rollout cannot go on by itself, in the controller's words.
    pub stalled: Option<String>,
    /// A problem the controller reports that may clear (a held disruption, a refused pod).
    pub problem: Option<String>,
}

/// What `rollout status` concludes from one state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The rollout is complete; the sentence says so.
    Done(String),
    /// The rollout is under way; the sentence says what it waits for.
    Waiting(String),
    /// The rollout will not finish by itself; the sentence says why.
    Stalled(String),
}

impl RolloutState {
    fn object(&self) -> String {
        format!("{} {}/{}", self.kind, self.namespace, self.name)
    }

    /// Old-revision pods (what the rollout has still to replace, or keeps by partition).
    pub fn old_pods(&self) -> i32 {
        (self.pods - self.updated).max(0)
    }
}

/// Done, waiting or stalled, in the order kubectl's status viewers check (the spec seen
/// first, then updated, old pods gone, updated pods ready, all available); a stall is
/// reported only while the rollout is unfinished.
pub fn assess(state: &RolloutState) -> Verdict {
    if state.observed_generation < state.generation {
        return Verdict::Waiting(format!(
            "Waiting for the {} spec update to be observed...",
            state.kind
        ));
    }
    let waiting = waiting_for(state);
    let Some(waiting) = waiting else {
        return Verdict::Done(if state.target_updated < state.desired {
            format!(
                "partitioned roll out complete: {} of {} pods updated.",
                state.updated, state.desired
            )
        } else {
            format!("{} successfully rolled out.", state.object())
        });
    };
    if let Some(reason) = &state.stalled {
        return Verdict::Stalled(reason.clone());
    }
    if state.paused {
        return Verdict::Stalled(format!(
            "{} is paused, so its rollout does not go on ({waiting}); resume it with `kubectl stevedore rollout resume {}/{}`.",
            state.object(),
            state.kind.to_ascii_lowercase(),
            state.name
        ));
    }
    if state.on_delete && state.updated < state.target_updated {
        return Verdict::Stalled(format!(
            "{} updates pods only when they are deleted (updateStrategy OnDelete): {waiting}",
            state.object()
        ));
    }
    Verdict::Waiting(waiting)
}

/// What an unfinished rollout waits for; `None` when it is done.
fn waiting_for(state: &RolloutState) -> Option<String> {
    let target = state.target_updated.max(0);
    if state.updated < target {
        return Some(format!(
            "Waiting for rollout to finish: {} of {target} pods updated...",
            state.updated
        ));
    }
    if state.pods > state.desired {
        return Some(format!(
            "Waiting for rollout to finish: {} old pods pending termination...",
            state.pods - state.desired
        ));
    }
    if let Some(updated_ready) = state.updated_ready
        && updated_ready < target
    {
        return Some(format!(
            "Waiting for rollout to finish: {updated_ready} of {target} updated pods ready..."
        ));
    }
    if state.available < state.desired {
        return Some(format!(
            "Waiting for rollout to finish: {} of {} pods available...",
            state.available, state.desired
        ));
    }
    None
}

/// The short form of a revision name: the hash after the workload's name.
pub fn short_revision<'a>(revision: &'a str, workload: &str) -> &'a str {
    revision
        .strip_prefix(workload)
        .and_then(|rest| rest.strip_prefix('-'))
        .unwrap_or(revision)
}

/// The counts per revision beside the bar: updated (at the update revision) and old.
pub fn revision_counts(state: &RolloutState) -> String {
    let update = short_revision(&state.update_revision, &state.name);
    let mut line = format!(
        "{} updated ({}), {} ready, {} available of {}",
        state.updated,
        if update.is_empty() { "-" } else { update },
        state.ready,
        state.available,
        state.desired
    );
    let old = state.old_pods();
    if old > 0 {
        let current = short_revision(&state.current_revision, &state.name);
        if current.is_empty() || current == update {
            line.push_str(&format!(", {old} old"));
        } else {
            line.push_str(&format!(", {old} old ({current})"));
        }
    }
    if let Some(problem) = &state.problem {
        line.push_str(&format!(" — {problem}"));
    }
    line
}

/// The bar's length and position: updated-and-ready pods (available ones for kinds that
/// do not count them) out of the pods the rollout updates.
pub fn bar_position(state: &RolloutState) -> (u64, u64) {
    let target = state.target_updated.max(0);
    let done = state
        .updated_ready
        .unwrap_or(state.available.min(state.updated))
        .clamp(0, target);
    (target.unsigned_abs().into(), done.unsigned_abs().into())
}

#[cfg(test)]
#[path = "rollout_state_tests.rs"]
mod tests;
