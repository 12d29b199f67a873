//! Component and e2e tests of the agent's `ImageService` against the real containerd,
//! registry and kubelet of the local cluster. The service runs in-process on a loopback
//! port with the same wiring as the agent binary.
//!
//! Runs alone: it removes the shared test image web:v1 from the node's containerd and
//! counts the blobs a pull fetches, which other suites' pods on that node change.

use std::{collections::HashMap, net::SocketAddr, time::Duration};

use anyhow::{Context as _, Result, bail, ensure};
use clap::Parser as _;
use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Pod;
use kube::api::PostParams;
use serde_json::json;
use stevedore_agent::{
    config::Args,
    images::{
        AgentImageService,
        store::{CRI_IMAGE_LABEL, ContainerdStore, ImageStore as _},
    },
};
use stevedore_proto::stevedore::agent::v1::{
    self as api, image_service_client::ImageServiceClient, image_service_server::ImageServiceServer,
};
use stevedore_tests::registry_process::{RegistryAuth, RegistryProcess};
use stevedore_tests::scratch::{ScratchDir, free_loopback_addr};
use stevedore_tests::{ClusterInfo, poll_until, registry_log, run_in_namespace};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tonic::{Code, transport::Channel};

/// The tests share containerd's content and leases (and some share images), so they
/// run one at a time: a lease check must not see another test's pull in flight.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// An agent image service serving on loopback; stops when dropped.
struct Agent {
    client: ImageServiceClient<Channel>,
    cluster: &'static ClusterInfo,
    shutdown: CancellationToken,
    _serial: tokio::sync::MutexGuard<'static, ()>,
}

impl Drop for Agent {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

async fn start_agent() -> Result<Agent> {
    start_agent_with(&[]).await
}

/// [`start_agent`] with `extra` flags.
async fn start_agent_with(extra: &[&str]) -> Result<Agent> {
    let serial = SERIAL.lock().await;
    let cluster = stevedore_tests::cluster().await?;
    let socket = cluster.containerd.socket.to_string_lossy().into_owned();
    let base = [
        "stevedore-agent",
        "--node-name",
        &cluster.node_name,
        "--containerd-socket",
        &socket,
        "--containerd-namespace",
        "k8s.io",
        "--insecure-registry",
        &cluster.registry,
        "--insecure-registry",
        &cluster.auth_registry,
        "--max-concurrent-pulls",
        "3",
        "--pull-timeout",
        "120",
    ];
    let args = Args::try_parse_from(base.iter().chain(extra))?;
    let shutdown = CancellationToken::new();
    let images = AgentImageService::connect(&args, shutdown.clone()).await?;
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr: SocketAddr = listener.local_addr()?;
    // The image service alone, without TLS or token checks (agent_node covers those).
    let serve = tonic::transport::Server::builder()
        .add_service(ImageServiceServer::new(images))
        .serve_with_incoming_shutdown(
            tonic::transport::server::TcpIncoming::from(listener),
            shutdown.clone().cancelled_owned(),
        );
    tokio::spawn(serve);
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))?
        .connect()
        .await?;
    Ok(Agent {
        client: ImageServiceClient::new(channel),
        cluster,
        shutdown,
        _serial: serial,
    })
}

impl Agent {
    /// Pulls `image` and collects every progress message, or the final error status.
    async fn pull(
        &self,
        image: &str,
        policy: api::PullPolicy,
    ) -> Result<Result<Vec<api::PullProgress>, tonic::Status>> {
        self.pull_with(image, policy, None).await
    }

    async fn pull_with(
        &self,
        image: &str,
        policy: api::PullPolicy,
        credentials: Option<api::Credentials>,
    ) -> Result<Result<Vec<api::PullProgress>, tonic::Status>> {
        let request = api::PullImageRequest {
            image: image.to_owned(),
            pull_policy: policy.into(),
            credentials,
            timeout_seconds: 0,
        };
        let mut stream = match self.client.clone().pull_image(request).await {
            Ok(response) => response.into_inner(),
            Err(status) => return Ok(Err(status)),
        };
        let mut messages = Vec::new();
        while let Some(message) = stream.next().await {
            match message {
                Ok(message) => messages.push(message),
                Err(status) => return Ok(Err(status)),
            }
        }
        Ok(Ok(messages))
    }

    async fn remove(&self, image: &str) -> Result<()> {
        stevedore_tests::grpc::remove_image(&self.client, image).await
    }

    async fn status(&self, image: &str) -> Result<Option<api::Image>> {
        stevedore_tests::grpc::image_status(&self.client, image).await
    }

    async fn store(&self) -> Result<ContainerdStore> {
        Ok(ContainerdStore::connect(
            &self.cluster.containerd.socket,
            "k8s.io",
        )?)
    }
}

fn done(messages: &[api::PullProgress]) -> Result<&api::PullProgress> {
    let last = messages.last().context("no progress message")?;
    ensure!(
        last.phase == i32::from(api::PullPhase::Done),
        "last message is not DONE: {last:?}"
    );
    Ok(last)
}

/// Access-log lines of this agent's registry requests for `path_part`.
fn registry_requests(path_part: &str) -> Result<usize> {
    let cluster_log = std::path::Path::new("/var/lib/stevedore-local/logs/registry.log");
    let log = std::fs::read_to_string(cluster_log).context("reading the registry log")?;
    Ok(log
        .lines()
        .filter(|l| l.contains("\"GET /v2/") && l.contains(path_part))
        .filter(|l| l.contains("stevedore-agent/"))
        .count())
}

