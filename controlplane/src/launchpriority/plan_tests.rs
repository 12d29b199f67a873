use serde_json::json;

use super::*;

/// A pod named `web` with `containers` (name, optional `KRUISE_CONTAINER_PRIORITY`).
fn pod(annotation: Option<&str>, containers: &[(&str, Option<&str>)]) -> Pod {
    let containers: Vec<Value> = (containers.iter())
        .map(|(name, priority)| match priority {
            Some(p) => json!({ "name": name, "env": [{ "name": PRIORITY_ENV, "value": p }] }),
            None => json!({ "name": name }),
        })
        .collect();
    let annotations = annotation.map(|a| json!({ LAUNCH_PRIORITY_ANNOTATION: a }));
    serde_json::from_value(json!({
        "metadata": { "name": "web", "annotations": annotations },
        "spec": { "containers": containers },
    }))
    .expect("a pod")
}

/// What [`priorities`] answers.
type Priorities = Result<Option<Vec<i32>>, PriorityError>;

#[test]
fn priorities_follow_the_annotation_or_the_env() {
    let cases: [(&str, Pod, Priorities); 9] = [
        (
            "Ordered: spec order, the first highest",
            pod(Some("Ordered"), &[("a", None), ("b", None), ("c", None)]),
            Ok(Some(vec![0, -1, -2])),
        ),
        (
            "Ordered wins over the env",
            pod(Some("Ordered"), &[("a", Some("-5")), ("b", Some("9"))]),
            Ok(Some(vec![0, -1])),
        ),
        (
            "env: its value, 0 when absent",
            pod(None, &[("main", None), ("proxy", Some("1"))]),
            Ok(Some(vec![0, 1])),
        ),
        (
            "env: the extremes of the range",
            pod(
                None,
                &[("a", Some("2147483647")), ("b", Some("-2147483647"))],
            ),
            Ok(Some(vec![2_147_483_647, -2_147_483_647])),
        ),
        (
            "every priority equal: no order",
            pod(None, &[("a", Some("3")), ("b", Some("3"))]),
            Ok(None),
        ),
        (
            "another annotation value: the env decides",
            pod(Some("Random"), &[("a", None), ("b", None)]),
            Ok(None),
        ),
        (
            "one container: no order, even Ordered",
            pod(Some("Ordered"), &[("a", None)]),
            Ok(None),
        ),
        (
            "not a number: refused naming the container and value",
            pod(None, &[("a", None), ("proxy", Some("high"))]),
            Err(PriorityError {
                container: "proxy".into(),
                value: "high".into(),
            }),
        ),
        (
            "out of range: refused",
            pod(None, &[("a", Some("-2147483648")), ("b", None)]),
            Err(PriorityError {
                container: "a".into(),
                value: "-2147483648".into(),
            }),
        ),
    ];
    for (case, pod, expected) in cases {
        assert_eq!(priorities(&pod), expected, "{case}");
    }
}

#[test]
fn a_refusal_names_the_container_and_the_value() {
    let refused =
        priorities(&pod(None, &[("a", None), ("proxy", Some("high"))])).expect_err("a bad value");
    assert_eq!(
        refused.to_string(),
        "container proxy has KRUISE_CONTAINER_PRIORITY \"high\", but a launch priority is a \
         whole number from -2147483647 to 2147483647"
    );
}

#[test]
fn only_pods_that_ask_are_looked_at() {
    let barrier =
        json!({ "spec": { "containers": [{ "name": "a", "env": [barrier_env("web", 0)] }] } });
    let cases = [
        (
            json!({ "metadata": { "annotations": { LAUNCH_PRIORITY_ANNOTATION: "Ordered" } } }),
            true,
        ),
        (
            json!({ "spec": { "containers": [{ "name": "a", "env": [{ "name": PRIORITY_ENV, "value": "1" }] }] } }),
            true,
        ),
        (barrier, true),
        (
            json!({ "metadata": { "annotations": { LAUNCH_PRIORITY_ANNOTATION: "No" } } }),
            false,
        ),
        (
            json!({ "spec": { "containers": [{ "name": "a", "env": [{ "name": "X", "value": "1" }] }] } }),
            false,
        ),
        (
            json!({ "spec": { "containers": [{ "name": "a" }] } }),
            false,
        ),
    ];
    for (pod, asks) in cases {
        assert_eq!(asks_for_order(&pod), asks, "{pod}");
    }
}

