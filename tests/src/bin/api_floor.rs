//! The apiserver floor for the workload benchmarks: the same pod writes the controller makes,
//! issued by a minimal client with no planning, so the controller's figures can be read
//! against what the apiserver (and kwok) alone cost.
//!
//!   api-floor create --namespace NS --node-label K=V --replicas N
//!       creates N pods like a CloneSet's and waits until all are Ready;
//!   api-floor inplace --namespace NS --image IMAGE
//!       for every pod: InPlaceUpdateReady=False (pods/status), then image + state annotation,
//!       waits for the simulated restart, then InPlaceUpdateReady=True and the annotation
//!       removed — the writes of one in-place update, all pods at once.
//!
//!   api-floor tasks --namespace NS --node-label K=V --image IMAGE
//!       creates one task pod pinned to each node with that label (as a BroadcastJob does,
//!       by required node affinity) that kwok runs to success, and waits until all Succeeded.
//!
//!   api-floor daemon --namespace NS --node-label K=V --image IMAGE
//!       creates one running pod pinned to each node with that label (as a DaemonSet does)
//!       and waits until all are Ready;
//!   api-floor daemon-roll --namespace NS --image IMAGE --batch N
//!       replaces those pods N at a time (delete, create with IMAGE, wait Ready) — the
//!       writes of a DaemonSet's recreate rollout with maxUnavailable N.
//!
//!   api-floor roll --namespace NS --image IMAGE --batch N [--count C]
//!       replaces the pods of `create` (the first C by name, or all; delete, create again under a new name with IMAGE for
//!       the scheduler to place), N replacements not yet Ready at any moment — the writes of
//!       a recreate rollout with maxUnavailable N and no surge, in its best order.
//!
//!   api-floor imagelist-entries --node-label K=V --image IMAGE
//!       server-side applies an entry for IMAGE to the ImageList of every node with that
//!       label (a field manager of its own, the UID as a precondition, as an ImagePullJob
//!       writes its entries), then releases them the same way: the writes of one
//!       ImagePullJob at parallelism 100%. With `--always-pull` the entries pull even an
//!       image the node has (a job's `imagePullPolicy: Always`); with `--wait-succeeded`
//!       the release waits until every list reports the image pulled, as the job's does.
//!
//! Prints the elapsed seconds on stdout.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::Parser;
use futures::{StreamExt as _, stream};
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt as _;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::watcher::{self, Event};
use serde_json::json;

#[derive(Parser)]
struct Args {
    #[command(subcommand)]
    command: Command,
    /// Requests in flight at once.
    #[arg(long, default_value_t = 64, global = true)]
    concurrency: usize,
}

#[derive(clap::Subcommand)]
enum Command {
    Create {
        #[arg(long)]
        namespace: String,
        /// The simulated nodes' label, `key=value`.
        #[arg(long)]
        node_label: String,
        #[arg(long)]
        replicas: usize,
        #[arg(long)]
        image: String,
    },
    Inplace {
        #[arg(long)]
        namespace: String,
        #[arg(long)]
        image: String,
    },
    Tasks {
        #[arg(long)]
        namespace: String,
        /// The simulated nodes' label, `key=value`.
        #[arg(long)]
        node_label: String,
        #[arg(long)]
        image: String,
    },
    Daemon {
        #[arg(long)]
        namespace: String,
        /// The simulated nodes' label, `key=value`.
        #[arg(long)]
        node_label: String,
        #[arg(long)]
        image: String,
    },
    Roll {
        #[arg(long)]
        namespace: String,
        #[arg(long)]
        image: String,
        /// Pods replaced at once.
        #[arg(long)]
        batch: usize,
        /// Replace only this many pods (the first by name); all when not given.
        #[arg(long)]
        count: Option<usize>,
    },
    ImagelistEntries {
        /// The simulated nodes' label, `key=value`.
        #[arg(long)]
        node_label: String,
        #[arg(long)]
        image: String,
        /// Entries that pull even an image the node has (`alwaysPull`), as a job with
        /// `imagePullPolicy: Always` writes them.
        #[arg(long)]
        always_pull: bool,
        /// Release only once every list reports the image Succeeded, as a job does.
        #[arg(long)]
        wait_succeeded: bool,
    },
    DaemonRoll {
        #[arg(long)]
        namespace: String,
        #[arg(long)]
        image: String,
        /// Pods replaced at once.
        #[arg(long)]
        batch: usize,
    },
}

