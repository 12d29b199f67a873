//! The objects a CloneSet creates: pods, claims and revisions, shaped as OpenKruise shapes
//! them (`cloneset/core` `newVersionedPods`, `utils.GetPersistentVolumeClaims`,
//! `revision.getPatch`).

#![allow(
    clippy::type_complexity,
    reason = "case tables are tuples read in one place"
)]

use k8s_openapi::api::core::v1::{
    Container, EmptyDirVolumeSource, PersistentVolumeClaimSpec, PodReadinessGate, PodSpec,
    PodTemplateSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde_json::{Value, json};

use super::*;
use crate::api::cloneset::CloneSetSpec;
use crate::api::common::{Lifecycle, LifecycleHook, PodUpdatePolicy};
use crate::workload::inplace::INPLACE_UPDATE_READY;
use crate::workload::lifecycle::KRUISE_POD_READY;
use crate::workload::ownership::{controller_of, is_controlled_by};
use crate::workload::revision::{
    CONTROLLER_REVISION_HASH_LABEL, POD_TEMPLATE_HASH_LABEL, REVISION_HASH_LABEL,
};
use crate::workload::revision_spec::RevisionSpec;

const REV: &str = "web-6d8f7c9b5";

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn template() -> PodTemplateSpec {
    PodTemplateSpec {
        metadata: Some(ObjectMeta {
            labels: Some(labels(&[("app", "web"), ("tier", "front")])),
            annotations: Some(labels(&[("team", "blue")])),
            ..ObjectMeta::default()
        }),
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "app".to_owned(),
                image: Some("web:v2".to_owned()),
                ..Container::default()
            }],
            ..PodSpec::default()
        }),
    }
}

fn claim(name: &str) -> PersistentVolumeClaim {
    PersistentVolumeClaim {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            labels: Some(labels(&[("kind", "data")])),
            annotations: Some(labels(&[("backup", "daily")])),
            ..ObjectMeta::default()
        },
        spec: Some(PersistentVolumeClaimSpec {
            access_modes: Some(vec!["ReadWriteOnce".to_owned()]),
            storage_class_name: Some("fast".to_owned()),
            ..PersistentVolumeClaimSpec::default()
        }),
        status: None,
    }
}

fn cloneset(f: impl FnOnce(&mut CloneSetSpec)) -> CloneSet {
    let mut spec = CloneSetSpec {
        replicas: Some(3),
        selector: LabelSelector {
            match_labels: Some(labels(&[("app", "web")])),
            ..LabelSelector::default()
        },
        template: template(),
        ..CloneSetSpec::default()
    };
    f(&mut spec);
    let mut cs = CloneSet::new("web", spec);
    cs.metadata.namespace = Some("prod".to_owned());
    cs.metadata.uid = Some("cs-uid".to_owned());
    cs
}

fn pod_of(cs: &CloneSet) -> Pod {
    new_pod(cs, REV, &revision_spec(cs), "x7k2m")
}

fn gates(pod: &Pod) -> Vec<&str> {
    pod.spec
        .as_ref()
        .and_then(|s| s.readiness_gates.as_ref())
        .map(|g| g.iter().map(|g| g.condition_type.as_str()).collect())
        .unwrap_or_default()
}

fn hook(labels_: &[(&str, &str)], finalizers: &[&str], mark: bool) -> LifecycleHook {
    LifecycleHook {
        labels_handler: labels(labels_),
        finalizers_handler: finalizers.iter().map(|f| (*f).to_owned()).collect(),
        mark_pod_not_ready: mark,
    }
}