#[test]
fn the_patch_gives_a_barrier_to_all_but_the_highest_priority() {
    let ordered = pod(
        Some("Ordered"),
        &[("a", None), ("b", None), ("c", Some("7"))],
    );
    let patch = barrier_patch(&ordered, "web", Some(&[0, -1, -2]));
    assert_eq!(
        patch,
        [
            json!({ "op": "add", "path": "/spec/containers/1/env", "value": [barrier_env("web", -1)] }),
            json!({ "op": "add", "path": "/spec/containers/2/env/-", "value": barrier_env("web", -2) }),
        ]
    );
    assert_eq!(
        barrier_env("web", -1)["valueFrom"]["configMapKeyRef"],
        json!({ "name": "web-barrier", "key": "p_-1" })
    );
    // Several containers share the highest priority: none of them waits.
    let shared = pod(None, &[("a", Some("1")), ("b", Some("1")), ("c", None)]);
    let patch = barrier_patch(&shared, "web", Some(&[1, 1, 0]));
    assert_eq!(
        patch,
        [
            json!({ "op": "add", "path": "/spec/containers/2/env", "value": [barrier_env("web", 0)] })
        ]
    );
}

/// The pod after `patch`, applied by hand: `add`, `replace` and `remove` of env members,
/// the only operations the patch has.
fn patched(pod: &Pod, name: &str, priorities: Option<&[i32]>) -> Pod {
    let mut value = serde_json::to_value(pod).expect("a pod as JSON");
    for op in barrier_patch(pod, name, priorities) {
        let path = op["path"].as_str().expect("a path");
        let (parent, last) = path.rsplit_once('/').expect("a member path");
        let target = value.pointer_mut(parent).expect("the parent exists");
        match (op["op"].as_str(), target) {
            (Some("add"), Value::Object(map)) => {
                map.insert(last.to_owned(), op["value"].clone());
            }
            (Some("add"), Value::Array(list)) if last == "-" => list.push(op["value"].clone()),
            (Some("replace"), Value::Array(list)) => {
                list[last.parse::<usize>().expect("an index")] = op["value"].clone();
            }
            (Some("remove"), Value::Array(list)) => {
                list.remove(last.parse::<usize>().expect("an index"));
            }
            (op, _) => panic!("unexpected operation {op:?} at {path}"),
        }
    }
    serde_json::from_value(value).expect("a pod")
}

#[test]
fn a_reinvoked_webhook_changes_nothing_twice_and_fixes_what_changed() {
    let first = pod(Some("Ordered"), &[("a", None), ("b", None)]);
    let once = patched(&first, "web", Some(&[0, -1]));
    assert!(barrier_patch(&once, "web", Some(&[0, -1])).is_empty());
    // A later webhook put a container in front: the old first one now waits, the new
    // first one loses its barrier and the second key moves.
    let mut reordered = once.clone();
    let spec = reordered.spec.as_mut().expect("a spec");
    let mut front = spec.containers[1].clone();
    front.name = "sidecar".into();
    spec.containers.insert(0, front);
    let patch = barrier_patch(&reordered, "web", Some(&[0, -1, -2]));
    assert_eq!(
        patch,
        [
            json!({ "op": "remove", "path": "/spec/containers/0/env/0" }),
            json!({ "op": "add", "path": "/spec/containers/1/env", "value": [barrier_env("web", -1)] }),
            json!({ "op": "replace", "path": "/spec/containers/2/env/0", "value": barrier_env("web", -2) }),
        ]
    );
    // No order any more: every barrier is dropped.
    let dropped = patched(&once, "web", None);
    assert!(barrier_keys(&dropped).is_empty());
}