#[tokio::test]
async fn pull_reports_per_layer_progress_and_creates_the_cri_image_records() -> Result<()> {
    let agent = start_agent().await?;
    let image = agent.cluster.image("web:v1");
    let messages = agent
        .pull(&image, api::PullPolicy::Always)
        .await?
        .map_err(|s| anyhow::anyhow!("pull failed: {s:?}"))?;

    let last = done(&messages)?;
    ensure!(last.image_id.starts_with("sha256:"), "{last:?}");
    ensure!(
        last.repo_digest
            .starts_with(&format!("{}@sha256:", image.trim_end_matches(":v1"))),
        "{last:?}"
    );
    ensure!(
        last.bytes_total > 0 && last.bytes_done == last.bytes_total,
        "{last:?}"
    );
    ensure!(
        last.layers.len() >= 2,
        "config and layers expected: {last:?}"
    );
    ensure!(
        last.layers
            .iter()
            .all(|l| l.bytes_done == l.bytes_total && l.digest.starts_with("sha256:"))
    );
    let mut previous = 0;
    for message in &messages {
        ensure!(
            message.bytes_done >= previous,
            "progress went backwards: {messages:?}"
        );
        previous = message.bytes_done;
    }

    // The three records CRI creates, each with CRI's label and the same target.
    let store = agent.store().await?;
    let repo_digest = last.repo_digest.clone();
    let mut targets = Vec::new();
    for name in [image.clone(), repo_digest.clone(), last.image_id.clone()] {
        let record = store
            .get_image(&name)
            .await?
            .with_context(|| format!("no image record {name}"))?;
        ensure!(
            record.labels.get(CRI_IMAGE_LABEL.0).map(String::as_str) == Some(CRI_IMAGE_LABEL.1),
            "{name} lacks CRI's label: {:?}",
            record.labels
        );
        targets.push(record.target.digest);
    }
    ensure!(
        targets
            .iter()
            .all(|t| Some(t) == repo_digest.split('@').nth(1).map(str::to_owned).as_ref())
    );

    // containerd's distribution source label on every blob, as its own pull writes it.
    let (host_port, path) = image
        .trim_end_matches(":v1")
        .split_once('/')
        .context("image without registry")?;
    let source_key = format!(
        "containerd.io/distribution.source.{}",
        host_port.split(':').next().unwrap_or(host_port)
    );
    let manifest_digest = repo_digest.split('@').nth(1).context("repo digest")?;
    let blobs = last.layers.iter().map(|l| l.digest.as_str());
    for digest in blobs.chain([manifest_digest, last.image_id.as_str()]) {
        let labels = store.blob_labels(digest).await?;
        let sources = labels.get(&source_key).map(String::as_str).unwrap_or("");
        ensure!(
            sources.split(',').any(|r| r == path),
            "{digest} lacks {source_key}={path}: {labels:?}"
        );
    }

    let status = agent.status(&image).await?.context("ImageStatus: absent")?;
    ensure!(
        status.id == last.image_id && status.repo_tags.contains(&image),
        "{status:?}"
    );
    ensure!(status.repo_digests.contains(&repo_digest), "{status:?}");
    let by_id = agent
        .status(&last.image_id)
        .await?
        .context("by ID: absent")?;
    ensure!(by_id.id == status.id);
    let list = agent
        .client
        .clone()
        .list_images(api::ListImagesRequest {})
        .await?
        .into_inner();
    ensure!(
        list.images
            .iter()
            .any(|i| i.id == last.image_id && i.size_bytes > 0)
    );
    Ok(())
}

#[tokio::test]
async fn if_not_present_makes_no_registry_request_for_a_present_image() -> Result<()> {
    let agent = start_agent().await?;
    let image = agent.cluster.image("pause:3.10");
    // pause is on kubelet's containerd (every pod sandbox uses it) and never removed here,
    // but a containerd beside the cluster's may not have it yet: make it present.
    agent
        .pull(&image, api::PullPolicy::IfNotPresent)
        .await?
        .map_err(|s| anyhow::anyhow!("the first pull failed: {s:?}"))?;
    let before = registry_requests("/v2/stevedore/pause/")?;
    let messages = agent
        .pull(&image, api::PullPolicy::IfNotPresent)
        .await?
        .map_err(|s| anyhow::anyhow!("pull failed: {s:?}"))?;
    let last = done(&messages)?;
    ensure!(
        messages.len() == 1 && last.image_id.starts_with("sha256:"),
        "{messages:?}"
    );
    ensure!(
        registry_requests("/v2/stevedore/pause/")? == before,
        "the registry was asked"
    );
    Ok(())
}

/// Held by the tests that pull or remove `large:v1`: they run in parallel otherwise, and
/// one test's download (or removal) would change what the other counts or finds.
static LARGE_IMAGE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[tokio::test]
async fn concurrent_pulls_of_one_image_share_one_download() -> Result<()> {
    let _large = LARGE_IMAGE.lock().await;
    let agent = start_agent().await?;
    let image = agent.cluster.image("large:v1");
    agent.remove(&image).await?;
    ensure!(
        agent.status(&image).await?.is_none(),
        "still present after removal"
    );
    let blobs_before = registry_requests("/v2/stevedore/large/blobs/")?;

    let pulls = (0..4).map(|_| agent.pull(&image, api::PullPolicy::Always));
    let results = futures::future::join_all(pulls).await;
    let mut image_ids = Vec::new();
    for result in results {
        let messages = result?.map_err(|s| anyhow::anyhow!("pull failed: {s:?}"))?;
        let last = done(&messages)?;
        ensure!(
            last.bytes_done == last.bytes_total && last.layers.len() == 6,
            "{last:?}"
        );
        ensure!(
            messages
                .iter()
                .any(|m| m.bytes_done < m.bytes_total && !m.layers.is_empty()),
            "this caller saw no download in progress"
        );
        image_ids.push(last.image_id.clone());
    }
    ensure!(image_ids.windows(2).all(|w| w[0] == w[1]), "{image_ids:?}");
    // One download: the config and five layers fetched once each.
    let fetched = registry_requests("/v2/stevedore/large/blobs/")? - blobs_before;
    ensure!(
        fetched == 6,
        "{fetched} blob requests for one image of 6 blobs"
    );

    agent.remove(&image).await?;
    ensure!(
        agent.status(&image).await?.is_none(),
        "still present after removal"
    );
    Ok(())
}

