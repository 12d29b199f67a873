use serde_json::{Value, json};

use super::*;

/// One step of the state machine.
fn step(s: &Snapshot<'_>) -> Plan {
    plan(s)
}

const CREATED: &str = "2026-01-01T00:00:00Z";

fn at(seconds: i64) -> Timestamp {
    let created: Timestamp = CREATED.parse().expect("a timestamp");
    created + SignedDuration::from_secs(seconds)
}

/// A request for containers `app` and `side` of pod `web`, with `extra` merged into spec
/// and `status` as its status.
fn request(spec: Value, status: Value, labels: Value) -> ContainerRecreateRequest {
    let mut full = json!({
        "apiVersion": "apps.kruise.io/v1alpha1",
        "kind": "ContainerRecreateRequest",
        "metadata": {
            "name": "crr", "namespace": "ns", "uid": "crr-uid",
            "creationTimestamp": CREATED, "labels": labels,
        },
        "spec": { "podName": "web", "containers": [{ "name": "app" }, { "name": "side" }] },
    });
    if let (Some(base), Some(extra)) = (full["spec"].as_object_mut(), spec.as_object()) {
        base.extend(extra.clone());
    }
    if !status.is_null() {
        full["status"] = status;
    }
    serde_json::from_value(full).expect("a request")
}

fn plain() -> ContainerRecreateRequest {
    request(json!({}), Value::Null, json!({}))
}

fn labelled(spec: Value, status: Value) -> ContainerRecreateRequest {
    let labels = json!({
        POD_NAME_LABEL: "web", POD_UID_LABEL: "pod-uid", NODE_NAME_LABEL: "node-a",
    });
    request(spec, status, labels)
}

fn recreating_status() -> Value {
    json!({
        "phase": "Recreating",
        "containerRecreateStates": [
            { "name": "app", "phase": "Recreating" },
            { "name": "side", "phase": "Pending" },
        ],
    })
}

fn pod(uid: &str, node: Option<&str>) -> Pod {
    serde_json::from_value(json!({
        "metadata": { "name": "web", "namespace": "ns", "uid": uid },
        "spec": {
            "nodeName": node,
            "containers": [{ "name": "app" }, { "name": "side" }, { "name": "other" }],
        },
    }))
    .expect("a pod")
}

fn snapshot<'a>(
    request: &'a ContainerRecreateRequest,
    pod: Option<&'a Pod>,
    operation: Option<&'a str>,
    agent: &'a AgentView,
    now: Timestamp,
) -> Snapshot<'a> {
    Snapshot {
        request,
        pod,
        node_exists: true,
        earlier: None,
        operation,
        agent,
        now,
    }
}

fn progress(states: &[(&str, Phase, &str)], done: bool) -> AgentView {
    AgentView::Progress {
        containers: states
            .iter()
            .map(|(name, phase, message)| ContainerProgress {
                name: (*name).to_owned(),
                phase: *phase,
                message: (*message).to_owned(),
            })
            .collect(),
        done,
    }
}

fn phases(plan: &Plan) -> Vec<(String, Phase)> {
    (plan.status.container_recreate_states.iter())
        .map(|s| (s.name.clone(), s.phase))
        .collect()
}

#[test]
fn a_new_request_labels_itself_and_starts_the_restart() {
    let request = request(
        json!({ "strategy": { "orderedRecreate": true, "unreadyGracePeriodSeconds": 3, "minStartedSeconds": 5, "terminationGracePeriodSeconds": 10 } }),
        Value::Null,
        json!({}),
    );
    let pod = pod("pod-uid", Some("node-a"));
    let plan = step(&snapshot(
        &request,
        Some(&pod),
        None,
        &AgentView::Silent,
        at(1),
    ));
    assert_eq!(
        plan.action,
        Action::Start(RestartRequest {
            node: "node-a".into(),
            namespace: "ns".into(),
            pod_name: "web".into(),
            pod_uid: "pod-uid".into(),
            containers: vec!["app".into(), "side".into()],
            ordered: true,
            termination_grace_period_seconds: Some(10),
            unready_grace_period_seconds: 3,
            min_started_seconds: 5,
        })
    );
    assert_eq!(plan.status.phase, Phase::Pending);
    let labels: Vec<(&str, &str)> = (plan.labels.iter())
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    assert_eq!(
        labels,
        [
            (NODE_NAME_LABEL, "node-a"),
            (POD_NAME_LABEL, "web"),
            (POD_UID_LABEL, "pod-uid")
        ]
    );
    let status = recreating(&request, "node-a");
    assert_eq!(status.phase, Phase::Recreating);
    assert_eq!(status.container_recreate_states.len(), 2);
}