const LABEL: &str = "stevedore.dev/api-floor";

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    let client = kube::Client::try_default().await?;
    let started = Instant::now();
    let concurrency = args.concurrency;
    let outcome = match args.command {
        Command::Create {
            namespace,
            node_label,
            replicas,
            image,
        } => {
            create_pods(
                client,
                &namespace,
                &node_label,
                replicas,
                &image,
                concurrency,
            )
            .await
        }
        Command::Inplace { namespace, image } => {
            update_in_place(client, &namespace, &image, concurrency).await
        }
        Command::Tasks {
            namespace,
            node_label,
            image,
        } => run_tasks(client, &namespace, &node_label, &image, concurrency).await,
        Command::Daemon {
            namespace,
            node_label,
            image,
        } => create_daemon_pods(client, &namespace, &node_label, &image, concurrency).await,
        Command::DaemonRoll {
            namespace,
            image,
            batch,
        } => roll_daemon_pods(client, &namespace, &image, batch, concurrency).await,
        Command::Roll {
            namespace,
            image,
            batch,
            count,
        } => roll_pods(client, &namespace, &image, batch, count, concurrency).await,
        Command::ImagelistEntries {
            node_label,
            image,
            always_pull,
            wait_succeeded,
        } => {
            let entries = Entries {
                image: &image,
                always_pull,
                wait_succeeded,
            };
            apply_and_release_imagelist_entries(client, &node_label, &entries, concurrency).await
        }
    };
    outcome?;
    // The one line of output the benchmark script reads.
    let mut out = std::io::stdout().lock();
    writeln!(out, "{:.2}", started.elapsed().as_secs_f64())?;
    Ok(())
}

/// `create`: `replicas` pods like a CloneSet's, then waits until all are Ready.
async fn create_pods(
    client: kube::Client,
    namespace: &str,
    node_label: &str,
    replicas: usize,
    image: &str,
    concurrency: usize,
) -> Result<()> {
    let api: Api<Pod> = Api::namespaced(client, namespace);
    let (key, value) = node_label
        .split_once('=')
        .context("--node-label must be key=value")?;
    let api = Arc::new(api);
    let results: Vec<Result<()>> = stream::iter(0..replicas)
        .map(|i| {
            let api = api.clone();
            let pod: Pod = serde_json::from_value(json!({
                "metadata": { "name": format!("floor-{i:05}"), "labels": { LABEL: "true" } },
                "spec": {
                    "nodeSelector": { key: value },
                    "tolerations": [{ "operator": "Exists" }],
                    "readinessGates": [{ "conditionType": "InPlaceUpdateReady" }],
                    "containers": [{ "name": "web", "image": image }]
                }
            }))
            .expect("valid pod");
            async move {
                api.create(&PostParams::default(), &pod).await?;
                Ok(())
            }
        })
        .buffer_unordered(concurrency)
        .collect()
        .await;
    results.into_iter().collect::<Result<Vec<()>>>()?;
    // Through a watch, not a list per poll: listing 20,000 pods five times a second
    // would load the apiserver the floor is measuring.
    ReadyPods::watch((*api).clone()).until_count(replicas).await
}

/// `inplace`: the writes of one in-place update of every pod, all at once.
async fn update_in_place(
    client: kube::Client,
    namespace: &str,
    image: &str,
    concurrency: usize,
) -> Result<()> {
    let api = Arc::new(Api::<Pod>::namespaced(client, namespace));
    let pods = api
        .list(&ListParams::default().labels(&format!("{LABEL}=true")))
        .await?
        .items;
    let names: Vec<String> = pods.iter().map(|p| p.name_any()).collect();
    let state =
        json!({ "revision": "floor", "updateTimestamp": "2000-01-01T00:00:00Z" }).to_string();
    for_each(&api, &names, concurrency, |api, name| {
        let state = state.clone();
        let image = image.to_owned();
        async move {
            set_condition(&api, &name, "False").await?;
            let patch = json!({
                "metadata": { "annotations": { "apps.kruise.io/inplace-update-state": state } },
                "spec": { "containers": [{ "name": "web", "image": image }] }
            });
            api.patch(&name, &PatchParams::default(), &Patch::Strategic(patch))
                .await?;
            Ok(())
        }
    })
    .await?;
    wait(&api, |pods| {
        pods.iter().all(|p| {
            p.status
                .as_ref()
                .and_then(|s| s.container_statuses.as_ref())
                .and_then(|c| c.first())
                .is_some_and(|c| c.image == image)
        })
    })
    .await?;
    for_each(&api, &names, concurrency, |api, name| async move {
        set_condition(&api, &name, "True").await?;
        let patch = json!({ "metadata": { "annotations": { "apps.kruise.io/inplace-update-state": null } } });
        api.patch(&name, &PatchParams::default(), &Patch::Strategic(patch))
            .await?;
        Ok(())
    })
    .await
}

