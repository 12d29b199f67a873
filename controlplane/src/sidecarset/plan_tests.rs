//! Which pods a SidecarSet upgrades now, one rule per case.

use super::*;

const NEW: Versions<'static> = Versions {
    hash: "new",
    hash_without_image: "shape",
};

/// An injected, active, ready pod at version `hash` (same shape unless `other_shape`).
fn pod(name: &str, hash: &str) -> SidecarPod {
    SidecarPod {
        view: PodView {
            name: name.to_owned(),
            ready: true,
            phase: "Running".to_owned(),
            node_name: "node-1".to_owned(),
            ..PodView::default()
        },
        injected: true,
        active: true,
        hash: hash.to_owned(),
        hash_without_image: "shape".to_owned(),
        selected_for_update: true,
        ..SidecarPod::default()
    }
}

fn old_pods(count: usize) -> Vec<SidecarPod> {
    (0..count).map(|i| pod(&format!("p{i}"), "old")).collect()
}

fn strategy(
    partition: Option<IntOrString>,
    max_unavailable: Option<IntOrString>,
) -> SidecarSetUpdateStrategy {
    SidecarSetUpdateStrategy {
        partition,
        max_unavailable,
        ..SidecarSetUpdateStrategy::default()
    }
}

fn names(pods: &[SidecarPod], indexes: &[usize]) -> Vec<String> {
    indexes.iter().map(|&i| pods[i].view.name.clone()).collect()
}

fn upgraded(strategy: &SidecarSetUpdateStrategy, pods: &[SidecarPod]) -> Vec<String> {
    names(pods, &plan(strategy, NEW, pods).expect("a plan").upgrade)
}

#[test]
fn max_unavailable_bounds_each_batch_and_defaults_to_one() {
    let cases = [
        ("default 1", strategy(None, None), 1),
        ("3", strategy(None, Some(IntOrString::Int(3))), 3),
        (
            "50% of 4 rounds up to 2",
            strategy(None, Some(IntOrString::String("50%".into()))),
            2,
        ),
        (
            "1% still 1",
            strategy(None, Some(IntOrString::String("1%".into()))),
            1,
        ),
    ];
    for (case, strategy, expected) in cases {
        assert_eq!(upgraded(&strategy, &old_pods(4)).len(), expected, "{case}");
    }
}

#[test]
fn pods_already_unavailable_or_upgrading_use_the_budget() {
    let mut pods = old_pods(3);
    pods[0].upgrading = true;
    assert!(
        upgraded(&strategy(None, None), &pods).is_empty(),
        "one upgrading uses maxUnavailable 1"
    );
    let mut pods = old_pods(3);
    pods[2].view.ready = false;
    // The not-ready pod goes first at no cost; no ready one while it is unavailable.
    assert_eq!(upgraded(&strategy(None, None), &pods), ["p2"]);
}

#[test]
fn partition_keeps_that_many_pods_on_their_old_version() {
    let wide = |partition| strategy(Some(partition), Some(IntOrString::Int(10)));
    let cases = [
        ("partition 0", wide(IntOrString::Int(0)), 4),
        ("partition 3", wide(IntOrString::Int(3)), 1),
        ("partition 4", wide(IntOrString::Int(4)), 0),
        ("partition 50%", wide(IntOrString::String("50%".into())), 2),
    ];
    for (case, strategy, expected) in cases {
        assert_eq!(upgraded(&strategy, &old_pods(4)).len(), expected, "{case}");
    }
    // Pods already updated count toward what the partition lets go.
    let mut pods = old_pods(4);
    pods[0].hash = "new".into();
    pods[1].hash = "new".into();
    assert!(upgraded(&wide(IntOrString::Int(2)), &pods).is_empty());
}

#[test]
fn paused_and_not_update_upgrade_nothing() {
    let paused = SidecarSetUpdateStrategy {
        paused: true,
        ..SidecarSetUpdateStrategy::default()
    };
    let not_update = SidecarSetUpdateStrategy {
        type_: Some(SidecarSetUpdateStrategyType::NotUpdate),
        ..SidecarSetUpdateStrategy::default()
    };
    for strategy in [paused, not_update] {
        let plan = plan(&strategy, NEW, &old_pods(2)).expect("a plan");
        assert!(plan.upgrade.is_empty(), "{strategy:?}");
        assert_eq!(plan.status.matched_pods, 2, "{strategy:?}");
    }
}

#[test]
fn only_image_changes_of_selected_idle_pods_are_upgraded() {
    let mut pods = old_pods(5);
    pods[0].hash_without_image = "other shape".into();
    pods[1].selected_for_update = false;
    pods[2].workload_updating = true;
    pods[3].injected = false;
    let wide = strategy(None, Some(IntOrString::Int(10)));
    assert_eq!(upgraded(&wide, &pods), ["p4"]);
}

#[test]
fn status_counts_the_injected_active_pods() {
    let mut pods = old_pods(4);
    pods[0].hash = "new".into();
    pods[1].hash = "new".into();
    pods[1].view.ready = false;
    pods[2].active = false;
    pods[3].injected = false;
    let status = plan(&strategy(None, None), NEW, &pods)
        .expect("a plan")
        .status;
    assert_eq!(
        (
            status.matched_pods,
            status.updated_pods,
            status.ready_pods,
            status.updated_ready_pods
        ),
        (2, 2, 1, 1)
    );
}

#[test]
fn finished_upgrades_are_closed() {
    let mut pods = old_pods(3);
    pods[0].upgrading = true;
    pods[0].upgrade_done = true;
    pods[1].upgrading = true;
    let plan = plan(&strategy(None, Some(IntOrString::Int(10))), NEW, &pods).expect("a plan");
    assert_eq!(names(&pods, &plan.finish), ["p0"]);
    assert_eq!(names(&pods, &plan.upgrade), ["p2"]);
}

