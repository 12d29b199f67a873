//! Table-driven cases for what is the CloneSet's own in one sync, following OpenKruise's
//! `cloneset_scale.go` and `cloneset_update.go`: instance ids and the claims that go with
//! them (reuse, `disablePVCReuse`), `scaleStrategy.podsToDelete` and
//! `excludePreparingDelete`, claim templates, and a new pod's wait for scheduling. The
//! shared planner's rules are tested over a toy workload beside it (`workload::plan`).

#![allow(
    clippy::type_complexity,
    reason = "case tables are tuples read in one place"
)]

use k8s_openapi::api::core::v1::{
    Container, PersistentVolumeClaimSpec, PodSpec, PodTemplateSpec, VolumeResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, Time};
use serde_json::{Value, json};

use super::*;
use crate::api::cloneset::{CloneSetSpec, SCALING_EXCLUDE_PREPARING_DELETE_LABEL};
use crate::api::common::{Lifecycle, LifecycleHook, PodUpdatePolicy};
use crate::workload::actions::{Delete, DeleteReason, PodChange};
use crate::workload::deletion::{REVISION_LABEL, SPECIFIED_DELETE_LABEL};
use crate::workload::inplace::STATE_ANNOTATION;
use crate::workload::lifecycle::{self, LifecycleState};
use crate::workload::plan::CLAIMS_REVISION_ANNOTATION;
use crate::workload::revision::POD_TEMPLATE_HASH_LABEL;
use crate::workload::test_pods::{PodBuilder, at as ts, new_pod, run_on};

const SET: &str = "web";
const OLD: &str = "web-oldhash1";
const NEW: &str = "web-newhash2";
const OLD_IMAGE: &str = "web:v1";
const NEW_IMAGE: &str = "web:v2";

fn now() -> Timestamp {
    ts(1_000)
}

fn app_labels() -> BTreeMap<String, String> {
    BTreeMap::from([("app".to_owned(), SET.to_owned())])
}

fn template(image: &str) -> PodTemplateSpec {
    PodTemplateSpec {
        metadata: Some(ObjectMeta {
            labels: Some(app_labels()),
            ..ObjectMeta::default()
        }),
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "app".to_owned(),
                image: Some(image.to_owned()),
                ..Container::default()
            }],
            ..PodSpec::default()
        }),
    }
}

fn claim_template(name: &str, size: &str) -> PersistentVolumeClaim {
    PersistentVolumeClaim {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        spec: Some(PersistentVolumeClaimSpec {
            access_modes: Some(vec!["ReadWriteOnce".to_owned()]),
            resources: Some(VolumeResourceRequirements {
                requests: Some(BTreeMap::from([(
                    "storage".to_owned(),
                    Quantity(size.to_owned()),
                )])),
                ..VolumeResourceRequirements::default()
            }),
            ..PersistentVolumeClaimSpec::default()
        }),
        status: None,
    }
}

/// A CloneSet `web` with `replicas` pods of the new image and default strategies.
fn cloneset(replicas: i32) -> CloneSet {
    let mut cs = CloneSet::new(
        SET,
        CloneSetSpec {
            replicas: Some(replicas),
            selector: LabelSelector {
                match_labels: Some(app_labels()),
                ..LabelSelector::default()
            },
            template: template(NEW_IMAGE),
            ..CloneSetSpec::default()
        },
    );
    cs.metadata.namespace = Some("default".to_owned());
    cs.metadata.uid = Some("cs-uid".to_owned());
    cs
}

fn with(mut cs: CloneSet, f: impl FnOnce(&mut CloneSetSpec)) -> CloneSet {
    f(&mut cs.spec);
    cs
}

fn policy(cs: CloneSet, policy: PodUpdatePolicy) -> CloneSet {
    with(cs, |s| s.update_strategy.type_ = Some(policy.into()))
}

fn hook(labels: &[(&str, &str)], mark_pod_not_ready: bool) -> LifecycleHook {
    LifecycleHook {
        labels_handler: labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
        finalizers_handler: Vec::new(),
        mark_pod_not_ready,
    }
}

/// The pod `name` (`web-<id>`) at `revision`, running its image on `node-<id>` (see
/// `workload::test_pods::run_on`), its instance id the name without `web-`.
fn pod(name: &str, revision: &str) -> PodBuilder {
    let id = name.strip_prefix("web-").unwrap_or(name);
    let image = if revision == OLD {
        OLD_IMAGE
    } else {
        NEW_IMAGE
    };
    let mut labels = app_labels();
    labels.insert(REVISION_LABEL.to_owned(), revision.to_owned());
    labels.insert(
        crate::cloneset::pods::INSTANCE_ID_LABEL.to_owned(),
        id.to_owned(),
    );
    let pod = new_pod(name, labels, template(image).spec);
    PodBuilder(run_on(pod, &format!("node-{id}")))
}