#[test]
fn requests_the_pod_cannot_satisfy_fail_naming_why() {
    let unbound = pod("pod-uid", None);
    let good = pod("pod-uid", Some("node-a"));
    let missing = request(
        json!({ "containers": [{ "name": "app" }, { "name": "ghost" }] }),
        Value::Null,
        json!({}),
    );
    let plain = plain();
    let cases: [(&str, &ContainerRecreateRequest, Option<&Pod>, bool, &str); 3] = [
        (
            "unbound",
            &plain,
            Some(&unbound),
            true,
            "Pod web is not bound to a node.",
        ),
        (
            "no node",
            &plain,
            Some(&good),
            false,
            "Node node-a of pod web does not exist.",
        ),
        (
            "no container",
            &missing,
            Some(&good),
            true,
            "Pod web has no container named ghost.",
        ),
    ];
    for (name, request, pod, node_exists, expected) in cases {
        let mut s = snapshot(request, pod, None, &AgentView::Silent, at(1));
        s.node_exists = node_exists;
        let plan = step(&s);
        assert_eq!(plan.status.phase, Phase::Failed, "{name}");
        assert!(
            plan.status.message.contains(expected),
            "{name}: {}",
            plan.status.message
        );
        assert_eq!(plan.status.completion_time, Some(Time(at(1))), "{name}");
        assert_eq!(plan.action, Action::None, "{name}");
    }
}

#[test]
fn a_request_whose_pod_is_gone_completes_saying_so() {
    // OpenKruise: not found, being deleted, or another UID than recorded → Completed,
    // message "pod has gone" (checked before the deadline).
    let replaced = pod("new-uid", Some("node-a"));
    let mut deleting = pod("pod-uid", Some("node-a"));
    deleting.metadata.deletion_timestamp = Some(Time(at(0)));
    let labelled = labelled(json!({}), Value::Null);
    let past_deadline = request(
        json!({ "activeDeadlineSeconds": 1 }),
        Value::Null,
        json!({}),
    );
    let plain = plain();
    let cases: [(&str, &ContainerRecreateRequest, Option<&Pod>); 5] = [
        ("no pod", &plain, None),
        ("no pod, recorded UID", &labelled, None),
        ("replaced", &labelled, Some(&replaced)),
        ("deleting", &plain, Some(&deleting)),
        ("gone and past the deadline", &past_deadline, None),
    ];
    for (name, request, pod) in cases {
        let s = snapshot(request, pod, None, &AgentView::Silent, at(100));
        let plan = step(&s);
        assert_eq!(plan.status.phase, Phase::Completed, "{name}");
        assert_eq!(plan.status.message, POD_GONE, "{name}");
        assert_eq!(plan.status.completion_time, Some(Time(at(100))), "{name}");
        assert_eq!(plan.action, Action::None, "{name}");
    }
}

#[test]
fn a_second_request_for_the_pod_waits_for_the_first() {
    let request = plain();
    let pod = pod("pod-uid", Some("node-a"));
    let mut s = snapshot(&request, Some(&pod), None, &AgentView::Silent, at(1));
    s.earlier = Some("first");
    let plan = step(&s);
    assert_eq!(plan.action, Action::None);
    assert_eq!(plan.status.phase, Phase::Pending);
    assert!(
        plan.status.message.contains("first"),
        "{}",
        plan.status.message
    );
    assert_eq!(plan.requeue_after, Some(RECHECK_WAITING_AFTER));
}

#[test]
fn earlier_request_is_the_oldest_unfinished_one_of_the_same_pod() {
    let make = |name: &str, pod: &str, created: &str, phase: Option<&str>| {
        let mut r = plain();
        r.metadata.name = Some(name.into());
        r.metadata.uid = Some(format!("{name}-uid"));
        r.metadata.creation_timestamp = Some(Time(created.parse().expect("a timestamp")));
        r.spec.pod_name = pod.into();
        r.status = phase.map(|p| serde_json::from_value(json!({ "phase": p })).expect("a status"));
        r
    };
    let me = make("m", "web", "2026-01-01T00:00:10Z", None);
    let older = make("b", "web", "2026-01-01T00:00:05Z", Some("Recreating"));
    let oldest = make("c", "web", "2026-01-01T00:00:01Z", Some("Pending"));
    let same_time_earlier_name = make("a", "web", "2026-01-01T00:00:10Z", None);
    let finished = make("d", "web", "2026-01-01T00:00:00Z", Some("Completed"));
    let failed = make("e", "web", "2026-01-01T00:00:00Z", Some("Failed"));
    let other_pod = make("f", "db", "2026-01-01T00:00:00Z", None);
    let later = make("g", "web", "2026-01-01T00:00:20Z", None);
    let cases: [(&str, Vec<&ContainerRecreateRequest>, Option<&str>); 5] = [
        ("alone", vec![&me], None),
        ("oldest first", vec![&me, &older, &oldest], Some("c")),
        (
            "same time: by name",
            vec![&me, &same_time_earlier_name],
            Some("a"),
        ),
        (
            "finished, other pods and later ones do not count",
            vec![&me, &finished, &failed, &other_pod, &later],
            None,
        ),
        ("the earlier one only", vec![&later, &me], Some("m")),
    ];
    for (name, all, expected) in cases {
        let subject = if name == "the earlier one only" {
            &later
        } else {
            &me
        };
        assert_eq!(earlier_request(subject, all), expected, "{name}");
    }
}

