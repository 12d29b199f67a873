#![allow(clippy::unwrap_used)]

use super::*;

fn spec() -> DesiredSpec {
    DesiredSpec::default()
}

fn list_of(images: &[(&str, DesiredSpec)]) -> BTreeMap<String, DesiredSpec> {
    images
        .iter()
        .map(|(name, spec)| ((*name).to_owned(), spec.clone()))
        .collect()
}

fn ok(id: &str) -> PullResult {
    PullResult::Succeeded {
        image_id: id.to_owned(),
    }
}

fn failed() -> PullResult {
    PullResult::Failed {
        message: "boom".to_owned(),
    }
}

const WALL: SystemTime = SystemTime::UNIX_EPOCH;
const UID: &str = "uid-1";

fn epoch(generation: i64) -> Epoch {
    Epoch::new(UID, generation)
}

#[test]
fn generations_order_applies() {
    let now = Instant::now();
    let mut list = ImageList::default();
    assert_eq!(list.epoch(), None);
    assert_eq!(
        list.apply(epoch(2), list_of(&[("a", spec())]), now),
        Ok(Applied::Replaced)
    );
    assert_eq!(
        list.apply(epoch(2), list_of(&[]), now),
        Ok(Applied::Unchanged)
    );
    assert_eq!(list.statuses().len(), 1, "same generation changed the list");
    assert_eq!(
        list.apply(epoch(1), list_of(&[]), now),
        Err(StaleGeneration {
            list_uid: UID.to_owned(),
            held: 2,
            offered: 1
        })
    );
    assert_eq!(
        list.apply(epoch(3), list_of(&[("b", spec())]), now),
        Ok(Applied::Replaced)
    );
    let statuses = list.statuses();
    assert_eq!(statuses.len(), 1);
    assert_eq!(statuses[0].image, "b");
    assert_eq!(statuses[0].generation, 3);
}

#[test]
fn epochs_are_ordered_by_generation_within_one_uid_only() {
    let cases = [
        // held, offered, expected
        (("a", 5), ("a", 6), Order::Newer),
        (("a", 5), ("a", 5), Order::Same),
        (("a", 5), ("a", 4), Order::Stale),
        // The ImageList was deleted and created again: generation back at 1.
        (("a", 5), ("b", 1), Order::Newer),
        // A stray huge generation does not block the next ImageList.
        (("a", i64::MAX), ("b", 1), Order::Newer),
        (("a", 1), ("b", i64::MAX), Order::Newer),
        // Within one UID a huge generation still wins, and a lower one is stale.
        (("a", i64::MAX), ("a", 2), Order::Stale),
        // An older control plane sends no UID: generation alone, as before.
        (("", 3), ("", 2), Order::Stale),
        (("", 3), ("a", 1), Order::Newer),
        (("a", 3), ("", 1), Order::Newer),
    ];
    for ((held_uid, held_gen), (uid, generation), expected) in cases {
        let held = Epoch::new(held_uid, held_gen);
        let offered = Epoch::new(uid, generation);
        assert_eq!(
            order(&held, &offered),
            expected,
            "held {held:?}, offered {offered:?}"
        );
    }
}

#[test]
fn a_recreated_list_replaces_the_held_one_and_keeps_pulled_images() {
    let now = Instant::now();
    let mut list = ImageList::default();
    list.apply(epoch(9), list_of(&[("a", spec())]), now)
        .unwrap();
    list.start("a").unwrap();
    list.finish("a", ok("sha256:a"), now, WALL).unwrap();
    let recreated = Epoch::new("uid-2", 1);
    assert_eq!(
        list.apply(
            recreated.clone(),
            list_of(&[("a", spec()), ("b", spec())]),
            now
        ),
        Ok(Applied::Replaced)
    );
    assert_eq!(list.epoch(), Some(&recreated));
    let statuses = list.statuses();
    assert_eq!(
        statuses[0].phase,
        ListPhase::Succeeded,
        "a is not pulled again"
    );
    assert!(
        statuses
            .iter()
            .all(|s| s.generation == 1 && s.list_uid == "uid-2")
    );
    assert_eq!(list.due(now).len(), 1, "only b is due");
    // The old list's generation is now of another UID: it replaces again.
    assert_eq!(
        list.apply(epoch(9), list_of(&[]), now),
        Ok(Applied::Replaced)
    );
}

