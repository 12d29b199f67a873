//! A `PodWrites` that records every call in order and answers from a script: which names
//! fail with which status code, which claims and nodes the cache holds, which agents are
//! unreachable. Also a `NewPods` for a toy workload whose pods are `<set>-<id>`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::core::Status;
use serde_json::Value;

use super::writes::{ConditionWriteError, NewPod, NewPods, PodWrites, WorkloadEvent};
use crate::controller::pod_conditions::{ConditionError, ConditionRequest};
use crate::workload::actions::Create;

/// One call the executor made.
#[derive(Clone, Debug, PartialEq)]
pub enum Write {
    CreatePod(String),
    CreateClaim(String),
    DeletePod {
        name: String,
        uid: String,
    },
    EvictPod {
        name: String,
        uid: String,
    },
    DeleteClaim {
        name: String,
        uid: String,
    },
    PatchPod {
        name: String,
        body: Value,
    },
    ResizePod {
        name: String,
        body: Value,
    },
    SetCondition {
        node: String,
        pod: String,
        condition: String,
        status: bool,
    },
    RestartContainers {
        node: String,
        pod: String,
        containers: Vec<String>,
    },
    Event(WorkloadEvent),
}

/// The script and the record.
#[derive(Default)]
pub struct RecordingWrites {
    /// Object name → the status code its write fails with.
    pub failures: BTreeMap<String, u16>,
    /// Claims in the cache: name → UID.
    pub cached_claims: BTreeMap<String, String>,
    /// Nodes in the cache.
    pub nodes: BTreeSet<String>,
    /// Nodes whose agent cannot be reached.
    pub unreachable: BTreeSet<String>,
    /// How long each pod patch and condition write takes (tests run on paused time).
    pub latency: std::time::Duration,
    pub written: Mutex<Vec<Write>>,
}

impl RecordingWrites {
    pub fn writes(&self) -> Vec<Write> {
        self.written.lock().expect("lock").clone()
    }

    pub fn events(&self) -> Vec<WorkloadEvent> {
        self.writes()
            .into_iter()
            .filter_map(|w| match w {
                Write::Event(e) => Some(e),
                _ => None,
            })
            .collect()
    }

    /// The writes other than events.
    pub fn calls(&self) -> Vec<Write> {
        self.writes()
            .into_iter()
            .filter(|w| !matches!(w, Write::Event(_)))
            .collect()
    }

    fn record(&self, name: &str, write: Write) -> Result<(), kube::Error> {
        self.written.lock().expect("lock").push(write);
        match self.failures.get(name) {
            Some(&code) => Err(kube::Error::Api(
                Status::failure(&format!("{name} refused with {code}"), "Refused")
                    .with_code(code)
                    .boxed(),
            )),
            None => Ok(()),
        }
    }
}

fn name_of(meta: &ObjectMeta) -> String {
    meta.name.clone().unwrap_or_default()
}

impl PodWrites for RecordingWrites {
    async fn create_pod(&self, pod: &Pod) -> Result<(), kube::Error> {
        let name = name_of(&pod.metadata);
        self.record(&name, Write::CreatePod(name.clone()))
    }

    async fn create_claim(&self, claim: &PersistentVolumeClaim) -> Result<(), kube::Error> {
        let name = name_of(&claim.metadata);
        self.record(&name, Write::CreateClaim(name.clone()))
    }

    async fn delete_pod(&self, name: &str, uid: &str) -> Result<(), kube::Error> {
        let write = Write::DeletePod {
            name: name.to_owned(),
            uid: uid.to_owned(),
        };
        self.record(name, write)
    }

    async fn evict_pod(&self, name: &str, uid: &str) -> Result<(), kube::Error> {
        let write = Write::EvictPod {
            name: name.to_owned(),
            uid: uid.to_owned(),
        };
        self.record(name, write)
    }

    async fn delete_claim(&self, name: &str, uid: &str) -> Result<(), kube::Error> {
        let write = Write::DeleteClaim {
            name: name.to_owned(),
            uid: uid.to_owned(),
        };
        self.record(name, write)
    }

    async fn patch_pod(&self, name: &str, body: Value) -> Result<u64, kube::Error> {
        let write = Write::PatchPod {
            name: name.to_owned(),
            body,
        };
        let recorded = self.record(name, write);
        tokio::time::sleep(self.latency).await;
        recorded.map(|()| 42)
    }

    async fn resize_pod(&self, name: &str, body: Value) -> Result<u64, kube::Error> {
        let write = Write::ResizePod {
            name: name.to_owned(),
            body,
        };
        self.record(&format!("{name}/resize"), write).map(|()| 41)
    }

    async fn set_condition(
        &self,
        node: &str,
        pod: &str,
        _uid: &str,
        request: ConditionRequest<'_>,
    ) -> Result<(), ConditionWriteError> {
        if !self.nodes.contains(node) {
            return Err(ConditionWriteError::UnknownNode);
        }
        self.written
            .lock()
            .expect("lock")
            .push(Write::SetCondition {
                node: node.to_owned(),
                pod: pod.to_owned(),
                condition: request.condition_type.to_owned(),
                status: request.status,
            });
        tokio::time::sleep(self.latency).await;
        if self.unreachable.contains(node) {
            return Err(ConditionWriteError::Agent(ConditionError {
                unreachable: true,
                message: "connection refused".to_owned(),
            }));
        }
        Ok(())
    }

    async fn restart_containers(
        &self,
        node: &str,
        pod: &str,
        _uid: &str,
        containers: &[String],
    ) -> Result<(), ConditionWriteError> {
        if !self.nodes.contains(node) {
            return Err(ConditionWriteError::UnknownNode);
        }
        self.written
            .lock()
            .expect("lock")
            .push(Write::RestartContainers {
                node: node.to_owned(),
                pod: pod.to_owned(),
                containers: containers.to_vec(),
            });
        if self.unreachable.contains(node) {
            return Err(ConditionWriteError::Agent(ConditionError {
                unreachable: true,
                message: "connection refused".to_owned(),
            }));
        }
        Ok(())
    }

    async fn publish(&self, event: WorkloadEvent) {
        self.written.lock().expect("lock").push(Write::Event(event));
    }

    fn cached_claim_uid(&self, name: &str) -> Option<String> {
        self.cached_claims.get(name).cloned()
    }
}

/// A toy workload `set`: pods `<set>-<id>`, and a claim `data-<set>-<id>` when `claims`;
/// fresh ids count up from `n0`. Knows only the revisions in `revisions`.
pub struct ToyPods {
    pub set: &'static str,
    pub revisions: BTreeSet<&'static str>,
    pub claims: bool,
}

impl NewPods for ToyPods {
    fn fresh_instance_id(&self, taken: &BTreeSet<String>) -> String {
        (0..)
            .map(|n| format!("n{n}"))
            .find(|id| !taken.contains(id))
            .expect("an unused id")
    }

    fn new_pod(&self, create: &Create) -> Option<NewPod> {
        if !self.revisions.contains(create.revision.as_str()) {
            return None;
        }
        let name = format!("{}-{}", self.set, create.instance_id);
        let meta = |name: String| ObjectMeta {
            name: Some(name),
            ..ObjectMeta::default()
        };
        let claims = if self.claims {
            vec![PersistentVolumeClaim {
                metadata: meta(format!("data-{name}")),
                ..PersistentVolumeClaim::default()
            }]
        } else {
            Vec::new()
        };
        Some(NewPod {
            pod: Pod {
                metadata: meta(name),
                ..Pod::default()
            },
            claims,
        })
    }
}
