use super::*;
use LifecycleState::*;

fn hook(labels: &[(&str, &str)], finalizers: &[&str], mark_pod_not_ready: bool) -> LifecycleHook {
    LifecycleHook {
        labels_handler: labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
        finalizers_handler: finalizers.iter().map(|f| (*f).to_owned()).collect(),
        mark_pod_not_ready,
    }
}

/// A pod with the given state (None: no label) plus extra labels and finalizers.
struct TestPod {
    labels: BTreeMap<String, String>,
    finalizers: Vec<String>,
}

impl TestPod {
    fn new(state: Option<&str>, labels: &[(&str, &str)], finalizers: &[&str]) -> Self {
        let mut all: BTreeMap<String, String> = labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        if let Some(state) = state {
            all.insert(STATE_LABEL.to_owned(), state.to_owned());
        }
        Self {
            labels: all,
            finalizers: finalizers.iter().map(|f| (*f).to_owned()).collect(),
        }
    }
    fn view(&self) -> PodHookView<'_> {
        PodHookView {
            labels: &self.labels,
            finalizers: &self.finalizers,
        }
    }
}

fn change(state: LifecycleState, readiness: Option<ReadinessChange>) -> StateChange {
    StateChange {
        state,
        readiness,
        add_labels: BTreeMap::new(),
        add_finalizers: Vec::new(),
    }
}

const ADD_DELETE: Option<ReadinessChange> =
    Some(ReadinessChange::AddNotReadyKey("preparingDelete"));
const ADD_UPDATE: Option<ReadinessChange> =
    Some(ReadinessChange::AddNotReadyKey("preparingUpdate"));
const REMOVE_UPDATE: Option<ReadinessChange> =
    Some(ReadinessChange::RemoveNotReadyKey("preparingUpdate"));

#[test]
fn states_round_trip_through_the_label() {
    for state in LifecycleState::ALL {
        assert_eq!(LifecycleState::parse(state.as_str()), Some(state));
    }
    assert_eq!(LifecycleState::parse(""), None);
    assert_eq!(LifecycleState::parse("normal"), None);
}

type Labels = &'static [(&'static str, &'static str)];
/// (case, hook, pod labels, pod finalizers, is_hooked, is_all_hooked)
type HookCase = (
    &'static str,
    Option<LifecycleHook>,
    Labels,
    &'static [&'static str],
    bool,
    bool,
);
/// (case, lifecycle, state, pod labels, expected)
type UpdateCase = (
    &'static str,
    Option<Lifecycle>,
    Option<&'static str>,
    Labels,
    UpdateStep,
);

#[test]
fn hooked_and_all_hooked() {
    let two_labels = hook(&[("a", "1"), ("b", "1")], &[], false);
    let with_finalizer = hook(&[("a", "1")], &["f"], false);
    // (case, hook, pod labels, pod finalizers, is_hooked, is_all_hooked)
    let cases: Vec<HookCase> = vec![
        ("no hook", None, &[("a", "1")], &["f"], false, false),
        (
            "empty hook",
            Some(hook(&[], &[], false)),
            &[],
            &[],
            false,
            true,
        ),
        (
            "label with value",
            Some(hook(&[("a", "1")], &[], false)),
            &[("a", "1")],
            &[],
            true,
            true,
        ),
        (
            "label with other value",
            Some(hook(&[("a", "1")], &[], false)),
            &[("a", "2")],
            &[],
            false,
            false,
        ),
        (
            "label missing",
            Some(hook(&[("a", "1")], &[], false)),
            &[],
            &[],
            false,
            false,
        ),
        (
            "one of two labels",
            Some(two_labels.clone()),
            &[("a", "1")],
            &[],
            true,
            false,
        ),
        (
            "both labels",
            Some(two_labels),
            &[("a", "1"), ("b", "1")],
            &[],
            true,
            true,
        ),
        (
            "finalizer only",
            Some(with_finalizer.clone()),
            &[],
            &["f"],
            true,
            false,
        ),
        (
            "label and finalizer",
            Some(with_finalizer.clone()),
            &[("a", "1")],
            &["f"],
            true,
            true,
        ),
        (
            "other finalizer",
            Some(with_finalizer),
            &[],
            &["g"],
            false,
            false,
        ),
    ];
    for (case, hook, labels, finalizers, hooked, all) in cases {
        let pod = TestPod::new(Some("Normal"), labels, finalizers);
        assert_eq!(
            is_hooked(hook.as_ref(), pod.view()),
            hooked,
            "{case}: is_hooked"
        );
        assert_eq!(
            is_all_hooked(hook.as_ref(), pod.view()),
            all,
            "{case}: is_all_hooked"
        );
    }
}