/// `tasks`: one task pod per labelled node, then waits until all Succeeded.
async fn run_tasks(
    client: kube::Client,
    namespace: &str,
    node_label: &str,
    image: &str,
    concurrency: usize,
) -> Result<()> {
    let nodes = labelled_nodes(client.clone(), node_label).await?;
    let api = Arc::new(Api::<Pod>::namespaced(client, namespace));
    for_each(&api, &nodes, concurrency, |api, node| {
        let pod = task_pod(&node, image);
        async move {
            api.create(&PostParams::default(), &pod?).await?;
            Ok(())
        }
    })
    .await?;
    let want = nodes.len();
    wait(&api, |pods| {
        pods.len() == want && pods.iter().all(|p| phase(p) == Some("Succeeded"))
    })
    .await
}

/// `daemon`: one running pod per labelled node, then waits until all are Ready.
async fn create_daemon_pods(
    client: kube::Client,
    namespace: &str,
    node_label: &str,
    image: &str,
    concurrency: usize,
) -> Result<()> {
    let nodes = labelled_nodes(client.clone(), node_label).await?;
    let api = Arc::new(Api::<Pod>::namespaced(client, namespace));
    for_each(&api, &nodes, concurrency, |api, node| {
        let pod = daemon_pod(&node, image, 1);
        async move {
            api.create(&PostParams::default(), &pod?).await?;
            Ok(())
        }
    })
    .await?;
    let want = nodes.len();
    wait(&api, |pods| {
        pods.len() == want && pods.iter().all(|p| condition(p, "Ready"))
    })
    .await
}

/// `daemon-roll`: replaces the daemon pods `batch` nodes at a time.
async fn roll_daemon_pods(
    client: kube::Client,
    namespace: &str,
    image: &str,
    batch: usize,
    concurrency: usize,
) -> Result<()> {
    let api = Arc::new(Api::<Pod>::namespaced(client, namespace));
    let pods = api
        .list(&ListParams::default().labels(&format!("{LABEL}=true")))
        .await?
        .items;
    let mut nodes: Vec<String> = pods
        .iter()
        .filter_map(|p| p.spec.as_ref()?.node_name.clone())
        .collect();
    nodes.sort();
    for chunk in nodes.chunks(batch.max(1)) {
        replace_daemon_pods(&api, chunk, nodes.len(), image, concurrency).await?;
    }
    Ok(())
}

/// One batch of `daemon-roll`: deletes the pods of `chunk`'s nodes, creates their
/// replacements and waits until those are Ready (and the total is back to `want`).
async fn replace_daemon_pods(
    api: &Arc<Api<Pod>>,
    chunk: &[String],
    want: usize,
    image: &str,
    concurrency: usize,
) -> Result<()> {
    let names: Vec<String> = chunk.iter().map(|n| format!("daemon-{n}-1")).collect();
    for_each(api, &names, concurrency, |api, name| async move {
        api.delete(&name, &kube::api::DeleteParams::default().grace_period(0))
            .await?;
        Ok(())
    })
    .await?;
    for_each(api, chunk, concurrency, |api, node| {
        let pod = daemon_pod(&node, image, 2);
        async move {
            api.create(&PostParams::default(), &pod?).await?;
            Ok(())
        }
    })
    .await?;
    let new: Vec<String> = chunk.iter().map(|n| format!("daemon-{n}-2")).collect();
    wait(api, |pods| {
        let ready_new = (pods.iter())
            .filter(|p| new.contains(&p.name_any()) && condition(p, "Ready"))
            .count();
        ready_new == new.len() && pods.len() == want
    })
    .await
}