#[tokio::test]
async fn failures_map_to_their_codes_and_leave_no_image() -> Result<()> {
    let agent = start_agent().await?;
    let registry = &agent.cluster.registry;
    let closed = free_loopback_addr()?;
    let cases = [
        (agent.cluster.image("web:no-such-tag"), Code::NotFound),
        (
            format!("{registry}/stevedore/no-such-repo:v1"),
            Code::NotFound,
        ),
        (format!("{closed}/stevedore/web:v1"), Code::Unavailable),
        ("Upper/Case:v1".to_owned(), Code::InvalidArgument),
        (format!("{registry}/web@sha256:123"), Code::InvalidArgument),
        (format!("{registry}/web:-bad"), Code::InvalidArgument),
    ];
    for (image, code) in cases {
        match agent.pull(&image, api::PullPolicy::Always).await? {
            Ok(messages) => bail!("{image} pulled: {messages:?}"),
            Err(status) => {
                ensure!(
                    status.code() == code,
                    "{image}: {status:?}, wanted {code:?}"
                );
                ensure!(!status.message().is_empty());
            }
        }
        if code != Code::InvalidArgument {
            ensure!(
                agent.status(&image).await?.is_none(),
                "{image} left an image"
            );
        }
    }
    // No lease is left behind by the failed pulls.
    let leases = pull_leases(agent.cluster)?;
    ensure!(leases.is_empty(), "leaked leases: {leases:?}");
    Ok(())
}

/// The agent's pull leases present in containerd.
fn pull_leases(cluster: &ClusterInfo) -> Result<Vec<String>> {
    Ok(ctr(cluster, &["leases", "ls", "-q"])?
        .lines()
        .filter(|l| l.starts_with("stevedore-pull-"))
        .map(str::to_owned)
        .collect())
}

#[tokio::test]
async fn a_pull_cut_short_by_shutdown_leaves_nothing_and_the_next_pull_completes() -> Result<()> {
    let _large = LARGE_IMAGE.lock().await;
    let agent = start_agent().await?;
    let image = agent.cluster.image("large:v1");
    agent.remove(&image).await?;
    let request = api::PullImageRequest {
        image: image.clone(),
        pull_policy: api::PullPolicy::Always.into(),
        credentials: None,
        timeout_seconds: 0,
    };
    let mut stream = agent.client.clone().pull_image(request).await?.into_inner();
    // Stop the agent as soon as the download has started.
    while let Some(message) = stream.next().await {
        if message?.phase == i32::from(api::PullPhase::Downloading) {
            break;
        }
    }
    agent.shutdown.cancel();
    let ended = stream.next().await;
    ensure!(
        !matches!(&ended, Some(Ok(m)) if m.phase == i32::from(api::PullPhase::Done)),
        "the pull finished anyway: {ended:?}"
    );
    let cluster = agent.cluster;
    drop(agent);

    let store = ContainerdStore::connect(&cluster.containerd.socket, "k8s.io")?;
    ensure!(
        store.get_image(&image).await?.is_none(),
        "a cut-short pull left a record"
    );
    poll_until(
        "the pull lease to be released",
        Duration::from_secs(10),
        || async {
            let leases = pull_leases(cluster)?;
            Ok(leases.is_empty().then_some(()))
        },
    )
    .await?;

    // A new agent pulls the same image completely (over any partial ingest).
    let agent = start_agent().await?;
    let messages = agent
        .pull(&image, api::PullPolicy::Always)
        .await?
        .map_err(|s| anyhow::anyhow!("pull after restart failed: {s:?}"))?;
    let last = done(&messages)?;
    ensure!(
        last.bytes_done == last.bytes_total && last.layers.len() == 6,
        "{last:?}"
    );
    let check = ctr(cluster, &["images", "check", &format!("name=={image}")])?;
    ensure!(
        check.contains("complete (6/6)") && check.contains("true"),
        "{check}"
    );
    agent.remove(&image).await?;
    Ok(())
}

#[tokio::test]
async fn image_list_pulls_and_streams_status_by_generation() -> Result<()> {
    let agent = start_agent().await?;
    let node = agent.cluster.node_name.clone();
    let present = agent.cluster.image("pause:3.10");
    let missing = agent.cluster.image("web:not-there");
    let mut client = agent.client.clone();
    let apply =
        |generation, images: HashMap<String, api::DesiredImage>| api::ApplyImageListRequest {
            node_name: node.clone(),
            generation,
            images,
            list_uid: "image-list-uid".to_owned(),
        };
    let once = api::DesiredImage {
        backoff_limit: 0,
        ..Default::default()
    };
    let images = HashMap::from([(present.clone(), once.clone()), (missing.clone(), once)]);
    let mut watch = client
        .watch_image_list(api::WatchImageListRequest {
            node_name: node.clone(),
        })
        .await?
        .into_inner();
    let applied = client
        .apply_image_list(apply(5, images.clone()))
        .await?
        .into_inner();
    ensure!(applied.generation == 5);
    // The same generation again is a no-op; an older one is refused.
    client.apply_image_list(apply(5, HashMap::new())).await?;
    let stale = client.apply_image_list(apply(4, images.clone())).await;
    ensure!(
        matches!(&stale, Err(s) if s.code() == Code::FailedPrecondition),
        "{stale:?}"
    );
    let other_node = api::ApplyImageListRequest {
        node_name: "another-node".to_owned(),
        ..apply(6, images)
    };
    let refused = client.apply_image_list(other_node).await;
    ensure!(
        matches!(&refused, Err(s) if s.code() == Code::FailedPrecondition),
        "{refused:?}"
    );

    let mut latest: HashMap<String, api::ImageListStatusUpdate> = HashMap::new();
    let settled = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(update) = watch.next().await {
            let update = update?;
            latest.insert(update.image.clone(), update);
            let phase = |image: &str| latest.get(image).map(|u| u.phase);
            if phase(&present) == Some(api::ImageListPhase::Succeeded.into())
                && phase(&missing) == Some(api::ImageListPhase::Failed.into())
            {
                return Ok::<_, anyhow::Error>(());
            }
        }
        bail!("watch ended")
    })
    .await;
    ensure!(matches!(settled, Ok(Ok(()))), "{settled:?}: {latest:#?}");
    let ok = &latest[&present];
    ensure!(
        ok.image_id.starts_with("sha256:") && ok.last_pull_time.is_some() && ok.generation == 5
    );
    let failed = &latest[&missing];
    ensure!(
        failed.attempts == 1 && failed.message.contains("not found"),
        "{failed:?}"
    );
    Ok(())
}