#[test]
fn new_images_are_due_at_once_and_not_twice() {
    let now = Instant::now();
    let mut list = ImageList::default();
    list.apply(epoch(1), list_of(&[("a", spec()), ("b", spec())]), now)
        .unwrap();
    let due: Vec<String> = list.due(now).into_iter().map(|(i, _)| i).collect();
    assert_eq!(due, ["a", "b"]);
    let started = list.start("a").unwrap();
    assert_eq!(started.phase, ListPhase::Pulling);
    assert_eq!(started.attempts, 1);
    let due: Vec<String> = list.due(now).into_iter().map(|(i, _)| i).collect();
    assert_eq!(due, ["b"]);
}

#[test]
fn success_records_the_image_and_plans_no_repull_without_always_pull() {
    let now = Instant::now();
    let mut list = ImageList::default();
    list.apply(epoch(1), list_of(&[("a", spec())]), now)
        .unwrap();
    list.start("a");
    assert!(list.progress("a", 5, 10).is_some());
    assert!(list.progress("a", 5, 10).is_none(), "no change, no update");
    let status = list.finish("a", ok("sha256:id"), now, WALL).unwrap();
    assert_eq!(status.phase, ListPhase::Succeeded);
    assert_eq!(status.image_id, "sha256:id");
    assert_eq!(status.last_pull, Some(WALL));
    assert_eq!(status.bytes_done, 5);
    assert_eq!(list.next_due(), None);
    assert!(list.due(now + Duration::from_secs(1_000_000)).is_empty());
}

#[test]
fn always_pull_repulls_on_its_interval() {
    let now = Instant::now();
    let hourly = DesiredSpec {
        always_pull: true,
        pull_interval: Some(Duration::from_secs(3600)),
        ..spec()
    };
    let mut list = ImageList::default();
    list.apply(epoch(1), list_of(&[("a", hourly)]), now)
        .unwrap();
    list.start("a");
    list.finish("a", ok("sha256:id"), now, WALL);
    assert_eq!(list.next_due(), Some(now + Duration::from_secs(3600)));
    assert!(list.due(now + Duration::from_secs(3599)).is_empty());
    assert_eq!(list.due(now + Duration::from_secs(3600)).len(), 1);
    let again = list.start("a").unwrap();
    assert_eq!(again.attempts, 1, "a new cycle counts attempts afresh");
}

fn failed_with(message: &str) -> PullResult {
    PullResult::Failed {
        message: message.to_owned(),
    }
}

/// One attempt in a failure table: its result, then the phase, message and wait until
/// the next attempt (`None`: none planned) the image shows.
struct Step {
    result: PullResult,
    phase: ListPhase,
    message: &'static str,
    next_in: Option<u64>,
}

fn step(result: PullResult, phase: ListPhase, message: &'static str, next_in: Option<u64>) -> Step {
    Step {
        result,
        phase,
        message,
        next_in,
    }
}

