use std::collections::BTreeSet;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use k8s_openapi::jiff::Timestamp;

use super::plan::{Plan, Snapshot, child_name, plan};
use crate::api::common::{CompletionPolicy, CompletionPolicyType};
use crate::api::imagelistpulljob::{ImageListPullJob, ImageListPullJobSpec};
use crate::api::imagepulljob::{ImagePullJob, ImagePullJobStatus, PullPolicy, PullProgress};

const A: &str = "registry.local/a:v1";
const B: &str = "registry.local/b:v1";
const C: &str = "registry.local/c:v1";

fn t(seconds: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + seconds).expect("valid")
}

fn list_job(images: &[&str]) -> ImageListPullJob {
    let mut job = ImageListPullJob::new(
        "warm",
        ImageListPullJobSpec {
            images: images.iter().map(|i| (*i).to_owned()).collect(),
            pull_policy: Some(PullPolicy {
                timeout_seconds: Some(60),
                backoff_limit: Some(1),
            }),
            completion_policy: CompletionPolicy {
                type_: Some(CompletionPolicyType::Always),
                ttl_seconds_after_finished: Some(30),
                ..CompletionPolicy::default()
            },
            ..ImageListPullJobSpec::default()
        },
    );
    job.metadata.namespace = Some("ns".into());
    job.metadata.uid = Some("list-uid".into());
    job
}

/// The ImagePullJob `job` would create for `image`, as the cache shows it, with `status`.
fn child(job: &ImageListPullJob, image: &str, status: Option<ImagePullJobStatus>) -> ImagePullJob {
    let name = child_name("warm", image);
    ImagePullJob {
        metadata: ObjectMeta {
            uid: Some(format!("{name}-uid")),
            name: Some(name),
            namespace: Some("ns".into()),
            ..ObjectMeta::default()
        },
        spec: job.spec.child_spec(image),
        status,
    }
}

fn running(
    desired: i32,
    active: i32,
    succeeded: i32,
    failed: i32,
    percent: i32,
) -> ImagePullJobStatus {
    ImagePullJobStatus {
        start_time: Some(Time(t(0))),
        desired,
        active,
        succeeded,
        failed,
        failed_nodes: (0..failed).map(|i| format!("node-{i}")).collect(),
        progress: Some(PullProgress {
            percent,
            bytes_done: i64::from(percent),
            bytes_total: 100,
        }),
        ..ImagePullJobStatus::default()
    }
}

fn run(job: &ImageListPullJob, children: &[ImagePullJob], taken: &[&str], now: i64) -> Plan {
    plan(&Snapshot {
        job,
        children: children.iter().collect(),
        taken: taken.iter().copied().collect::<BTreeSet<_>>(),
        now: t(now),
    })
}

fn created(p: &Plan) -> Vec<(String, String)> {
    p.create
        .iter()
        .map(|c| {
            (
                c.metadata.name.clone().unwrap_or_default(),
                c.spec.image.clone(),
            )
        })
        .collect()
}

#[test]
fn child_names_are_stable_short_enough_and_distinct() {
    assert_eq!(child_name("warm", A), child_name("warm", A));
    assert_ne!(child_name("warm", A), child_name("warm", B));
    assert!(child_name("warm", A).starts_with("warm-"));
    let long = format!("{}-.x", "a".repeat(250));
    let name = child_name(&long, A);
    assert!(name.len() <= 253, "{} characters", name.len());
    assert!(!name.contains("-.") && !name.contains(".-"), "{name}");
}