#[tokio::test]
async fn a_pod_with_pull_policy_never_runs_an_image_the_agent_pulled() -> Result<()> {
    if !stevedore_tests::cluster()
        .await?
        .containerd
        .runs_kubelets_pods("a_pod_with_pull_policy_never_runs_an_image_the_agent_pulled")
    {
        return Ok(());
    }
    let agent = start_agent().await?;
    let image = agent.cluster.image("web:v2");
    agent.remove(&image).await?;
    ensure!(
        agent.status(&image).await?.is_none(),
        "web:v2 still present"
    );
    let messages = agent
        .pull(&image, api::PullPolicy::IfNotPresent)
        .await?
        .map_err(|s| anyhow::anyhow!("pull failed: {s:?}"))?;
    let pulled = done(&messages)?.clone();
    ensure!(pulled.bytes_done == pulled.bytes_total && pulled.bytes_total > 0);

    run_in_namespace("agent-pulled-image", |ctx| async move {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": { "name": "web-v2" },
            "spec": {
                "nodeName": ctx.cluster.node_name,
                "containers": [{
                    "name": "web",
                    "image": image,
                    "imagePullPolicy": "Never"
                }]
            }
        }))?;
        ctx.api::<Pod>()
            .create(&PostParams::default(), &pod)
            .await?;
        poll_until("pod web-v2 running", Duration::from_secs(120), || async {
            let pod = ctx.api::<Pod>().get("web-v2").await?;
            let status = pod.status.unwrap_or_default();
            let waiting = status
                .container_statuses
                .iter()
                .flatten()
                .filter_map(|c| c.state.as_ref()?.waiting.as_ref()?.reason.clone())
                .find(|r| r == "ErrImageNeverPull");
            if let Some(reason) = waiting {
                bail!("kubelet does not see the image: {reason}");
            }
            Ok((status.phase.as_deref() == Some("Running")).then_some(()))
        })
        .await?;
        Ok(())
    })
    .await
}

fn basic(username: &str, password: &str) -> Option<api::Credentials> {
    Some(api::Credentials {
        kind: Some(api::credentials::Kind::Basic(api::BasicAuth {
            username: username.to_owned(),
            password: password.to_owned(),
        })),
    })
}

/// Against the registry that demands a password: none or a wrong one is refused with
/// UNAUTHENTICATED and leaves no image; the right one (sent with the request, as the
/// control plane does from pull secrets) pulls. (Callers with different credentials at
/// the same moment: `a_wrong_password_does_not_ride_on_a_joined_pull_with_the_right_one`.)
#[tokio::test]
async fn credentials_are_required_checked_and_used() -> Result<()> {
    let agent = start_agent().await?;
    let cluster = agent.cluster;
    let image = format!("{}/stevedore/web:v1", cluster.auth_registry);
    let password = std::fs::read_to_string(&cluster.auth_registry_password_file)?;
    let password = password.trim();
    let user = cluster.auth_registry_user.as_str();
    agent.remove(&image).await?;
    let refused = [
        ("no credentials", None),
        ("a wrong password", basic(user, "not-the-password")),
        ("an unknown user", basic("nobody", password)),
    ];
    for (what, credentials) in refused {
        match agent
            .pull_with(&image, api::PullPolicy::Always, credentials)
            .await?
        {
            Ok(_) => bail!("pulled with {what}"),
            Err(status) => ensure!(
                status.code() == Code::Unauthenticated,
                "{what}: {status:?}, wanted Unauthenticated"
            ),
        }
        ensure!(
            agent.status(&image).await?.is_none(),
            "{what} left an image"
        );
    }
    let messages = agent
        .pull_with(&image, api::PullPolicy::Always, basic(user, password))
        .await?
        .map_err(|status| anyhow::anyhow!("with the right password: {status:?}"))?;
    done(&messages)?;
    ensure!(
        agent.status(&image).await?.is_some(),
        "image present after the pull"
    );
    agent.remove(&image).await
}

#[tokio::test]
async fn an_interrupted_layer_download_resumes_from_the_bytes_in_containerd() -> Result<()> {
    use stevedore_tests::{proxy::Proxy, slow_image};
    let cluster = stevedore_tests::cluster().await?;
    let slow = slow_image::ensure(&cluster.registry, "agent-images").await?;
    // Through a throttled proxy, so the agent can be stopped in the middle of the layer.
    let proxy = Proxy::start(&cluster.registry).await?;
    proxy.throttle(Some(2 << 20));
    let image = format!("{}/{}", proxy.host(), slow.name);
    let agent = start_agent().await?;
    agent.remove(&image).await?;
    let request = api::PullImageRequest {
        image: image.clone(),
        pull_policy: api::PullPolicy::Always.into(),
        credentials: None,
        timeout_seconds: 0,
    };
    let mut stream = agent.client.clone().pull_image(request).await?.into_inner();
    let mut interrupted_at = 0;
    while let Some(message) = stream.next().await {
        let layer = message?
            .layers
            .into_iter()
            .find(|l| l.bytes_total > 1 << 20);
        if let Some(layer) = layer.filter(|l| l.bytes_done >= 4 << 20) {
            interrupted_at = layer.bytes_done;
            break;
        }
    }
    ensure!(interrupted_at > 0, "the layer download never got going");
    agent.shutdown.cancel();
    drop(stream);
    drop(agent);
    tokio::time::sleep(Duration::from_secs(2)).await;

    proxy.throttle(None);
    let before = registry_log::line_count(cluster)?;
    let agent = start_agent().await?;
    let messages = agent
        .pull(&image, api::PullPolicy::Always)
        .await?
        .map_err(|s| anyhow::anyhow!("the resumed pull failed: {s:?}"))?;
    let last = done(&messages)?;
    ensure!(last.image_id == slow.image_id, "{last:?}");
    // The first report of the layer already counts what the first agent wrote.
    let resumed_from = messages
        .iter()
        .filter_map(|m| m.layers.iter().find(|l| l.bytes_total > 1 << 20))
        .map(|l| l.bytes_done)
        .find(|done| *done > 0)
        .unwrap_or_default();
    let blobs = format!("/v2/{}/blobs/", slow.repository);
    let fetched = registry_log::agent_blob_bytes(cluster, &blobs, before)?;
    agent.remove(&image).await?;
    ensure!(
        fetched > 0 && fetched < slow_image::LAYER_BYTES as u64 - (2 << 20),
        "the second pull fetched {fetched} bytes of a {} byte layer (stopped at {interrupted_at})",
        slow_image::LAYER_BYTES
    );
    ensure!(
        resumed_from >= 2 << 20,
        "progress restarted at {resumed_from}"
    );
    Ok(())
}

