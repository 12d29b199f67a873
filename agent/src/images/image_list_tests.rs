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

#[test]
fn generations_order_applies() {
    let now = Instant::now();
    let mut list = ImageList::default();
    assert_eq!(list.generation(), None);
    assert_eq!(
        list.apply(2, list_of(&[("a", spec())]), now),
        Ok(Applied::Replaced)
    );
    assert_eq!(list.apply(2, list_of(&[]), now), Ok(Applied::Unchanged));
    assert_eq!(list.statuses().len(), 1, "same generation changed the list");
    assert_eq!(
        list.apply(1, list_of(&[]), now),
        Err(StaleGeneration {
            held: 2,
            offered: 1
        })
    );
    assert_eq!(
        list.apply(3, list_of(&[("b", spec())]), now),
        Ok(Applied::Replaced)
    );
    let statuses = list.statuses();
    assert_eq!(statuses.len(), 1);
    assert_eq!(statuses[0].image, "b");
    assert_eq!(statuses[0].generation, 3);
}

#[test]
fn new_images_are_due_at_once_and_not_twice() {
    let now = Instant::now();
    let mut list = ImageList::default();
    list.apply(1, list_of(&[("a", spec()), ("b", spec())]), now)
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
    list.apply(1, list_of(&[("a", spec())]), now).unwrap();
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
    list.apply(1, list_of(&[("a", hourly)]), now).unwrap();
    list.start("a");
    list.finish("a", ok("sha256:id"), now, WALL);
    assert_eq!(list.next_due(), Some(now + Duration::from_secs(3600)));
    assert!(list.due(now + Duration::from_secs(3599)).is_empty());
    assert_eq!(list.due(now + Duration::from_secs(3600)).len(), 1);
    let again = list.start("a").unwrap();
    assert_eq!(again.attempts, 1, "a new cycle counts attempts afresh");
}

#[test]
fn failures_back_off_then_fail_at_the_limit() {
    let now = Instant::now();
    let limited = DesiredSpec {
        backoff_limit: 3,
        ..spec()
    };
    let mut list = ImageList::default();
    list.apply(1, list_of(&[("a", limited)]), now).unwrap();

    list.start("a");
    let first = list.finish("a", failed(), now, WALL).unwrap();
    assert_eq!(first.phase, ListPhase::Waiting);
    assert_eq!(first.message, "boom");
    assert_eq!(list.next_due(), Some(now + Duration::from_secs(2)));

    let t2 = now + Duration::from_secs(2);
    assert_eq!(list.due(t2).len(), 1);
    list.start("a");
    list.finish("a", failed(), t2, WALL);
    assert_eq!(list.next_due(), Some(t2 + Duration::from_secs(4)));

    let t3 = t2 + Duration::from_secs(4);
    let third = list.start("a").unwrap();
    assert_eq!(third.attempts, 3);
    let last = list.finish("a", failed(), t3, WALL).unwrap();
    assert_eq!(last.phase, ListPhase::Failed);
    assert_eq!(list.next_due(), None);
}

#[test]
fn zero_backoff_limit_means_the_default() {
    let now = Instant::now();
    let mut list = ImageList::default();
    list.apply(1, list_of(&[("a", spec())]), now).unwrap();
    for attempt in 1..=DEFAULT_BACKOFF_LIMIT {
        list.start("a");
        let status = list.finish("a", failed(), now, WALL).unwrap();
        let expected = if attempt < DEFAULT_BACKOFF_LIMIT {
            ListPhase::Waiting
        } else {
            ListPhase::Failed
        };
        assert_eq!(status.phase, expected, "after attempt {attempt}");
    }
}

#[test]
fn a_changed_spec_revives_a_failed_image_and_an_unchanged_one_does_not() {
    let now = Instant::now();
    let once = DesiredSpec {
        backoff_limit: 1,
        ..spec()
    };
    let mut list = ImageList::default();
    list.apply(1, list_of(&[("a", once.clone())]), now).unwrap();
    list.start("a");
    list.finish("a", failed(), now, WALL);
    assert_eq!(list.statuses()[0].phase, ListPhase::Failed);

    list.apply(2, list_of(&[("a", once.clone())]), now).unwrap();
    assert_eq!(list.statuses()[0].phase, ListPhase::Failed);

    let changed = DesiredSpec {
        backoff_limit: 5,
        ..once
    };
    list.apply(3, list_of(&[("a", changed)]), now).unwrap();
    let status = &list.statuses()[0];
    assert_eq!(status.phase, ListPhase::Waiting);
    assert_eq!(status.attempts, 0);
    assert_eq!(list.due(now).len(), 1);
}

#[test]
fn results_for_images_no_longer_listed_are_ignored() {
    let now = Instant::now();
    let mut list = ImageList::default();
    list.apply(1, list_of(&[("a", spec())]), now).unwrap();
    list.start("a");
    list.apply(2, list_of(&[]), now).unwrap();
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
