//! The control plane's runtime against the real apiserver: two electors on one Lease
//! (exactly one leads; the standby takes over when the leader stops, and a leader whose
//! Lease is taken stops at once), and the admin `/readyz` turning 200 once the shared
//! caches have synced.

use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams};
use serde_json::json;
use stevedore_controlplane::caches::Stores;
use stevedore_controlplane::runtime::elector::Elector;
use stevedore_controlplane::runtime::leader::Timings;
use stevedore_controlplane::runtime::{Runtime, RuntimeConfig};
use stevedore_tests::{TestContext, poll_until, run_in_namespace};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

const LEASE: &str = "stevedore-controlplane";

/// Short enough for a test, with the same proportions as the 15/10/2 s defaults.
fn fast() -> Timings {
    Timings {
        lease_duration: Duration::from_secs(3),
        renew_deadline: Duration::from_secs(2),
        retry_period: Duration::from_millis(500),
    }
}

/// One in-process replica: its leadership signal and how to stop it.
struct Candidate {
    identity: &'static str,
    leading: watch::Receiver<bool>,
    stop: CancellationToken,
    task: JoinHandle<()>,
}

fn candidate(ctx: &TestContext, identity: &'static str) -> Candidate {
    let elector = Elector::new(ctx.client.clone(), &ctx.namespace, LEASE, identity, fast());
    let leading = elector.leadership();
    let stop = CancellationToken::new();
    let task = tokio::spawn(elector.run(stop.clone()));
    Candidate {
        identity,
        leading,
        stop,
        task,
    }
}

fn leaders<'a>(candidates: &[&'a Candidate]) -> Vec<&'a str> {
    candidates
        .iter()
        .filter(|c| *c.leading.borrow())
        .map(|c| c.identity)
        .collect()
}

async fn lease(ctx: &TestContext) -> Result<(Option<String>, i32)> {
    let lease = ctx.api::<Lease>().get(LEASE).await?;
    let spec = lease.spec.unwrap_or_default();
    Ok((
        spec.holder_identity.filter(|h| !h.is_empty()),
        spec.lease_transitions.unwrap_or(0),
    ))
}

