//! The leader-election loop: reads the Lease, asks `leader::decide` what to do, and writes
//! the Lease with the read `resourceVersion`, so a conflicting writer makes the apiserver
//! answer 409 and the loop re-reads instead of overwriting. Leadership is published on a
//! `watch` channel that turns `false` the moment it is lost, the renew deadline passes, or
//! shutdown begins — before the Lease is released.

use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ObjectMeta, PostParams};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use super::leader::{Decision, LeaseRecord, Timings, decide, held_spec, released_spec};

/// Why one attempt to read or write the Lease failed; the loop logs it and retries.
#[derive(Debug, thiserror::Error)]
pub enum ElectorError {
    #[error("{action} Lease {name}: {source}")]
    Api {
        action: &'static str,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("{action} Lease {name}: no answer within {timeout:?}")]
    Timeout {
        action: &'static str,
        name: String,
        timeout: Duration,
    },
}

/// One replica's candidacy for the Lease `name`.
pub struct Elector {
    api: Api<Lease>,
    name: String,
    identity: String,
    timings: Timings,
    leading: watch::Sender<bool>,
    post_params: PostParams,
}

/// What the loop remembers between attempts while it leads.
#[derive(Debug, Clone, Copy)]
struct Term {
    acquired: Timestamp,
    last_renew: Timestamp,
}

/// The result of one attempt that reached the apiserver.
enum Step {
    Done,
    /// Someone else wrote the Lease between our read and write: re-read at once.
    Conflict,
}

impl Elector {
    pub fn new(
        client: kube::Client,
        namespace: &str,
        name: &str,
        identity: &str,
        timings: Timings,
    ) -> Self {
        Self {
            api: Api::namespaced(client, namespace),
            name: name.to_owned(),
            identity: identity.to_owned(),
            timings,
            leading: watch::Sender::new(false),
            post_params: PostParams::default(),
        }
    }

    /// `true` while this replica leads; it turns `false` before any Lease write that gives
    /// leadership up, so reconcilers stop acting first.
    pub fn leadership(&self) -> watch::Receiver<bool> {
        self.leading.subscribe()
    }

    /// Campaigns and renews until `shutdown`, then releases the Lease if it holds it.
    pub async fn run(self, shutdown: CancellationToken) {
        let span =
            tracing::info_span!("leader_election", lease = %self.name, identity = %self.identity);
        self.campaign(shutdown).instrument(span).await;
    }

    async fn campaign(self, shutdown: CancellationToken) {
        let mut term: Option<Term> = None;
        loop {
            let outcome = tokio::select! {
                biased;
                () = shutdown.cancelled() => break,
                outcome = self.attempt(&mut term) => outcome,
            };
            match outcome {
                Ok(Step::Conflict) => {
                    tracing::debug!("Lease changed under us; re-reading");
                    continue;
                }
                Ok(Step::Done) => {}
                Err(err) => tracing::warn!(error = %err, "leader election attempt failed"),
            }
            if let Some(t) = term
                && super::leader::renew_deadline_passed(
                    t.last_renew,
                    Timestamp::now(),
                    &self.timings,
                )
            {
                self.lose(&mut term, "renew deadline passed");
            }
            tokio::select! {
                () = shutdown.cancelled() => break,
                () = tokio::time::sleep(self.timings.retry_period) => {}
            }
        }
        if term.take().is_some() {
            self.leading.send_replace(false);
            if let Err(err) = self.release().await {
                tracing::warn!(error = %err, "could not release the Lease; it expires on its own");
            }
        }
    }