#[test]
fn not_ready_policy_per_state() {
    for state in LifecycleState::ALL {
        assert_eq!(not_ready_policy(state, false), None, "{state:?}");
    }
    assert_eq!(not_ready_policy(PreparingDelete, true), ADD_DELETE);
    assert_eq!(not_ready_policy(PreparingUpdate, true), ADD_UPDATE);
    assert_eq!(not_ready_policy(Updated, true), REMOVE_UPDATE);
    assert_eq!(not_ready_policy(Normal, true), None);
    assert_eq!(not_ready_policy(Updating, true), None);
}

fn pre_delete(mark: bool) -> Lifecycle {
    Lifecycle {
        pre_delete: Some(hook(&[("hold", "true")], &["example.io/drain"], mark)),
        ..Lifecycle::default()
    }
}

#[test]
fn delete_steps() {
    let in_place_only = Lifecycle {
        in_place_update: Some(hook(&[("hold", "true")], &[], true)),
        ..Lifecycle::default()
    };
    // (case, lifecycle, pod, expected)
    let cases: Vec<(&str, Option<Lifecycle>, TestPod, DeleteStep)> = vec![
        (
            "no lifecycle",
            None,
            TestPod::new(Some("Normal"), &[("hold", "true")], &[]),
            DeleteStep::Delete,
        ),
        (
            "not hooked",
            Some(pre_delete(true)),
            TestPod::new(Some("Normal"), &[], &[]),
            DeleteStep::Delete,
        ),
        (
            "hooked by label",
            Some(pre_delete(false)),
            TestPod::new(Some("Normal"), &[("hold", "true")], &[]),
            DeleteStep::Prepare(change(PreparingDelete, None)),
        ),
        (
            "hooked, no state label yet, marks not ready",
            Some(pre_delete(true)),
            TestPod::new(None, &[], &["example.io/drain"]),
            DeleteStep::Prepare(change(PreparingDelete, ADD_DELETE)),
        ),
        (
            "still hooked in PreparingDelete",
            Some(pre_delete(false)),
            TestPod::new(Some("PreparingDelete"), &[("hold", "true")], &[]),
            DeleteStep::Wait { readiness: None },
        ),
        (
            "still hooked keeps the pod not ready",
            Some(pre_delete(true)),
            TestPod::new(Some("PreparingDelete"), &[], &["example.io/drain"]),
            DeleteStep::Wait {
                readiness: ADD_DELETE,
            },
        ),
        (
            "released in PreparingDelete",
            Some(pre_delete(true)),
            TestPod::new(Some("PreparingDelete"), &[("hold", "false")], &[]),
            DeleteStep::Delete,
        ),
        (
            "only an inPlaceUpdate hook",
            Some(in_place_only),
            TestPod::new(Some("Normal"), &[("hold", "true")], &[]),
            DeleteStep::Delete,
        ),
        (
            "hooked while updating",
            Some(pre_delete(false)),
            TestPod::new(Some("Updating"), &[("hold", "true")], &[]),
            DeleteStep::Prepare(change(PreparingDelete, None)),
        ),
    ];
    for (case, lifecycle, pod, want) in cases {
        assert_eq!(plan_delete(lifecycle.as_ref(), pod.view()), want, "{case}");
    }
}

fn in_place(mark: bool) -> Lifecycle {
    Lifecycle {
        in_place_update: Some(hook(&[("serving", "true")], &["example.io/lb"], mark)),
        ..Lifecycle::default()
    }
}

