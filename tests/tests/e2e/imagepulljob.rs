//! The ImagePullJob controller of the running (in-cluster) control plane against the
//! real apiserver: the test creates kwok Nodes and their ImageLists itself, and plays the
//! agents by writing ImageList status (the nodes have no agents, so the distributor's
//! pushes to them fail and change no phase). Checks parallelism, completion, status
//! counts, TTL, the deadline, nodes added later under completion policy Never, and that a
//! person's entries and the job's coexist and deleting the job removes only its own.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt as _;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use stevedore_api::imagelist::ImagePullPhase;
use stevedore_api::{ImageList, ImagePullJob};
use stevedore_controlplane::imagepulljob::entries::field_manager;
use stevedore_tests::test_nodes::{self, TestNode};
use stevedore_tests::{TestContext, poll_until, run_in_namespace};

const IMAGE: &str = "127.0.0.1:5000/stevedore/ipj-test:v1";
const PERSON_IMAGE: &str = "127.0.0.1:5000/stevedore/person:v1";

fn node_name(ctx: &TestContext, i: usize) -> String {
    format!("{}-node-{i}", ctx.namespace)
}

/// A kwok Node of this test (`test_nodes`), Ready, and its ImageList (owned by the Node).
async fn add_node(ctx: &TestContext, i: usize) -> Result<String> {
    let name = node_name(ctx, i);
    let node = test_nodes::create(ctx, &name, TestNode::default()).await?;
    let list: ImageList = serde_json::from_value(json!({
        "apiVersion": "stevedore.dev/v1alpha1",
        "kind": "ImageList",
        "metadata": {
            "name": name,
            "ownerReferences": [{
                "apiVersion": "v1", "kind": "Node", "name": name,
                "uid": node.uid().unwrap_or_default(),
            }],
        },
        "spec": {},
    }))?;
    match lists(ctx).create(&PostParams::default(), &list).await {
        // A distributor, if one runs, may have created it first.
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.code == 409 => {}
        Err(err) => return Err(err.into()),
    }
    Ok(name)
}

async fn remove_nodes(ctx: &TestContext, count: usize) {
    let nodes: Api<Node> = Api::all(ctx.client.clone());
    for i in 0..count {
        let name = node_name(ctx, i);
        let _ = lists(ctx).delete(&name, &DeleteParams::default()).await;
        let _ = nodes.delete(&name, &DeleteParams::default()).await;
    }
}

fn lists(ctx: &TestContext) -> Api<ImageList> {
    Api::all(ctx.client.clone())
}

fn jobs(ctx: &TestContext) -> Api<ImagePullJob> {
    ctx.api()
}

async fn create_job(ctx: &TestContext, name: &str, spec: Value) -> Result<ImagePullJob> {
    let mut spec = spec;
    spec["image"] = json!(IMAGE);
    spec["selector"] = json!({ "matchLabels": test_nodes::node_selector(ctx) });
    let job: ImagePullJob = serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1alpha1",
        "kind": "ImagePullJob",
        "metadata": { "name": name },
        "spec": spec,
    }))?;
    Ok(jobs(ctx).create(&PostParams::default(), &job).await?)
}

/// Plays the agent of `node`: reports `IMAGE` in `phase`, for the current spec.
async fn report(ctx: &TestContext, node: &str, phase: ImagePullPhase) -> Result<()> {
    let list = lists(ctx).get(node).await?;
    let patch = json!({ "status": {
        "observedGeneration": list.metadata.generation.unwrap_or(0),
        "images": { IMAGE: {
            "phase": phase,
            "imageID": "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
            "lastPullTime": Timestamp::now().to_string(),
            "message": if phase == ImagePullPhase::Failed { "simulated failure" } else { "" },
        } },
    } });
    lists(ctx)
        .patch_status(node, &PatchParams::default(), &Patch::Merge(patch))
        .await?;
    Ok(())
}

