//! A `PodWrites` that records every call in order and answers from a script: which names
//! fail with which status code, which claims and nodes the cache holds, which agents are
//! unreachable. Also a `NewPods` for a toy workload whose pods are `<set>-<id>`, and the
//! one-sync create run and refusal check each pod-set kind's own `NewPods` is tested with.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, PersistentVolumeClaim, Pod, PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use kube::core::Status;
use serde_json::Value;

use super::writes::{ConditionWriteError, NewPod, NewPods, PodWrites, WorkloadEvent};
use super::{ExecuteError, Executor, Problems};
use crate::controller::create_backoff::CreateBackoff;
use crate::controller::expectations::{EXPECTATION_TIMEOUT, Expectations};
use crate::controller::pod_conditions::{ConditionError, ConditionRequest};
use crate::workload::actions::{Create, Plan};
use crate::workload::budget::NoBudgets;
use crate::workload::revision_adapter::CONTROLLER_REVISION_HASH_LABEL;
use crate::workload::selector::SELECTOR_MISMATCH;
use crate::workload::selector_guard::check_template_selected;

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
    PatchClaim {
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

    async fn patch_claim(&self, name: &str, body: Value) -> Result<u64, kube::Error> {
        let write = Write::PatchClaim {
            name: name.to_owned(),
            body,
        };
        self.record(name, write).map(|()| 43)
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

/// A toy workload `set`: pods `<set>-<id>` labelled `app=<set>`, `toy-id=<id>` and
/// `controller-revision-hash=<revision>`, and a claim `data-<set>-<id>` when `claims`;
/// fresh ids count up from `n0`. Knows only the revisions in `revisions`.
pub struct ToyPods {
    pub set: &'static str,
    pub revisions: BTreeSet<&'static str>,
    pub claims: bool,
    pub selector: LabelSelector,
    /// Instance ids the toy's pods and claims hold.
    pub taken: BTreeSet<String>,
}

/// The selector `app=<set>`, which selects every pod of the toy `set`.
pub fn toy_selector(set: &str) -> LabelSelector {
    LabelSelector {
        match_labels: Some(BTreeMap::from([("app".to_owned(), set.to_owned())])),
        ..LabelSelector::default()
    }
}

impl NewPods for ToyPods {
    fn selector(&self) -> &LabelSelector {
        &self.selector
    }

    fn fresh_instance_id(&self, taken: &BTreeSet<String>) -> String {
        (0..)
            .map(|n| format!("n{n}"))
            .find(|id| !taken.contains(id) && !self.taken.contains(id))
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
        let labels = BTreeMap::from([
            ("app".to_owned(), self.set.to_owned()),
            ("toy-id".to_owned(), create.instance_id.clone()),
            (
                CONTROLLER_REVISION_HASH_LABEL.to_owned(),
                create.revision.clone(),
            ),
        ]);
        Some(NewPod {
            pod: Pod {
                metadata: ObjectMeta {
                    labels: Some(labels),
                    ..meta(name)
                },
                ..Pod::default()
            },
            claims,
        })
    }
}

/// One sync's creates of any workload through the executor: `creates` built by
/// `new_pods`, at `generation`, against `writes`, remembering failures in `backoff`.
pub async fn execute_creates<N: NewPods>(
    new_pods: &N,
    writes: &RecordingWrites,
    backoff: &CreateBackoff<&'static str>,
    generation: i64,
    creates: Vec<Create>,
) -> (Result<Option<Duration>, ExecuteError>, Problems) {
    let expectations = Expectations::new(EXPECTATION_TIMEOUT);
    let executor = Executor {
        key: &"default/set",
        generation,
        writes,
        new_pods,
        budgets: &NoBudgets,
        expectations: &expectations,
        create_backoff: backoff,
    };
    let plan = Plan {
        creates,
        ..Plan::default()
    };
    let mut problems = Problems::default();
    let result = executor.execute(&plan, &mut problems).await;
    (result, problems)
}

/// One sync creating `creates` through `new_pods`; a refused create must not fail it.
pub async fn create_in_one_sync<N: NewPods>(
    new_pods: &N,
    creates: Vec<Create>,
) -> (RecordingWrites, Problems) {
    let writes = RecordingWrites::default();
    let backoff = CreateBackoff::default();
    let (result, problems) = execute_creates(new_pods, &writes, &backoff, 1, creates).await;
    result.expect("a refused create is not a sync error");
    (writes, problems)
}

/// For each label a kind's controller sets on its pods (`owned`: the label and the value
/// it sets), a selector requiring it passes the template guard, yet `sync_with_selector`
/// (one sync of a set whose selector and template say `app=web` and `<label>=abc`)
/// creates nothing and reports why.
pub async fn assert_owned_labels_refused<F>(
    owned: &[(&'static str, &'static str)],
    sync_with_selector: impl Fn(Option<&'static str>) -> F,
) where
    F: Future<Output = (RecordingWrites, Problems)>,
{
    for &(label, value) in owned {
        let (selector, template) = selector_and_template(Some(label));
        assert_eq!(
            check_template_selected(&selector, &template),
            Ok(()),
            "{label}: the template guard alone lets it through"
        );
        let (writes, problems) = sync_with_selector(Some(label)).await;
        assert_refused_for_owned_label(&writes, &problems, label, value);
    }
}

/// The sync created nothing (no pod, no claim), and reported a selector that names
/// `label`, which the controller sets to `value` on its pods, once: one Warning event,
/// and the same message for the workload's create-failure condition.
pub fn assert_refused_for_owned_label(
    writes: &RecordingWrites,
    problems: &Problems,
    label: &str,
    value: &str,
) {
    let creates: Vec<Write> = (writes.calls().into_iter())
        .filter(|w| matches!(w, Write::CreatePod(_) | Write::CreateClaim(_)))
        .collect();
    assert_eq!(creates, [], "{label}: nothing is created");
    let events = writes.events();
    let [event] = events.as_slice() else {
        panic!("{label}: one event, got {events:?}");
    };
    assert!(event.warning, "{label}: {event:?}");
    assert_eq!(event.reason, SELECTOR_MISMATCH, "{label}");
    for words in [
        format!("requires {label}=abc"),
        format!("the controller sets {label}={value}"),
        "no pods are created".to_owned(),
    ] {
        assert!(
            event.note.contains(&words),
            "{label}: {:?} lacks {words:?}",
            event.note
        );
    }
    assert_eq!(
        problems.scale.as_ref(),
        Some(&event.note),
        "{label}: the condition"
    );
}

/// A selector and a pod template that both say `app=web`, and `owned=abc` when given: what
/// a person writes who names a label the controller owns in both.
pub fn selector_and_template(owned: Option<&str>) -> (LabelSelector, PodTemplateSpec) {
    let mut labels = BTreeMap::from([("app".to_owned(), "web".to_owned())]);
    if let Some(key) = owned {
        labels.insert(key.to_owned(), "abc".to_owned());
    }
    let selector = LabelSelector {
        match_labels: Some(labels.clone()),
        ..LabelSelector::default()
    };
    let template = PodTemplateSpec {
        metadata: Some(ObjectMeta {
            labels: Some(labels),
            ..ObjectMeta::default()
        }),
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "app".to_owned(),
                image: Some("web:1".to_owned()),
                ..Container::default()
            }],
            ..PodSpec::default()
        }),
    };
    (selector, template)
}

/// The pods the sync created, by name.
pub fn created_pods(writes: &RecordingWrites) -> Vec<String> {
    (writes.calls().into_iter())
        .filter_map(|w| match w {
            Write::CreatePod(name) => Some(name),
            _ => None,
        })
        .collect()
}
