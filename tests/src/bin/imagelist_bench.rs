//! The ImageList fan-out benchmark: one change written to many nodes' ImageLists at once
//! (server-side apply under a field manager of its own), timed until each list's status
//! shows that its agent acknowledged the change and until the pull finished; then the
//! change is taken back and timed the same way.
//!
//!   imagelist-bench fanout (--nodes-label K=V | --node NAME...) --image IMAGE [--rounds R]
//!       per round: add IMAGE to every list, then remove it; one line per step on stdout,
//!       and with several rounds a last line of medians;
//!   imagelist-bench absent --nodes-label K=V --image IMAGE
//!       waits until no list of those nodes names IMAGE in spec or status.
//!
//! When a list counts as *acknowledged*: its `status.observedGeneration` reached the
//! generation our write produced, and `status.images` has the entry (in any phase). The
//! distributor writes that only after the node's agent accepted the new list
//! (`ApplyImageList` returned), so it is the agent's acknowledgement as the API shows it.
//! *Succeeded*: the entry's phase is Succeeded (reported by the agent on its status
//! stream; the distributor writes at most once a second per node). For a removal both
//! mean: `observedGeneration` caught up and the entry is gone from `status.images`.

use std::collections::{BTreeMap, HashMap};
use std::io::Write as _;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use clap::Parser;
use futures::{StreamExt as _, stream};
use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt as _;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams,
};
use kube::runtime::{WatchStreamExt as _, watcher};
use serde_json::json;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

/// The field manager of the benchmark's entries.
const MANAGER: &str = "stevedore-bench";

#[derive(Parser)]
struct Args {
    #[command(subcommand)]
    command: Command,
    /// The nodes: those carrying this label, `key=value`.
    #[arg(long, global = true)]
    nodes_label: Option<String>,
    /// The nodes: these (repeat the flag).
    #[arg(long = "node", global = true)]
    nodes: Vec<String>,
    #[arg(long, global = true)]
    image: Option<String>,
    /// Give up after this many seconds per step.
    #[arg(long, default_value_t = 600, global = true)]
    timeout: u64,
}

#[derive(clap::Subcommand)]
enum Command {
    Fanout {
        #[arg(long, default_value_t = 1)]
        rounds: usize,
        /// Writes in flight at once.
        #[arg(long, default_value_t = 64)]
        concurrency: usize,
    },
    Absent,
}

/// What one watch event said, and when it arrived.
struct Seen {
    at: Instant,
    list: DynamicObject,
}

/// One step (add or remove) of a round: when the writes were sent, when each list
/// acknowledged, when each finished.
struct Step {
    started: Instant,
    writes_done: Instant,
    sent: HashMap<String, Instant>,
    acked: HashMap<String, Instant>,
    done: HashMap<String, Instant>,
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    let client = kube::Client::try_default().await?;
    let image = args.image.clone().context("--image is required")?;
    let timeout = Duration::from_secs(args.timeout);
    let gvk = GroupVersionKind::gvk("stevedore.dev", "v1alpha1", "ImageList");
    let resource = ApiResource::from_gvk_with_plural(&gvk, "imagelists");
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    let names = node_names(client, &args).await?;

    let (mut events, synced, watch) = watch_lists(api.clone());
    synced.await.context("the ImageList watch ended")?;
    let mut latest = first_lists(&mut events, &names, Instant::now() + timeout).await?;
    let uids: BTreeMap<String, String> = names
        .iter()
        .map(|n| (n.clone(), latest[n].uid().unwrap_or_default()))
        .collect();

    let outcome = match args.command {
        Command::Absent => wait_absent(&mut events, &mut latest, &names, &image, timeout).await,
        Command::Fanout {
            rounds,
            concurrency,
        } => {
            let fanout = Fanout {
                api: &api,
                uids: &uids,
                image: &image,
                concurrency,
                timeout,
            };
            fanout.run(&mut events, rounds).await
        }
    };
    // Stopped (and waited for) before the client goes, so that it does not report the
    // client's end as a watch error.
    watch.abort();
    let _ = watch.await;
    outcome
}

/// The nodes the flags name: those listed by `--node` and those carrying `--nodes-label`.
async fn node_names(client: kube::Client, args: &Args) -> Result<Vec<String>> {
    let mut names = args.nodes.clone();
    if let Some(label) = &args.nodes_label {
        let nodes: Api<Node> = Api::all(client);
        let listed = nodes.list(&ListParams::default().labels(label)).await?;
        names.extend(listed.items.iter().map(kube::ResourceExt::name_any));
    }
    names.sort();
    names.dedup();
    ensure!(!names.is_empty(), "no nodes: give --nodes-label or --node");
    Ok(names)
}