#[test]
fn in_place_update_steps() {
    let rearm = StateChange {
        add_labels: BTreeMap::from([("serving".to_owned(), "true".to_owned())]),
        add_finalizers: vec!["example.io/lb".to_owned()],
        ..change(PreparingUpdate, ADD_UPDATE)
    };
    let hooked = &[("serving", "true")];
    // (case, lifecycle, state, pod labels, expected)
    let cases: Vec<UpdateCase> = vec![
        (
            "no state, no lifecycle",
            None,
            None,
            &[],
            UpdateStep::UpdateNow,
        ),
        (
            "Normal, not hooked",
            Some(in_place(false)),
            Some("Normal"),
            &[],
            UpdateStep::UpdateNow,
        ),
        (
            "Normal, hooked",
            Some(in_place(false)),
            Some("Normal"),
            hooked,
            UpdateStep::Prepare(change(PreparingUpdate, None)),
        ),
        (
            "PreparingNormal, hooked, marks not ready",
            Some(in_place(true)),
            Some("PreparingNormal"),
            hooked,
            UpdateStep::Prepare(change(PreparingUpdate, ADD_UPDATE)),
        ),
        (
            "no state, hooked",
            Some(in_place(true)),
            None,
            hooked,
            UpdateStep::Prepare(change(PreparingUpdate, ADD_UPDATE)),
        ),
        (
            "PreparingUpdate, still hooked",
            Some(in_place(true)),
            Some("PreparingUpdate"),
            hooked,
            UpdateStep::Wait,
        ),
        (
            "PreparingUpdate, released",
            Some(in_place(true)),
            Some("PreparingUpdate"),
            &[],
            UpdateStep::UpdateNow,
        ),
        (
            "PreparingUpdate, no hook",
            None,
            Some("PreparingUpdate"),
            hooked,
            UpdateStep::UpdateNow,
        ),
        (
            "Updating continues",
            Some(in_place(true)),
            Some("Updating"),
            hooked,
            UpdateStep::UpdateNow,
        ),
        (
            "Updated re-arms the hook",
            Some(in_place(true)),
            Some("Updated"),
            &[],
            UpdateStep::Prepare(rearm),
        ),
        (
            "Updated without hook waits for refresh",
            None,
            Some("Updated"),
            &[],
            UpdateStep::Wait,
        ),
    ];
    for (case, lifecycle, state, labels, want) in cases {
        let pod = TestPod::new(state, labels, &[]);
        assert_eq!(
            plan_in_place_update(lifecycle.as_ref(), "p", pod.view()),
            Ok(want),
            "{case}"
        );
    }
}

#[test]
fn in_place_update_refused_while_deleting() {
    for state in ["PreparingDelete", "Bogus"] {
        let pod = TestPod::new(Some(state), &[], &[]);
        let err = plan_in_place_update(None, "web-1", pod.view()).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("not allowed to in-place update pod web-1 in lifecycle state {state:?}")
        );
    }
}