#[test]
fn progress_is_followed_until_done() {
    let request = labelled(json!({}), recreating_status());
    let pod = pod("pod-uid", Some("node-a"));
    let running = progress(
        &[
            ("app", Phase::Succeeded, ""),
            ("side", Phase::Recreating, ""),
        ],
        false,
    );
    let plan = step(&snapshot(&request, Some(&pod), Some("op"), &running, at(5)));
    assert_eq!(plan.status.phase, Phase::Recreating);
    assert_eq!(
        phases(&plan),
        [
            ("app".into(), Phase::Succeeded),
            ("side".into(), Phase::Recreating)
        ]
    );
    assert_eq!(plan.requeue_after, Some(POLL_EVERY));
    assert!(plan.labels.is_empty());

    let done = progress(
        &[
            ("app", Phase::Succeeded, ""),
            ("side", Phase::Succeeded, ""),
        ],
        true,
    );
    let plan = step(&snapshot(&request, Some(&pod), Some("op"), &done, at(6)));
    assert_eq!(plan.status.phase, Phase::Completed);
    assert_eq!(plan.status.completion_time, Some(Time(at(6))));
}

#[test]
fn a_failed_container_fails_the_request_unless_ignored() {
    let pod = pod("pod-uid", Some("node-a"));
    let one_failed = |done| {
        progress(
            &[
                ("app", Phase::Failed, "no running container named app"),
                ("side", Phase::Pending, ""),
            ],
            done,
        )
    };
    let cases = [
        ("Fail, still running", "Fail", false, Some(Phase::Failed)),
        (
            "Ignore, still running",
            "Ignore",
            false,
            Some(Phase::Recreating),
        ),
        ("Ignore, done", "Ignore", true, Some(Phase::Completed)),
    ];
    for (name, policy, done, expected) in cases {
        let request = labelled(
            json!({ "strategy": { "failurePolicy": policy } }),
            recreating_status(),
        );
        let agent = one_failed(done);
        let plan = step(&snapshot(&request, Some(&pod), Some("op"), &agent, at(5)));
        assert_eq!(Some(plan.status.phase), expected, "{name}");
        if plan.status.phase.is_finished() {
            assert!(
                plan.status
                    .message
                    .contains("no running container named app"),
                "{name}: {}",
                plan.status.message
            );
        }
    }
}

#[test]
fn the_deadline_fails_a_request_whose_containers_still_run() {
    let request = labelled(json!({ "activeDeadlineSeconds": 30 }), recreating_status());
    let pod = pod("pod-uid", Some("node-a"));
    let running = progress(
        &[
            ("app", Phase::Succeeded, ""),
            ("side", Phase::Recreating, ""),
        ],
        false,
    );
    let before = step(&snapshot(
        &request,
        Some(&pod),
        Some("op"),
        &running,
        at(20),
    ));
    assert_eq!(before.status.phase, Phase::Recreating);
    assert_eq!(before.requeue_after, Some(POLL_EVERY));

    let after = step(&snapshot(
        &request,
        Some(&pod),
        Some("op"),
        &running,
        at(30),
    ));
    assert_eq!(after.status.phase, Phase::Failed);
    assert!(
        after.status.message.contains("activeDeadlineSeconds (30s)"),
        "{}",
        after.status.message
    );
    assert_eq!(
        phases(&after),
        [
            ("app".into(), Phase::Succeeded),
            ("side".into(), Phase::Failed)
        ]
    );

    // A waiting request wakes for its deadline.
    let waiting = request_waiting_with_deadline();
    let pod2 = pod.clone();
    let mut s = snapshot(&waiting, Some(&pod2), None, &AgentView::Silent, at(25));
    s.earlier = Some("first");
    assert_eq!(step(&s).requeue_after, Some(Duration::from_secs(5)));
}

fn request_waiting_with_deadline() -> ContainerRecreateRequest {
    request(
        json!({ "activeDeadlineSeconds": 30 }),
        Value::Null,
        json!({}),
    )
}