#[test]
fn one_image_pull_job_per_image_owned_by_the_job() {
    let job = list_job(&[A, B]);
    let p = run(&job, &[], &[], 0);
    assert_eq!(
        created(&p),
        [
            (child_name("warm", A), A.to_owned()),
            (child_name("warm", B), B.to_owned())
        ]
    );
    let first = &p.create[0];
    assert_eq!(first.metadata.namespace.as_deref(), Some("ns"));
    let owner: &OwnerReference = &first.metadata.owner_references.as_ref().expect("owner")[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str(), owner.controller),
        ("ImageListPullJob", "list-uid", Some(true))
    );
    // Every ImagePullJob field is the job's, but the TTL, which deletes the whole job.
    assert_eq!(first.spec.pull_policy, job.spec.pull_policy);
    assert_eq!(
        first.spec.completion_policy.ttl_seconds_after_finished,
        None
    );
    assert_eq!(p.status.desired, 2);
    assert_eq!(p.status.start_time, Some(Time(t(0))));
    assert_eq!(p.status.progress.as_ref().map(|p| p.percent), Some(0));
    assert!(p.update.is_empty() && p.delete.is_empty());
}

#[test]
fn existing_children_are_kept_edited_or_deleted() {
    let job = list_job(&[A, B]);
    let mut edited = job.clone();
    edited.spec.pull_policy = Some(PullPolicy {
        timeout_seconds: Some(15),
        backoff_limit: Some(1),
    });
    let a = child(&job, A, None);
    let b = child(&job, B, None);
    let c = child(&job, C, None);
    let mut second_a = child(&job, A, None);
    second_a.metadata.name = Some("warm-older".into());
    second_a.metadata.uid = Some("older-uid".into());
    // (job, children, want created, want updated, want deleted)
    type Case<'a> = (
        &'a ImageListPullJob,
        Vec<ImagePullJob>,
        Vec<&'a str>,
        Vec<String>,
        Vec<String>,
    );
    let cases: Vec<Case<'_>> = vec![
        // After a restart: its own children are found, nothing is created again.
        (&job, vec![a.clone(), b.clone()], vec![], vec![], vec![]),
        // A lost child comes back under the same name.
        (&job, vec![a.clone()], vec![B], vec![], vec![]),
        // An edited timeout reaches every child (kruise #2221).
        (
            &edited,
            vec![a.clone(), b.clone()],
            vec![],
            vec![child_name("warm", A), child_name("warm", B)],
            vec![],
        ),
        // An image taken off the list loses its ImagePullJob.
        (
            &job,
            vec![a.clone(), b.clone(), c.clone()],
            vec![],
            vec![],
            vec![child_name("warm", C)],
        ),
        // Two for one image: the one under the job's own name stays.
        (
            &job,
            vec![second_a, a, b],
            vec![],
            vec![],
            vec!["warm-older".to_owned()],
        ),
    ];
    for (job, children, want_created, want_updated, want_deleted) in cases {
        let p = run(job, &children, &[], 5);
        let got: Vec<String> = created(&p).into_iter().map(|(_, image)| image).collect();
        assert_eq!(got, want_created);
        let updated: Vec<String> = p.update.iter().map(|(n, _)| n.clone()).collect();
        assert_eq!(updated, want_updated);
        assert!(
            p.update
                .iter()
                .all(|(_, spec)| spec.timeout() == job.spec.child_spec(A).timeout())
        );
        let deleted: Vec<String> = p.delete.iter().map(|(n, _)| n.clone()).collect();
        assert_eq!(deleted, want_deleted);
        assert!(
            p.delete
                .iter()
                .all(|(name, uid)| uid.starts_with(name.as_str()) || uid == "older-uid")
        );
    }
}

#[test]
fn a_name_held_by_another_owner_is_reported_not_taken_over() {
    let job = list_job(&[A]);
    let taken = child_name("warm", A);
    let p = run(&job, &[], &[taken.as_str()], 0);
    assert!(p.create.is_empty());
    let event = p.events.iter().find(|e| e.warning).expect("a warning");
    assert_eq!(event.reason, "FailedCreate");
    assert!(event.note.contains(&taken), "{}", event.note);
}