fn pvc(name: &str, id: &str) -> PersistentVolumeClaim {
    let mut labels = app_labels();
    labels.insert(
        crate::cloneset::pods::INSTANCE_ID_LABEL.to_owned(),
        id.to_owned(),
    );
    PersistentVolumeClaim {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some("default".to_owned()),
            labels: Some(labels),
            ..ObjectMeta::default()
        },
        spec: None,
        status: None,
    }
}

fn terminating_pvc(name: &str, id: &str) -> PersistentVolumeClaim {
    let mut claim = pvc(name, id);
    claim.metadata.deletion_timestamp = Some(Time(ts(900)));
    claim
}

fn revision(image: &str) -> RevisionSpec {
    RevisionSpec {
        template: template(image),
        volume_claim_templates: Vec::new(),
    }
}

/// One sync's input.
struct Case {
    cs: CloneSet,
    pods: Vec<Pod>,
    pvcs: Vec<PersistentVolumeClaim>,
    revisions: BTreeMap<String, RevisionSpec>,
    current: &'static str,
    update: &'static str,
    now: Timestamp,
}

impl Case {
    /// A rollout from OLD (web:v1) to NEW (web:v2).
    fn new(cs: CloneSet) -> Self {
        Self {
            cs,
            pods: Vec::new(),
            pvcs: Vec::new(),
            revisions: BTreeMap::from([
                (OLD.to_owned(), revision(OLD_IMAGE)),
                (NEW.to_owned(), revision(NEW_IMAGE)),
            ]),
            current: OLD,
            update: NEW,
            now: now(),
        }
    }

    /// No rollout: current and update revision are both NEW.
    fn settled(cs: CloneSet) -> Self {
        Self {
            current: NEW,
            ..Self::new(cs)
        }
    }

    fn pods(mut self, pods: Vec<PodBuilder>) -> Self {
        self.pods = pods.into_iter().map(PodBuilder::build).collect();
        self
    }

    fn pvcs(mut self, pvcs: Vec<PersistentVolumeClaim>) -> Self {
        self.pvcs = pvcs;
        self
    }

    fn new_revision(mut self, spec: RevisionSpec) -> Self {
        self.revisions.insert(NEW.to_owned(), spec);
        self
    }

    fn old_revision(mut self, spec: RevisionSpec) -> Self {
        self.revisions.insert(OLD.to_owned(), spec);
        self
    }

    fn try_plan(&self) -> Result<Plan, PlanError> {
        self.try_cloneset_plan().map(|planned| planned.plan)
    }

    /// The shared plan and what beside it is the CloneSet's own.
    fn try_cloneset_plan(&self) -> Result<CloneSetPlan, PlanError> {
        plan(&Snapshot {
            cloneset: &self.cs,
            pods: self.pods.iter().collect(),
            pvcs: self.pvcs.iter().collect(),
            update_revision: self.update,
            current_revision: self.current,
            revisions: &self.revisions,
            now: self.now,
        })
    }

    fn plan(&self) -> Plan {
        self.try_plan().expect("plan")
    }

    fn cloneset_plan(&self) -> CloneSetPlan {
        self.try_cloneset_plan().expect("plan")
    }
}

fn deleted(plan: &Plan) -> Vec<(&str, DeleteReason)> {
    plan.deletes
        .iter()
        .map(|d| (d.pod.as_str(), d.reason))
        .collect()
}

fn change<'p>(plan: &'p Plan, pod: &str) -> &'p PodChange {
    plan.pod_changes
        .iter()
        .find(|c| c.pod == pod)
        .unwrap_or_else(|| panic!("no change for {pod} in {plan:#?}"))
}

fn patch(change: &PodChange) -> &Value {
    change.patch.as_ref().expect("a patch")
}

fn patch_label<'v>(change: &'v PodChange, key: &str) -> Option<&'v Value> {
    patch(change).get("metadata")?.get("labels")?.get(key)
}

fn patch_annotation<'v>(change: &'v PodChange, key: &str) -> Option<&'v Value> {
    patch(change).get("metadata")?.get("annotations")?.get(key)
}

