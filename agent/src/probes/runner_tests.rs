//! The runner with a scripted exec and paused time: states move by the thresholds, only
//! changes are broadcast, an apply keeps unchanged probes and drops removed ones, and an
//! older generation is refused.

use std::collections::{BTreeMap, VecDeque};
use std::net::{IpAddr, Ipv4Addr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use super::*;
use crate::containers::ExecError;
use crate::probes::state::Thresholds;

/// Exits with the scripted statuses in turn, then 0; counts its runs.
#[derive(Clone, Default)]
struct Scripted {
    exits: Arc<Mutex<VecDeque<u32>>>,
    runs: Arc<Mutex<u32>>,
}

impl ContainerExec for Scripted {
    async fn exec(
        &self,
        _: &str,
        _: &str,
        _: &[String],
        _: Duration,
    ) -> Result<ExecExit, ExecError> {
        *self.runs.lock().expect("not poisoned") += 1;
        let next = self
            .exits
            .lock()
            .expect("not poisoned")
            .pop_front()
            .unwrap_or(0);
        Ok(ExecExit::Status(next))
    }
}

fn key(probe: &str) -> ProbeKey {
    ProbeKey {
        namespace: "ns".into(),
        pod: "p".into(),
        uid: "u".into(),
        probe: probe.into(),
    }
}

fn spec(period: u64, failure: u32) -> ProbeSpec {
    ProbeSpec {
        ip: IpAddr::V4(Ipv4Addr::LOCALHOST),
        container: "main".into(),
        handler: Handler::Exec(vec!["true".into()]),
        initial_delay: Duration::ZERO,
        timeout: Duration::from_secs(1),
        period: Duration::from_secs(period),
        thresholds: Thresholds {
            success: 1,
            failure,
        },
    }
}

fn runner(exits: &[u32]) -> (ProbeRunner<Scripted>, Scripted) {
    let exec = Scripted::default();
    exec.exits.lock().expect("not poisoned").extend(exits);
    let client = crate::probes::handlers::http_client().expect("client");
    (
        ProbeRunner::new(exec.clone(), client, CancellationToken::new()),
        exec,
    )
}

async fn next(updates: &mut broadcast::Receiver<Update>) -> Update {
    tokio::time::timeout(Duration::from_secs(60), updates.recv())
        .await
        .expect("an update in time")
        .expect("open")
}

#[tokio::test(start_paused = true)]
async fn states_move_by_thresholds_and_only_changes_are_sent() {
    let (runner, exec) = runner(&[1, 1, 0]);
    let (_, mut updates) = runner.watch();
    let probes = BTreeMap::from([(key("m#a"), spec(10, 2))]);
    runner.apply(Epoch::new("uid", 1), probes).expect("applied");

    // First failure: still Unknown, but its message is news.
    let first = next(&mut updates).await;
    let record = first.record.expect("a record");
    assert_eq!(
        (record.state, record.message.as_str()),
        (ProbeState::Unknown, "command exited with status 1")
    );
    // Second failure reaches the threshold of 2.
    let second = next(&mut updates).await.record.expect("a record");
    assert_eq!(second.state, ProbeState::Failed);
    assert!(second.last_transition.is_some());
    // A success turns it Succeeded with an empty message.
    let third = next(&mut updates).await.record.expect("a record");
    assert_eq!(
        (third.state, third.message.as_str()),
        (ProbeState::Succeeded, "")
    );
    // More successes send nothing, though the probe keeps running every period.
    tokio::time::sleep(Duration::from_secs(35)).await;
    assert!(updates.try_recv().is_err());
    assert!(*exec.runs.lock().expect("not poisoned") >= 6);
    let (snapshot, _) = runner.watch();
    assert_eq!(snapshot.len(), 1);
    assert_eq!(
        snapshot[0].record.as_ref().map(|r| r.state),
        Some(ProbeState::Succeeded)
    );
}

#[tokio::test(start_paused = true)]
async fn an_apply_keeps_what_is_unchanged_and_refuses_an_older_generation() {
    let (runner, _) = runner(&[]);
    let (_, mut updates) = runner.watch();
    let both = BTreeMap::from([(key("m#a"), spec(10, 3)), (key("m#b"), spec(10, 3))]);
    runner.apply(Epoch::new("uid", 2), both).expect("applied");
    next(&mut updates).await;
    next(&mut updates).await;

    let only_a = BTreeMap::from([(key("m#a"), spec(10, 3))]);
    let stale = runner.apply(Epoch::new("uid", 1), only_a.clone());
    assert!(stale.is_err(), "{stale:?}");
    assert_eq!(runner.apply(Epoch::new("uid", 3), only_a), Ok(3));
    let removed = next(&mut updates).await;
    assert_eq!((removed.key.probe.as_str(), removed.record), ("m#b", None));
    let (snapshot, _) = runner.watch();
    let kept: Vec<_> = snapshot
        .iter()
        .map(|u| (u.key.probe.clone(), u.record.as_ref().map(|r| r.state)))
        .collect();
    assert_eq!(kept, [("m#a".to_owned(), Some(ProbeState::Succeeded))]);
}
