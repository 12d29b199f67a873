use super::*;

const SEC: Duration = Duration::from_secs(1);

fn plan(containers: &[&str]) -> Plan {
    Plan {
        containers: containers.iter().map(|c| (*c).to_owned()).collect(),
        ordered: false,
        termination_grace: 10 * SEC,
        unready_grace: Duration::ZERO,
        min_started: 3 * SEC,
        mark_unready: false,
        timeout: 100 * SEC,
    }
}

/// Observation builder: `(container, running ids, ready id)`.
fn seen(entries: &[(&str, &[&str], Option<&str>)]) -> Observation {
    entries
        .iter()
        .map(|(name, running, ready)| {
            (
                (*name).to_owned(),
                ContainerObservation {
                    running: running.iter().map(|id| (*id).to_owned()).collect(),
                    ready: ready.map(str::to_owned),
                },
            )
        })
        .collect()
}

fn signal(container: &str, ids: &[&str], signal: Signal) -> Action {
    Action::Signal {
        container: container.to_owned(),
        ids: ids.iter().map(|id| (*id).to_owned()).collect(),
        signal,
    }
}

fn states(op: &Operation) -> Vec<RestartState> {
    op.progress()
        .containers
        .iter()
        .map(ContainerRestartStatus::state)
        .collect()
}

#[test]
fn stops_with_sigterm_then_sigkill_after_the_grace_period() {
    let t0 = Instant::now();
    let mut op = Operation::new(plan(&["web"]), t0);
    let old = seen(&[("web", &["a"], None)]);

    assert_eq!(op.step(&old, t0), [signal("web", &["a"], Signal::Term)]);
    assert_eq!(states(&op), [RestartState::Recreating]);
    assert_eq!(op.step(&old, t0 + 9 * SEC), []);
    assert_eq!(
        op.step(&old, t0 + 10 * SEC),
        [signal("web", &["a"], Signal::Kill)]
    );
    assert_eq!(op.step(&seen(&[("web", &[], None)]), t0 + 11 * SEC), []);
    assert!(!op.is_done());
}

#[test]
fn a_container_that_stops_on_sigterm_gets_no_sigkill() {
    let t0 = Instant::now();
    let mut op = Operation::new(plan(&["web"]), t0);
    op.step(&seen(&[("web", &["a"], None)]), t0);
    assert_eq!(op.step(&seen(&[("web", &[], None)]), t0 + SEC), []);
    assert_eq!(op.step(&seen(&[("web", &[], None)]), t0 + 20 * SEC), []);
}

#[test]
fn succeeds_once_the_new_container_ran_min_started() {
    let t0 = Instant::now();
    let mut op = Operation::new(plan(&["web"]), t0);
    op.step(&seen(&[("web", &["a"], None)]), t0);
    let new = seen(&[("web", &["b"], None)]);

    assert_eq!(op.step(&new, t0 + SEC), []);
    assert_eq!(states(&op), [RestartState::Recreating]);
    op.step(&new, t0 + 3 * SEC);
    assert!(!op.is_done(), "up 2s of 3s");
    op.step(&new, t0 + 4 * SEC);
    assert_eq!(states(&op), [RestartState::Succeeded]);
    assert!(op.is_done());
    assert!(op.progress().done);
}

#[test]
fn zero_min_started_succeeds_as_soon_as_the_new_container_runs() {
    let t0 = Instant::now();
    let mut op = Operation::new(
        Plan {
            min_started: Duration::ZERO,
            ..plan(&["web"])
        },
        t0,
    );
    op.step(&seen(&[("web", &["a"], None)]), t0);
    op.step(&seen(&[("web", &["b"], None)]), t0 + SEC);
    assert!(op.is_done());
}

#[test]
fn a_new_container_that_dies_early_is_not_counted() {
    let t0 = Instant::now();
    let mut op = Operation::new(plan(&["web"]), t0);
    op.step(&seen(&[("web", &["a"], None)]), t0);
    op.step(&seen(&[("web", &["b"], None)]), t0 + SEC);
    op.step(&seen(&[("web", &[], None)]), t0 + 2 * SEC);
    op.step(&seen(&[("web", &["c"], None)]), t0 + 3 * SEC);
    op.step(&seen(&[("web", &["c"], None)]), t0 + 5 * SEC);
    assert!(!op.is_done(), "c is up only 2s");
    op.step(&seen(&[("web", &["c"], None)]), t0 + 6 * SEC);
    assert!(op.is_done());
    assert_eq!(op.progress().containers[0].message, "new container c");
}

#[test]
fn unordered_containers_are_stopped_together() {
    let t0 = Instant::now();
    let mut op = Operation::new(plan(&["a", "b"]), t0);
    let actions = op.step(&seen(&[("a", &["a1"], None), ("b", &["b1"], None)]), t0);
    assert_eq!(
        actions,
        [
            signal("a", &["a1"], Signal::Term),
            signal("b", &["b1"], Signal::Term)
        ]
    );
}