fn is_quiet(plan: &Plan) -> bool {
    plan.creates.is_empty() && plan.deletes.is_empty() && plan.pod_changes.is_empty()
}

#[test]
fn new_pods_get_fresh_ids_from_the_executor_and_taken_ids_cover_pods_and_claims() {
    let planned = Case::settled(cloneset(3))
        .pods(vec![pod("web-a", NEW), pod("web-b", NEW).terminating()])
        .pvcs(vec![terminating_pvc("data-web-z", "z")])
        .cloneset_plan();
    // Terminating pod b still holds its id; so does the terminating claim.
    assert_eq!(
        planned.taken_ids,
        BTreeSet::from(["a".to_owned(), "b".to_owned(), "z".to_owned()])
    );
    assert_eq!(
        planned.plan.creates,
        vec![
            Create {
                instance_id: String::new(),
                revision: NEW.to_owned()
            };
            2
        ]
    );
}

#[test]
fn replacement_reuses_the_instance_id_of_an_orphan_claim() {
    let cases: Vec<(
        &str,
        CloneSet,
        Vec<PodBuilder>,
        Vec<PersistentVolumeClaim>,
        Vec<&str>,
    )> = vec![
        (
            "pod deleted from outside: its claim's id comes back",
            cloneset(2),
            vec![pod("web-a", NEW)],
            vec![pvc("data-web-a", "a"), pvc("data-web-b", "b")],
            vec!["b"],
        ),
        (
            "two claims of one instance give one id",
            cloneset(2),
            vec![pod("web-a", NEW)],
            vec![pvc("data-web-b", "b"), pvc("logs-web-b", "b")],
            vec!["b"],
        ),
        (
            "more creations than orphans: the rest get fresh ids",
            cloneset(3),
            vec![pod("web-a", NEW)],
            vec![pvc("data-web-b", "b")],
            vec!["b", ""],
        ),
        (
            "a terminating claim is not reused",
            cloneset(2),
            vec![pod("web-a", NEW)],
            vec![terminating_pvc("data-web-b", "b")],
            vec![""],
        ),
        (
            "the claim of a terminating pod waits for the pod to go, then its id comes back",
            cloneset(2),
            vec![pod("web-a", NEW), pod("web-b", NEW).terminating()],
            vec![pvc("data-web-b", "b")],
            vec![],
        ),
        (
            "a terminating pod with a claim delays only its own replacement",
            cloneset(3),
            vec![pod("web-a", NEW), pod("web-b", NEW).terminating()],
            vec![pvc("data-web-b", "b")],
            vec![""],
        ),
        (
            "disablePVCReuse: a fresh id",
            with(cloneset(2), |s| s.scale_strategy.disable_pvc_reuse = true),
            vec![pod("web-a", NEW)],
            vec![pvc("data-web-b", "b")],
            vec![""],
        ),
    ];
    for (name, cs, pods, pvcs, want) in cases {
        let plan = Case::settled(cs).pods(pods).pvcs(pvcs).plan();
        let ids: Vec<&str> = plan
            .creates
            .iter()
            .map(|c| c.instance_id.as_str())
            .collect();
        assert_eq!(ids, want, "{name}");
    }
}

#[test]
fn disable_pvc_reuse_deletes_orphan_claims_in_a_sync_without_scaling() {
    let claims = || {
        vec![
            pvc("data-web-a", "a"),
            pvc("data-web-gone", "gone"),
            terminating_pvc("data-web-old", "old"),
        ]
    };
    let reuse_disabled = with(cloneset(1), |s| s.scale_strategy.disable_pvc_reuse = true);
    let planned = Case::settled(reuse_disabled)
        .pods(vec![pod("web-a", NEW)])
        .pvcs(claims())
        .cloneset_plan();
    assert_eq!(planned.unused_claims, vec!["data-web-gone".to_owned()]);
    assert!(is_quiet(&planned.plan), "{planned:#?}");

    // With reuse (the default) the orphan is kept for the next replacement.
    let planned = Case::settled(cloneset(1))
        .pods(vec![pod("web-a", NEW)])
        .pvcs(claims())
        .cloneset_plan();
    assert!(planned.unused_claims.is_empty(), "{planned:#?}");
}

