use chrono_tz::Tz;

use super::*;

fn at(text: &str) -> Timestamp {
    text.parse().expect("test timestamp")
}

fn every_minute() -> Schedule {
    Schedule::parse("*/1 * * * *", None, Tz::UTC).unwrap()
}

fn facts(concurrency: ConcurrencyPolicy) -> CronFacts<'static> {
    CronFacts {
        name: "nightly",
        created: at("2026-11-24T10:00:10Z"),
        last_schedule: None,
        starting_deadline_seconds: None,
        concurrency,
        paused: false,
        successful_history_limit: 3,
        failed_history_limit: 1,
    }
}

fn child(name: &str, state: RunState, when: &str) -> Child {
    Child {
        name: name.to_owned(),
        state,
        finished_or_created: at(when),
    }
}

#[test]
fn a_run_is_named_by_its_scheduled_minute() {
    // 2026-11-24T10:01:00Z is unix 1795514460 s = 29925241 min (`date -u -d ... +%s`).
    assert_eq!(
        run_name("nightly", at("2026-11-24T10:01:00Z")),
        "nightly-29925241"
    );
}

#[test]
fn the_first_time_after_creation_creates_one_run_and_requeues_at_the_next() {
    let plan = plan(
        &facts(ConcurrencyPolicy::Allow),
        &every_minute(),
        &[],
        at("2026-11-24T10:01:05Z"),
    );
    let scheduled = at("2026-11-24T10:01:00Z");
    assert_eq!(
        plan.create,
        Some(Run {
            name: run_name("nightly", scheduled),
            scheduled
        })
    );
    assert_eq!(plan.last_schedule, Some(scheduled));
    assert_eq!(plan.requeue_at, Some(at("2026-11-24T10:02:00Z")));
    assert!(plan.notices.is_empty());
}

#[test]
fn before_the_first_time_nothing_is_created_and_the_requeue_is_exact() {
    let plan = plan(
        &facts(ConcurrencyPolicy::Allow),
        &every_minute(),
        &[],
        at("2026-11-24T10:00:40Z"),
    );
    assert_eq!(plan.create, None);
    assert_eq!(plan.requeue_at, Some(at("2026-11-24T10:01:00Z")));
}

#[test]
fn a_run_that_exists_already_is_not_created_again() {
    // A restart or a second leader at the scheduled minute: the name says it ran.
    let scheduled = at("2026-11-24T10:01:00Z");
    let existing = child(
        &run_name("nightly", scheduled),
        RunState::Active,
        "2026-11-24T10:01:01Z",
    );
    let plan = plan(
        &facts(ConcurrencyPolicy::Allow),
        &every_minute(),
        &[existing],
        at("2026-11-24T10:01:30Z"),
    );
    assert_eq!(plan.create, None);
    assert_eq!(plan.last_schedule, Some(scheduled));
}

#[test]
fn concurrency_policies_decide_what_happens_to_an_active_run() {
    let now = at("2026-11-24T10:02:05Z");
    let mut cron = facts(ConcurrencyPolicy::Allow);
    cron.last_schedule = Some(at("2026-11-24T10:01:00Z"));
    let running = [child(
        "nightly-29925241",
        RunState::Active,
        "2026-11-24T10:01:01Z",
    )];
    let next = at("2026-11-24T10:02:00Z");

    let allow = plan(&cron, &every_minute(), &running, now);
    assert_eq!(allow.create.map(|r| r.scheduled), Some(next));
    assert!(allow.delete.is_empty());

    cron.concurrency = ConcurrencyPolicy::Forbid;
    let forbid = plan(&cron, &every_minute(), &running, now);
    assert_eq!(forbid.create, None);
    assert_eq!(
        forbid.last_schedule, None,
        "a skipped time does not count as run"
    );
    assert_eq!(
        forbid.notices,
        vec![Notice::AlreadyActive { scheduled: next }]
    );

    cron.concurrency = ConcurrencyPolicy::Replace;
    let replace = plan(&cron, &every_minute(), &running, now);
    assert_eq!(replace.create.map(|r| r.scheduled), Some(next));
    assert_eq!(
        replace.delete,
        vec![("nightly-29925241".to_owned(), DeleteReason::Replaced)]
    );
}