/// Per node: whether its spec has the job's image, and its reported phase of it.
async fn observe(
    ctx: &TestContext,
    nodes: &[String],
) -> Result<BTreeMap<String, (bool, Option<ImagePullPhase>)>> {
    let mut seen = BTreeMap::new();
    for node in nodes {
        let list = lists(ctx).get(node).await?;
        let has = list.spec.images.contains_key(IMAGE);
        let phase = list
            .status
            .as_ref()
            .and_then(|s| s.images.get(IMAGE))
            .map(|s| s.phase);
        seen.insert(node.clone(), (has, phase));
    }
    Ok(seen)
}

async fn job_status(ctx: &TestContext, name: &str) -> Result<ImagePullJob> {
    Ok(jobs(ctx).get(name).await?)
}

/// Runs `body` with `count` test nodes, removing them and the test's jobs after.
async fn with_nodes<F, Fut>(ctx: TestContext, count: usize, body: F) -> Result<()>
where
    F: FnOnce(TestContext, Vec<String>) -> Fut,
    Fut: std::future::Future<Output = Result<()>>,
{
    let mut nodes = Vec::new();
    let mut result = Ok(());
    for i in 0..count {
        match add_node(&ctx, i).await {
            Ok(name) => nodes.push(name),
            Err(err) => {
                result = Err(err);
                break;
            }
        }
    }
    if result.is_ok() {
        result = body(ctx.clone(), nodes).await;
    }
    // Jobs first, so the controller releases their entries while the nodes are there.
    if let Ok(list) = jobs(&ctx).list(&Default::default()).await {
        for job in list {
            let _ = jobs(&ctx)
                .delete(&job.name_any(), &DeleteParams::default())
                .await;
        }
    }
    let _ = poll_until("test jobs gone", Duration::from_secs(30), || async {
        Ok(jobs(&ctx)
            .list(&Default::default())
            .await?
            .items
            .is_empty()
            .then_some(()))
    })
    .await;
    remove_nodes(&ctx, count + 1).await;
    result
}