#[test]
fn disable_pvc_reuse_deletes_the_orphan_claim_in_the_sync_that_replaces_its_pod() {
    let cs = with(cloneset(2), |s| s.scale_strategy.disable_pvc_reuse = true);
    let planned = Case::settled(cs)
        .pods(vec![pod("web-a", NEW)])
        .pvcs(vec![pvc("data-web-a", "a"), pvc("data-web-b", "b")])
        .cloneset_plan();
    assert_eq!(planned.plan.creates.len(), 1);
    assert_eq!(planned.plan.creates[0].instance_id, "");
    assert_eq!(planned.unused_claims, vec!["data-web-b".to_owned()]);
}

fn names_abc() -> Vec<PodBuilder> {
    vec![pod("web-a", NEW), pod("web-b", NEW), pod("web-c", NEW)]
}

#[test]
fn specified_delete_with_fewer_replicas_deletes_only_the_named_pod() {
    let cs = with(cloneset(2), |s| {
        s.scale_strategy.pods_to_delete = vec!["web-c".to_owned()];
    });
    let plan = Case::settled(cs).pods(names_abc()).plan();
    assert_eq!(deleted(&plan), vec![("web-c", DeleteReason::Specified)]);
    assert!(plan.creates.is_empty());
}

#[test]
fn pods_to_delete_drops_the_names_of_pods_that_are_gone() {
    let cases: Vec<(&str, Vec<&str>, Option<Vec<&str>>)> = vec![
        ("empty list: nothing to write", vec![], None),
        ("all present: nothing to write", vec!["web-a"], None),
        ("one gone", vec!["web-x", "web-a"], Some(vec!["web-a"])),
        ("all gone", vec!["web-x", "web-y"], Some(vec![])),
    ];
    for (name, list, want) in cases {
        let cs = with(cloneset(3), |s| {
            s.scale_strategy.pods_to_delete = list.iter().map(|n| (*n).to_owned()).collect();
        });
        // A terminating pod still exists: its name stays until it is gone.
        let plan = Case::settled(cs)
            .pods(vec![
                pod("web-a", NEW),
                pod("web-b", NEW),
                pod("web-c", NEW),
                pod("web-t", NEW).terminating(),
            ])
            .cloneset_plan();
        let want: Option<Vec<String>> = want.map(|w| w.into_iter().map(str::to_owned).collect());
        assert_eq!(plan.pods_to_delete, want, "{name}");
    }
    let cs = with(cloneset(3), |s| {
        s.scale_strategy.pods_to_delete = vec!["web-t".to_owned()];
    });
    let plan = Case::settled(cs)
        .pods(vec![pod("web-t", NEW).terminating()])
        .cloneset_plan();
    assert_eq!(plan.pods_to_delete, None);
}

/// Claim templates are the CloneSet's own part of a revision: a change of them alone
/// relabels the pod, with the image recreates pod and volumes unless InPlaceOnly (the image
/// and env rules without them are the shared planner's, `workload::plan` tests).
#[test]
fn claim_template_changes_update_as_the_policy_says() {
    #[derive(Debug, PartialEq)]
    enum Want {
        Recreate,
        InPlace,
        Relabel,
    }
    let vct = |image: &str, size: &str| RevisionSpec {
        template: template(image),
        volume_claim_templates: vec![claim_template("data", size)],
    };
    use PodUpdatePolicy::{InPlaceIfPossible, InPlaceOnly, ReCreate};
    let cases: Vec<(&str, PodUpdatePolicy, &str, Want)> = vec![
        (
            "claim templates only, ReCreate",
            ReCreate,
            NEW_IMAGE,
            Want::Relabel,
        ),
        (
            "claim templates only, InPlaceIfPossible",
            InPlaceIfPossible,
            NEW_IMAGE,
            Want::Relabel,
        ),
        (
            "claim templates only, InPlaceOnly",
            InPlaceOnly,
            NEW_IMAGE,
            Want::Relabel,
        ),
        (
            "claim templates and image, InPlaceIfPossible: recreate pod and volumes",
            InPlaceIfPossible,
            OLD_IMAGE,
            Want::Recreate,
        ),
        (
            "claim templates and image, InPlaceOnly: in place, the claims kept",
            InPlaceOnly,
            OLD_IMAGE,
            Want::InPlace,
        ),
        (
            "claim templates and image, ReCreate",
            ReCreate,
            OLD_IMAGE,
            Want::Recreate,
        ),
    ];
    for (name, policy_, old_image, want) in cases {
        let plan = Case::new(policy(cloneset(1), policy_))
            .old_revision(vct(old_image, "1Gi"))
            .new_revision(vct(NEW_IMAGE, "2Gi"))
            .pods(vec![pod("web-a", OLD).in_place_ready()])
            .pvcs(vec![pvc("data-web-a", "a")])
            .plan();
        match want {
            Want::Recreate => {
                assert_eq!(
                    without_detail(&plan.deletes),
                    vec![Delete {
                        pod: "web-a".to_owned(),
                        uid: "uid-web-a".to_owned(),
                        pvcs: vec!["data-web-a".to_owned()],
                        reason: DeleteReason::RecreateUpdate,
                        detail: String::new(),
                    }],
                    "{name}"
                );
                assert!(plan.pod_changes.is_empty(), "{name}: {plan:#?}");
                assert_eq!(plan.refusal, None, "{name}");
            }
            Want::InPlace => {
                assert!(plan.deletes.is_empty(), "{name}: {plan:#?}");
                let c = change(&plan, "web-a");
                assert!(patch(c)["spec"]["containers"].is_array(), "{name}");
                assert!(patch_annotation(c, STATE_ANNOTATION).is_some(), "{name}");
            }
            Want::Relabel => {
                assert!(plan.deletes.is_empty(), "{name}: {plan:#?}");
                let c = change(&plan, "web-a");
                assert_eq!(patch_label(c, REVISION_LABEL), Some(&json!(NEW)), "{name}");
                assert_eq!(
                    patch_label(c, POD_TEMPLATE_HASH_LABEL),
                    Some(&json!("newhash2")),
                    "{name}"
                );
                assert!(patch(c).get("spec").is_none(), "{name}: no restart");
                assert_eq!(patch_annotation(c, STATE_ANNOTATION), None, "{name}");
                assert!(c.conditions.is_empty(), "{name}: stays ready");
            }
        }
    }
}