#[test]
fn failures_back_off_turn_failed_at_the_limit_and_keep_retrying_until_a_success() {
    use ListPhase::{Failed, Succeeded, Waiting};
    let outage = || failed_with("registry unreachable");
    let cases: Vec<(&str, u32, Vec<Step>)> = vec![
        (
            "limit 3: three retries Waiting, then Failed, still retried, then recovered",
            3,
            vec![
                step(outage(), Waiting, "registry unreachable", Some(2)),
                step(outage(), Waiting, "registry unreachable", Some(4)),
                step(outage(), Waiting, "registry unreachable", Some(8)),
                step(outage(), Failed, "registry unreachable", Some(16)),
                step(ok("sha256:id"), Succeeded, "", None),
            ],
        ),
        (
            "limit 0: no retries, Failed at once; a later failure keeps Failed with its own message",
            0,
            vec![
                step(outage(), Failed, "registry unreachable", Some(2)),
                step(
                    failed_with("manifest not found"),
                    Failed,
                    "manifest not found",
                    Some(4),
                ),
                step(ok("sha256:id"), Succeeded, "", None),
            ],
        ),
        (
            "limit 1: one retry Waiting, then Failed",
            1,
            vec![
                step(outage(), Waiting, "registry unreachable", Some(2)),
                step(outage(), Failed, "registry unreachable", Some(4)),
            ],
        ),
    ];
    for (name, backoff_limit, steps) in cases {
        let spec = DesiredSpec {
            backoff_limit,
            ..spec()
        };
        let mut now = Instant::now();
        let mut list = ImageList::default();
        list.apply(epoch(1), list_of(&[("a", spec)]), now).unwrap();
        let mut previous = list.statuses()[0].clone();
        for (i, step) in steps.into_iter().enumerate() {
            let attempt = u32::try_from(i).unwrap() + 1;
            assert_eq!(list.due(now).len(), 1, "{name}: attempt {attempt} due");
            let running = list.start("a").unwrap();
            assert_eq!(running.attempts, attempt, "{name}");
            if previous.phase == Failed {
                // A retry of a Failed image still says Failed, and why.
                assert_eq!(running.phase, Failed, "{name}: attempt {attempt}");
                assert_eq!(running.message, previous.message, "{name}");
            } else {
                assert_eq!(
                    running.phase,
                    ListPhase::Pulling,
                    "{name}: attempt {attempt}"
                );
            }
            assert_eq!(list.next_due(), None, "{name}: nothing due while it runs");
            let status = list.finish("a", step.result, now, WALL).unwrap();
            assert_eq!(status.phase, step.phase, "{name}: after attempt {attempt}");
            assert_eq!(
                status.message, step.message,
                "{name}: after attempt {attempt}"
            );
            assert_eq!(status.attempts, attempt, "{name}");
            let next = step.next_in.map(|s| now + Duration::from_secs(s));
            assert_eq!(list.next_due(), next, "{name}: after attempt {attempt}");
            if let Some(next) = next {
                assert!(
                    list.due(next - Duration::from_millis(1)).is_empty(),
                    "{name}"
                );
                now = next;
            }
            previous = status;
        }
    }
}

#[test]
fn the_backoff_of_a_failed_image_is_capped_at_five_minutes() {
    let now = Instant::now();
    let once = DesiredSpec {
        backoff_limit: 0,
        ..spec()
    };
    let mut list = ImageList::default();
    list.apply(epoch(1), list_of(&[("a", once)]), now).unwrap();
    for _ in 0..12 {
        list.start("a").unwrap();
        list.finish("a", failed(), now, WALL);
    }
    let status = &list.statuses()[0];
    assert_eq!((status.phase, status.attempts), (ListPhase::Failed, 12));
    assert_eq!(list.next_due(), Some(now + Duration::from_secs(300)));
}

#[test]
fn a_retry_of_a_failed_image_reports_its_progress() {
    let now = Instant::now();
    let once = DesiredSpec {
        backoff_limit: 0,
        ..spec()
    };
    let mut list = ImageList::default();
    list.apply(epoch(1), list_of(&[("a", once)]), now).unwrap();
    list.start("a");
    list.finish("a", failed(), now, WALL);
    assert_eq!(list.progress("a", 1, 10), None, "no pull runs");
    list.start("a").unwrap();
    let status = list.progress("a", 3, 10).unwrap();
    assert_eq!(status.phase, ListPhase::Failed);
    assert_eq!((status.bytes_done, status.bytes_total), (3, 10));
}

#[test]
fn a_running_pull_is_not_started_twice() {
    let now = Instant::now();
    let mut list = ImageList::default();
    list.apply(epoch(1), list_of(&[("a", spec())]), now)
        .unwrap();
    assert!(list.start("a").is_some());
    assert_eq!(list.start("a"), None);
    assert_eq!(list.statuses()[0].attempts, 1);
}

