//! One in-place restart as an explicit state machine. It never touches the world: the
//! executor feeds it what it observed and the time, and carries out the actions it
//! returns. That keeps every rule (ordering, grace periods, min started, timeouts,
//! restoring readiness) testable without containerd, kubelet or a clock.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use stevedore_proto::stevedore::agent::v1::{
    ContainerRestartStatus, RestartProgress, RestartState,
};

use super::runtime::Signal;

/// What to restart and how, decided when the request is accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// Container names, in request order.
    pub containers: Vec<String>,
    /// One at a time, each after the previous one is running again and ready.
    pub ordered: bool,
    pub termination_grace: Duration,
    pub unready_grace: Duration,
    pub min_started: Duration,
    /// Set `KruisePodReady=False` first (and `True` at the end).
    pub mark_unready: bool,
    /// Containers not done by then fail.
    pub timeout: Duration,
}

/// What the executor saw of one container just before a step.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContainerObservation {
    /// IDs of its running containers in the runtime.
    pub running: Vec<String>,
    /// ID of the container the pod status reports ready, if any.
    pub ready: Option<String>,
}

/// What the executor saw, by container name.
pub type Observation = HashMap<String, ContainerObservation>;

/// A side effect the executor must carry out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Set the pod's `KruisePodReady` condition.
    SetPodReady(bool),
    /// Signal the given containers.
    Signal {
        container: String,
        ids: Vec<String>,
        signal: Signal,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Phase {
    Pending,
    /// SIGTERM sent to `old`; SIGKILL at `kill_at` if they still run.
    Terminating {
        old: Vec<String>,
        kill_at: Instant,
    },
    /// The old containers were stopped; waiting for kubelet's new one.
    Recreating {
        old: Vec<String>,
    },
    /// A new container runs since `since`.
    Starting {
        old: Vec<String>,
        new: String,
        since: Instant,
    },
    Succeeded {
        new: String,
    },
    Failed(String),
}

impl Phase {
    fn is_terminal(&self) -> bool {
        matches!(self, Self::Succeeded { .. } | Self::Failed(_))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    MarkUnready,
    UnreadyGrace { until: Instant },
    Restarting,
    Restore,
    Done,
}

/// The state of one restart operation.
#[derive(Debug, Clone)]
pub struct Operation {
    plan: Plan,
    stage: Stage,
    phases: Vec<Phase>,
    deadline: Instant,
}

impl Operation {
    pub fn new(plan: Plan, now: Instant) -> Self {
        let stage = if plan.mark_unready {
            Stage::MarkUnready
        } else {
            Stage::Restarting
        };
        Self {
            phases: vec![Phase::Pending; plan.containers.len()],
            deadline: now + plan.unready_grace + plan.timeout,
            plan,
            stage,
        }
    }

    pub fn is_done(&self) -> bool {
        self.stage == Stage::Done
    }

    /// Advances with what was observed at `now`; returns the actions to carry out.
    pub fn step(&mut self, observed: &Observation, now: Instant) -> Vec<Action> {
        let mut actions = Vec::new();
        if self.stage == Stage::MarkUnready {
            actions.push(Action::SetPodReady(false));
            self.stage = Stage::UnreadyGrace {
                until: now + self.plan.unready_grace,
            };
        }
        if let Stage::UnreadyGrace { until } = self.stage {
            if now < until {
                return actions;
            }
            self.stage = Stage::Restarting;
        }
        if self.stage == Stage::Restarting {
            for index in 0..self.phases.len() {
                if let Some(action) = self.advance(index, observed, now) {
                    actions.push(action);
                }
            }
            if now >= self.deadline {
                self.fail_unfinished("timed out waiting for the new container");
            }
            if self.phases.iter().all(Phase::is_terminal) {
                self.stage = if self.plan.mark_unready {
                    Stage::Restore
                } else {
                    Stage::Done
                };
            }
        }
        if self.stage == Stage::Restore {
            actions.push(Action::SetPodReady(true));
            self.stage = Stage::Done;
        }
        actions
    }

    /// Marks every unfinished container failed (an action failed, or shutdown);
    /// the next step restores readiness if it was taken away.
    pub fn fail_unfinished(&mut self, message: &str) {
        for phase in &mut self.phases {
            if !phase.is_terminal() {
                *phase = Phase::Failed(message.to_owned());
            }
        }
        if matches!(self.stage, Stage::MarkUnready) {
            self.stage = Stage::Done;
        } else if matches!(self.stage, Stage::UnreadyGrace { .. }) {
            self.stage = Stage::Restarting;
        }
    }

    /// Whether the container at `index` may be stopped now.
    fn may_start(&self, index: usize, observed: &Observation) -> Result<bool, String> {
        if !self.plan.ordered || index == 0 {
            return Ok(true);
        }
        let previous = &self.plan.containers[index - 1];
        match &self.phases[index - 1] {
            Phase::Succeeded { new } => Ok(observed
                .get(previous)
                .and_then(|o| o.ready.as_ref())
                .is_some_and(|ready| ready == new)),
            Phase::Failed(_) => Err(format!("not restarted: container {previous} failed")),
            _ => Ok(false),
        }
    }

    fn advance(&mut self, index: usize, observed: &Observation, now: Instant) -> Option<Action> {
        let name = self.plan.containers[index].clone();
        let seen = observed.get(&name).cloned().unwrap_or_default();
        let mut action = None;
        // Loop so one observation can carry a container through several phases
        // (e.g. stopped and already replaced since the last look).
        loop {
            let next = match &self.phases[index] {
                Phase::Pending => match self.may_start(index, observed) {
                    Err(message) => Phase::Failed(message),
                    Ok(false) => break,
                    Ok(true) if seen.running.is_empty() => {
                        Phase::Failed(format!("no running container named {name}"))
                    }
                    Ok(true) => {
                        action = Some(Action::Signal {
                            container: name.clone(),
                            ids: seen.running.clone(),
                            signal: Signal::Term,
                        });
                        Phase::Terminating {
                            old: seen.running.clone(),
                            kill_at: now + self.plan.termination_grace,
                        }
                    }
                },
                Phase::Terminating { old, kill_at } => {
                    let still: Vec<String> = old
                        .iter()
                        .filter(|id| seen.running.contains(id))
                        .cloned()
                        .collect();
                    if still.is_empty() {
                        Phase::Recreating { old: old.clone() }
                    } else if now >= *kill_at {
                        action = Some(Action::Signal {
                            container: name.clone(),
                            ids: still,
                            signal: Signal::Kill,
                        });
                        Phase::Recreating { old: old.clone() }
                    } else {
                        break;
                    }
                }
                Phase::Recreating { old } => {
                    match seen.running.iter().find(|id| !old.contains(id)) {
                        Some(new) => Phase::Starting {
                            old: old.clone(),
                            new: new.clone(),
                            since: now,
                        },
                        None => break,
                    }
                }
                Phase::Starting { old, new, since } => {
                    if !seen.running.contains(new) {
                        // It died before counting as started; wait for the next one.
                        Phase::Recreating { old: old.clone() }
                    } else if now.duration_since(*since) >= self.plan.min_started {
                        Phase::Succeeded { new: new.clone() }
                    } else {
                        break;
                    }
                }
                Phase::Succeeded { .. } | Phase::Failed(_) => break,
            };
            self.phases[index] = next;
        }
        action
    }

    /// The API view of the operation.
    pub fn progress(&self) -> RestartProgress {
        let containers = self
            .plan
            .containers
            .iter()
            .zip(&self.phases)
            .map(|(name, phase)| {
                let (state, message) = match phase {
                    Phase::Pending => (RestartState::Pending, String::new()),
                    Phase::Terminating { .. } => (
                        RestartState::Recreating,
                        "stopping the container".to_owned(),
                    ),
                    Phase::Recreating { .. } => (
                        RestartState::Recreating,
                        "waiting for kubelet to start a new container".to_owned(),
                    ),
                    Phase::Starting { new, .. } => (
                        RestartState::Recreating,
                        format!("new container {new} running, waiting for min started seconds"),
                    ),
                    Phase::Succeeded { new } => {
                        (RestartState::Succeeded, format!("new container {new}"))
                    }
                    Phase::Failed(message) => (RestartState::Failed, message.clone()),
                };
                ContainerRestartStatus {
                    name: name.clone(),
                    state: state.into(),
                    message,
                }
            })
            .collect();
        RestartProgress {
            containers,
            done: self.is_done(),
        }
    }
}

#[cfg(test)]
mod tests;