#[test]
fn generated_names_keep_the_prefix_and_the_apiservers_length() {
    let mut draws = [0_usize, 1, 26, 5, 3].into_iter();
    let name = generated_name("web-", |_| draws.next().unwrap_or(0));
    assert_eq!(name, "web-bc9hf");
    let long = "x".repeat(70);
    let name = generated_name(&long, |_| 0);
    assert_eq!(name.len(), 63);
    assert!(name.ends_with("xbbbbb"), "{name}");
}

/// A running pod: `containers` (name, barrier priority), `ready` the ready ones.
fn running(containers: &[(&str, Option<i32>)], ready: &[&str], phase: &str) -> Pod {
    let specs: Vec<Value> = (containers.iter())
        .map(|(name, barrier)| match barrier {
            Some(p) => json!({ "name": name, "env": [barrier_env("web", *p)] }),
            None => json!({ "name": name }),
        })
        .collect();
    let statuses: Vec<Value> = (containers.iter())
        .map(|(name, _)| json!({ "name": name, "ready": ready.contains(name), "restartCount": 0, "image": "i", "imageID": "" }))
        .collect();
    serde_json::from_value(json!({
        "metadata": { "name": "web" },
        "spec": { "containers": specs },
        "status": { "phase": phase, "containerStatuses": statuses },
    }))
    .expect("a pod")
}

#[test]
fn keys_fall_due_as_the_containers_before_them_become_ready() {
    let three = [("a", None), ("b", Some(-1)), ("c", Some(-2))];
    let keys = |list: &[&str]| {
        list.iter()
            .map(|k| (*k).to_owned())
            .collect::<BTreeSet<_>>()
    };
    let cases: [(&str, Pod, BTreeSet<String>, Vec<&str>); 8] = [
        (
            "nothing ready: nothing due",
            running(&three, &[], "Pending"),
            keys(&[]),
            vec![],
        ),
        (
            "the first ready: the second's key",
            running(&three, &["a"], "Pending"),
            keys(&[]),
            vec!["p_-1"],
        ),
        (
            "already added: nothing again",
            running(&three, &["a"], "Running"),
            keys(&["p_-1"]),
            vec![],
        ),
        (
            "the second ready: the third's key",
            running(&three, &["a", "b"], "Running"),
            keys(&["p_-1"]),
            vec!["p_-2"],
        ),
        (
            "both fell due unseen: both, highest first",
            running(&three, &["a", "b"], "Running"),
            keys(&[]),
            vec!["p_-1", "p_-2"],
        ),
        (
            "the second not ready: the third waits",
            running(&three, &["a", "c"], "Running"),
            keys(&["p_-1"]),
            vec![],
        ),
        (
            "a finished pod: nothing",
            running(&three, &["a"], "Failed"),
            keys(&[]),
            vec![],
        ),
        (
            "OpenKruise's pods: the highest has a barrier too, due at once",
            running(&[("a", Some(0)), ("b", Some(-1))], &[], "Pending"),
            keys(&[]),
            vec!["p_0"],
        ),
    ];
    for (case, pod, present, due) in cases {
        assert_eq!(keys_due(&pod, &present), due, "{case}");
    }
}

#[test]
fn equal_priorities_share_a_key_and_wait_for_each_other_above() {
    let pod = running(
        &[("a", Some(0)), ("b", Some(0)), ("c", Some(-1))],
        &["a"],
        "Running",
    );
    let present: BTreeSet<String> = ["p_0".to_owned()].into();
    assert!(keys_due(&pod, &present).is_empty(), "b is not ready yet");
    assert_eq!(barrier_keys(&pod).get("b"), Some(&0));
}