#[test]
fn excluding_preparing_delete_replaces_a_held_pod_at_once() {
    // Replicas 3: c is specified for deletion and held by the preDelete hook. Counted, it
    // fills its place until released; with the CloneSet labelled to exclude PreparingDelete
    // from scaling, a replacement is created now (status.replicas then counts 4 pods).
    let held = || {
        vec![
            pod("web-a", NEW),
            pod("web-b", NEW),
            pod("web-c", NEW)
                .state(LifecycleState::PreparingDelete)
                .label("hold", "true")
                .label(SPECIFIED_DELETE_LABEL, "true"),
        ]
    };
    let cs = |label: Option<&str>| {
        let mut cs = with_lifecycle(
            cloneset(3),
            Lifecycle {
                pre_delete: Some(hook(&[("hold", "true")], false)),
                ..Lifecycle::default()
            },
        );
        if let Some(value) = label {
            cs.metadata.labels.get_or_insert_default().insert(
                SCALING_EXCLUDE_PREPARING_DELETE_LABEL.to_owned(),
                value.to_owned(),
            );
        }
        cs
    };
    for (name, label, creates) in [
        ("no label: the held pod counts", None, 0),
        ("label \"false\": the held pod counts", Some("false"), 0),
        ("label \"true\": replaced at once", Some("true"), 1),
    ] {
        let plan = Case::settled(cs(label)).pods(held()).plan();
        assert_eq!(plan.creates.len(), creates, "{name}: {plan:#?}");
        assert!(plan.deletes.is_empty(), "{name}: {plan:#?}");
    }
}

fn with_lifecycle(cs: CloneSet, lifecycle: Lifecycle) -> CloneSet {
    with(cs, |s| s.lifecycle = Some(lifecycle))
}

#[test]
fn exclude_preparing_delete_replaces_a_held_pod_at_once() {
    let held = || {
        with_lifecycle(
            cloneset(3),
            Lifecycle {
                pre_delete: Some(hook(&[("hold", "true")], false)),
                ..Lifecycle::default()
            },
        )
    };
    let by_field = with(held(), |s| s.scale_strategy.exclude_preparing_delete = true);
    let mut by_label = held();
    by_label.metadata.labels = Some(BTreeMap::from([(
        SCALING_EXCLUDE_PREPARING_DELETE_LABEL.to_owned(),
        "true".to_owned(),
    )]));
    let pods = || {
        vec![
            pod("web-a", NEW),
            pod("web-b", NEW)
                .label("hold", "true")
                .state(LifecycleState::PreparingDelete),
            pod("web-c", NEW),
        ]
    };
    let counted = Case::settled(held()).pods(pods()).plan();
    assert!(counted.creates.is_empty(), "{counted:#?}");
    for cs in [by_field, by_label] {
        let plan = Case::settled(cs).pods(pods()).plan();
        assert_eq!(plan.creates.len(), 1, "{plan:#?}");
        assert_eq!(plan.creates[0].revision, NEW);
        assert!(plan.deletes.is_empty(), "{plan:#?}");
    }
}