    /// Reads the Lease once and carries out the decision.
    async fn attempt(&self, term: &mut Option<Term>) -> Result<Step, ElectorError> {
        let timeout = self.call_timeout(*term);
        let observed = self
            .call("reading", timeout, self.api.get_opt(&self.name))
            .await?;
        let now = Timestamp::now();
        let record = observed
            .as_ref()
            .map(|lease| LeaseRecord::from_spec(lease.spec.as_ref()));
        let decision = decide(
            record.as_ref(),
            now,
            &self.identity,
            term.map(|t| t.last_renew),
            &self.timings,
        );
        let (acquired, transitions) = match (&decision, &record) {
            (Decision::Create, _) => (now, 0),
            (Decision::Acquire { transitions }, _) => (now, *transitions),
            (Decision::Renew, Some(record)) => (
                term.map(|t| t.acquired)
                    .or_else(|| observed_acquire_time(observed.as_ref()))
                    .unwrap_or(now),
                record.transitions,
            ),
            (Decision::Lost, _) => {
                self.lose(term, "another replica holds the Lease");
                return Ok(Step::Done);
            }
            (Decision::Wait | Decision::Renew, _) => return Ok(Step::Done),
        };
        let spec = held_spec(&self.identity, now, acquired, transitions, &self.timings);
        let written = match observed {
            None => {
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(self.name.clone()),
                        ..ObjectMeta::default()
                    },
                    spec: Some(spec),
                };
                let create = self.api.create(&self.post_params, &lease);
                self.call("creating", timeout, create).await
            }
            Some(mut lease) => {
                // metadata still carries the read resourceVersion: the write is conditional.
                lease.spec = Some(spec);
                let replace = self.api.replace(&self.name, &self.post_params, &lease);
                self.call("updating", timeout, replace).await
            }
        };
        match written {
            Ok(_) => {
                if term.is_none() {
                    tracing::info!(transitions, "became leader");
                }
                *term = Some(Term {
                    acquired,
                    last_renew: now,
                });
                self.leading
                    .send_if_modified(|leading| !std::mem::replace(leading, true));
                Ok(Step::Done)
            }
            Err(ElectorError::Api {
                source: kube::Error::Api(status),
                ..
            }) if status.code == 409 => Ok(Step::Conflict),
            Err(err) => Err(err),
        }
    }

    /// Gives up leadership after a failed election round.
    fn lose(&self, term: &mut Option<Term>, reason: &'static str) {
        if term.take().is_some() {
            self.leading.send_replace(false);
            tracing::warn!(reason, "lost leadership; stopping at once");
        }
    }

    /// Clears the holder so a standby takes over at its next retry instead of waiting for
    /// the lease to expire; a conflicting write means someone else already moved on.
    async fn release(&self) -> Result<(), ElectorError> {
        let timeout = self.timings.renew_deadline;
        let Some(mut lease) = self
            .call("reading", timeout, self.api.get_opt(&self.name))
            .await?
        else {
            return Ok(());
        };
        let record = LeaseRecord::from_spec(lease.spec.as_ref());
        if record.holder.as_deref() != Some(self.identity.as_str()) {
            return Ok(());
        }
        let previous = lease.spec.take().unwrap_or_default();
        lease.spec = Some(released_spec(&previous, Timestamp::now()));
        let replace = self.api.replace(&self.name, &self.post_params, &lease);
        self.call("releasing", timeout, replace).await?;
        tracing::info!("released the Lease");
        Ok(())
    }

    /// While leading, a call may take only what is left of the renew deadline, so a hung
    /// apiserver cannot keep a stale leader acting.
    fn call_timeout(&self, term: Option<Term>) -> Duration {
        let Some(term) = term else {
            return self.timings.renew_deadline;
        };
        let spent = Duration::try_from(Timestamp::now().duration_since(term.last_renew))
            .unwrap_or(Duration::ZERO);
        self.timings
            .renew_deadline
            .saturating_sub(spent)
            .max(Duration::from_millis(1))
    }

    async fn call<T>(
        &self,
        action: &'static str,
        timeout: Duration,
        request: impl Future<Output = kube::Result<T>>,
    ) -> Result<T, ElectorError> {
        match tokio::time::timeout(timeout, request).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(source)) => Err(ElectorError::Api {
                action,
                name: self.name.clone(),
                source,
            }),
            Err(_) => Err(ElectorError::Timeout {
                action,
                name: self.name.clone(),
                timeout,
            }),
        }
    }
}

fn observed_acquire_time(lease: Option<&Lease>) -> Option<Timestamp> {
    lease?.spec.as_ref()?.acquire_time.as_ref().map(|t| t.0)
}

#[cfg(test)]
#[path = "elector_tests.rs"]
mod tests;
