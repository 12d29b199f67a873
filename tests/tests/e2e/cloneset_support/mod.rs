//! Shared by the CloneSet e2e suites: manifests of the web CloneSet, apply and wait
//! helpers, the set's Events, and a recorder of every version of every object a watch saw.

#![allow(dead_code, reason = "each suite uses its own subset of these helpers")]

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use futures::StreamExt as _;
use k8s_openapi::api::core::v1::{Event, PersistentVolumeClaim, Pod};
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::runtime::watcher;
use kube::{Resource, ResourceExt as _};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use stevedore_api::CloneSet;
use stevedore_tests::{TestContext, poll_until};
use tokio::task::JoinHandle;

/// Long enough for the kubelet to pull and start the web image on the real node.
pub const ROLLOUT: Duration = Duration::from_secs(240);
pub const INSTANCE_ID_LABEL: &str = "apps.kruise.io/cloneset-instance-id";
pub const STATE_ANNOTATION: &str = "apps.kruise.io/inplace-update-state";
pub const INPLACE_UPDATE_READY: &str = "InPlaceUpdateReady";

/// Whether an in-place update of the pod is still under way: a grace period runs, or the
/// state annotation records an update whose end the controller has not recorded. The
/// annotation stays after the update, as OpenKruise keeps it, so its presence alone says
/// nothing.
pub fn in_place_update_pending(pod: &Pod) -> bool {
    use stevedore_controlplane::workload::inplace::{GRACE_ANNOTATION, update_in_progress};
    let Some(annotations) = pod.metadata.annotations.as_ref() else {
        return false;
    };
    annotations.contains_key(GRACE_ANNOTATION)
        || annotations
            .get(STATE_ANNOTATION)
            .is_some_and(|s| update_in_progress(s))
}

/// Where the pods of a CloneSet run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Nodes {
    /// The node with the real kubelet and the agent (`type` NotIn `kwok`).
    Kubelet,
    /// The simulated nodes (`type=kwok`, tolerating their taint).
    Kwok,
}

/// The web CloneSet: `replicas` pods of `web:v1` with one 1Mi claim each (`data`,
/// mounted at /data), updated by `policy` one pod at a time.
pub fn web_cloneset(
    ctx: &TestContext,
    name: &str,
    replicas: i32,
    policy: &str,
    nodes: Nodes,
) -> Value {
    let mut pod_spec = json!({
        "terminationGracePeriodSeconds": 1,
        "containers": [{
            "name": "web",
            "image": ctx.cluster.image("web:v1"),
            "ports": [{ "name": "http", "containerPort": 8080 }],
            "readinessProbe": {
                "httpGet": { "path": "/version", "port": "http" },
                "periodSeconds": 2,
            },
            "volumeMounts": [{ "name": "data", "mountPath": "/data" }],
        }],
    });
    match nodes {
        Nodes::Kubelet => {
            pod_spec["affinity"] = json!({ "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": { "nodeSelectorTerms": [
                    { "matchExpressions": [{ "key": "type", "operator": "NotIn", "values": ["kwok"] }] }
                ] }
            } });
        }
        Nodes::Kwok => {
            pod_spec["nodeSelector"] = json!({ "type": "kwok" });
            pod_spec["tolerations"] = json!([{
                "key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"
            }]);
        }
    }
    json!({
        "apiVersion": "apps.kruise.io/v1alpha1",
        "kind": "CloneSet",
        "metadata": { "name": name, "namespace": ctx.namespace },
        "spec": {
            "replicas": replicas,
            "selector": { "matchLabels": { "app": name } },
            "updateStrategy": { "type": policy, "maxUnavailable": 1 },
            "template": {
                "metadata": { "labels": { "app": name } },
                "spec": pod_spec,
            },
            "volumeClaimTemplates": [{
                "metadata": { "name": "data" },
                "spec": {
                    "accessModes": ["ReadWriteOnce"],
                    "resources": { "requests": { "storage": "1Mi" } },
                },
            }],
        },
    })
}

