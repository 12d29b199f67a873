use super::*;

/// Three pods, all at the update revision, ready and available.
fn done() -> RolloutState {
    RolloutState {
        kind: "CloneSet",
        namespace: "ns".into(),
        name: "web".into(),
        generation: 2,
        observed_generation: 2,
        desired: 3,
        target_updated: 3,
        pods: 3,
        updated: 3,
        updated_ready: Some(3),
        ready: 3,
        available: 3,
        current_revision: "web-aaa".into(),
        update_revision: "web-bbb".into(),
        ..RolloutState::default()
    }
}

#[test]
fn verdicts() {
    type Edit = fn(&mut RolloutState);
    let cases: &[(&str, Edit, Verdict)] = &[
        ("complete", |_| {}, Verdict::Done("CloneSet ns/web successfully rolled out.".into())),
        (
            "spec not yet observed",
            |s| s.observed_generation = 1,
            Verdict::Waiting("Waiting for the CloneSet spec update to be observed...".into()),
        ),
        (
            "pods still to update",
            |s| s.updated = 1,
            Verdict::Waiting("Waiting for rollout to finish: 1 of 3 pods updated...".into()),
        ),
        (
            "an old pod still terminating",
            |s| s.pods = 4,
            Verdict::Waiting("Waiting for rollout to finish: 1 old pods pending termination...".into()),
        ),
        (
            "updated but not ready",
            |s| s.updated_ready = Some(2),
            Verdict::Waiting("Waiting for rollout to finish: 2 of 3 updated pods ready...".into()),
        ),
        (
            "ready but not yet available (minReadySeconds)",
            |s| s.available = 2,
            Verdict::Waiting("Waiting for rollout to finish: 2 of 3 pods available...".into()),
        ),
        (
            "a kind without updated-ready counts waits on availability",
            |s| {
                s.updated_ready = None;
                s.available = 1;
            },
            Verdict::Waiting("Waiting for rollout to finish: 1 of 3 pods available...".into()),
        ),
        (
            "partition reached",
            |s| {
                s.target_updated = 1;
                s.updated = 1;
                s.updated_ready = Some(1);
            },
            Verdict::Done("partitioned roll out complete: 1 of 3 pods updated.".into()),
        ),
        (
            "deadline exceeded: the controller's message",
            |s| {
                s.updated = 1;
                s.stalled = Some("CloneSet revision web-bbb has timed out progressing".into());
            },
            Verdict::Stalled("CloneSet revision web-bbb has timed out progressing".into()),
        ),
        (
            "a stale deadline condition on a finished rollout is not a stall",
            |s| s.stalled = Some("timed out".into()),
            Verdict::Done("CloneSet ns/web successfully rolled out.".into()),
        ),
        (
            "paused mid-rollout",
            |s| {
                s.updated = 1;
                s.paused = true;
            },
            Verdict::Stalled(
                "CloneSet ns/web is paused, so its rollout does not go on (Waiting for rollout to finish: 1 of 3 pods updated...); resume it with `kubectl stevedore rollout resume cloneset/web`.".into(),
            ),
        ),
        (
            "OnDelete with old pods",
            |s| {
                s.updated = 0;
                s.on_delete = true;
            },
            Verdict::Stalled(
                "CloneSet ns/web updates pods only when they are deleted (updateStrategy OnDelete): Waiting for rollout to finish: 0 of 3 pods updated...".into(),
            ),
        ),
    ];
    for (name, edit, want) in cases {
        let mut state = done();
        edit(&mut state);
        assert_eq!(assess(&state), *want, "{name}");
    }
}

#[test]
fn revision_counts_name_both_revisions_and_the_problem() {
    let mut state = done();
    state.pods = 3;
    state.updated = 1;
    state.ready = 2;
    state.available = 2;
    assert_eq!(
        revision_counts(&state),
        "1 updated (bbb), 2 ready, 2 available of 3, 2 old (aaa)"
    );
    state.problem = Some("The update is held by budget pub.".into());
    state.current_revision = state.update_revision.clone();
    assert_eq!(
        revision_counts(&state),
        "1 updated (bbb), 2 ready, 2 available of 3, 2 old — The update is held by budget pub."
    );
}

#[test]
fn bar_counts_updated_ready_pods_of_the_target() {
    let cases = [
        (Some(2), 3, 3, (3, 2)),
        // Kinds without an updated-ready count: available pods, at most the updated ones.
        (None, 1, 3, (3, 1)),
        // Never past the target (a partition of 1 with more pods ready).
        (Some(3), 3, 2, (2, 2)),
    ];
    for (updated_ready, updated, target, want) in cases {
        let state = RolloutState {
            updated_ready,
            updated,
            target_updated: target,
            ..done()
        };
        assert_eq!(bar_position(&state), want);
    }
}

#[test]
fn short_revision_drops_the_workload_name() {
    assert_eq!(short_revision("web-6d4f9c", "web"), "6d4f9c");
    assert_eq!(short_revision("6d4f9c", "web"), "6d4f9c");
    assert_eq!(short_revision("", "web"), "");
}
