//! `scale` and `scaledown`: the new replicas (and CloneSet's specified-delete list) from
//! the object and the arguments, as merge patches conditional on its resourceVersion.

use serde_json::{Value, json};

use crate::workload::Kind;

/// Refuses the kind without replicas (checked before the object is read, so the answer
/// does not depend on whether it exists).
pub fn scalable(kind: Kind) -> Result<(), String> {
    if kind == Kind::DaemonSet {
        return Err(
            "an Advanced DaemonSet runs one pod per matching node and has no replicas to scale"
                .to_owned(),
        );
    }
    Ok(())
}

/// The merge patch of `scale --replicas N [--current-replicas M]`.
pub fn scale_patch(
    kind: Kind,
    object: &Value,
    replicas: i32,
    current_replicas: Option<i32>,
) -> Result<Value, String> {
    scalable(kind)?;
    if replicas < 0 {
        return Err(format!("--replicas must be 0 or more, not {replicas}"));
    }
    let current = object
        .pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(1);
    if let Some(expected) = current_replicas
        && i64::from(expected) != current
    {
        return Err(format!(
            "expected {expected} replicas (--current-replicas) but {} has {current}",
            kind.resource()
        ));
    }
    Ok(json!({
        "metadata": { "resourceVersion": resource_version(object) },
        "spec": { "replicas": replicas }
    }))
}

fn resource_version(object: &Value) -> &str {
    object
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// The pod names of `--pods a,b` (spaces around commas allowed, as kubectl-kruise's
/// example writes them), each once.
pub fn pod_names(pods: &str) -> Result<Vec<String>, String> {
    let mut names: Vec<String> = Vec::new();
    for name in pods.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        if !names.iter().any(|n| n == name) {
            names.push(name.to_owned());
        }
    }
    if names.is_empty() {
        return Err("--pods names no pod: give pod names separated by commas".to_owned());
    }
    Ok(names)
}

/// What `scaledown` writes: the pods added to `spec.scaleStrategy.podsToDelete` and the
/// replicas lowered by as many (pods already listed are not counted twice).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Scaledown {
    pub replicas: i32,
    pub added: Vec<String>,
    pub pods_to_delete: Vec<String>,
}

pub fn scaledown(cloneset: &Value, pods: &[String]) -> Result<Scaledown, String> {
    let current = cloneset
        .pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(1);
    let mut pods_to_delete: Vec<String> = cloneset
        .pointer("/spec/scaleStrategy/podsToDelete")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|p| p.as_str().map(str::to_owned))
        .collect();
    let added: Vec<String> = pods
        .iter()
        .filter(|p| !pods_to_delete.contains(p))
        .cloned()
        .collect();
    let replicas = current - added.len() as i64;
    if replicas < 0 {
        return Err(format!(
            "the CloneSet has {current} replicas; it cannot lose {} pods",
            added.len()
        ));
    }
    pods_to_delete.extend(added.iter().cloned());
    Ok(Scaledown {
        replicas: i32::try_from(replicas).map_err(|_| "replicas out of range".to_owned())?,
        added,
        pods_to_delete,
    })
}

pub fn scaledown_patch(cloneset: &Value, plan: &Scaledown) -> Value {
    json!({
        "metadata": { "resourceVersion": resource_version(cloneset) },
        "spec": {
            "replicas": plan.replicas,
            "scaleStrategy": { "podsToDelete": plan.pods_to_delete }
        }
    })
}

/// Whether `pod` (as JSON) is owned by the object with `owner_uid`: `scaledown` refuses a
/// pod of another workload, which the CloneSet would ignore while still losing a replica.
pub fn owned_by(pod: &Value, owner_uid: &str) -> bool {
    pod.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|o| o.get("uid").and_then(Value::as_str) == Some(owner_uid))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cloneset(replicas: i64, listed: &[&str]) -> Value {
        json!({
            "metadata": { "resourceVersion": "7" },
            "spec": { "replicas": replicas, "scaleStrategy": { "podsToDelete": listed } }
        })
    }

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn pod_lists() {
        assert_eq!(pod_names("a,b"), Ok(names(&["a", "b"])));
        assert_eq!(pod_names("a, b,,a"), Ok(names(&["a", "b"])));
        assert!(pod_names(" , ").unwrap_err().contains("--pods"));
    }

    #[test]
    fn scaledown_lowers_replicas_by_the_pods_newly_listed() {
        // (replicas, already listed, --pods, the replicas and list written or the error)
        type Case<'a> = (
            i64,
            &'a [&'a str],
            &'a [&'a str],
            Result<(i32, &'a [&'a str]), &'a str>,
        );
        let cases: [Case<'_>; 4] = [
            (3, &[], &["a", "b"], Ok((1, &["a", "b"]))),
            (3, &["a"], &["a", "b"], Ok((2, &["a", "b"]))),
            (2, &["a"], &["a"], Ok((2, &["a"]))),
            (1, &[], &["a", "b"], Err("cannot lose 2 pods")),
        ];
        for (replicas, listed, pods, expected) in cases {
            let got = scaledown(&cloneset(replicas, listed), &names(pods));
            match (got, expected) {
                (Ok(plan), Ok((want_replicas, want_list))) => {
                    assert_eq!(plan.replicas, want_replicas);
                    assert_eq!(plan.pods_to_delete, names(want_list));
                }
                (Err(message), Err(words)) => assert!(message.contains(words), "{message}"),
                (got, _) => panic!("{replicas} {listed:?} {pods:?}: {got:?}"),
            }
        }
    }

    #[test]
    fn scaledown_patch_is_conditional() {
        let object = cloneset(3, &[]);
        let plan = scaledown(&object, &names(&["a"])).expect("plan");
        let patch = scaledown_patch(&object, &plan);
        assert_eq!(patch["metadata"]["resourceVersion"], "7");
        assert_eq!(patch["spec"]["replicas"], 2);
        assert_eq!(patch["spec"]["scaleStrategy"]["podsToDelete"], json!(["a"]));
    }

    #[test]
    fn scale_checks_kind_and_precondition() {
        let object = cloneset(3, &[]);
        let patch = scale_patch(Kind::CloneSet, &object, 5, Some(3)).expect("scales");
        assert_eq!(patch["spec"]["replicas"], 5);
        assert_eq!(patch["metadata"]["resourceVersion"], "7");
        let stale = scale_patch(Kind::StatefulSet, &object, 5, Some(2)).unwrap_err();
        assert!(stale.contains("expected 2 replicas"), "{stale}");
        let daemon = scale_patch(Kind::DaemonSet, &object, 5, None).unwrap_err();
        assert!(daemon.contains("no replicas"), "{daemon}");
        assert!(scale_patch(Kind::CloneSet, &object, -1, None).is_err());
    }

    #[test]
    fn ownership() {
        let pod = json!({ "metadata": { "ownerReferences": [{ "uid": "u1" }] } });
        assert!(owned_by(&pod, "u1"));
        assert!(!owned_by(&pod, "u2"));
        assert!(!owned_by(&json!({}), "u1"));
    }
}