#[test]
fn priority_and_scatter_order_the_upgrade_as_the_workloads() {
    let mut pods = old_pods(4);
    pods[3].view.labels =
        std::borrow::Cow::Owned([("tier".to_owned(), "canary".to_owned())].into());
    let priority: crate::api::common::UpdatePriorityStrategy = serde_json::from_value(serde_json::json!({
        "weightPriority": [{ "weight": 50, "matchSelector": { "matchLabels": { "tier": "canary" } } }]
    }))
    .expect("a priority strategy");
    let by_priority = SidecarSetUpdateStrategy {
        priority_strategy: Some(priority),
        ..SidecarSetUpdateStrategy::default()
    };
    assert_eq!(upgraded(&by_priority, &pods), ["p3"]);
    // Scatter: two pods of zone a among four spread over the batches, not both first.
    let mut pods = old_pods(4);
    for i in [0, 1] {
        pods[i].view.labels = std::borrow::Cow::Owned([("zone".to_owned(), "a".to_owned())].into());
    }
    let scattered = SidecarSetUpdateStrategy {
        scatter_strategy: vec![crate::api::common::UpdateScatterTerm {
            key: "zone".into(),
            value: "a".into(),
        }],
        max_unavailable: Some(IntOrString::Int(2)),
        ..SidecarSetUpdateStrategy::default()
    };
    let first_two = upgraded(&scattered, &pods);
    let zone_a = first_two
        .iter()
        .filter(|n| *n == "p0" || *n == "p1")
        .count();
    assert_eq!((first_two.len(), zone_a), (2, 1), "{first_two:?}");
}

#[test]
fn pods_of_one_name_in_two_namespaces_are_told_apart() {
    let pods = [pod("web-0", "old"), pod("web-0", "old")];
    let plan = plan(&strategy(None, Some(IntOrString::Int(2))), NEW, &pods).expect("a plan");
    assert_eq!(plan.upgrade, [0, 1]);
}

/// The default rolling strategy, and a paused one: what must happen under both.
fn rolling_and_paused() -> [SidecarSetUpdateStrategy; 2] {
    let paused = SidecarSetUpdateStrategy {
        paused: true,
        ..SidecarSetUpdateStrategy::default()
    };
    [strategy(None, None), paused]
}

#[test]
fn a_hot_sidecar_ready_in_its_new_container_has_the_old_one_emptied_even_when_paused() {
    let mut pods = vec![pod("swapped", "new"), pod("done", "new")];
    pods[0].upgrading = true;
    pods[0].reset_due = true;
    pods[1].upgrading = true;
    pods[1].upgrade_done = true;
    for strategy in rolling_and_paused() {
        let plan = plan(&strategy, NEW, &pods).expect("a plan");
        assert_eq!(names(&pods, &plan.reset), ["swapped"]);
        assert_eq!(names(&pods, &plan.finish), ["done"]);
        assert_eq!(
            plan.status.updated_ready_pods, 0,
            "a pod upgrading is not counted updated and ready"
        );
    }
}

#[test]
fn pods_due_a_change_beyond_images_are_not_upgradable_whatever_the_budgets() {
    let mut pods = old_pods(6);
    for pod in &mut pods[..5] {
        pod.hash_without_image = "other shape".into();
    }
    pods[1].selected_for_update = false;
    pods[2].upgrading = true;
    pods[3].injected = false;
    pods[4].workload_updating = true;
    let mut current = pod("current", "new");
    current.hash_without_image = "other shape".into();
    pods.push(current);
    // Partition keeping every pod and one unavailable pod using maxUnavailable: neither
    // holds the verdict back.
    pods[5].view.ready = false;
    let held = strategy(Some(IntOrString::Int(7)), Some(IntOrString::Int(1)));
    let plan = plan(&held, NEW, &pods).expect("a plan");
    assert_eq!(names(&pods, &plan.not_upgradable), ["p0", "p4"]);
    assert!(plan.upgrade.is_empty(), "{:?}", plan.upgrade);
}

#[test]
fn paused_and_not_update_mark_no_pod_not_upgradable() {
    let mut pods = old_pods(2);
    pods[0].hash_without_image = "other shape".into();
    let wide = strategy(None, Some(IntOrString::Int(10)));
    let plan_of = |strategy: &SidecarSetUpdateStrategy| plan(strategy, NEW, &pods).expect("a plan");
    let running = plan_of(&wide);
    assert_eq!(
        (
            names(&pods, &running.not_upgradable),
            names(&pods, &running.upgrade)
        ),
        (vec!["p0".to_owned()], vec!["p1".to_owned()])
    );
    let paused = SidecarSetUpdateStrategy {
        paused: true,
        ..wide.clone()
    };
    let not_update = SidecarSetUpdateStrategy {
        type_: Some(SidecarSetUpdateStrategyType::NotUpdate),
        ..wide
    };
    for strategy in [paused, not_update] {
        assert!(plan_of(&strategy).not_upgradable.is_empty(), "{strategy:?}");
    }
}

#[test]
fn a_gate_left_closed_is_reopened_even_when_paused_but_only_on_matched_pods() {
    let mut pods = vec![pod("closed", "old"), pod("open", "old"), pod("gone", "old")];
    pods[0].gate_left_closed = true;
    pods[2].gate_left_closed = true;
    pods[2].active = false;
    for strategy in rolling_and_paused() {
        let plan = plan(&strategy, NEW, &pods).expect("a plan");
        assert_eq!(names(&pods, &plan.reopen), ["closed"]);
    }
}