/// `roll`: replaces every pod of `create` with one of `image`, at most `batch` replacements
/// not yet Ready at any moment, the next pod started as soon as one of those is Ready (a
/// sliding window, the best order a rollout with maxUnavailable `batch` and no surge can
/// take; a barrier per batch would wait on each batch's slowest pod and be no floor).
async fn roll_pods(
    client: kube::Client,
    namespace: &str,
    image: &str,
    batch: usize,
    count: Option<usize>,
    concurrency: usize,
) -> Result<()> {
    let api = Api::<Pod>::namespaced(client, namespace);
    let mut pods = api
        .list(&ListParams::default().labels(&format!("{LABEL}=true")))
        .await?
        .items;
    pods.sort_by_key(|p| p.name_any());
    pods.truncate(count.unwrap_or(usize::MAX));
    let ready = ReadyPods::watch(api.clone());
    // Requests in flight stay at `concurrency`, as for every other command.
    let requests = Arc::new(tokio::sync::Semaphore::new(concurrency.max(1)));
    let results: Vec<Result<()>> = stream::iter(pods)
        .map(|pod| {
            let (api, ready, requests) = (api.clone(), ready.clone(), requests.clone());
            let replacement = replacement(&pod, image);
            async move {
                let params = kube::api::DeleteParams::default().grace_period(0);
                let permit = requests.acquire().await?;
                api.delete(&pod.name_any(), &params).await?;
                api.create(&PostParams::default(), &replacement).await?;
                drop(permit);
                ready.until_ready(&replacement.name_any()).await
            }
        })
        .buffer_unordered(batch.max(1))
        .collect()
        .await;
    results.into_iter().collect::<Result<Vec<()>>>()?;
    Ok(())
}

/// How long a wait sees no pod become Ready before it reports a stall.
const STALL: Duration = Duration::from_secs(120);

/// The names of the Ready pods of the benchmark's label, kept by a watch (one stream,
/// not a list per waiter), and a signal at each change.
#[derive(Clone)]
struct ReadyPods {
    names: tokio::sync::watch::Receiver<std::collections::BTreeSet<String>>,
}

impl ReadyPods {
    fn watch(api: Api<Pod>) -> Self {
        let (tx, names) = tokio::sync::watch::channel(std::collections::BTreeSet::new());
        let config = watcher::Config::default().labels(&format!("{LABEL}=true"));
        tokio::spawn(async move {
            let events = watcher::watcher(api, config);
            let mut events = std::pin::pin!(events);
            while let Some(event) = events.next().await {
                let Ok(event) = event else { continue };
                tx.send_modify(|ready| match event {
                    Event::Apply(pod) | Event::InitApply(pod) => {
                        if condition(&pod, "Ready") {
                            ready.insert(pod.name_any());
                        } else {
                            ready.remove(&pod.name_any());
                        }
                    }
                    Event::Delete(pod) => {
                        ready.remove(&pod.name_any());
                    }
                    Event::Init | Event::InitDone => {}
                });
            }
        });
        Self { names }
    }

    /// Waits until `want` pods are Ready; fails as stalled when none became Ready for
    /// [`STALL`], saying how many were (a pod the node lifecycle controller marked
    /// NotReady, its kwok node late with a heartbeat, is never made Ready again).
    async fn until_count(mut self, want: usize) -> Result<()> {
        let (mut most, mut stall_at) = (0, tokio::time::Instant::now() + STALL);
        loop {
            let ready = self.names.borrow_and_update().len();
            if ready >= want {
                return Ok(());
            }
            if ready > most {
                (most, stall_at) = (ready, tokio::time::Instant::now() + STALL);
            }
            match tokio::time::timeout_at(stall_at, self.names.changed()).await {
                Ok(changed) => changed.context("the pod watch ended")?,
                Err(_) => bail!(
                    "stalled: {ready} of {want} pods Ready, none more for {} s",
                    STALL.as_secs()
                ),
            }
        }
    }

    async fn until_ready(mut self, name: &str) -> Result<()> {
        let waited = tokio::time::timeout(
            Duration::from_secs(1800),
            self.names.wait_for(|ready| ready.contains(name)),
        );
        waited
            .await
            .with_context(|| format!("{name} not Ready in 30 minutes"))?
            .context("the pod watch ended")?;
        Ok(())
    }
}