#[test]
fn status_sums_the_image_pull_jobs() {
    let job = list_job(&[A, B, C]);
    // (statuses of A, B, C; want active, completed, succeeded, failed images, percent, done)
    type Case = (
        [Option<ImagePullJobStatus>; 3],
        (i32, i32, i32, usize, i32, bool),
    );
    let cases: Vec<Case> = vec![
        // Created, none started: nothing counts, 0%.
        ([None, None, None], (0, 0, 0, 0, 0, false)),
        // Pulling: progress moves with the bytes before any node finished (kruise #1656).
        (
            [
                Some(running(3, 1, 0, 0, 30)),
                Some(running(3, 1, 0, 0, 60)),
                None,
            ],
            (2, 0, 0, 0, 30, false),
        ),
        // One finished on every node, one with a failed node, one still running.
        (
            [
                Some(running(3, 0, 3, 0, 100)),
                Some(running(3, 0, 2, 1, 100)),
                Some(running(3, 1, 1, 0, 50)),
            ],
            (1, 2, 1, 1, 83, false),
        ),
        // All finished: completed, 100%.
        (
            [
                Some(running(3, 0, 3, 0, 100)),
                Some(running(3, 0, 2, 1, 100)),
                Some(running(3, 0, 3, 0, 100)),
            ],
            (0, 3, 2, 1, 100, true),
        ),
    ];
    for ([a, b, c], (active, completed, succeeded, failed, percent, done)) in cases {
        let children = [child(&job, A, a), child(&job, B, b), child(&job, C, c)];
        let p = run(&job, &children, &[], 10);
        let s = &p.status;
        assert_eq!(
            (s.desired, s.active, s.completed, s.succeeded),
            (3, active, completed, succeeded)
        );
        assert_eq!(s.failed_image_statuses.len(), failed);
        assert_eq!(s.progress.as_ref().map(|p| p.percent), Some(percent));
        assert_eq!(s.completion_time.is_some(), done);
        if let Some(f) = s.failed_image_statuses.first() {
            assert_eq!(
                (f.name.as_str(), f.image_pull_job.clone()),
                (B, child_name("warm", B))
            );
            assert!(f.message.contains("node-0"), "{}", f.message);
        }
    }
}

#[test]
fn progress_does_not_go_back_when_a_pull_starts_over() {
    let mut job = list_job(&[A, B]);
    let children = [
        child(&job, A, Some(running(1, 1, 0, 0, 80))),
        child(&job, B, Some(running(1, 1, 0, 0, 80))),
    ];
    let first = run(&job, &children, &[], 10).status;
    assert_eq!(first.progress.as_ref().map(|p| p.percent), Some(80));
    job.status = Some(first);
    // A retry started over on both.
    let children = [
        child(&job, A, Some(running(1, 1, 0, 0, 5))),
        child(&job, B, Some(running(1, 1, 0, 0, 5))),
    ];
    let again = run(&job, &children, &[], 20).status;
    assert_eq!(again.progress.as_ref().map(|p| p.percent), Some(80));
}

#[test]
fn a_completed_job_acts_no_more_and_is_deleted_after_its_ttl() {
    let mut job = list_job(&[A, B]);
    job.status = Some(crate::api::imagelistpulljob::ImageListPullJobStatus {
        completion_time: Some(Time(t(100))),
        desired: 2,
        ..Default::default()
    });
    // An image added after completion starts nothing.
    job.spec.images.push(C.to_owned());
    let p = run(&job, &[], &[], 110);
    assert!(p.create.is_empty() && p.update.is_empty() && p.delete.is_empty());
    assert!(!p.delete_job);
    assert_eq!(p.requeue_after, Some(std::time::Duration::from_secs(20)));
    let p = run(&job, &[], &[], 130);
    assert!(p.delete_job);
}

#[test]
fn never_does_not_complete() {
    let mut job = list_job(&[A]);
    job.spec.completion_policy.type_ = Some(CompletionPolicyType::Never);
    let children = [child(&job, A, Some(running(2, 0, 2, 0, 100)))];
    let p = run(&job, &children, &[], 10);
    assert_eq!((p.status.completed, p.status.succeeded), (1, 1));
    assert_eq!(p.status.completion_time, None);
}