#[test]
fn refresh_transitions() {
    let pre_normal = Lifecycle {
        pre_normal: Some(hook(&[("registered", "true")], &[], false)),
        ..Lifecycle::default()
    };
    let done = RefreshFacts {
        on_update_revision: true,
        update_completed: true,
        ..RefreshFacts::default()
    };
    let busy = RefreshFacts {
        on_update_revision: true,
        update_completed: false,
        ..RefreshFacts::default()
    };
    let old = RefreshFacts::default();
    let unscheduled = RefreshFacts {
        awaiting_schedule: true,
        ..RefreshFacts::default()
    };
    let hooked = &[("serving", "true")];
    // (case, lifecycle, state, pod labels, pod finalizers, facts, expected)
    type Case<'a> = (
        &'a str,
        Option<Lifecycle>,
        Option<&'a str>,
        &'a [(&'a str, &'a str)],
        &'a [&'a str],
        RefreshFacts,
        Option<StateChange>,
    );
    let cases: Vec<Case<'_>> = vec![
        (
            "no state label",
            Some(in_place(true)),
            None,
            &[],
            &[],
            done,
            None,
        ),
        (
            "PreparingNormal without lifecycle",
            None,
            Some("PreparingNormal"),
            &[],
            &[],
            old,
            Some(change(Normal, None)),
        ),
        (
            "PreparingNormal waits to be scheduled without preNormal",
            None,
            Some("PreparingNormal"),
            &[],
            &[],
            unscheduled,
            None,
        ),
        (
            "PreparingNormal waits to be scheduled with other hooks only",
            Some(in_place(true)),
            Some("PreparingNormal"),
            &[],
            &[],
            unscheduled,
            None,
        ),
        (
            "PreparingNormal all hooked need not be scheduled",
            Some(pre_normal.clone()),
            Some("PreparingNormal"),
            &[("registered", "true")],
            &[],
            unscheduled,
            Some(change(Normal, None)),
        ),
        (
            "PreparingNormal waits for preNormal",
            Some(pre_normal.clone()),
            Some("PreparingNormal"),
            &[],
            &[],
            old,
            None,
        ),
        (
            "PreparingNormal once all hooked",
            Some(pre_normal),
            Some("PreparingNormal"),
            &[("registered", "true")],
            &[],
            old,
            Some(change(Normal, None)),
        ),
        (
            "PreparingUpdate on the old revision",
            Some(in_place(true)),
            Some("PreparingUpdate"),
            &[],
            &[],
            old,
            None,
        ),
        (
            "PreparingUpdate rolled back, hook not re-attached",
            Some(in_place(true)),
            Some("PreparingUpdate"),
            &[],
            &[],
            busy,
            Some(change(Updated, REMOVE_UPDATE)),
        ),
        (
            "PreparingUpdate rolled back without lifecycle",
            None,
            Some("PreparingUpdate"),
            &[],
            &[],
            busy,
            Some(change(Normal, None)),
        ),
        (
            "Updating, not done",
            Some(in_place(true)),
            Some("Updating"),
            &[],
            &[],
            busy,
            None,
        ),
        (
            "Updating done, hook released",
            Some(in_place(true)),
            Some("Updating"),
            &[],
            &[],
            done,
            Some(change(Updated, REMOVE_UPDATE)),
        ),
        (
            "Updating done, hook already back",
            Some(in_place(false)),
            Some("Updating"),
            hooked,
            &["example.io/lb"],
            done,
            Some(change(Normal, None)),
        ),
        (
            "Updating done, no lifecycle",
            None,
            Some("Updating"),
            &[],
            &[],
            done,
            Some(change(Normal, None)),
        ),
        (
            "Updating done, lifecycle without inPlaceUpdate hook passes through Updated",
            Some(Lifecycle::default()),
            Some("Updating"),
            &[],
            &[],
            done,
            Some(change(Updated, None)),
        ),
        (
            "Updated waits for the hook",
            Some(in_place(true)),
            Some("Updated"),
            hooked,
            &[],
            done,
            None,
        ),
        (
            "Updated once all hooked",
            Some(in_place(true)),
            Some("Updated"),
            hooked,
            &["example.io/lb"],
            done,
            Some(change(Normal, None)),
        ),
        (
            "Updated without hook",
            Some(Lifecycle::default()),
            Some("Updated"),
            &[],
            &[],
            done,
            Some(change(Normal, None)),
        ),
        (
            "Normal stays",
            Some(in_place(true)),
            Some("Normal"),
            &[],
            &[],
            done,
            None,
        ),
        (
            "PreparingDelete stays",
            Some(in_place(true)),
            Some("PreparingDelete"),
            &[],
            &[],
            done,
            None,
        ),
    ];
    for (case, lifecycle, state, labels, finalizers, facts, want) in cases {
        let pod = TestPod::new(state, labels, finalizers);
        assert_eq!(
            refresh_state(lifecycle.as_ref(), pod.view(), facts),
            want,
            "{case}"
        );
    }
}

#[test]
fn merge_patch_matches_openkruise_body() {
    let plain = change(PreparingDelete, ADD_DELETE).merge_patch("2026-01-02T03:04:05Z");
    assert_eq!(
        plain,
        json!({"metadata": {
            "labels": {"lifecycle.apps.kruise.io/state": "PreparingDelete"},
            "annotations": {"lifecycle.apps.kruise.io/timestamp": "2026-01-02T03:04:05Z"},
        }})
    );
    let rearm = StateChange {
        add_labels: BTreeMap::from([("serving".to_owned(), "true".to_owned())]),
        add_finalizers: vec!["example.io/lb".to_owned()],
        ..change(PreparingUpdate, None)
    };
    assert_eq!(
        rearm.merge_patch("t"),
        json!({"metadata": {
            "labels": {"lifecycle.apps.kruise.io/state": "PreparingUpdate", "serving": "true"},
            "annotations": {"lifecycle.apps.kruise.io/timestamp": "t"},
            "finalizers": ["example.io/lb"],
        }})
    );
}