/// `pod` as a recreate rollout makes it again: a new name, the new image, no node yet.
fn replacement(pod: &Pod, image: &str) -> Pod {
    let mut spec = pod.spec.clone().unwrap_or_default();
    spec.node_name = None;
    for container in &mut spec.containers {
        container.image = Some(image.to_owned());
    }
    let mut metadata = kube::api::ObjectMeta {
        name: Some(format!("{}-2", pod.name_any())),
        labels: pod.metadata.labels.clone(),
        ..Default::default()
    };
    metadata.annotations = pod.metadata.annotations.clone();
    Pod {
        metadata,
        spec: Some(spec),
        status: None,
    }
}

/// What `imagelist-entries` writes, and whether it waits for the pulls.
struct Entries<'a> {
    image: &'a str,
    always_pull: bool,
    wait_succeeded: bool,
}

/// `imagelist-entries`: applies an entry for the image to every labelled node's ImageList,
/// (with `wait_succeeded`) waits until every list reports it pulled, then releases it, the
/// way an ImagePullJob writes its entries.
async fn apply_and_release_imagelist_entries(
    client: kube::Client,
    node_label: &str,
    entries: &Entries<'_>,
    concurrency: usize,
) -> Result<()> {
    let nodes = labelled_nodes(client.clone(), node_label).await?;
    let gvk = GroupVersionKind::gvk("stevedore.dev", "v1alpha1", "ImageList");
    let resource = ApiResource::from_gvk_with_plural(&gvk, "imagelists");
    let api = Arc::new(Api::<DynamicObject>::all_with(client, &resource));
    let uids: BTreeMap<String, String> = (api.list(&ListParams::default()).await?.items)
        .into_iter()
        .filter(|l| nodes.contains(&l.name_any()))
        .map(|l| (l.name_any(), l.metadata.uid.unwrap_or_default()))
        .collect();
    let names: Vec<String> = uids.keys().cloned().collect();
    for apply in [true, false] {
        let uids = &uids;
        for_each(&api, &names, concurrency, |api, name| async move {
            // The shape of an ImagePullJob's apply body (imagepulljob/entries.rs):
            // the UID refuses a recreated list; no spec releases the entry.
            let mut body = json!({
                "apiVersion": "stevedore.dev/v1alpha1",
                "kind": "ImageList",
                "metadata": { "name": name, "uid": uids[&name] },
            });
            if apply {
                let entry = if entries.always_pull {
                    json!({ "alwaysPull": true })
                } else {
                    json!({})
                };
                body["spec"] = json!({ "images": { entries.image: entry } });
            }
            let params = PatchParams::apply("api-floor").force();
            api.patch(&name, &params, &Patch::Apply(body)).await?;
            Ok(())
        })
        .await?;
        if apply && entries.wait_succeeded {
            let (api, image) = (api.as_ref(), entries.image);
            wait_for(api, watcher::Config::default(), |lists| {
                let pulled = lists
                    .iter()
                    .filter(|l| uids.contains_key(&l.name_any()) && pulled(l, image))
                    .count();
                pulled == uids.len()
            })
            .await?;
        }
    }
    Ok(())
}

/// The list reports `image` Succeeded for its current spec.
fn pulled(list: &DynamicObject, image: &str) -> bool {
    let status = &list.data["status"];
    let generation = list.metadata.generation.unwrap_or(0);
    status["observedGeneration"].as_i64().unwrap_or(0) >= generation
        && status["images"][image]["phase"] == "Succeeded"
}

async fn labelled_nodes(client: kube::Client, label: &str) -> Result<Vec<String>> {
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(client);
    let list = nodes.list(&ListParams::default().labels(label)).await?;
    Ok(list.items.iter().map(|n| n.name_any()).collect())
}

/// A task pod pinned to `node` the way a BroadcastJob pins its pods, which kwok completes.
fn task_pod(node: &str, image: &str) -> Result<Pod> {
    Ok(serde_json::from_value(json!({
        "metadata": {
            "name": format!("task-{node}"),
            "labels": { LABEL: "true" },
            "annotations": { "stevedore.dev/kwok-complete": "true" }
        },
        "spec": {
            "restartPolicy": "Never",
            "tolerations": [{ "operator": "Exists" }],
            "affinity": { "nodeAffinity": { "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{ "matchFields": [{
                    "key": "metadata.name", "operator": "In", "values": [node]
                }] }]
            } } },
            "containers": [{ "name": "task", "image": image }]
        }
    }))?)
}