#[test]
fn a_changed_spec_revives_a_failed_image_and_an_unchanged_one_does_not() {
    let now = Instant::now();
    let once = DesiredSpec {
        backoff_limit: 0,
        ..spec()
    };
    let mut list = ImageList::default();
    list.apply(epoch(1), list_of(&[("a", once.clone())]), now)
        .unwrap();
    list.start("a");
    list.finish("a", failed(), now, WALL);
    assert_eq!(list.statuses()[0].phase, ListPhase::Failed);

    list.apply(epoch(2), list_of(&[("a", once.clone())]), now)
        .unwrap();
    assert_eq!(list.statuses()[0].phase, ListPhase::Failed);
    assert_eq!(
        list.next_due(),
        Some(now + Duration::from_secs(2)),
        "still on its backoff"
    );

    let changed = DesiredSpec {
        backoff_limit: 5,
        ..once
    };
    list.apply(epoch(3), list_of(&[("a", changed)]), now)
        .unwrap();
    let status = &list.statuses()[0];
    assert_eq!(status.phase, ListPhase::Waiting);
    assert_eq!(status.attempts, 0);
    assert_eq!(list.due(now).len(), 1);
}

#[test]
fn a_changed_spec_during_a_retry_of_a_failed_image_makes_that_retry_the_first_attempt() {
    let now = Instant::now();
    let once = DesiredSpec {
        backoff_limit: 0,
        ..spec()
    };
    let mut list = ImageList::default();
    list.apply(epoch(1), list_of(&[("a", once.clone())]), now)
        .unwrap();
    list.start("a");
    list.finish("a", failed(), now, WALL);
    list.start("a").unwrap();
    let changed = DesiredSpec {
        backoff_limit: 2,
        ..once
    };
    list.apply(epoch(2), list_of(&[("a", changed)]), now)
        .unwrap();
    let status = &list.statuses()[0];
    assert_eq!((status.phase, status.attempts), (ListPhase::Pulling, 1));
    assert!(
        list.due(now).is_empty(),
        "the running retry is not started again"
    );
    let after = list.finish("a", failed(), now, WALL).unwrap();
    assert_eq!(
        after.phase,
        ListPhase::Waiting,
        "one of two attempts failed"
    );
}

#[test]
fn results_for_images_no_longer_listed_are_ignored() {
    let now = Instant::now();
    let mut list = ImageList::default();
    list.apply(epoch(1), list_of(&[("a", spec())]), now)
        .unwrap();
    list.start("a");
    list.apply(epoch(2), list_of(&[]), now).unwrap();
    assert_eq!(list.finish("a", ok("x"), now, WALL), None);
    assert_eq!(list.progress("a", 1, 2), None);
    assert!(list.statuses().is_empty());
}

#[test]
fn backoff_doubles_and_is_capped() {
    assert_eq!(backoff(1), Duration::from_secs(2));
    assert_eq!(backoff(2), Duration::from_secs(4));
    assert_eq!(backoff(5), Duration::from_secs(32));
    assert_eq!(backoff(30), Duration::from_secs(300));
}

#[test]
fn a_succeeded_image_found_gone_is_due_at_once_and_nothing_else_is() {
    let now = Instant::now();
    let mut list = ImageList::default();
    list.apply(epoch(1), list_of(&[("a", spec()), ("b", spec())]), now)
        .unwrap();
    assert!(list.succeeded().is_empty());
    assert!(!list.gone("a", now), "a Waiting image is not revived");
    list.start("a").unwrap();
    list.start("b").unwrap();
    assert!(list.succeeded().is_empty(), "running pulls are not checked");
    assert!(!list.gone("a", now), "a running image is not revived");
    list.finish("a", ok("sha256:a"), now, WALL);
    list.finish("b", failed(), now, WALL);
    assert_eq!(list.succeeded(), ["a"]);
    assert!(!list.gone("b", now), "a Failed image has its own backoff");
    assert!(!list.gone("missing", now));
    assert_eq!(list.next_due(), Some(now + Duration::from_secs(2)));

    let later = now + Duration::from_secs(60);
    let before = list.statuses();
    assert!(list.gone("a", later));
    assert_eq!(
        list.statuses(),
        before,
        "no status change until the pull starts"
    );
    let due: Vec<String> = list.due(later).into_iter().map(|(i, _)| i).collect();
    assert_eq!(due, ["a", "b"]);
    let pulling = list.start("a").unwrap();
    assert_eq!((pulling.phase, pulling.attempts), (ListPhase::Pulling, 1));
}