#[tokio::test]
async fn a_mirror_in_hosts_toml_serves_pulls_while_the_registry_is_down() -> Result<()> {
    use stevedore_tests::slow_image;
    let scratch = ScratchDir::new("mirror")?;
    let mirror =
        RegistryProcess::start(&scratch.path().join("registry"), &RegistryAuth::None).await?;
    let slow = slow_image::ensure(&mirror.addr, "agent-images").await?;
    // The registry the image is named by: nothing listens there.
    let upstream = free_loopback_addr()?;
    let config_dir = scratch.path().join("certs.d");
    let hosts = config_dir.join(&upstream).join("hosts.toml");
    std::fs::create_dir_all(config_dir.join(&upstream))?;
    let server = format!("server = \"http://{upstream}\"\n");
    let mirrored = format!(
        "{server}[host.\"http://{}\"]\n  capabilities = [\"pull\", \"resolve\"]\n",
        mirror.addr
    );
    std::fs::write(&hosts, &mirrored)?;
    let dir = config_dir.to_string_lossy().into_owned();
    let agent = start_agent_with(&["--registry-config-dir", &dir]).await?;
    let image = format!("{upstream}/{}", slow.name);
    agent.remove(&image).await?;
    let messages = agent
        .pull(&image, api::PullPolicy::Always)
        .await?
        .map_err(|s| anyhow::anyhow!("the pull through the mirror failed: {s:?}"))?;
    ensure!(done(&messages)?.image_id == slow.image_id, "{messages:?}");
    ensure!(
        agent.status(&image).await?.is_some(),
        "no image after the pull"
    );

    // Without the mirror the same pull goes to the registry, which is down.
    std::fs::write(&hosts, &server)?;
    let refused = agent.pull(&image, api::PullPolicy::Always).await?;
    agent.remove(&image).await?;
    let status = refused.err().context("pulled without the mirror")?;
    ensure!(status.code() == Code::Unavailable, "{status:?}");
    ensure!(status.message().contains(&upstream), "{status:?}");
    Ok(())
}

/// containerd 2.x's CRI pins its sandbox image: it labels that image's records
/// `io.cri-containerd.pinned=pinned`, whoever pulled it, and kubelet never removes such
/// an image. RemoveImage refuses it too. A throwaway image is pinned the same way here
/// (1.6 pins nothing), and once unpinned it is removed as any other.
#[tokio::test]
async fn an_image_pinned_by_cri_is_not_removed() -> Result<()> {
    let agent = start_agent().await?;
    let cluster = agent.cluster;
    let image = cluster.image("web:v2");
    agent
        .pull(&image, api::PullPolicy::IfNotPresent)
        .await?
        .map_err(|s| anyhow::anyhow!("pull failed: {s:?}"))?;
    ctr(
        cluster,
        &["images", "label", &image, "io.cri-containerd.pinned=pinned"],
    )?;
    let request = api::RemoveImageRequest {
        image: image.clone(),
    };
    let refused = agent.client.clone().remove_image(request).await;
    ctr(
        cluster,
        &["images", "label", &image, "io.cri-containerd.pinned="],
    )?;
    let status = refused.err().context("a pinned image was removed")?;
    ensure!(status.code() == Code::FailedPrecondition, "{status:?}");
    ensure!(status.message().contains("pinned"), "{status:?}");
    ensure!(agent.status(&image).await?.is_some(), "the image is gone");
    agent.remove(&image).await?;
    ensure!(
        agent.status(&image).await?.is_none(),
        "the unpinned image was not removed"
    );
    Ok(())
}

/// The node's architecture as OCI names it, and another one.
fn this_and_another_architecture() -> (&'static str, &'static str) {
    match std::env::consts::ARCH {
        "aarch64" => ("arm64", "amd64"),
        _ => ("amd64", "arm64"),
    }
}

/// Runs `command`, failing with its output when it fails; returns its stdout.
fn run(command: &mut std::process::Command) -> Result<String> {
    let output = command
        .output()
        .with_context(|| format!("running {command:?}"))?;
    ensure!(output.status.success(), "{command:?}: {output:?}");
    Ok(String::from_utf8(output.stdout)?)
}

/// PUTs `body` as the manifest `reference` of `repository` on the plain-HTTP registry.
fn put_manifest(
    registry: &str,
    repository: &str,
    reference: &str,
    media_type: &str,
    body: &[u8],
) -> Result<()> {
    let file = std::env::temp_dir().join(format!("stevedore-manifest-{}", std::process::id()));
    std::fs::write(&file, body)?;
    let url = format!("http://{registry}/v2/{repository}/manifests/{reference}");
    let result = run(std::process::Command::new("curl")
        .args(["-sSf", "-X", "PUT", "-H"])
        .arg(format!("Content-Type: {media_type}"))
        .arg("--data-binary")
        .arg(format!("@{}", file.display()))
        .arg(&url));
    let _ = std::fs::remove_file(&file);
    result.map(|_| ())
}

fn sha256(body: &[u8]) -> Result<String> {
    let mut child = std::process::Command::new("sha256sum")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()?;
    std::io::Write::write_all(child.stdin.as_mut().context("stdin")?, body)?;
    let output = child.wait_with_output()?;
    let hex = String::from_utf8(output.stdout)?;
    Ok(format!(
        "sha256:{}",
        hex.split_whitespace().next().unwrap_or_default()
    ))
}