/// A CloneSet `web` of `replicas` pods of `web:v1` on the simulated nodes `prefix-*`
/// (`deploy/local/sim-agents.sh`, where each node has its own agent), spread evenly over
/// them, updated by `update_strategy`.
pub fn sim_cloneset(
    ctx: &TestContext,
    prefix: &str,
    replicas: i32,
    update_strategy: Value,
) -> Value {
    json!({
        "apiVersion": "apps.kruise.io/v1alpha1",
        "kind": "CloneSet",
        "metadata": { "name": "web", "namespace": ctx.namespace },
        "spec": {
            "replicas": replicas,
            "selector": { "matchLabels": { "app": "web" } },
            "updateStrategy": update_strategy,
            "template": {
                "metadata": { "labels": { "app": "web" } },
                "spec": {
                    "nodeSelector": { "stevedore.dev/simulated": prefix },
                    "topologySpreadConstraints": [{
                        "maxSkew": 1,
                        "topologyKey": "kubernetes.io/hostname",
                        "whenUnsatisfiable": "DoNotSchedule",
                        "labelSelector": { "matchLabels": { "app": "web" } }
                    }],
                    "tolerations": [
                        { "key": "kwok.x-k8s.io/node", "operator": "Exists" },
                        { "key": "stevedore.dev/simulated", "operator": "Exists" }
                    ],
                    "containers": [{ "name": "web", "image": ctx.cluster.image("web:v1") }]
                }
            }
        }
    })
}

/// The image of the pod's first container.
pub fn image_of(pod: &Pod) -> &str {
    pod.spec
        .as_ref()
        .and_then(|s| s.containers.first())
        .and_then(|c| c.image.as_deref())
        .unwrap_or_default()
}

/// The node the pod is bound to ("" before scheduling).
pub fn node_of(pod: &Pod) -> &str {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .unwrap_or_default()
}

/// Server-side applies `object` (a CloneSet) as the test's field manager.
pub async fn apply(ctx: &TestContext, object: &Value) -> Result<CloneSet> {
    let name = object["metadata"]["name"]
        .as_str()
        .context("object has a name")?;
    let pp = PatchParams::apply("stevedore-tests").force();
    Ok(ctx
        .api::<CloneSet>()
        .patch(name, &pp, &Patch::Apply(object))
        .await?)
}

/// A JSON patch on the CloneSet, e.g. one `replace` of the first container's image.
pub async fn json_patch(ctx: &TestContext, name: &str, ops: Value) -> Result<CloneSet> {
    let patch: json_patch::Patch = serde_json::from_value(ops)?;
    Ok(ctx
        .api::<CloneSet>()
        .patch(name, &PatchParams::default(), &Patch::Json::<()>(patch))
        .await?)
}

/// Replaces the image of the first container.
pub async fn set_image(ctx: &TestContext, name: &str, image: &str) -> Result<CloneSet> {
    json_patch(
        ctx,
        name,
        json!([{ "op": "replace", "path": "/spec/template/spec/containers/0/image", "value": image }]),
    )
    .await
}

/// Waits until the set observed its latest spec and all `replicas` pods are updated and
/// ready, with no other pod left; returns the set.
pub async fn wait_rolled_out(ctx: &TestContext, name: &str, timeout: Duration) -> Result<CloneSet> {
    let what = format!("CloneSet {name} to be rolled out and ready");
    poll_until(&what, timeout, || async {
        let cs = ctx.api::<CloneSet>().get(name).await?;
        let want = cs.spec.replicas.unwrap_or(1);
        let generation = cs.metadata.generation.unwrap_or(0);
        let Some(status) = cs.status.clone() else {
            bail!("no status yet");
        };
        let pods = pods_of(ctx, name).await?;
        let done = status.observed_generation == generation
            && status.replicas == want
            && status.ready_replicas == want
            && status.updated_replicas == want
            && status.updated_ready_replicas == want
            && status.current_revision == status.update_revision
            && pods.len() == usize::try_from(want).unwrap_or(0);
        if done {
            Ok(Some(cs))
        } else {
            bail!("status {status:?}, {} pods", pods.len())
        }
    })
    .await
}

/// The set's pods (by its `app` label), terminating ones included, sorted by name.
pub async fn pods_of(ctx: &TestContext, name: &str) -> Result<Vec<Pod>> {
    let lp = ListParams::default().labels(&format!("app={name}"));
    let mut pods = ctx.api::<Pod>().list(&lp).await?.items;
    pods.sort_by_key(|p| p.name_any());
    Ok(pods)
}

/// The claims in the test namespace, by name.
pub async fn pvcs(ctx: &TestContext) -> Result<BTreeMap<String, PersistentVolumeClaim>> {
    let list = ctx
        .api::<PersistentVolumeClaim>()
        .list(&ListParams::default())
        .await?;
    Ok(list.items.into_iter().map(|p| (p.name_any(), p)).collect())
}

pub fn is_bound(pvc: &PersistentVolumeClaim) -> bool {
    pvc.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound")
}

pub fn instance_id(pod: &Pod) -> Option<&str> {
    pod.labels().get(INSTANCE_ID_LABEL).map(String::as_str)
}

pub fn uid(object: &impl Resource) -> String {
    object.meta().uid.clone().unwrap_or_default()
}

/// One Event about the CloneSet.
#[derive(Clone, Debug)]
pub struct SetEvent {
    pub type_: String,
    pub reason: String,
    pub message: String,
}