#[test]
fn new_pod_is_named_labelled_and_owned() {
    let cs = cloneset(|_| {});
    let pod = pod_of(&cs);
    assert_eq!(pod.metadata.name.as_deref(), Some("web-x7k2m"));
    assert_eq!(pod.metadata.namespace.as_deref(), Some("prod"));
    assert_eq!(
        pod.metadata.labels,
        Some(labels(&[
            ("app", "web"),
            ("tier", "front"),
            ("lifecycle.apps.kruise.io/state", "PreparingNormal"),
            (CONTROLLER_REVISION_HASH_LABEL, REV),
            (POD_TEMPLATE_HASH_LABEL, "6d8f7c9b5"),
            (INSTANCE_ID_LABEL, "x7k2m"),
        ]))
    );
    assert_eq!(pod.metadata.annotations, Some(labels(&[("team", "blue")])));
    assert_eq!(pod.metadata.finalizers, None);
    assert_eq!(
        pod.metadata.owner_references,
        Some(vec![OwnerReference {
            api_version: "apps.kruise.io/v1alpha1".to_owned(),
            kind: "CloneSet".to_owned(),
            name: "web".to_owned(),
            uid: "cs-uid".to_owned(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }])
    );
    assert_eq!(
        pod.spec.as_ref().unwrap().containers,
        template().spec.unwrap().containers
    );
    assert!(pod.status.is_none());
}

#[test]
fn pod_template_hash_is_always_the_short_hash() {
    let cs = cloneset(|_| {});
    for (revision, short) in [
        ("web-6d8f7c9b5", "6d8f7c9b5"),
        ("my-long-set-name-abc12", "abc12"),
        ("abc12", "abc12"),
    ] {
        let pod = new_pod(&cs, revision, &revision_spec(&cs), "id");
        let l = pod.metadata.labels.unwrap();
        assert_eq!(l[POD_TEMPLATE_HASH_LABEL], short, "{revision}");
        assert_eq!(l[CONTROLLER_REVISION_HASH_LABEL], revision, "{revision}");
    }
}

#[test]
fn readiness_gates_follow_the_update_policy_and_hooks() {
    use PodUpdatePolicy::{InPlaceIfPossible, InPlaceOnly, ReCreate};
    let not_ready_hook = || hook(&[("hold", "true")], &[], true);
    let cases: Vec<(&str, Option<PodUpdatePolicy>, Option<Lifecycle>, Vec<&str>)> = vec![
        ("default (ReCreate)", None, None, vec![]),
        ("ReCreate", Some(ReCreate), None, vec![]),
        (
            "InPlaceIfPossible",
            Some(InPlaceIfPossible),
            None,
            vec![INPLACE_UPDATE_READY],
        ),
        (
            "InPlaceOnly",
            Some(InPlaceOnly),
            None,
            vec![INPLACE_UPDATE_READY],
        ),
        (
            "hook without markPodNotReady",
            Some(ReCreate),
            Some(Lifecycle {
                pre_delete: Some(hook(&[("hold", "true")], &[], false)),
                ..Lifecycle::default()
            }),
            vec![],
        ),
        (
            "preDelete markPodNotReady",
            Some(ReCreate),
            Some(Lifecycle {
                pre_delete: Some(not_ready_hook()),
                ..Lifecycle::default()
            }),
            vec![KRUISE_POD_READY],
        ),
        (
            "inPlaceUpdate markPodNotReady, in place",
            Some(InPlaceIfPossible),
            Some(Lifecycle {
                in_place_update: Some(not_ready_hook()),
                ..Lifecycle::default()
            }),
            vec![INPLACE_UPDATE_READY, KRUISE_POD_READY],
        ),
    ];
    for (name, policy, lifecycle, want) in cases {
        let cs = cloneset(|s| {
            s.update_strategy.type_ = policy.map(Into::into);
            s.lifecycle = lifecycle;
        });
        let pod = pod_of(&cs);
        assert_eq!(gates(&pod), want, "{name}");
        if want.is_empty() {
            assert_eq!(pod.spec.unwrap().readiness_gates, None, "{name}");
        }
    }
}

#[test]
fn readiness_gates_of_the_template_are_kept_once() {
    let cs = cloneset(|s| {
        s.update_strategy.type_ = Some(PodUpdatePolicy::InPlaceIfPossible.into());
        s.template.spec.as_mut().unwrap().readiness_gates = Some(vec![
            PodReadinessGate {
                condition_type: "example.com/ready".to_owned(),
            },
            PodReadinessGate {
                condition_type: INPLACE_UPDATE_READY.to_owned(),
            },
        ]);
    });
    assert_eq!(
        gates(&pod_of(&cs)),
        vec!["example.com/ready", INPLACE_UPDATE_READY]
    );
}

#[test]
fn lifecycle_sets_the_initial_state_and_pre_normal_handlers() {
    let cases: Vec<(
        &str,
        Option<Lifecycle>,
        Option<&str>,
        Vec<(&str, &str)>,
        Option<Vec<&str>>,
    )> = vec![
        (
            "no lifecycle: PreparingNormal all the same, as OpenKruise creates every pod",
            None,
            Some("PreparingNormal"),
            vec![],
            None,
        ),
        (
            "lifecycle without preNormal: PreparingNormal too (the next sync makes it Normal)",
            Some(Lifecycle {
                pre_delete: Some(hook(&[("hold", "true")], &[], false)),
                ..Lifecycle::default()
            }),
            Some("PreparingNormal"),
            vec![],
            None,
        ),
        (
            "preNormal: PreparingNormal, without the hook's labels and finalizers (the user \
             controller adds them to let the pod become Normal)",
            Some(Lifecycle {
                pre_normal: Some(hook(
                    &[("registered", "true")],
                    &["example.com/register"],
                    false,
                )),
                ..Lifecycle::default()
            }),
            Some("PreparingNormal"),
            vec![],
            None,
        ),
    ];
    for (name, lifecycle, state, extra_labels, finalizers) in cases {
        let cs = cloneset(|s| s.lifecycle = lifecycle);
        let pod = pod_of(&cs);
        let l = pod.metadata.labels.as_ref().unwrap();
        assert_eq!(l.get(STATE_LABEL).map(String::as_str), state, "{name}");
        assert!(!l.contains_key("registered"), "{name}");
        for (k, v) in extra_labels {
            assert_eq!(l.get(k).map(String::as_str), Some(v), "{name}");
        }
        let finalizers: Option<Vec<String>> =
            finalizers.map(|f| f.into_iter().map(str::to_owned).collect());
        assert_eq!(pod.metadata.finalizers, finalizers, "{name}");
    }
}

#[test]
fn template_finalizers_are_kept_and_hook_finalizers_not_added() {
    let cs = cloneset(|s| {
        s.template.metadata.as_mut().unwrap().finalizers = Some(vec!["example.com/own".into()]);
        s.lifecycle = Some(Lifecycle {
            pre_normal: Some(hook(&[], &["example.com/register"], false)),
            ..Lifecycle::default()
        });
    });
    assert_eq!(
        pod_of(&cs).metadata.finalizers,
        Some(vec!["example.com/own".to_owned()])
    );
}

#[test]
fn claim_templates_become_volumes_and_claims_named_after_the_instance() {
    let cs = cloneset(|s| {
        s.volume_claim_templates = vec![claim("data"), claim("logs")];
        s.template.spec.as_mut().unwrap().volumes = Some(vec![
            Volume {
                name: "scratch".to_owned(),
                empty_dir: Some(EmptyDirVolumeSource::default()),
                ..Volume::default()
            },
            // A template volume named like a claim template is replaced by the claim.
            Volume {
                name: "data".to_owned(),
                empty_dir: Some(EmptyDirVolumeSource::default()),
                ..Volume::default()
            },
        ]);
    });
    let pod = pod_of(&cs);
    let volumes = pod.spec.unwrap().volumes.unwrap();
    let summary: Vec<(&str, Option<&str>, bool)> = volumes
        .iter()
        .map(|v| {
            (
                v.name.as_str(),
                v.persistent_volume_claim
                    .as_ref()
                    .map(|c| c.claim_name.as_str()),
                v.empty_dir.is_some(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        vec![
            ("scratch", None, true),
            ("data", Some("data-web-x7k2m"), false),
            ("logs", Some("logs-web-x7k2m"), false),
        ]
    );

    let claims = new_pvcs(&cs, &revision_spec(&cs), "x7k2m");
    let names: Vec<String> = claims.iter().map(|c| c.name_any()).collect();
    assert_eq!(names, vec!["data-web-x7k2m", "logs-web-x7k2m"]);
    for c in &claims {
        assert_eq!(c.metadata.namespace.as_deref(), Some("prod"));
        assert_eq!(
            c.metadata.labels,
            Some(labels(&[
                ("app", "web"),
                ("kind", "data"),
                (INSTANCE_ID_LABEL, "x7k2m"),
            ]))
        );
        assert_eq!(c.metadata.annotations, Some(labels(&[("backup", "daily")])));
        assert_eq!(
            c.metadata.owner_references,
            Some(vec![owner_reference(&cs)])
        );
        assert_eq!(c.spec, claim("data").spec);
        // The pod and its claims share the instance id.
        assert_eq!(
            instance_id(c.metadata.labels.as_ref()),
            instance_id(pod_of(&cs).metadata.labels.as_ref())
        );
    }
}

#[test]
fn no_claim_templates_no_claims_and_no_volumes() {
    let cs = cloneset(|_| {});
    assert!(new_pvcs(&cs, &revision_spec(&cs), "x7k2m").is_empty());
    assert_eq!(pod_of(&cs).spec.unwrap().volumes, None);
}

#[test]
fn a_pod_is_built_from_the_revision_it_is_given_not_the_current_spec() {
    let cs = cloneset(|_| {});
    let mut old = revision_spec(&cs);
    old.template.spec.as_mut().unwrap().containers[0].image = Some("web:v1".to_owned());
    let pod = new_pod(&cs, "web-old", &old, "a");
    assert_eq!(
        pod.spec.unwrap().containers[0].image.as_deref(),
        Some("web:v1")
    );
}

#[test]
fn revision_data_has_openkruises_shape_without_claim_templates() {
    let cs = cloneset(|_| {});
    let data = revision_spec(&cs).to_data().unwrap();
    let value: Value = serde_json::from_slice(&data).unwrap();
    assert_eq!(
        value,
        json!({
            "spec": {
                "template": {
                    "metadata": {
                        "labels": { "app": "web", "tier": "front" },
                        "annotations": { "team": "blue" }
                    },
                    "spec": { "containers": [{ "name": "app", "image": "web:v2" }] },
                    "$patch": "replace"
                }
            }
        })
    );
}

#[test]
fn revision_data_carries_claim_templates_when_there_are_any() {
    let cs = cloneset(|s| s.volume_claim_templates = vec![claim("data")]);
    let value: Value = serde_json::from_slice(&revision_spec(&cs).to_data().unwrap()).unwrap();
    assert_eq!(value["spec"]["template"]["$patch"], json!("replace"));
    let claims = value["spec"]["volumeClaimTemplates"]
        .as_array()
        .expect("claim templates in the data");
    assert_eq!(claims.len(), 1);
    assert_eq!(
        claims[0]["metadata"],
        json!({
            "name": "data",
            "labels": { "kind": "data" },
            "annotations": { "backup": "daily" }
        })
    );
    assert_eq!(
        claims[0]["spec"],
        json!({ "accessModes": ["ReadWriteOnce"], "storageClassName": "fast" })
    );
}

#[test]
fn revision_data_round_trips() {
    let cases: Vec<(&str, CloneSet)> = vec![
        ("template only", cloneset(|_| {})),
        (
            "with claim templates",
            cloneset(|s| s.volume_claim_templates = vec![claim("data"), claim("logs")]),
        ),
        (
            "empty template",
            cloneset(|s| s.template = PodTemplateSpec::default()),
        ),
    ];
    for (name, cs) in cases {
        let spec = revision_spec(&cs);
        let back = RevisionSpec::from_data(&spec.to_data().unwrap());
        assert_eq!(back.as_ref(), Some(&spec), "{name}");
    }
}

#[test]
fn revision_data_from_openkruise_is_read() {
    // What OpenKruise writes for a CloneSet revision.
    let data = br#"{"spec":{"template":{"$patch":"replace","metadata":{"labels":{"app":"web"}},"spec":{"containers":[{"name":"app","image":"web:v1"}]}}}}"#;
    let spec = RevisionSpec::from_data(data).expect("a CloneSet revision");
    assert_eq!(
        spec.template.spec.unwrap().containers[0].image.as_deref(),
        Some("web:v1")
    );
    assert!(spec.volume_claim_templates.is_empty());

    for not_ours in [
        &b"not json"[..],
        br#"{"spec":{"replicas":3}}"#,
        br#"{"template":{}}"#,
        br#"[1,2]"#,
    ] {
        assert_eq!(
            RevisionSpec::from_data(not_ours),
            None,
            "{}",
            String::from_utf8_lossy(not_ours)
        );
    }
}

#[test]
fn new_revision_is_labelled_owned_and_numbered() {
    let cs = cloneset(|_| {});
    let data = revision_spec(&cs).to_data().unwrap();
    let revision = new_revision(&cs, REV, "6d8f7c9b5", 7, data.clone()).unwrap();
    assert_eq!(revision.metadata.name.as_deref(), Some(REV));
    assert_eq!(revision.metadata.namespace.as_deref(), Some("prod"));
    assert_eq!(
        revision.metadata.labels,
        Some(labels(&[
            ("app", "web"),
            (REVISION_HASH_LABEL, "6d8f7c9b5")
        ]))
    );
    assert_eq!(
        revision.metadata.owner_references,
        Some(vec![owner_reference(&cs)])
    );
    assert_eq!(revision.revision, 7);
    assert_eq!(
        revision.data.map(|d| d.0),
        Some(serde_json::from_slice::<Value>(&data).unwrap())
    );
    assert!(new_revision(&cs, REV, "h", 1, b"{oops".to_vec()).is_err());
}

#[test]
fn instance_id_and_controller_helpers() {
    assert_eq!(instance_id(None), None);
    assert_eq!(instance_id(Some(&labels(&[("app", "web")]))), None);
    assert_eq!(
        instance_id(Some(&labels(&[(INSTANCE_ID_LABEL, "x7k2m")]))),
        Some("x7k2m")
    );
    assert_eq!(pvc_name("data", "web", "x7k2m"), "data-web-x7k2m");

    let cs = cloneset(|_| {});
    let owned = pod_of(&cs).metadata;
    assert!(is_controlled_by(&owned, "cs-uid"));
    assert!(!is_controlled_by(&owned, "other"));
    let mut not_controller = owned.clone();
    for owner in not_controller.owner_references.iter_mut().flatten() {
        owner.controller = Some(false);
    }
    assert!(!is_controlled_by(&not_controller, "cs-uid"));
    assert_eq!(controller_of(&not_controller), None);
    assert_eq!(controller_of(&ObjectMeta::default()), None);
}

#[test]
fn kruise_pod_ready_is_needed_only_with_mark_pod_not_ready() {
    let with_hooks = |pre_delete: bool, in_place: bool, pre_normal: bool| {
        cloneset(|s| {
            s.lifecycle = Some(Lifecycle {
                pre_delete: Some(hook(&[("a", "b")], &[], pre_delete)),
                in_place_update: Some(hook(&[("a", "b")], &[], in_place)),
                pre_normal: Some(hook(&[("a", "b")], &[], pre_normal)),
            });
        })
    };
    assert!(!needs_kruise_pod_ready(&cloneset(|_| {})));
    assert!(!needs_kruise_pod_ready(&with_hooks(false, false, false)));
    assert!(needs_kruise_pod_ready(&with_hooks(true, false, false)));
    assert!(needs_kruise_pod_ready(&with_hooks(false, true, false)));
    assert!(needs_kruise_pod_ready(&with_hooks(false, false, true)));
}