#[test]
fn a_new_pod_without_a_pre_normal_hook_turns_normal_once_scheduled() {
    // Every pod is created PreparingNormal; without a preNormal hook the refresh moves it
    // to Normal once it is bound to a node, ready or not (OpenKruise 1.9, kruise#2087),
    // so a pod nobody can schedule never reads as Normal.
    let running = || pod("web-a", NEW).state(LifecycleState::PreparingNormal);
    for (name, p, want) in [
        ("unscheduled", running().unscheduled().not_ready(), None),
        (
            "scheduled, not ready",
            running().not_ready(),
            Some("Normal"),
        ),
        ("running", running(), Some("Normal")),
    ] {
        let plan = Case::settled(cloneset(1)).pods(vec![p]).plan();
        let got = plan
            .pod_changes
            .iter()
            .find(|c| c.pod == "web-a")
            .and_then(|c| patch_label(c, lifecycle::STATE_LABEL))
            .and_then(Value::as_str);
        assert_eq!(got, want, "{name}: {plan:#?}");
    }
}

/// The deletes without their free-text detail, for exact comparison.
fn without_detail(deletes: &[Delete]) -> Vec<Delete> {
    deletes
        .iter()
        .map(|d| Delete {
            detail: String::new(),
            ..d.clone()
        })
        .collect()
}

/// After a claim-template-only change relabelled a pod (no restart), a later image-only
/// change recreates it: its claims still come from the revision it was created with.
#[test]
fn a_pod_relabelled_by_a_claim_template_change_is_recreated_by_a_later_image_change() {
    const FIRST: &str = "web-firsthash0";
    let vct = |image: &str, size: &str| RevisionSpec {
        template: template(image),
        volume_claim_templates: vec![claim_template("data", size)],
    };
    // The claim-template change relabels the pod and records where it came from.
    let relabel = Case::new(policy(cloneset(1), PodUpdatePolicy::InPlaceIfPossible))
        .old_revision(vct(OLD_IMAGE, "1Gi"))
        .new_revision(vct(OLD_IMAGE, "2Gi"))
        .pods(vec![pod("web-a", OLD).in_place_ready()])
        .pvcs(vec![pvc("data-web-a", "a")])
        .plan();
    let c = change(&relabel, "web-a");
    assert_eq!(patch_label(c, REVISION_LABEL), Some(&json!(NEW)));
    assert_eq!(
        patch_annotation(c, CLAIMS_REVISION_ANNOTATION),
        Some(&json!(OLD))
    );

    // Then the image changes: FIRST (1Gi, v1) → OLD (2Gi, v1, the pod's label) → NEW (2Gi, v2).
    let mut case = Case::new(policy(cloneset(1), PodUpdatePolicy::InPlaceIfPossible))
        .old_revision(vct(OLD_IMAGE, "2Gi"))
        .new_revision(vct(NEW_IMAGE, "2Gi"));
    case.revisions
        .insert(FIRST.to_owned(), vct(OLD_IMAGE, "1Gi"));
    let relabelled = pod("web-a", OLD)
        .in_place_ready()
        .annotation(CLAIMS_REVISION_ANNOTATION, FIRST);
    let plan = case
        .pods(vec![relabelled])
        .pvcs(vec![pvc("data-web-a", "a")])
        .plan();
    assert_eq!(
        deleted(&plan),
        [("web-a", DeleteReason::RecreateUpdate)],
        "{plan:#?}"
    );
    assert_eq!(plan.deletes[0].pvcs, ["data-web-a"]);

    // A pod created at OLD (no annotation) updates in place.
    let mut case = Case::new(policy(cloneset(1), PodUpdatePolicy::InPlaceIfPossible))
        .old_revision(vct(OLD_IMAGE, "2Gi"))
        .new_revision(vct(NEW_IMAGE, "2Gi"));
    case.revisions
        .insert(FIRST.to_owned(), vct(OLD_IMAGE, "1Gi"));
    let plan = case
        .pods(vec![pod("web-a", OLD).in_place_ready()])
        .pvcs(vec![pvc("data-web-a", "a")])
        .plan();
    assert!(plan.deletes.is_empty(), "{plan:#?}");
    assert!(patch_annotation(change(&plan, "web-a"), STATE_ANNOTATION).is_some());
}