/// Plays the agents until the job completes: every node that has the job's entry and has
/// not reported Succeeded pulls (one poll later it reports Succeeded, or stays pulling
/// when `stuck` names it). Fails at once when more than `parallelism` nodes pull together.
/// Returns the order in which nodes started.
async fn play_agents(
    ctx: &TestContext,
    job: &str,
    nodes: &[String],
    parallelism: usize,
    stuck: &[String],
    timeout: Duration,
) -> Result<(Vec<String>, ImagePullJob)> {
    let deadline = tokio::time::Instant::now() + timeout;
    let mut order: Vec<String> = Vec::new();
    loop {
        let seen = observe(ctx, nodes).await?;
        let pulling: Vec<&String> = seen
            .iter()
            .filter(|(_, (has, phase))| *has && *phase != Some(ImagePullPhase::Succeeded))
            .map(|(n, _)| n)
            .collect();
        ensure!(
            pulling.len() <= parallelism,
            "more than {parallelism} nodes pulling at once: {seen:?}"
        );
        for node in pulling {
            if !order.contains(node) {
                order.push(node.clone());
                // Pulling for one poll, so the next look sees it still active.
                report(ctx, node, ImagePullPhase::Pulling).await?;
            } else if !stuck.contains(node) {
                report(ctx, node, ImagePullPhase::Succeeded).await?;
            }
        }
        let job = jobs(ctx).get(job).await?;
        if job
            .status
            .as_ref()
            .is_some_and(|s| s.completion_time.is_some())
        {
            return Ok((order, job));
        }
        ensure!(
            tokio::time::Instant::now() < deadline,
            "the job did not complete in {timeout:?}; nodes {seen:?}, status {:?}",
            job.status
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// Waits until no node's spec has the job's image.
async fn wait_entries_gone(ctx: &TestContext, nodes: &[String]) -> Result<()> {
    poll_until(
        "the job's entries removed",
        Duration::from_secs(30),
        || async {
            let seen = observe(ctx, nodes).await?;
            Ok(seen.values().all(|(has, _)| !has).then_some(()))
        },
    )
    .await
}

#[tokio::test]
async fn parallelism_one_over_three_nodes_completes_then_ttl_deletes_the_job() -> Result<()> {
    run_in_namespace("ipj-parallelism", |ctx| async move {
        with_nodes(ctx, 3, |ctx, nodes| async move {
            create_job(
                &ctx,
                "warm",
                json!({ "parallelism": 1, "completionPolicy": { "ttlSecondsAfterFinished": 5 } }),
            )
            .await?;
            let (order, job) =
                play_agents(&ctx, "warm", &nodes, 1, &[], Duration::from_secs(90)).await?;
            ensure!(
                order == nodes,
                "each node in turn, in name order: {order:?}"
            );
            let status = job.status.context("status")?;
            ensure!(
                (
                    status.desired,
                    status.active,
                    status.succeeded,
                    status.failed
                ) == (3, 0, 3, 0),
                "{status:?}"
            );
            ensure!(status.message == "job has completed", "{status:?}");
            ensure!(status.start_time.is_some() && status.failed_nodes.is_empty());
            ensure!(
                job.metadata
                    .finalizers
                    .unwrap_or_default()
                    .contains(&"apps.kruise.io/imagepulljob-cleanup".to_owned()),
                "the job carries the cleanup finalizer"
            );
            wait_entries_gone(&ctx, &nodes).await?;
            poll_until(
                "the TTL to delete the job",
                Duration::from_secs(30),
                || async { Ok(jobs(&ctx).get_opt("warm").await?.is_none().then_some(())) },
            )
            .await?;
            Ok(())
        })
        .await
    })
    .await
}

#[tokio::test]
async fn the_deadline_fails_the_nodes_that_did_not_finish() -> Result<()> {
    run_in_namespace("ipj-deadline", |ctx| async move {
        with_nodes(ctx, 3, |ctx, nodes| async move {
            create_job(
                &ctx,
                "late",
                json!({
                    "parallelism": 1,
                    "pullPolicy": { "timeoutSeconds": 1, "backoffLimit": 0 },
                    "completionPolicy": { "activeDeadlineSeconds": 8 },
                }),
            )
            .await?;
            // node-1 never finishes, so node-2 waits for a slot that never frees.
            let stuck = vec![nodes[1].clone()];
            let started = tokio::time::Instant::now();
            let (order, job) =
                play_agents(&ctx, "late", &nodes, 1, &stuck, Duration::from_secs(60)).await?;
            ensure!(
                started.elapsed() >= Duration::from_secs(5),
                "completed before the deadline: {:?}",
                job.status
            );
            let status = job.status.context("status")?;
            ensure!(
                status.message == "job exceeded activeDeadlineSeconds",
                "{status:?}"
            );
            ensure!(order == nodes[..2], "node-2 never started: {order:?}");
            ensure!(
                (
                    status.desired,
                    status.succeeded,
                    status.failed,
                    status.active
                ) == (3, 1, 2, 0),
                "{status:?}"
            );
            ensure!(status.failed_nodes == nodes[1..], "{status:?}");
            wait_entries_gone(&ctx, &nodes).await?;
            let events = events_of(&ctx, "late").await?;
            ensure!(events.iter().any(|r| r == "DeadlineExceeded"), "{events:?}");
            Ok(())
        })
        .await
    })
    .await
}

/// The reasons of the Events on a job.
async fn events_of(ctx: &TestContext, name: &str) -> Result<Vec<String>> {
    let api: Api<k8s_openapi::api::events::v1::Event> = ctx.api();
    Ok(api
        .list(&Default::default())
        .await?
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
        .filter_map(|e| e.reason)
        .collect())
}

#[tokio::test]
async fn a_persons_entries_and_the_jobs_coexist_and_deleting_the_job_removes_only_its_own()
-> Result<()> {
    run_in_namespace("ipj-owners", |ctx| async move {
        // The job names a pull secret: the namespace grants the control plane its reading.
        stevedore_tests::auth::grant_pull_secrets(&ctx).await?;
        with_nodes(ctx, 1, |ctx, mut nodes| async move {
            // A person pulls two images on node-0, one of them the job's image.
            let person = json!({
                "apiVersion": "stevedore.dev/v1alpha1",
                "kind": "ImageList",
                "metadata": { "name": nodes[0] },
                "spec": { "images": { PERSON_IMAGE: {}, IMAGE: {} } },
            });
            lists(&ctx)
                .patch(
                    &nodes[0],
                    &PatchParams::apply("kubectl"),
                    &Patch::Apply(person),
                )
                .await?;
            create_job(
                &ctx,
                "keep",
                json!({
                    "parallelism": "100%",
                    "pullSecrets": ["regcred"],
                    "completionPolicy": { "type": "Never" },
                }),
            )
            .await?;
            let manager = field_manager(&ctx.namespace, "keep");
            let owned_by = |list: &ImageList, who: &str| {
                list.metadata.managed_fields.iter().flatten().any(|m| {
                    m.manager.as_deref() == Some(who)
                        && m.fields_v1.as_ref().is_some_and(|f| {
                            f.0.pointer("/f:spec/f:images")
                                .and_then(Value::as_object)
                                .is_some_and(|images| images.contains_key(&format!("f:{IMAGE}")))
                        })
                })
            };
            poll_until(
                "the job's entry on node-0",
                Duration::from_secs(30),
                || async {
                    let list = lists(&ctx).get(&nodes[0]).await?;
                    Ok(owned_by(&list, &manager).then_some(list))
                },
            )
            .await
            .and_then(|list| {
                let entry = list.spec.images.get(IMAGE).context("entry")?;
                ensure!(entry.pull_secrets.len() == 1 && entry.pull_secrets[0].name == "regcred");
                ensure!(list.spec.images.contains_key(PERSON_IMAGE));
                Ok(())
            })?;
            // A node added later pulls too (completion policy Never).
            nodes.push(add_node(&ctx, 1).await?);
            poll_until(
                "the job's entry on the new node",
                Duration::from_secs(30),
                || async {
                    let list = lists(&ctx).get(&nodes[1]).await?;
                    Ok(list.spec.images.contains_key(IMAGE).then_some(()))
                },
            )
            .await?;
            report(&ctx, &nodes[0], ImagePullPhase::Succeeded).await?;
            poll_until(
                "the re-pull entry and the counts",
                Duration::from_secs(30),
                || async {
                    let list = lists(&ctx).get(&nodes[0]).await?;
                    let repull = list.spec.images.get(IMAGE).is_some_and(|e| {
                        e.always_pull && e.pull_interval.as_deref() == Some("24h")
                    });
                    let job = job_status(&ctx, "keep").await?;
                    let status = job.status.unwrap_or_default();
                    ensure!(
                        status.completion_time.is_none(),
                        "Never completed: {status:?}"
                    );
                    Ok((repull && status.desired == 2 && status.succeeded == 1).then_some(()))
                },
            )
            .await?;

            jobs(&ctx).delete("keep", &DeleteParams::default()).await?;
            poll_until("the job gone", Duration::from_secs(30), || async {
                Ok(jobs(&ctx).get_opt("keep").await?.is_none().then_some(()))
            })
            .await?;
            let shared = lists(&ctx).get(&nodes[0]).await?;
            ensure!(!owned_by(&shared, &manager), "the job's manager is gone");
            ensure!(
                owned_by(&shared, "kubectl"),
                "the person still holds the image"
            );
            ensure!(
                shared.spec.images.contains_key(IMAGE)
                    && shared.spec.images.contains_key(PERSON_IMAGE),
                "the person's entries survive: {:?}",
                shared.spec.images
            );
            ensure!(
                !shared.spec.images[IMAGE].always_pull,
                "the job's fields went with it: {:?}",
                shared.spec.images[IMAGE]
            );
            let alone = lists(&ctx).get(&nodes[1]).await?;
            ensure!(
                !alone.spec.images.contains_key(IMAGE),
                "only the job held it there: {:?}",
                alone.spec.images
            );
            Ok(())
        })
        .await
    })
    .await
}
