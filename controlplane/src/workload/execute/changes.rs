//! One pod change: readiness conditions through the pod's agent first (so the pod leaves
//! endpoints before its containers restart), then a resize of its containers' resources
//! if any, then one strategic-merge patch.

use serde_json::json;

use super::disruption::Disrupted;
use super::writes::{ConditionWriteError, NewPods, PodWrites, WorkloadEvent};
use super::{ExecuteError, Executor, Problems, WorkloadKey, is_not_found};
use crate::controller::api_error::api_error;
use crate::controller::expectations::Expectation;
use crate::controller::pod_conditions::{ConditionError, ConditionRequest};
use crate::workload::actions::{ChangeReason, PodChange, deep_merge};
use crate::workload::budget::{DisruptionBudgets, DisruptionKind};

impl<K: WorkloadKey, W: PodWrites, N: NewPods, B: DisruptionBudgets> Executor<'_, K, W, N, B> {
    /// Applies `changes`, only the start of an in-place update asking the budgets
    /// ([`Self::admit_then_write`]): a wave of in-place updates costs about one pod's round
    /// trips, not one per pod in turn. Returns whether a budget held a change, and the
    /// first hard error.
    pub(super) async fn apply_changes(
        &self,
        changes: &[PodChange],
        problems: &mut Problems,
    ) -> (bool, Option<ExecuteError>) {
        let write = |change, _evict| async move {
            let mut own = Problems::default();
            let applied = self.apply_admitted(change, &mut own).await;
            (applied.map(|()| Disrupted::Done), own)
        };
        // Only the start of an in-place update makes the pod unavailable.
        let asks = |change: &PodChange| change.reason == ChangeReason::InPlaceStart;
        self.admit_then_write(
            changes,
            DisruptionKind::InPlaceUpdate,
            asks,
            problems,
            write,
        )
        .await
    }

    /// Conditions, then a resize, then the patch of one admitted change; an unreachable
    /// agent leaves the pod as it is and is reported in `problems`, not as an error.
    async fn apply_admitted(
        &self,
        change: &PodChange,
        problems: &mut Problems,
    ) -> Result<(), ExecuteError> {
        let node = change.node.as_deref();
        if !change.conditions.is_empty() {
            let set = node.map(|node| self.set_conditions(change, node));
            if !agent_write_done(set, problems).await {
                return Ok(());
            }
        }
        // A condition just set through the agent moved the pod's resourceVersion, so the
        // precondition only guards changes that set none.
        let mut precondition = change
            .resource_version
            .clone()
            .filter(|_| change.conditions.is_empty());
        if let Some(resize) = &change.resize {
            let Some(resource_version) = self.resize(change, resize, precondition.as_ref()).await?
            else {
                return Ok(()); // the pod is gone
            };
            // The patch that follows builds on the resized pod.
            precondition = precondition.map(|_| resource_version.to_string());
        }
        if !change.agent_restarts.is_empty() {
            let restart = node.map(|node| self.restart_containers(change, node));
            if !agent_write_done(restart, problems).await {
                return Ok(());
            }
        }
        let Some(patch) = &change.patch else {
            return Ok(());
        };
        let body = under_precondition(patch, precondition.as_ref());
        match self.writes.patch_pod(&change.pod, body).await {
            Ok(resource_version) => {
                self.expect_pod_update(change, resource_version);
                if let Some((reason, action, note)) = change.reason.patched_event(&change.pod) {
                    let event = WorkloadEvent::normal(reason, action, note);
                    self.writes.publish(event).await;
                }
                if let Some(failure) = &change.failure {
                    let note = format!("pod {}: {failure}", change.pod);
                    let event = WorkloadEvent::warning("FailedUpdate", "Update", note);
                    self.writes.publish(event).await;
                }
                Ok(())
            }
            Err(err) if is_not_found(&err) => Ok(()),
            Err(err) => Err(
                api_error(format!("patching pod {} ({})", change.pod, change.reason))(err).into(),
            ),
        }
    }

    /// Patches the pod's `resize` subresource (under `precondition` if given); the new
    /// resourceVersion, or `None` when the pod is gone. Before the main patch, so a resize
    /// the apiserver refuses leaves the pod as it was and the sync is retried.
    async fn resize(
        &self,
        change: &PodChange,
        resize: &serde_json::Value,
        precondition: Option<&String>,
    ) -> Result<Option<u64>, ExecuteError> {
        let body = under_precondition(resize, precondition);
        match self.writes.resize_pod(&change.pod, body).await {
            Ok(resource_version) => {
                self.expect_pod_update(change, resource_version);
                Ok(Some(resource_version))
            }
            Err(err) if is_not_found(&err) => Ok(None),
            Err(err) => Err(
                api_error(format!("resizing pod {} ({})", change.pod, change.reason))(err).into(),
            ),
        }
    }

    /// Records that the change's pod was written at `resource_version`: the next sync waits
    /// until the cache shows it.
    fn expect_pod_update(&self, change: &PodChange, resource_version: u64) {
        self.expect(Expectation::Update {
            kind: "Pod",
            name: change.pod.clone(),
            resource_version,
        });
    }

    /// Has `node`'s agent restart the change's containers; at a failure, the message for
    /// the FailedUpdate condition (and a Warning event), and the restart is asked for
    /// again on a later sync (the state still lists the containers).
    async fn restart_containers(&self, change: &PodChange, node: &str) -> Result<(), String> {
        let result = self
            .writes
            .restart_containers(node, &change.pod, &change.uid, &change.agent_restarts)
            .await;
        let err = match result {
            Ok(()) => return Ok(()),
            Err(ConditionWriteError::UnknownNode) => {
                return Err(format!("pod {}: node {node} is not known", change.pod));
            }
            Err(ConditionWriteError::Agent(err)) => err,
        };
        let message = format!(
            "pod {} ({}): the agent on node {node} cannot restart {}: {}",
            change.pod,
            change.reason,
            change.agent_restarts.join(", "),
            err.message
        );
        Err(self.agent_failed(&err, message).await)
    }

    /// Says in a Warning event that an agent refused a write, or could not be reached;
    /// returns `message`, for the FailedUpdate condition.
    async fn agent_failed(&self, err: &ConditionError, message: String) -> String {
        let reason = if err.unreachable {
            "AgentUnreachable"
        } else {
            "AgentRefused"
        };
        let event = WorkloadEvent::warning(reason, "Update", message.clone());
        self.writes.publish(event).await;
        message
    }

    /// Sets the change's conditions on `node`'s agent, in order; at the first that cannot
    /// be set, the message for the FailedUpdate condition (an agent's failure also gets a
    /// Warning event).
    async fn set_conditions(&self, change: &PodChange, node: &str) -> Result<(), String> {
        for condition in &change.conditions {
            let request = ConditionRequest {
                condition_type: condition.condition_type,
                status: condition.status,
                reason: condition.reason,
                message: &condition.message,
            };
            let result = self
                .writes
                .set_condition(node, &change.pod, &change.uid, request)
                .await;
            let err = match result {
                Ok(()) => continue,
                Err(ConditionWriteError::UnknownNode) => {
                    return Err(format!("pod {}: node {node} is not known", change.pod));
                }
                Err(ConditionWriteError::Agent(err)) => err,
            };
            let message = format!(
                "pod {} ({}): cannot set {} through the agent on node {node}: {}",
                change.pod, change.reason, condition.condition_type, err.message
            );
            return Err(self.agent_failed(&err, message).await);
        }
        Ok(())
    }
}

/// The pod write `body` made conditional on the pod still being at `precondition` (the
/// apiserver refuses it with a conflict otherwise), when one is given.
fn under_precondition(
    body: &serde_json::Value,
    precondition: Option<&String>,
) -> serde_json::Value {
    let mut body = body.clone();
    if let Some(rv) = precondition {
        deep_merge(&mut body, json!({ "metadata": { "resourceVersion": rv } }));
    }
    body
}

/// Awaits a change's write through its node's agent; `None`: the pod is not scheduled yet,
/// so the write waits for a node. Whether the change goes on; a failed write's message is
/// kept in `problems` (the FailedUpdate condition) and ends the change for this sync.
async fn agent_write_done(
    write: Option<impl Future<Output = Result<(), String>>>,
    problems: &mut Problems,
) -> bool {
    let Some(write) = write else {
        return false;
    };
    match write.await {
        Ok(()) => true,
        Err(message) => {
            problems.update.get_or_insert(message);
            false
        }
    }
}