/// A multi-arch index in the real registry, another architecture's entry first: the
/// agent fetches the manifest of the node's own architecture and never the other.
#[tokio::test]
async fn a_multi_arch_index_pulls_the_nodes_platform() -> Result<()> {
    let agent = start_agent().await?;
    let registry = agent.cluster.registry.clone();
    let repository = "stevedore/multiarch";
    // The web image's blobs and manifest under the new repository (as the host's entry).
    run(std::process::Command::new("skopeo").args([
        "copy",
        "--quiet",
        "--src-tls-verify=false",
        "--dest-tls-verify=false",
        &format!("docker://{registry}/stevedore/web:v1"),
        &format!("docker://{registry}/{repository}:host"),
    ]))?;
    let host_manifest = run(std::process::Command::new("curl").args([
        "-sSf",
        "-H",
        "Accept: application/vnd.oci.image.manifest.v1+json",
        &format!("http://{registry}/v2/{repository}/manifests/host"),
    ]))?;
    let manifest_type = "application/vnd.oci.image.manifest.v1+json";
    let host_digest = sha256(host_manifest.as_bytes())?;
    // The other architecture's manifest: the same blobs, told apart by an annotation.
    let mut other: serde_json::Value = serde_json::from_str(&host_manifest)?;
    other["annotations"] = json!({ "stevedore.test/variant": "other-architecture" });
    let other_manifest = serde_json::to_vec(&other)?;
    let other_digest = sha256(&other_manifest)?;
    put_manifest(
        &registry,
        repository,
        &other_digest,
        manifest_type,
        &other_manifest,
    )?;
    let (this_arch, other_arch) = this_and_another_architecture();
    let entry = |digest: &str, size: usize, arch: &str| {
        json!({ "mediaType": manifest_type, "digest": digest, "size": size,
                "platform": { "os": "linux", "architecture": arch } })
    };
    let index = serde_json::to_vec(&json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [
            entry(&other_digest, other_manifest.len(), other_arch),
            entry(&host_digest, host_manifest.len(), this_arch),
        ],
    }))?;
    put_manifest(
        &registry,
        repository,
        "v1",
        "application/vnd.oci.image.index.v1+json",
        &index,
    )?;

    let image = format!("{registry}/{repository}:v1");
    let (host_before, other_before) = (
        registry_requests(&format!("{repository}/manifests/{host_digest}"))?,
        registry_requests(&format!("{repository}/manifests/{other_digest}"))?,
    );
    let messages = agent
        .pull(&image, api::PullPolicy::Always)
        .await?
        .map_err(|s| anyhow::anyhow!("pull failed: {s:?}"))?;
    let last = done(&messages)?;
    ensure!(
        last.repo_digest == format!("{registry}/{repository}@{}", sha256(&index)?),
        "the image is named by its index: {last:?}"
    );
    let host_fetched =
        registry_requests(&format!("{repository}/manifests/{host_digest}"))? - host_before;
    let other_fetched =
        registry_requests(&format!("{repository}/manifests/{other_digest}"))? - other_before;
    ensure!(
        host_fetched >= 1 && other_fetched == 0,
        "manifests fetched: {this_arch} {host_fetched}, {other_arch} {other_fetched}"
    );
    agent.remove(&image).await
}

use crate::agent_process;

/// The image list's status updates, collected as they stream in.
type Updates = std::sync::Arc<std::sync::Mutex<Vec<api::ImageListStatusUpdate>>>;

fn collect_updates(mut watch: tonic::Streaming<api::ImageListStatusUpdate>) -> Updates {
    let updates = Updates::default();
    let sink = std::sync::Arc::clone(&updates);
    tokio::spawn(async move {
        while let Some(Ok(update)) = watch.next().await {
            sink.lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(update);
        }
    });
    updates
}

fn updates_of(updates: &Updates, image: &str) -> Vec<api::ImageListStatusUpdate> {
    updates
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .iter()
        .filter(|u| u.image == image)
        .cloned()
        .collect()
}

/// `ctr -n k8s.io <args>` against the containerd under test.
fn ctr(cluster: &ClusterInfo, args: &[&str]) -> Result<String> {
    cluster.containerd.ctr(args)
}

/// Deletes `image` behind the agent's back as `crictl rmi` does: every containerd record
/// of the same manifest (tag, repo digest, image ID), then its content.
fn delete_out_of_band(cluster: &ClusterInfo, image: &str) -> Result<()> {
    let listing = ctr(cluster, &["images", "ls"])?;
    let rows: Vec<Vec<&str>> = listing
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().collect())
        .collect();
    let digest = rows
        .iter()
        .find(|r| r.first() == Some(&image))
        .and_then(|r| r.get(2).copied())
        .with_context(|| format!("no record of {image} in {listing}"))?;
    let mut rm = vec!["images", "rm", "--sync"];
    rm.extend(
        rows.iter()
            .filter(|r| r.get(2) == Some(&digest))
            .filter_map(|r| r.first().copied()),
    );
    ctr(cluster, &rm)?;
    let left = ctr(cluster, &["images", "ls", "-q"])?;
    ensure!(
        !left.lines().any(|l| l == image),
        "{image} still listed after ctr images rm"
    );
    Ok(())
}

