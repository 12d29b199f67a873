//! Runs the node's probes: one task per probe (initial delay, then one run every
//! period, each bounded by its timeout), its results fed to the pure [`ProbeTracker`];
//! every change of state or message is kept for new watchers and broadcast to the
//! current ones. An apply stops and starts only the probes whose spec changed.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::SystemTime;

use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use super::handlers::{self, HttpGet, Outcome};
use super::spec::{Handler, ProbeKey, ProbeSpec, changes};
use super::state::{ProbeState, ProbeTracker};
use crate::containers::{ContainerExec, ExecExit};
use crate::images::service::image_list::{Epoch, Order, StaleGeneration, order};

/// State changes kept for slow watchers before they must read everything again.
const UPDATE_BUFFER: usize = 1024;

/// What a probe last found.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ProbeRecord {
    pub state: ProbeState,
    pub last_probe: Option<SystemTime>,
    pub last_transition: Option<SystemTime>,
    pub message: String,
}

/// One probe's record, or its removal, for the list `epoch`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Update {
    pub key: ProbeKey,
    /// `None`: the probe was removed from the list.
    pub record: Option<ProbeRecord>,
    pub epoch: Epoch,
}

struct Running {
    spec: ProbeSpec,
    stop: CancellationToken,
}

#[derive(Default)]
struct Held {
    epoch: Option<Epoch>,
    running: BTreeMap<ProbeKey, Running>,
    records: BTreeMap<ProbeKey, ProbeRecord>,
}

/// The node's probes and their records.
#[derive(Clone)]
pub struct ProbeRunner<E> {
    held: Arc<Mutex<Held>>,
    updates: broadcast::Sender<Update>,
    exec: E,
    http: reqwest::Client,
    shutdown: CancellationToken,
}

impl<E: ContainerExec> ProbeRunner<E> {
    pub fn new(exec: E, http: reqwest::Client, shutdown: CancellationToken) -> Self {
        Self {
            held: Arc::default(),
            updates: broadcast::channel(UPDATE_BUFFER).0,
            exec,
            http,
            shutdown,
        }
    }

    fn held(&self) -> MutexGuard<'_, Held> {
        // A panic while holding the lock leaves consistent maps; carry on with them.
        self.held
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Replaces the list with `desired` unless `epoch` is older than the one held.
    pub fn apply(
        &self,
        epoch: Epoch,
        desired: BTreeMap<ProbeKey, ProbeSpec>,
    ) -> Result<i64, StaleGeneration> {
        let mut held = self.held();
        if let Some(current) = &held.epoch {
            match order(current, &epoch) {
                Order::Stale => {
                    return Err(StaleGeneration {
                        list_uid: epoch.list_uid,
                        held: current.generation,
                        offered: epoch.generation,
                    });
                }
                Order::Same => return Ok(epoch.generation),
                Order::Newer => {}
            }
        }
        let specs: BTreeMap<ProbeKey, ProbeSpec> = held
            .running
            .iter()
            .map(|(k, r)| (k.clone(), r.spec.clone()))
            .collect();
        let plan = changes(&specs, &desired);
        held.epoch = Some(epoch.clone());
        for key in plan.stop {
            if let Some(running) = held.running.remove(&key) {
                running.stop.cancel();
            }
            held.records.remove(&key);
            let _ = self.updates.send(Update {
                key,
                record: None,
                epoch: epoch.clone(),
            });
        }
        for key in plan.start {
            let Some(spec) = desired.get(&key).cloned() else {
                continue;
            };
            let stop = self.shutdown.child_token();
            held.records.insert(key.clone(), ProbeRecord::default());
            held.running.insert(
                key.clone(),
                Running {
                    spec: spec.clone(),
                    stop: stop.clone(),
                },
            );
            tokio::spawn(self.clone().run(key, spec, stop));
        }
        Ok(epoch.generation)
    }

    /// Every probe's record now, and the changes after it.
    pub fn watch(&self) -> (Vec<Update>, broadcast::Receiver<Update>) {
        let held = self.held();
        let receiver = self.updates.subscribe();
        let epoch = held.epoch.clone().unwrap_or_default();
        let snapshot = held
            .records
            .iter()
            .map(|(key, record)| Update {
                key: key.clone(),
                record: Some(record.clone()),
                epoch: epoch.clone(),
            })
            .collect();
        (snapshot, receiver)
    }

    async fn run(self, key: ProbeKey, spec: ProbeSpec, stop: CancellationToken) {
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(spec.initial_delay) => {}
        }
        let mut ticks = tokio::time::interval(spec.period);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut tracker = ProbeTracker::default();
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                _ = ticks.tick() => {}
            }
            let outcome = tokio::select! {
                () = stop.cancelled() => return,
                outcome = self.probe_once(&key, &spec) => outcome,
            };
            let changed = tracker.observe(outcome.result, spec.thresholds);
            self.record(
                &key,
                &stop,
                tracker.state(),
                changed.is_some(),
                outcome.message,
            );
        }
    }

    /// Keeps the run's result; broadcasts it when the state or message changed.
    fn record(
        &self,
        key: &ProbeKey,
        stop: &CancellationToken,
        state: ProbeState,
        moved: bool,
        message: String,
    ) {
        let mut held = self.held();
        // A probe stopped meanwhile (its record is gone or belongs to a new run).
        if stop.is_cancelled() {
            return;
        }
        let epoch = held.epoch.clone().unwrap_or_default();
        let Some(record) = held.records.get_mut(key) else {
            return;
        };
        let now = SystemTime::now();
        let publish = moved || record.message != message;
        record.last_probe = Some(now);
        record.state = state;
        record.message = message;
        if moved {
            record.last_transition = Some(now);
        }
        if publish {
            let update = Update {
                key: key.clone(),
                record: Some(record.clone()),
                epoch,
            };
            let _ = self.updates.send(update);
        }
    }

    async fn probe_once(&self, key: &ProbeKey, spec: &ProbeSpec) -> Outcome {
        match &spec.handler {
            Handler::Tcp(port) => handlers::tcp(spec.ip, *port, spec.timeout).await,
            Handler::Http {
                path,
                port,
                https,
                headers,
            } => {
                let get = HttpGet {
                    ip: spec.ip,
                    port: *port,
                    path: path.clone(),
                    https: *https,
                    headers: headers.clone(),
                };
                handlers::http(&self.http, &get, spec.timeout).await
            }
            Handler::Exec(command) => {
                let ran = self
                    .exec
                    .exec(&key.uid, &spec.container, command, spec.timeout)
                    .await;
                exec_outcome(ran, spec.timeout)
            }
        }
    }
}

/// An exec's end as a probe result: exit status 0 succeeds; anything else fails, saying
/// why.
pub fn exec_outcome(
    ran: Result<ExecExit, crate::containers::ExecError>,
    timeout: std::time::Duration,
) -> Outcome {
    match ran {
        Ok(ExecExit::Status(0)) => Outcome::success(),
        Ok(ExecExit::Status(status)) => {
            Outcome::failure(format!("command exited with status {status}"))
        }
        Ok(ExecExit::TimedOut) => Outcome::failure(format!(
            "command timed out after {}s",
            timeout.as_secs_f32()
        )),
        Err(err) => Outcome::failure(format!("command could not run: {err}")),
    }
}

#[cfg(test)]
#[path = "runner_tests.rs"]
mod tests;