#[test]
fn ordered_restart_waits_for_the_previous_container_to_be_ready() {
    let t0 = Instant::now();
    let mut op = Operation::new(
        Plan {
            ordered: true,
            min_started: Duration::ZERO,
            ..plan(&["a", "b"])
        },
        t0,
    );
    let actions = op.step(&seen(&[("a", &["a1"], None), ("b", &["b1"], None)]), t0);
    assert_eq!(actions, [signal("a", &["a1"], Signal::Term)]);
    assert_eq!(
        states(&op),
        [RestartState::Recreating, RestartState::Pending]
    );

    // a2 runs but the pod status still reports the old a1 as ready.
    let a2_not_ready = seen(&[("a", &["a2"], Some("a1")), ("b", &["b1"], None)]);
    assert_eq!(op.step(&a2_not_ready, t0 + SEC), []);
    assert_eq!(
        states(&op),
        [RestartState::Succeeded, RestartState::Pending]
    );

    let a2_ready = seen(&[("a", &["a2"], Some("a2")), ("b", &["b1"], None)]);
    assert_eq!(
        op.step(&a2_ready, t0 + 2 * SEC),
        [signal("b", &["b1"], Signal::Term)]
    );
}

#[test]
fn a_missing_container_fails_and_in_order_fails_the_rest() {
    let t0 = Instant::now();
    let mut op = Operation::new(
        Plan {
            ordered: true,
            ..plan(&["a", "b"])
        },
        t0,
    );
    assert_eq!(op.step(&seen(&[("b", &["b1"], None)]), t0), []);
    let progress = op.progress();
    assert_eq!(states(&op), [RestartState::Failed, RestartState::Failed]);
    assert_eq!(
        progress.containers[0].message,
        "no running container named a"
    );
    assert_eq!(
        progress.containers[1].message,
        "not restarted: container a failed"
    );
    assert!(op.is_done());
}

#[test]
fn marks_the_pod_unready_first_and_restores_it_at_the_end() {
    let t0 = Instant::now();
    let mut op = Operation::new(
        Plan {
            mark_unready: true,
            unready_grace: 5 * SEC,
            min_started: Duration::ZERO,
            ..plan(&["web"])
        },
        t0,
    );
    let old = seen(&[("web", &["a"], None)]);
    assert_eq!(op.step(&old, t0), [Action::SetPodReady(false)]);
    assert_eq!(op.step(&old, t0 + 4 * SEC), [], "within the unready grace");
    assert_eq!(states(&op), [RestartState::Pending]);
    assert_eq!(
        op.step(&old, t0 + 5 * SEC),
        [signal("web", &["a"], Signal::Term)]
    );
    assert_eq!(
        op.step(&seen(&[("web", &["b"], None)]), t0 + 6 * SEC),
        [Action::SetPodReady(true)]
    );
    assert!(op.is_done());
}

#[test]
fn times_out_and_still_restores_readiness() {
    let t0 = Instant::now();
    let mut op = Operation::new(
        Plan {
            mark_unready: true,
            ..plan(&["web"])
        },
        t0,
    );
    let old = seen(&[("web", &["a"], None)]);
    op.step(&old, t0);
    op.step(&old, t0 + SEC);
    let gone = seen(&[("web", &[], None)]);
    assert_eq!(op.step(&gone, t0 + 50 * SEC), []);
    assert_eq!(op.step(&gone, t0 + 100 * SEC), [Action::SetPodReady(true)]);
    assert_eq!(states(&op), [RestartState::Failed]);
    assert_eq!(
        op.progress().containers[0].message,
        "timed out waiting for the new container"
    );
}

#[test]
fn failing_before_the_pod_was_marked_unready_restores_nothing() {
    let t0 = Instant::now();
    let mut op = Operation::new(
        Plan {
            mark_unready: true,
            ..plan(&["web"])
        },
        t0,
    );
    op.fail_unfinished("agent shutting down");
    assert!(op.is_done());
    assert_eq!(states(&op), [RestartState::Failed]);
}

#[test]
fn failing_during_the_unready_grace_restores_readiness_on_the_next_step() {
    let t0 = Instant::now();
    let mut op = Operation::new(
        Plan {
            mark_unready: true,
            unready_grace: 5 * SEC,
            ..plan(&["web"])
        },
        t0,
    );
    op.step(&seen(&[("web", &["a"], None)]), t0);
    op.fail_unfinished("could not set KruisePodReady");
    assert_eq!(
        op.step(&Observation::new(), t0 + SEC),
        [Action::SetPodReady(true)]
    );
    assert!(op.is_done());
}