/// Follows the watch until every node in `names` has an ImageList; returns the latest
/// version of each list seen.
async fn first_lists(
    events: &mut mpsc::UnboundedReceiver<Seen>,
    names: &[String],
    deadline: Instant,
) -> Result<HashMap<String, DynamicObject>> {
    let mut latest: HashMap<String, DynamicObject> = HashMap::new();
    while !names.iter().all(|n| latest.contains_key(n)) {
        let seen = next(events, deadline).await.with_context(|| {
            let missing: Vec<&String> = names.iter().filter(|n| !latest.contains_key(*n)).collect();
            format!("no ImageList yet for {} nodes: {missing:?}", missing.len())
        })?;
        latest.insert(seen.list.name_any(), seen.list);
    }
    Ok(latest)
}

/// `absent`: waits until no list of `names` names `image` in spec or status, and prints
/// how long that took.
async fn wait_absent(
    events: &mut mpsc::UnboundedReceiver<Seen>,
    latest: &mut HashMap<String, DynamicObject>,
    names: &[String],
    image: &str,
    timeout: Duration,
) -> Result<()> {
    let started = Instant::now();
    let names_image = |list: &DynamicObject| {
        ["spec", "status"]
            .iter()
            .any(|part| list.data[part]["images"].get(image).is_some())
    };
    let deadline = started + timeout;
    while names.iter().any(|n| names_image(&latest[n])) {
        let seen = next(events, deadline).await?;
        latest.insert(seen.list.name_any(), seen.list);
    }
    let mut out = std::io::stdout().lock();
    writeln!(out, "{:.2}", started.elapsed().as_secs_f64())?;
    Ok(())
}

/// `fanout`: what every step of every round writes, and how long it may take.
struct Fanout<'a> {
    api: &'a Api<DynamicObject>,
    uids: &'a BTreeMap<String, String>,
    image: &'a str,
    concurrency: usize,
    timeout: Duration,
}

impl Fanout<'_> {
    /// Runs `rounds` rounds of add then remove, printing one line per step and, with
    /// several rounds, a last line of medians.
    async fn run(&self, events: &mut mpsc::UnboundedReceiver<Seen>, rounds: usize) -> Result<()> {
        let mut out = std::io::stdout().lock();
        let mut medians: [Vec<f64>; 3] = Default::default();
        for round in 1..=rounds {
            for add in [true, false] {
                let step = self.run_step(events, add).await?;
                let line = describe(&step, add, self.uids.len());
                writeln!(out, "round {round}: {line}")?;
                out.flush()?;
                let all_ack = secs(step.started, last(&step.acked));
                if add {
                    medians[0].push(all_ack);
                    medians[1].push(secs(step.started, last(&step.done)));
                } else {
                    medians[2].push(all_ack);
                }
            }
        }
        if rounds > 1 {
            let [add_ack, add_done, remove_ack] = medians.map(|mut v| percentile(&mut v, 0.5));
            writeln!(
                out,
                "median of {rounds} rounds: add acknowledged {add_ack:.2}s, Succeeded {add_done:.2}s; remove acknowledged {remove_ack:.2}s"
            )?;
        }
        Ok(())
    }
}

/// Every ImageList as the watch delivers it, stamped on arrival; the receiver resolves
/// once the initial list is in.
fn watch_lists(
    api: Api<DynamicObject>,
) -> (
    mpsc::UnboundedReceiver<Seen>,
    oneshot::Receiver<()>,
    JoinHandle<()>,
) {
    let (tx, rx) = mpsc::unbounded_channel();
    let (synced_tx, synced_rx) = oneshot::channel();
    let task = tokio::spawn(async move {
        let mut synced = Some(synced_tx);
        let mut stream = watcher(api, watcher::Config::default())
            .default_backoff()
            .boxed();
        while let Some(event) = stream.next().await {
            match event {
                Ok(watcher::Event::Apply(list) | watcher::Event::InitApply(list)) => {
                    if tx
                        .send(Seen {
                            at: Instant::now(),
                            list,
                        })
                        .is_err()
                    {
                        return;
                    }
                }
                Ok(watcher::Event::InitDone) => {
                    if let Some(synced) = synced.take() {
                        let _ = synced.send(());
                    }
                }
                Ok(watcher::Event::Init | watcher::Event::Delete(_)) => {}
                Err(err) => eprintln!("imagelist-bench: ImageList watch: {err}"),
            }
        }
    });
    (rx, synced_rx, task)
}

async fn next(events: &mut mpsc::UnboundedReceiver<Seen>, deadline: Instant) -> Result<Seen> {
    let left = deadline.saturating_duration_since(Instant::now());
    match tokio::time::timeout(left, events.recv()).await {
        Ok(Some(seen)) => Ok(seen),
        Ok(None) => bail!("the ImageList watch ended"),
        Err(_) => bail!("timed out"),
    }
}