/// An ImageList image that is Succeeded stays so without a single status update while it
/// is on the node; deleted out of band (as `crictl rmi` or kubelet's image GC would), the
/// agent notices on its next presence check, pulls it again and reports it Succeeded.
#[tokio::test]
async fn an_image_list_image_deleted_out_of_band_is_pulled_again() -> Result<()> {
    use stevedore_tests::invariant;
    let agent = start_agent_with(&["--image-presence-interval", "1"]).await?;
    let cluster = agent.cluster;
    let image = cluster.image("web:v1");
    agent.remove(&image).await?;
    let mut client = agent.client.clone();
    let watch = client
        .watch_image_list(api::WatchImageListRequest {
            node_name: cluster.node_name.clone(),
        })
        .await?
        .into_inner();
    let updates = collect_updates(watch);
    let desired = api::DesiredImage {
        backoff_limit: 3,
        ..Default::default()
    };
    client
        .apply_image_list(api::ApplyImageListRequest {
            node_name: cluster.node_name.clone(),
            generation: 1,
            images: HashMap::from([(image.clone(), desired)]),
            list_uid: "out-of-band-deletion".to_owned(),
        })
        .await?;
    let succeeded = i32::from(api::ImageListPhase::Succeeded);
    let failed = i32::from(api::ImageListPhase::Failed);
    let pulling = i32::from(api::ImageListPhase::Pulling);
    let settle = |what: &'static str, after: usize| {
        let updates = std::sync::Arc::clone(&updates);
        let image = image.clone();
        async move {
            poll_until(what, Duration::from_secs(60), || {
                let seen = updates_of(&updates, &image);
                async move {
                    let failure = seen.iter().skip(after).find(|u| u.phase == failed);
                    invariant(failure.is_none(), || {
                        format!("the pull failed: {failure:?}")
                    })?;
                    Ok(seen
                        .iter()
                        .skip(after)
                        .any(|u| u.phase == succeeded)
                        .then_some(seen.len()))
                }
            })
            .await
        }
    };
    let first = settle("the first pull Succeeded", 0).await?;
    ensure!(
        agent.status(&image).await?.is_some(),
        "no image after the pull"
    );

    // Present: several presence checks (one a second) come and go without a status
    // update or a registry request.
    let manifests = registry_requests("/v2/stevedore/web/manifests/")?;
    tokio::time::sleep(Duration::from_secs(4)).await;
    let quiet = updates_of(&updates, &image);
    ensure!(
        quiet.len() == first,
        "status updates while the image stayed: {:?}",
        &quiet[first..]
    );
    ensure!(
        registry_requests("/v2/stevedore/web/manifests/")? == manifests,
        "the registry was asked while the image stayed"
    );

    delete_out_of_band(cluster, &image)?;
    let again = settle("the image pulled again and Succeeded", first).await?;
    let cycle = &updates_of(&updates, &image)[first..again];
    ensure!(
        cycle.first().is_some_and(|u| u.phase == pulling),
        "the repair did not begin with Pulling: {cycle:?}"
    );
    ensure!(
        registry_requests("/v2/stevedore/web/manifests/")? > manifests,
        "the image came back without a pull"
    );
    let check = ctr(cluster, &["images", "check", &format!("name=={image}")])?;
    ensure!(check.contains("complete"), "image not complete: {check}");
    ensure!(
        agent.status(&image).await?.is_some(),
        "the agent does not see the image again"
    );
    Ok(())
}

/// Standard base64 (with padding), as HTTP Basic authentication encodes `user:password`.
fn base64(input: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in input.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// A password no one else uses, made at run time.
fn distinctive_password() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!("wrong-{:x}-{}", nanos, std::process::id())
}

/// The agent binary, logging at debug level, pulls from the password registry with the
/// right password and is refused with a wrong one, by PullImage and through the image
/// list: neither password, nor the `user:password` base64 of the Authorization header,
/// shows in its log, its `/metrics` or any error it returns.
#[tokio::test]
async fn credentials_appear_in_no_log_metric_or_error_of_the_agent() -> Result<()> {
    let _serial = SERIAL.lock().await;
    let cluster = stevedore_tests::cluster().await?;
    let agent = agent_process::AgentProcess::start(cluster, "credentials", &[]).await?;
    let client = ImageServiceClient::new(agent.channel().await?);
    let image = format!("{}/stevedore/web:v1", cluster.auth_registry);
    let user = cluster.auth_registry_user.as_str();
    let password = std::fs::read_to_string(&cluster.auth_registry_password_file)?;
    let password = password.trim().to_owned();
    let wrong = distinctive_password();
    let secrets = [
        ("the password", password.clone()),
        ("the wrong password", wrong.clone()),
        (
            "base64 of user:password",
            base64(format!("{user}:{password}").as_bytes()),
        ),
        (
            "base64 of user:wrong password",
            base64(format!("{user}:{wrong}").as_bytes()),
        ),
    ];
    let pull = |credentials: Option<api::Credentials>| {
        let mut client = client.clone();
        let image = image.clone();
        async move {
            let request = api::PullImageRequest {
                image,
                pull_policy: api::PullPolicy::Always.into(),
                credentials,
                timeout_seconds: 0,
            };
            let mut stream = client.pull_image(request).await?.into_inner();
            let mut last = None;
            while let Some(message) = stream.next().await {
                last = Some(message?);
            }
            Ok::<_, tonic::Status>(last)
        }
    };
    stevedore_tests::grpc::remove_image(&client, &image).await?;
    let mut errors = Vec::new();
    let refused = pull(basic(user, &wrong))
        .await
        .err()
        .context("pulled with a wrong password")?;
    ensure!(refused.code() == Code::Unauthenticated, "{refused:?}");
    errors.push(format!("{refused:?}"));
    let pulled = pull(basic(user, &password))
        .await
        .map_err(|s| anyhow::anyhow!("with the right password: {s:?}"))?;
    ensure!(
        pulled.is_some_and(|p| p.phase == i32::from(api::PullPhase::Done)),
        "the pull with the right password did not finish"
    );

    // The image list's failure message too.
    let watch = client
        .clone()
        .watch_image_list(api::WatchImageListRequest {
            node_name: cluster.node_name.clone(),
        })
        .await?
        .into_inner();
    let updates = collect_updates(watch);
    let listed = image.clone();
    let desired = api::DesiredImage {
        always_pull: true,
        credentials: basic(user, &wrong),
        ..Default::default()
    };
    client
        .clone()
        .apply_image_list(api::ApplyImageListRequest {
            node_name: cluster.node_name.clone(),
            generation: 1,
            images: HashMap::from([(listed.clone(), desired)]),
            list_uid: "credentials-in-no-log".to_owned(),
        })
        .await?;
    let failed = poll_until(
        "the listed image Failed",
        Duration::from_secs(60),
        || async {
            Ok(updates_of(&updates, &listed)
                .into_iter()
                .find(|u| u.phase == i32::from(api::ImageListPhase::Failed)))
        },
    )
    .await?;
    ensure!(!failed.message.is_empty(), "{failed:?}");
    errors.extend(
        updates_of(&updates, &listed)
            .iter()
            .map(|u| format!("{u:?}")),
    );

    let log = agent.log_text()?;
    ensure!(
        log.contains(&image) && log.contains("pull failed"),
        "the log does not show the pulls: {log}"
    );
    let metrics = agent.metrics().await?;
    ensure!(
        metrics.contains("unauthenticated"),
        "the metrics do not count the refused pull: {metrics}"
    );
    for (what, secret) in &secrets {
        ensure!(!log.contains(secret), "{what} is in the agent's log");
        ensure!(!metrics.contains(secret), "{what} is in /metrics");
        for error in &errors {
            ensure!(!error.contains(secret), "{what} is in an error: {error}");
        }
    }
    stevedore_tests::grpc::remove_image(&client, &image).await?;
    Ok(())
}