/// Waits until exactly one of `candidates` leads and the Lease names it; returns it.
async fn sole_leader<'a>(ctx: &TestContext, candidates: &[&'a Candidate]) -> Result<&'a str> {
    poll_until("exactly one leader", Duration::from_secs(20), || async {
        let leading = leaders(candidates);
        let (holder, _) = lease(ctx).await?;
        match leading.as_slice() {
            [one] if holder.as_deref() == Some(*one) => Ok(Some(*one)),
            [_, _, ..] => bail!("two leaders at once: {leading:?}"),
            _ => Ok(None),
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standby_takes_over_when_the_leader_stops() -> Result<()> {
    run_in_namespace(
        "standby_takes_over_when_the_leader_stops",
        |ctx| async move {
            let a = candidate(&ctx, "replica-a");
            let b = candidate(&ctx, "replica-b");
            let first = sole_leader(&ctx, &[&a, &b]).await?;
            // Both keep retrying for a few lease periods; still exactly one leads.
            for _ in 0..8 {
                tokio::time::sleep(Duration::from_millis(500)).await;
                let leading = leaders(&[&a, &b]);
                ensure!(leading == [first], "leaders changed to {leading:?}");
            }
            let (_, transitions_before) = lease(&ctx).await?;

            let (stopped, standby) = if first == a.identity { (a, b) } else { (b, a) };
            stopped.stop.cancel();
            tokio::time::timeout(Duration::from_secs(5), stopped.task)
                .await
                .context("the stopped elector did not finish")??;
            ensure!(
                !*stopped.leading.borrow(),
                "the stopped elector still claims to lead"
            );

            let took_over = sole_leader(&ctx, &[&standby]).await?;
            ensure!(took_over == standby.identity);
            let (holder, transitions_after) = lease(&ctx).await?;
            ensure!(
                holder.as_deref() == Some(standby.identity),
                "holder {holder:?}"
            );
            ensure!(
                transitions_after > transitions_before,
                "leaseTransitions {transitions_before} → {transitions_after}"
            );
            standby.stop.cancel();
            tokio::time::timeout(Duration::from_secs(5), standby.task).await??;
            let (holder, _) = lease(&ctx).await?;
            ensure!(holder.is_none(), "graceful shutdown left holder {holder:?}");
            Ok(())
        },
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_stops_at_once_when_its_lease_is_taken() -> Result<()> {
    run_in_namespace(
        "leader_stops_at_once_when_its_lease_is_taken",
        |ctx| async move {
            let a = candidate(&ctx, "replica-a");
            sole_leader(&ctx, &[&a]).await?;
            // Another writer takes the Lease with a fresh renewTime and a long duration.
            let patch = json!({"spec": {
                "holderIdentity": "intruder",
                "renewTime": MicroTime(Timestamp::now()),
                "leaseDurationSeconds": 60,
            }});
            ctx.api::<Lease>()
                .patch(LEASE, &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
            let mut leading = a.leading.clone();
            // One retry period to notice, plus slack for the apiserver round trip.
            tokio::time::timeout(Duration::from_secs(2), leading.wait_for(|l| !*l))
                .await
                .context("the leader kept leading after losing its Lease")??;
            // And it does not take the fresh Lease back.
            tokio::time::sleep(Duration::from_secs(2)).await;
            ensure!(!*a.leading.borrow(), "took a fresh Lease from its holder");
            ensure!(lease(&ctx).await?.0.as_deref() == Some("intruder"));
            a.stop.cancel();
            tokio::time::timeout(Duration::from_secs(5), a.task).await??;
            // It did not hold the Lease, so it must not release it either.
            ensure!(lease(&ctx).await?.0.as_deref() == Some("intruder"));
            Ok(())
        },
    )
    .await
}

/// A bare HTTP/1.1 GET: status code and body.
async fn get(addr: std::net::SocketAddr, path: &str) -> Result<(u16, String)> {
    let mut stream = tokio::net::TcpStream::connect(addr).await?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await?;
    let status = response
        .split_whitespace()
        .nth(1)
        .context("no status line")?
        .parse()?;
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
        .unwrap_or_default();
    Ok((status, body))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_turns_ok_once_the_caches_sync() -> Result<()> {
    run_in_namespace("readyz_turns_ok_once_the_caches_sync", |ctx| async move {
        stevedore_tests::crds::install(
            &ctx.client,
            &[include_str!(
                "../../../deploy/crds/apps.kruise.io_clonesets.yaml"
            )],
        )
        .await?;
        let shutdown = CancellationToken::new();
        let config = RuntimeConfig {
            namespace: ctx.namespace.clone(),
            lease_name: LEASE.to_owned(),
            identity: "replica-readyz".to_owned(),
            admin_addr: "127.0.0.1:0".parse()?,
            timings: fast(),
            owner: None,
        };
        let mut runtime =
            Runtime::<Stores>::start(ctx.client.clone(), config, shutdown.clone()).await?;
        let addr = runtime.admin_addr;
        let metrics_addr = runtime
            .serve_metrics("127.0.0.1:0".parse()?, &shutdown)
            .await?;

        let (status, body) = get(addr, "/healthz").await?;
        ensure!(status == 200, "/healthz {status}: {body}");
        let body = poll_until("/readyz to answer 200", Duration::from_secs(60), || async {
            let (status, body) = get(addr, "/readyz").await?;
            for kind in [
                "Pod",
                "Node",
                "PersistentVolumeClaim",
                "ControllerRevision",
                "CloneSet",
            ] {
                ensure!(
                    body.contains(kind),
                    "/readyz does not report {kind}: {body}"
                );
            }
            Ok((status == 200).then_some(body))
        })
        .await?;
        ensure!(!body.contains("[-]"), "{body}");
        ensure!(runtime.stores.sync.all_synced());
        ensure!(!runtime.stores.nodes.is_empty(), "the Node store is empty");

        poll_until(
            "the leader gauge to read 1",
            Duration::from_secs(20),
            || async {
                let (_, metrics) = get(metrics_addr, "/metrics").await?;
                Ok(metrics
                    .lines()
                    .any(|l| l == "stevedore_controlplane_leader 1")
                    .then_some(()))
            },
        )
        .await?;

        shutdown.cancel();
        tokio::time::timeout(Duration::from_secs(10), runtime.wait())
            .await
            .context("the runtime did not shut down")?;
        ensure!(lease(&ctx).await?.0.is_none(), "the Lease was not released");
        Ok(())
    })
    .await
}