impl Fanout<'_> {
    /// Adds (or removes) the image on every list at once and follows the lists until each
    /// acknowledged and finished.
    async fn run_step(
        &self,
        events: &mut mpsc::UnboundedReceiver<Seen>,
        add: bool,
    ) -> Result<Step> {
        // Whatever arrived before this step is older than its writes.
        while events.try_recv().is_ok() {}
        let started = Instant::now();
        let (sent, generations) = self.write_all(add).await?;
        let writes_done = Instant::now();
        let (acked, done) = self.follow(events, &generations, add).await?;
        Ok(Step {
            started,
            writes_done,
            sent,
            acked,
            done,
        })
    }

    /// Applies the entry (or its release) to every list, `concurrency` writes at a time;
    /// returns when each write was sent and the generation it produced.
    async fn write_all(
        &self,
        add: bool,
    ) -> Result<(HashMap<String, Instant>, HashMap<String, i64>)> {
        let params = PatchParams::apply(MANAGER).force();
        let writes: Vec<Result<(String, Instant, i64)>> = stream::iter(self.uids)
            .map(|(name, uid)| {
                let mut body = json!({
                    "apiVersion": "stevedore.dev/v1alpha1",
                    "kind": "ImageList",
                    "metadata": { "name": name, "uid": uid },
                });
                if add {
                    body["spec"] = json!({ "images": { self.image: {} } });
                }
                let params = &params;
                async move {
                    let sent = Instant::now();
                    let written = self
                        .api
                        .patch(name, params, &Patch::Apply(body))
                        .await
                        .with_context(|| format!("writing ImageList {name}"))?;
                    let generation = written.metadata.generation.unwrap_or(0);
                    Ok((name.clone(), sent, generation))
                }
            })
            .buffer_unordered(self.concurrency)
            .collect()
            .await;
        let mut sent = HashMap::new();
        let mut generations = HashMap::new();
        for write in writes {
            let (name, at, generation) = write?;
            sent.insert(name.clone(), at);
            generations.insert(name, generation);
        }
        Ok((sent, generations))
    }

    /// Follows the watch until every list written finished; returns when each list
    /// acknowledged the write and when it finished.
    async fn follow(
        &self,
        events: &mut mpsc::UnboundedReceiver<Seen>,
        generations: &HashMap<String, i64>,
        add: bool,
    ) -> Result<(HashMap<String, Instant>, HashMap<String, Instant>)> {
        let mut acked: HashMap<String, Instant> = HashMap::new();
        let mut done: HashMap<String, Instant> = HashMap::new();
        let deadline = Instant::now() + self.timeout;
        while done.len() < self.uids.len() {
            let seen = next(events, deadline).await.with_context(|| {
                let waiting: Vec<&String> = self
                    .uids
                    .keys()
                    .filter(|n| !done.contains_key(*n))
                    .collect();
                format!(
                    "{} lists not finished (acknowledged {} of {}): {waiting:?}",
                    waiting.len(),
                    acked.len(),
                    self.uids.len()
                )
            })?;
            let name = seen.list.name_any();
            let Some(&generation) = generations.get(&name) else {
                continue;
            };
            let (is_acked, is_done) = progress(&seen.list, generation, self.image, add);
            if is_acked {
                acked.entry(name.clone()).or_insert(seen.at);
            }
            if is_done {
                done.entry(name).or_insert(seen.at);
            }
        }
        Ok((acked, done))
    }
}

/// Whether `list` acknowledged the write that produced `generation`, and whether it
/// finished it (see the module comment).
fn progress(list: &DynamicObject, generation: i64, image: &str, add: bool) -> (bool, bool) {
    let status = &list.data["status"];
    let observed = status["observedGeneration"].as_i64().unwrap_or(0);
    if observed < generation {
        return (false, false);
    }
    match status["images"].get(image) {
        Some(entry) if add => (true, entry["phase"] == "Succeeded"),
        Some(_) => (false, false),
        None => (!add, !add),
    }
}

fn describe(step: &Step, add: bool, lists: usize) -> String {
    let per_list = |at: &HashMap<String, Instant>| {
        let mut latencies: Vec<f64> = at
            .iter()
            .map(|(name, at)| secs(step.sent[name], *at))
            .collect();
        format!(
            "all {:.2}s, per list p50 {:.2}s p90 {:.2}s max {:.2}s",
            secs(step.started, last(at)),
            percentile(&mut latencies, 0.5),
            percentile(&mut latencies, 0.9),
            percentile(&mut latencies, 1.0),
        )
    };
    let writes = secs(step.started, step.writes_done);
    if add {
        format!(
            "add    {lists} lists, writes {writes:.2}s | acknowledged: {} | Succeeded: {}",
            per_list(&step.acked),
            per_list(&step.done)
        )
    } else {
        format!(
            "remove {lists} lists, writes {writes:.2}s | acknowledged (entry gone): {}",
            per_list(&step.acked)
        )
    }
}

fn last(at: &HashMap<String, Instant>) -> Instant {
    at.values().copied().max().unwrap_or_else(Instant::now)
}

fn secs(from: Instant, to: Instant) -> f64 {
    to.saturating_duration_since(from).as_secs_f64()
}

/// The `q` quantile (nearest rank) of `values`; 0 when empty.
fn percentile(values: &mut [f64], q: f64) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    values.sort_by(f64::total_cmp);
    let rank = (q * values.len() as f64).ceil() as usize;
    values[rank.clamp(1, values.len()) - 1]
}