/// A running pod pinned to `node` the way a DaemonSet pins its pods; `generation` tells a
/// replacement's name from the pod it replaces.
fn daemon_pod(node: &str, image: &str, generation: u32) -> Result<Pod> {
    Ok(serde_json::from_value(json!({
        "metadata": { "name": format!("daemon-{node}-{generation}"), "labels": { LABEL: "true" } },
        "spec": {
            "tolerations": [{ "operator": "Exists" }],
            "terminationGracePeriodSeconds": 0,
            "readinessGates": [{ "conditionType": "InPlaceUpdateReady" }],
            "affinity": { "nodeAffinity": { "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{ "matchFields": [{
                    "key": "metadata.name", "operator": "In", "values": [node]
                }] }]
            } } },
            "containers": [{ "name": "web", "image": image }]
        }
    }))?)
}

fn phase(pod: &Pod) -> Option<&str> {
    pod.status.as_ref()?.phase.as_deref()
}

fn condition(pod: &Pod, type_: &str) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == type_ && c.status == "True"))
}

async fn set_condition(api: &Api<Pod>, name: &str, status: &str) -> Result<()> {
    let patch = json!({ "status": { "conditions": [{
        "type": "InPlaceUpdateReady", "status": status,
        "lastTransitionTime": k8s_openapi::jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
    }] } });
    api.patch_status(name, &PatchParams::default(), &Patch::Strategic(patch))
        .await?;
    Ok(())
}

async fn for_each<K, F, Fut>(
    api: &Arc<Api<K>>,
    names: &[String],
    concurrency: usize,
    f: F,
) -> Result<()>
where
    F: Fn(Arc<Api<K>>, String) -> Fut,
    Fut: Future<Output = Result<()>>,
{
    let results: Vec<Result<()>> = stream::iter(names.iter().cloned())
        .map(|name| f(api.clone(), name))
        .buffer_unordered(concurrency)
        .collect()
        .await;
    results.into_iter().collect()
}

/// Waits until `done` holds for the labelled pods, following them with a watch. A list
/// every 200 ms, as before, had the apiserver serialise every pod five times a second,
/// work the controllers measured against the floor do not cause: the BroadcastJob floor
/// over 500 nodes took 23.3 s against the controller's 21.0 s.
async fn wait(api: &Api<Pod>, done: impl Fn(&[&Pod]) -> bool) -> Result<()> {
    let config = watcher::Config::default().labels(&format!("{LABEL}=true"));
    wait_for(api, config, done).await
}

/// Waits until `done` holds for the objects `config` selects, following them with a watch.
async fn wait_for<K>(
    api: &Api<K>,
    config: watcher::Config,
    done: impl Fn(&[&K]) -> bool,
) -> Result<()>
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(1800);
    let mut events = std::pin::pin!(watcher::watcher(api.clone(), config));
    // `listing` gathers a (re)list; `pods` is the last complete one, kept up to date.
    let (mut pods, mut listing) = (None::<BTreeMap<String, K>>, None);
    loop {
        let event = match tokio::time::timeout_at(deadline, events.next()).await {
            Err(_) => bail!("timed out"),
            Ok(None) => bail!("the watch ended"),
            // The watcher lists and watches again by itself.
            Ok(Some(Err(_))) => continue,
            Ok(Some(Ok(event))) => event,
        };
        match event {
            Event::Init => listing = Some(BTreeMap::new()),
            Event::InitApply(pod) => {
                listing
                    .get_or_insert_with(BTreeMap::new)
                    .insert(pod.name_any(), pod);
            }
            Event::InitDone => pods = Some(listing.take().unwrap_or_default()),
            Event::Apply(pod) => {
                pods.get_or_insert_with(BTreeMap::new)
                    .insert(pod.name_any(), pod);
            }
            Event::Delete(pod) => {
                pods.get_or_insert_with(BTreeMap::new)
                    .remove(&pod.name_any());
            }
        }
        if listing.is_none()
            && let Some(pods) = &pods
            && done(&pods.values().collect::<Vec<_>>())
        {
            return Ok(());
        }
    }
}