/// The Events whose object is the CloneSet `name` (core/v1 view of events.k8s.io Events).
pub async fn events_of(ctx: &TestContext, name: &str) -> Result<Vec<SetEvent>> {
    let lp = ListParams::default().fields(&format!(
        "involvedObject.kind=CloneSet,involvedObject.name={name}"
    ));
    let events = ctx.api::<Event>().list(&lp).await?.items;
    Ok(events
        .into_iter()
        .map(|e| SetEvent {
            type_: e.type_.unwrap_or_default(),
            reason: e.reason.unwrap_or_default(),
            message: e.message.unwrap_or_default(),
        })
        .collect())
}

/// Waits for an Event on the set with `reason` whose message contains `words`.
pub async fn wait_event(
    ctx: &TestContext,
    name: &str,
    reason: &str,
    words: &[&str],
) -> Result<SetEvent> {
    let what = format!("an Event {reason} on {name} naming {words:?}");
    poll_until(&what, Duration::from_secs(60), || async {
        let events = events_of(ctx, name).await?;
        let found = events
            .iter()
            .find(|e| e.reason == reason && words.iter().all(|w| e.message.contains(w)));
        match found {
            Some(event) => Ok(Some(event.clone())),
            None => bail!("events: {events:?}"),
        }
    })
    .await
}

/// One observation of a watch: the object as it was, or its deletion.
#[derive(Clone, Debug)]
pub struct Seen<K> {
    pub deleted: bool,
    pub object: K,
    /// When the watch delivered it.
    pub at: Instant,
}

/// Records every version of every object of kind `K` in the namespace, from the moment it
/// is started, in the order the watch delivered them.
pub struct Recorder<K> {
    history: Arc<Mutex<Vec<Seen<K>>>>,
    task: JoinHandle<()>,
}

impl<K> Recorder<K>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + Debug
        + DeserializeOwned
        + Send
        + Sync
        + 'static,
    K::DynamicType: Default,
{
    /// Starts watching and returns once the initial list is in.
    pub async fn start(ctx: &TestContext) -> Result<Self> {
        let history = Arc::new(Mutex::new(Vec::new()));
        let (synced_tx, synced_rx) = tokio::sync::oneshot::channel();
        let api: Api<K> = ctx.api();
        let sink = history.clone();
        let task = tokio::spawn(async move {
            let mut synced = Some(synced_tx);
            let mut events = watcher(api, watcher::Config::default()).boxed();
            while let Some(event) = events.next().await {
                let seen = match event {
                    Ok(watcher::Event::Apply(object) | watcher::Event::InitApply(object)) => Seen {
                        deleted: false,
                        object,
                        at: Instant::now(),
                    },
                    Ok(watcher::Event::Delete(object)) => Seen {
                        deleted: true,
                        object,
                        at: Instant::now(),
                    },
                    Ok(watcher::Event::InitDone) => {
                        if let Some(tx) = synced.take() {
                            let _ = tx.send(());
                        }
                        continue;
                    }
                    Ok(watcher::Event::Init) | Err(_) => continue,
                };
                if let Ok(mut history) = sink.lock() {
                    history.push(seen);
                }
            }
        });
        tokio::time::timeout(Duration::from_secs(30), synced_rx)
            .await
            .context("the watch did not list in time")??;
        Ok(Self { history, task })
    }

    /// Everything seen so far.
    pub fn history(&self) -> Vec<Seen<K>> {
        self.history.lock().map(|h| h.clone()).unwrap_or_default()
    }
}

impl<K> Drop for Recorder<K> {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The `(status, reason)` of condition `type_` on a pod.
pub fn condition_with_reason(pod: &Pod, type_: &str) -> Option<(String, String)> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.clone(), c.reason.clone().unwrap_or_default()))
}

/// A value of a pod condition and when the watch first saw it.
#[derive(Clone, Debug)]
pub struct Transition {
    pub status: String,
    pub reason: String,
    pub at: Instant,
}

/// Per pod UID, the successive distinct values of `(status, reason)` of `type_` in a
/// pod history.
pub fn condition_transitions(
    history: &[Seen<Pod>],
    type_: &str,
) -> BTreeMap<String, Vec<Transition>> {
    let mut transitions: BTreeMap<String, Vec<Transition>> = BTreeMap::new();
    for seen in history {
        let Some((status, reason)) = condition_with_reason(&seen.object, type_) else {
            continue;
        };
        let list = transitions.entry(uid(&seen.object)).or_default();
        if list
            .last()
            .is_none_or(|t| t.status != status || t.reason != reason)
        {
            list.push(Transition {
                status,
                reason,
                at: seen.at,
            });
        }
    }
    transitions
}