/// Callers pulling the same image at once join one download only when their credentials
/// are the same: one with a wrong password, arriving while the right password's pull is
/// under way, is refused instead of riding on it, and a second caller with the right
/// password shares the download (each blob fetched once).
#[tokio::test]
async fn a_wrong_password_does_not_ride_on_a_joined_pull_with_the_right_one() -> Result<()> {
    use stevedore_tests::proxy::Proxy;
    let agent = start_agent().await?;
    let cluster = agent.cluster;
    // Through a throttled proxy, so the right password's pull is surely under way when
    // the others arrive.
    let proxy = Proxy::start(&cluster.auth_registry).await?;
    proxy.throttle(Some(256 << 10));
    let image = format!("{}/stevedore/web:v1", proxy.host());
    let user = cluster.auth_registry_user.as_str();
    let password = std::fs::read_to_string(&cluster.auth_registry_password_file)?;
    let password = password.trim();
    // The same image from the plain registry would lend its blobs.
    remove_web_v1_everywhere(&agent, &image).await?;
    let blobs_before = registry_auth_requests(cluster, "/blobs/", "200")?;

    let request = api::PullImageRequest {
        image: image.clone(),
        pull_policy: api::PullPolicy::Always.into(),
        credentials: basic(user, password),
        timeout_seconds: 0,
    };
    let mut first = agent.client.clone().pull_image(request).await?.into_inner();
    let mut messages = vec![first.next().await.context("no progress")??];
    ensure!(
        messages[0].phase != i32::from(api::PullPhase::Done),
        "the first pull was over before the others came: {messages:?}"
    );
    let (wrong, same) = futures::join!(
        agent.pull_with(
            &image,
            api::PullPolicy::Always,
            basic(user, "not-the-password")
        ),
        agent.pull_with(&image, api::PullPolicy::Always, basic(user, password)),
    );
    while let Some(message) = first.next().await {
        messages.push(message?);
    }
    done(&messages)?;
    match wrong? {
        Ok(messages) => bail!(
            "the wrong password pulled beside the right one: {:?}",
            messages.last()
        ),
        Err(status) => ensure!(
            status.code() == Code::Unauthenticated,
            "the wrong password beside the right one: {status:?}"
        ),
    }
    let same = same?.map_err(|s| anyhow::anyhow!("the second right caller: {s:?}"))?;
    ensure!(
        done(&same)?.image_id == done(&messages)?.image_id,
        "{same:?}"
    );
    let fetched = registry_auth_requests(cluster, "/blobs/", "200")? - blobs_before;
    // The config is among the blobs the progress lists.
    let blobs = done(&messages)?.layers.len();
    ensure!(
        fetched == blobs,
        "{fetched} blob downloads for {blobs} blobs: the right callers did not share one"
    );
    agent.remove(&image).await
}

/// Removes `image` (`stevedore/web:v1` of the password registry, maybe through a proxy) and
/// the same image under the other names it is pulled by (from the password registry, from
/// the plain registry, through the proxy of an earlier run that failed before removing
/// it), so that no blob of it is left in containerd for a pull to find.
async fn remove_web_v1_everywhere(agent: &Agent, image: &str) -> Result<()> {
    let cluster = agent.cluster;
    let listed = ctr(cluster, &["images", "ls", "-q"])?;
    let names = listed
        .lines()
        .filter(|l| l.ends_with("/stevedore/web:v1"))
        .map(str::to_owned)
        .chain([
            image.to_owned(),
            format!("{}/stevedore/web:v1", cluster.auth_registry),
            cluster.image("web:v1"),
        ]);
    for name in names {
        agent.remove(&name).await?;
        ensure!(agent.status(&name).await?.is_none(), "{name} still present");
    }
    Ok(())
}

/// Access-log lines of the password registry for agents' requests whose path contains
/// `path_part`, answered with `status`.
fn registry_auth_requests(cluster: &ClusterInfo, path_part: &str, status: &str) -> Result<usize> {
    let log = std::fs::read_to_string(cluster.log_dir().join("registry-auth.log"))
        .context("reading the password registry's log")?;
    let status = format!(" HTTP/1.1\" {status} ");
    Ok(log
        .lines()
        .filter(|l| l.contains(" /v2/") && l.contains(path_part))
        .filter(|l| l.contains(&status) && l.contains("stevedore-agent/"))
        .count())
}

/// A pull from the password registry (HTTP Basic) answers the registry's challenge once
/// and then sends the credential with every request: at most one 401 per pull, none on a
/// later pull by the same agent with the same credential, and every blob fetched at the
/// first try.
#[tokio::test]
async fn a_basic_auth_pull_is_challenged_once_not_per_blob() -> Result<()> {
    let agent = start_agent().await?;
    let cluster = agent.cluster;
    let image = format!("{}/stevedore/web:v1", cluster.auth_registry);
    let user = cluster.auth_registry_user.as_str();
    let password = std::fs::read_to_string(&cluster.auth_registry_password_file)?;
    let password = password.trim();
    remove_web_v1_everywhere(&agent, &image).await?;
    for (pull, most_challenges) in [("first", 1), ("second", 0)] {
        let challenges = registry_auth_requests(cluster, "", "401")?;
        let blobs = registry_auth_requests(cluster, "/blobs/", "200")?;
        let messages = agent
            .pull_with(&image, api::PullPolicy::Always, basic(user, password))
            .await?
            .map_err(|s| anyhow::anyhow!("the {pull} pull: {s:?}"))?;
        let last = done(&messages)?;
        let challenged = registry_auth_requests(cluster, "", "401")? - challenges;
        ensure!(
            challenged <= most_challenges,
            "the {pull} pull was challenged {challenged} times"
        );
        if pull == "first" {
            let fetched = registry_auth_requests(cluster, "/blobs/", "200")? - blobs;
            // The config is among the blobs the progress lists.
            ensure!(
                fetched == last.layers.len(),
                "{fetched} blob downloads for {} blobs",
                last.layers.len()
            );
        }
    }
    agent.remove(&image).await
}