/// (case, request, operation, agent's answer, now, expected phase, starts again)
type AgentCase<'a> = (
    &'a str,
    &'a ContainerRecreateRequest,
    Option<&'a str>,
    &'a AgentView,
    i64,
    Phase,
    bool,
);

#[test]
fn an_agent_that_stops_answering_ends_the_request_after_a_bounded_wait() {
    let recreating = labelled(json!({}), recreating_status());
    let fresh = plain();
    let pod = pod("pod-uid", Some("node-a"));
    let unreachable = AgentView::Unreachable {
        since: at(0),
        message: "connection refused".into(),
    };
    let lost = AgentView::Lost("no restart operation \"op\"".into());
    let refused = AgentView::Refused("pod has no container named \"app\"".into());
    let busy = AgentView::Busy("pod ns/web already has restart operation x running".into());
    let limit = i64::try_from(AGENT_LOST_AFTER.as_secs()).expect("small");
    let cases: [AgentCase<'_>; 8] = [
        (
            "following, briefly unreachable",
            &recreating,
            Some("op"),
            &unreachable,
            limit - 1,
            Phase::Recreating,
            false,
        ),
        (
            "following, unreachable too long",
            &recreating,
            Some("op"),
            &unreachable,
            limit,
            Phase::Failed,
            false,
        ),
        (
            "following, operation lost",
            &recreating,
            Some("op"),
            &lost,
            1,
            Phase::Failed,
            false,
        ),
        (
            "starting, briefly unreachable: ask again",
            &fresh,
            None,
            &unreachable,
            limit - 1,
            Phase::Pending,
            true,
        ),
        (
            "starting, unreachable too long",
            &fresh,
            None,
            &unreachable,
            limit,
            Phase::Failed,
            false,
        ),
        (
            "starting, refused",
            &fresh,
            None,
            &refused,
            1,
            Phase::Failed,
            false,
        ),
        (
            "starting, busy: ask again",
            &fresh,
            None,
            &busy,
            1,
            Phase::Pending,
            true,
        ),
        (
            "recreating with no recorded operation",
            &recreating,
            None,
            &AgentView::Silent,
            1,
            Phase::Failed,
            false,
        ),
    ];
    for (name, request, operation, agent, now, expected, starts) in cases {
        let plan = step(&snapshot(request, Some(&pod), operation, agent, at(now)));
        assert_eq!(
            plan.status.phase, expected,
            "{name}: {}",
            plan.status.message
        );
        assert_eq!(matches!(plan.action, Action::Start(_)), starts, "{name}");
        assert!(
            plan.requeue_after.is_some(),
            "{name}: never looked at again"
        );
        assert!(
            plan.status.message.contains("node-a"),
            "{name}: {}",
            plan.status.message
        );
    }
}

#[test]
fn a_finished_request_is_deleted_after_its_ttl() {
    let finished = |ttl: Value| {
        labelled(
            json!({ "ttlSecondsAfterFinished": ttl }),
            json!({ "phase": "Completed", "completionTime": "2026-01-01T00:01:00Z" }),
        )
    };
    let with_ttl = finished(json!(60));
    let without = finished(Value::Null);
    let cases: [(
        &str,
        &ContainerRecreateRequest,
        i64,
        Action,
        Option<Duration>,
    ); 3] = [
        (
            "before the TTL",
            &with_ttl,
            100,
            Action::None,
            Some(Duration::from_secs(20)),
        ),
        ("at the TTL", &with_ttl, 120, Action::Delete, None),
        ("no TTL: kept", &without, 10_000, Action::None, None),
    ];
    for (name, request, now, action, requeue) in cases {
        // A finished request is left alone even when its pod is gone.
        let plan = step(&snapshot(
            request,
            None,
            Some("op"),
            &AgentView::Silent,
            at(now),
        ));
        assert_eq!(plan.action, action, "{name}");
        assert_eq!(plan.requeue_after, requeue, "{name}");
        assert_eq!(Some(&plan.status), request.status.as_ref(), "{name}");
    }
}

#[test]
fn a_held_recreate_stays_pending_with_the_budgets_sentence() {
    let before = ContainerRecreateRequestStatus {
        phase: Phase::Pending,
        message: "Waiting for the agent.".into(),
        ..ContainerRecreateRequestStatus::default()
    };
    let plan = held(
        &before,
        "the PodUnavailableBudget web allows no more unavailable pods",
    );
    assert_eq!(plan.status.phase, Phase::Pending);
    assert_eq!(
        plan.status.message,
        "Waiting for a disruption budget: the PodUnavailableBudget web allows no more unavailable pods."
    );
    assert_eq!(plan.action, Action::None);
    assert_eq!(plan.requeue_after, Some(RETRY_BUDGET_AFTER));
}