#[test]
fn missed_times_run_once_within_the_starting_deadline_and_not_after_it() {
    // Down from 10:01 to 10:30: 29 times were missed; only the latest runs, once, and
    // the latest of those past the 60 s deadline (10:29) is reported as skipped.
    let mut cron = facts(ConcurrencyPolicy::Allow);
    cron.last_schedule = Some(at("2026-11-24T10:01:00Z"));
    cron.starting_deadline_seconds = Some(60);
    let back = plan(&cron, &every_minute(), &[], at("2026-11-24T10:30:20Z"));
    assert_eq!(
        back.create.map(|r| r.scheduled),
        Some(at("2026-11-24T10:30:00Z"))
    );
    assert_eq!(
        back.notices,
        vec![Notice::MissedDeadline {
            scheduled: at("2026-11-24T10:29:00Z")
        }]
    );

    // Hourly, back 10 minutes late with a 5-minute deadline: skipped, reported.
    let hourly = Schedule::parse("@hourly", None, Tz::UTC).unwrap();
    cron.starting_deadline_seconds = Some(300);
    cron.last_schedule = Some(at("2026-11-24T09:00:00Z"));
    let late = plan(&cron, &hourly, &[], at("2026-11-24T10:10:00Z"));
    assert_eq!(late.create, None);
    assert_eq!(late.requeue_at, Some(at("2026-11-24T11:00:00Z")));
    assert_eq!(
        late.notices,
        vec![Notice::MissedDeadline {
            scheduled: at("2026-11-24T10:00:00Z")
        }]
    );
}

#[test]
fn a_start_time_past_the_deadline_is_reported_not_run_and_one_within_it_runs() {
    let mut cron = facts(ConcurrencyPolicy::Allow);
    cron.starting_deadline_seconds = Some(10);
    // Created 10:00:10, deadline window is [now-10s, now]: 10:01:00 is 30 s old.
    let plan_ = plan(&cron, &every_minute(), &[], at("2026-11-24T10:01:30Z"));
    assert_eq!(plan_.create, None);
    assert_eq!(
        plan_.notices,
        vec![Notice::MissedDeadline {
            scheduled: at("2026-11-24T10:01:00Z")
        }]
    );
    let hourly = Schedule::parse("@hourly", None, Tz::UTC).unwrap();
    cron.created = at("2026-11-24T09:30:00Z");
    cron.starting_deadline_seconds = Some(3600);
    let missed = plan(&cron, &hourly, &[], at("2026-11-24T11:10:00Z"));
    assert_eq!(
        missed.create.map(|r| r.scheduled),
        Some(at("2026-11-24T11:00:00Z"))
    );
}

#[test]
fn more_than_a_hundred_missed_times_are_reported_and_the_latest_still_runs() {
    let mut cron = facts(ConcurrencyPolicy::Allow);
    cron.last_schedule = Some(at("2026-11-20T00:00:00Z"));
    let plan = plan(&cron, &every_minute(), &[], at("2026-11-24T10:30:20Z"));
    assert_eq!(plan.notices, vec![Notice::TooManyMissed]);
    assert_eq!(
        plan.create.map(|r| r.scheduled),
        Some(at("2026-11-24T10:30:00Z"))
    );
    let every = Schedule::parse("@every 7m", None, Tz::UTC).unwrap();
    let plan = super::plan(&cron, &every, &[], at("2026-11-24T10:30:20Z"));
    // 4 days + 10.5 h = 6390.33 min since the last run: the 912th step of 7 min.
    assert_eq!(
        plan.create.map(|r| r.scheduled),
        Some(at("2026-11-24T10:24:00Z"))
    );
}

#[test]
fn paused_creates_nothing_and_waits_for_an_edit_but_still_prunes_history() {
    let mut cron = facts(ConcurrencyPolicy::Allow);
    cron.paused = true;
    cron.failed_history_limit = 0;
    let failed = [child("nightly-1", RunState::Failed, "2026-11-24T09:00:00Z")];
    let plan = plan(&cron, &every_minute(), &failed, at("2026-11-24T10:30:20Z"));
    assert_eq!(plan.create, None);
    assert_eq!(plan.requeue_at, None);
    assert_eq!(
        plan.delete,
        vec![("nightly-1".to_owned(), DeleteReason::History)]
    );
}

#[test]
fn history_keeps_the_newest_finished_runs_per_outcome() {
    let children = [
        child("s1", RunState::Succeeded, "2026-11-24T10:01:00Z"),
        child("s4", RunState::Succeeded, "2026-11-24T10:04:00Z"),
        child("s2", RunState::Succeeded, "2026-11-24T10:02:00Z"),
        child("s3", RunState::Succeeded, "2026-11-24T10:03:00Z"),
        child("s0", RunState::Succeeded, "2026-11-24T10:00:30Z"),
        child("f1", RunState::Failed, "2026-11-24T10:01:30Z"),
        child("f2", RunState::Failed, "2026-11-24T10:02:30Z"),
        child("a", RunState::Active, "2026-11-24T09:00:00Z"),
    ];
    let mut cron = facts(ConcurrencyPolicy::Allow);
    cron.paused = true;
    let deleted: Vec<String> = plan(
        &cron,
        &every_minute(),
        &children,
        at("2026-11-24T10:05:00Z"),
    )
    .delete
    .into_iter()
    .map(|(name, _)| name)
    .collect();
    // Limits 3 succeeded, 1 failed (the defaults); active runs are never pruned.
    assert_eq!(deleted, vec!["s0", "s1", "f1"]);
}
