use std::collections::BTreeMap;
use std::time::Duration;

use super::plan::{Fault, FaultKind, Shape, plan};

fn shape(faults: usize, kinds: &[FaultKind]) -> Shape {
    Shape {
        faults,
        mean_gap: Duration::from_secs(2),
        sets: 3,
        nodes: 4,
        kinds: kinds.to_vec(),
    }
}

#[test]
fn a_seed_replays_the_same_schedule_and_another_seed_does_not() {
    let all = shape(200, &FaultKind::ALL);
    assert_eq!(plan(7, &all), plan(7, &all));
    assert_ne!(plan(7, &all), plan(8, &all));
    assert_eq!(plan(7, &all).len(), 200);
}

#[test]
fn every_enabled_kind_is_drawn_in_its_proportion_and_no_other() {
    let steps = plan(1, &shape(2_000, &FaultKind::ALL));
    let mut counts: BTreeMap<FaultKind, usize> = BTreeMap::new();
    for step in &steps {
        *counts.entry(step.fault.kind()).or_default() += 1;
    }
    assert_eq!(counts.len(), FaultKind::ALL.len(), "{counts:?}");
    // Weight 3 of 18 for pod deletions (≈ 333), 1 of 18 for a leader kill or a throttle
    // (≈ 111), 2 of 18 for an agent kill (≈ 222).
    let deletes = counts[&FaultKind::DeletePod];
    let kills = counts[&FaultKind::KillLeader];
    let agents = counts[&FaultKind::KillAgent];
    let throttles = counts[&FaultKind::ThrottleApiserver];
    assert!((280..430).contains(&deletes), "{counts:?}");
    assert!((70..170).contains(&kills), "{counts:?}");
    assert!((70..170).contains(&throttles), "{counts:?}");
    assert!((170..300).contains(&agents), "{counts:?}");

    let only = plan(1, &shape(300, &[FaultKind::DeletePod, FaultKind::UserEdit]));
    assert!(
        only.iter()
            .all(|s| matches!(s.fault, Fault::DeletePod { .. } | Fault::UserEdit { .. }))
    );
}

#[test]
fn targets_and_waits_stay_within_the_shape() {
    for step in plan(3, &shape(1_000, &FaultKind::ALL)) {
        let gap = step.after.as_millis();
        assert!((1_000..=3_000).contains(&gap), "{step:?}");
        match step.fault {
            Fault::NodeNotReady { node } => assert!(node < 4),
            Fault::KillAgent { node, seconds } => {
                assert!(node < 4 && (1..=6).contains(&seconds), "{step:?}");
            }
            Fault::DeletePod { set, .. } | Fault::DeleteRevision { set, .. } => assert!(set < 3),
            Fault::UserEdit { set } => assert!(set < 3),
            Fault::PauseEtcd { seconds } => assert!((1..=4).contains(&seconds)),
            Fault::ThrottleApiserver { seconds } => assert!((2..=8).contains(&seconds)),
            Fault::KillLeader
            | Fault::KillStandby
            | Fault::RestartApiserver
            | Fault::DeletePvc { .. }
            | Fault::KillRealAgent { .. }
            | Fault::DropWebhookEndpoints => {}
        }
    }
}

#[test]
fn no_enabled_kind_means_no_fault() {
    assert!(plan(1, &shape(10, &[])).is_empty());
}

#[test]
fn every_kind_has_a_command_line_name_that_finds_it_again() {
    assert_eq!(FaultKind::KillLeader.flag(), "kill-leader");
    assert_eq!(
        FaultKind::DropWebhookEndpoints.flag(),
        "drop-webhook-endpoints"
    );
    assert_eq!(FaultKind::DeletePvc.flag(), "delete-pvc");
    assert_eq!(FaultKind::ThrottleApiserver.flag(), "throttle-apiserver");
    for kind in FaultKind::ALL {
        assert_eq!(FaultKind::from_flag(&kind.flag()), Some(kind));
    }
    assert_eq!(FaultKind::from_flag("kill-everything"), None);
}
