//! The planner driven over minutes by a fake clock, as the controller drives it: synced at
//! each `requeue_at`, its creates and deletes applied to an in-memory set of runs, its
//! `lastScheduleTime` kept between syncs. These prove the behaviour that depends on
//! minute boundaries (one run per minute, concurrency across minutes, history pruning,
//! a leader change at the scheduled minute, a missed minute, time zones), so the
//! component suites against the cluster need not wait for real minutes to pass.

use chrono_tz::Tz;

use super::*;

fn at(text: &str) -> Timestamp {
    text.parse().expect("test timestamp")
}

fn schedule(text: &str, zone: Option<&str>) -> Schedule {
    Schedule::parse(text, zone, Tz::UTC).expect("test schedule")
}

/// One AdvancedCronJob, its runs and the clock, as the controller would see them.
struct Sim {
    cron: CronFacts<'static>,
    schedule: Schedule,
    children: Vec<Child>,
    /// Every run created, in order.
    created: Vec<Run>,
    /// Every run deleted, in order, with why.
    deleted: Vec<(String, DeleteReason)>,
    notices: Vec<Notice>,
}

impl Sim {
    fn new(schedule_text: &str, created: &str, concurrency: ConcurrencyPolicy) -> Self {
        Self {
            cron: CronFacts {
                name: "tick",
                created: at(created),
                last_schedule: None,
                starting_deadline_seconds: None,
                concurrency,
                paused: false,
                successful_history_limit: 3,
                failed_history_limit: 1,
            },
            schedule: schedule(schedule_text, None),
            children: Vec::new(),
            created: Vec::new(),
            deleted: Vec::new(),
            notices: Vec::new(),
        }
    }

    /// One sync at `now`, its plan carried out (a created run starts active).
    fn sync(&mut self, now: Timestamp) -> CronPlan {
        let planned = plan(&self.cron, &self.schedule, &self.children, now);
        for (name, reason) in &planned.delete {
            self.children.retain(|c| &c.name != name);
            self.deleted.push((name.clone(), *reason));
        }
        if let Some(run) = &planned.create {
            self.children.push(Child {
                name: run.name.clone(),
                state: RunState::Active,
                finished_or_created: now,
            });
            self.created.push(run.clone());
        }
        if planned.last_schedule.is_some() {
            self.cron.last_schedule = planned.last_schedule;
        }
        self.notices.extend(planned.notices.iter().cloned());
        planned
    }

    /// Syncs at `from` and then at every time the planner asks to look again, up to and
    /// including `until`: a leader that is up all along.
    fn run(&mut self, from: &str, until: &str) {
        let until = at(until);
        let mut now = at(from);
        while let Some(next) = self.sync(now).requeue_at.filter(|t| *t <= until) {
            now = next;
        }
    }

    /// The run `name` ends as `state` at `when` (the Job controller's doing).
    fn finish(&mut self, name: &str, state: RunState, when: &str) {
        let child = (self.children.iter_mut())
            .find(|c| c.name == name)
            .expect("the run to finish exists");
        child.state = state;
        child.finished_or_created = at(when);
    }

    fn created_at(&self) -> Vec<String> {
        (self.created.iter())
            .map(|r| r.scheduled.to_string())
            .collect()
    }

    /// The notices, each once: a skipped time is reported again at every sync until a
    /// run moves lastScheduleTime past it (as the native controller does; Events with
    /// the same message become one Event with a count).
    fn distinct_notices(&self) -> Vec<Notice> {
        let mut distinct: Vec<Notice> = Vec::new();
        for notice in &self.notices {
            if !distinct.contains(notice) {
                distinct.push(notice.clone());
            }
        }
        distinct
    }

    fn names(&self) -> Vec<String> {
        self.children.iter().map(|c| c.name.clone()).collect()
    }
}

fn name_of(scheduled: &str) -> String {
    run_name("tick", at(scheduled))
}

#[test]
fn every_minute_makes_one_run_per_minute_named_by_it() {
    let mut sim = Sim::new(
        "*/1 * * * *",
        "2026-11-24T10:00:10Z",
        ConcurrencyPolicy::Allow,
    );
    sim.run("2026-11-24T10:00:10Z", "2026-11-24T10:03:30Z");
    let minutes = [
        "2026-11-24T10:01:00Z",
        "2026-11-24T10:02:00Z",
        "2026-11-24T10:03:00Z",
    ];
    assert_eq!(sim.created_at(), minutes);
    assert_eq!(sim.names(), minutes.map(name_of));
    assert!(sim.notices.is_empty(), "{:?}", sim.notices);
}

#[test]
fn ticks_within_one_minute_share_its_run() {
    // `@every 2s` ticks 30 times a minute, but a run is named by its minute, so the later
    // ticks of a minute find its run and only move lastScheduleTime (the component
    // suites rely on this: a 2 s schedule makes its first run within seconds, then one
    // a minute).
    let mut sim = Sim::new(
        "@every 2s",
        "2026-11-24T10:00:10Z",
        ConcurrencyPolicy::Allow,
    );
    sim.run("2026-11-24T10:00:10Z", "2026-11-24T10:02:31Z");
    assert_eq!(
        sim.created_at(),
        [
            "2026-11-24T10:00:12Z",
            "2026-11-24T10:01:00Z",
            "2026-11-24T10:02:00Z"
        ]
    );
    assert_eq!(sim.cron.last_schedule, Some(at("2026-11-24T10:02:30Z")));
    assert!(sim.deleted.is_empty() && sim.notices.is_empty());
}

#[test]
fn forbid_holds_a_minutes_run_while_one_is_active_until_its_starting_deadline() {
    // The 10:01 run is active over 10:02 and ends at 10:02:40. A skipped time does not
    // move lastScheduleTime, so 10:02 is still due when the run ends: it starts then,
    // late (and holds 10:03 in its turn), unless startingDeadlineSeconds has passed,
    // and then 10:03 is the next.
    // (startingDeadlineSeconds, runs created, notices)
    let cases = [
        (
            None,
            vec!["10:01:00", "10:02:00"],
            vec![
                Notice::AlreadyActive {
                    scheduled: at("2026-11-24T10:02:00Z"),
                },
                // The late 10:02 run is active in its turn.
                Notice::AlreadyActive {
                    scheduled: at("2026-11-24T10:03:00Z"),
                },
            ],
        ),
        (
            Some(30),
            vec!["10:01:00", "10:03:00"],
            vec![
                Notice::AlreadyActive {
                    scheduled: at("2026-11-24T10:02:00Z"),
                },
                Notice::MissedDeadline {
                    scheduled: at("2026-11-24T10:02:00Z"),
                },
            ],
        ),
    ];
    for (deadline, runs, notices) in cases {
        let mut sim = Sim::new(
            "*/1 * * * *",
            "2026-11-24T10:00:10Z",
            ConcurrencyPolicy::Forbid,
        );
        sim.cron.starting_deadline_seconds = deadline;
        sim.run("2026-11-24T10:00:10Z", "2026-11-24T10:02:30Z");
        let first = name_of("2026-11-24T10:01:00Z");
        sim.finish(&first, RunState::Succeeded, "2026-11-24T10:02:40Z");
        // The run's end triggers a sync.
        sim.run("2026-11-24T10:02:40Z", "2026-11-24T10:03:30Z");
        let expected: Vec<String> = (runs.iter()).map(|t| format!("2026-11-24T{t}Z")).collect();
        assert_eq!(sim.created_at(), expected, "deadline {deadline:?}");
        assert_eq!(sim.distinct_notices(), notices, "deadline {deadline:?}");
    }
}

#[test]
fn replace_deletes_each_minutes_active_run_for_the_next() {
    let mut sim = Sim::new(
        "*/1 * * * *",
        "2026-11-24T10:00:10Z",
        ConcurrencyPolicy::Replace,
    );
    sim.run("2026-11-24T10:00:10Z", "2026-11-24T10:03:30Z");
    assert_eq!(sim.created.len(), 3);
    assert_eq!(
        sim.deleted,
        [
            (name_of("2026-11-24T10:01:00Z"), DeleteReason::Replaced),
            (name_of("2026-11-24T10:02:00Z"), DeleteReason::Replaced),
        ]
    );
    assert_eq!(sim.names(), [name_of("2026-11-24T10:03:00Z")]);
}

#[test]
fn history_keeps_the_newest_finished_run_as_the_minutes_pass() {
    for state in [RunState::Succeeded, RunState::Failed] {
        let mut sim = Sim::new(
            "*/1 * * * *",
            "2026-11-24T10:00:10Z",
            ConcurrencyPolicy::Allow,
        );
        sim.cron.successful_history_limit = 1;
        sim.cron.failed_history_limit = 1;
        for minute in ["10:01", "10:02", "10:03"] {
            sim.sync(at(&format!("2026-11-24T{minute}:00Z")));
            let run = name_of(&format!("2026-11-24T{minute}:00Z"));
            sim.finish(&run, state, &format!("2026-11-24T{minute}:10Z"));
            // The Job's status change triggers a sync, which prunes.
            sim.sync(at(&format!("2026-11-24T{minute}:10Z")));
            assert_eq!(sim.names(), [run], "{state:?} after {minute}");
        }
        let pruned: Vec<_> = sim.deleted.iter().map(|(n, _)| n.clone()).collect();
        assert_eq!(
            pruned,
            ["10:01", "10:02"].map(|m| name_of(&format!("2026-11-24T{m}:00Z"))),
            "{state:?}: the oldest go first"
        );
    }
}

#[test]
fn a_leader_change_at_the_scheduled_minute_makes_exactly_one_run() {
    // (what the old leader did before it died, the runs the new one must leave)
    let cases = [
        ("died before creating the run", false, false),
        ("created the run, died before writing status", true, false),
        ("created the run and wrote status", true, true),
    ];
    for (why, created, status_written) in cases {
        let mut sim = Sim::new(
            "*/1 * * * *",
            "2026-11-24T10:00:10Z",
            ConcurrencyPolicy::Allow,
        );
        sim.run("2026-11-24T10:00:10Z", "2026-11-24T10:01:30Z");
        let before_the_kill = sim.cron.last_schedule;
        if created {
            sim.sync(at("2026-11-24T10:02:00Z"));
            if !status_written {
                sim.cron.last_schedule = before_the_kill;
            }
        }
        // The new leader takes over 15 s later and keeps going.
        sim.run("2026-11-24T10:02:15Z", "2026-11-24T10:03:30Z");
        assert_eq!(
            sim.created_at(),
            [
                "2026-11-24T10:01:00Z",
                "2026-11-24T10:02:00Z",
                "2026-11-24T10:03:00Z"
            ],
            "{why}"
        );
        assert!(sim.deleted.is_empty() && sim.notices.is_empty(), "{why}");
    }
}

#[test]
fn a_minute_missed_while_down_runs_on_return_only_within_the_starting_deadline() {
    // Up until 10:01:25, down over 10:02:00, back at 10:02:25.
    // (startingDeadlineSeconds, runs created, notices)
    let cases = [
        (None, vec!["10:01", "10:02", "10:03"], vec![]),
        (Some(300), vec!["10:01", "10:02", "10:03"], vec![]),
        (
            Some(10),
            vec!["10:01", "10:03"],
            vec![Notice::MissedDeadline {
                scheduled: at("2026-11-24T10:02:00Z"),
            }],
        ),
    ];
    for (deadline, runs, notices) in cases {
        let mut sim = Sim::new(
            "*/1 * * * *",
            "2026-11-24T10:00:10Z",
            ConcurrencyPolicy::Allow,
        );
        sim.cron.starting_deadline_seconds = deadline;
        sim.run("2026-11-24T10:00:10Z", "2026-11-24T10:01:25Z");
        sim.run("2026-11-24T10:02:25Z", "2026-11-24T10:03:30Z");
        let expected: Vec<String> = (runs.iter())
            .map(|m| format!("2026-11-24T{m}:00Z"))
            .collect();
        assert_eq!(sim.created_at(), expected, "deadline {deadline:?}");
        assert_eq!(sim.distinct_notices(), notices, "deadline {deadline:?}");
    }
}

#[test]
fn ticks_missed_while_down_for_seconds_run_once_and_the_ones_past_the_deadline_are_reported() {
    // The faults suite's case: `@every 2s` created while the control plane is down, back
    // 9 s later. Ticks at :02, :04, :06, :08 were missed; only the latest runs.
    // (startingDeadlineSeconds, the run's scheduled time, notices)
    let cases = [
        (300, "2026-11-24T10:00:08Z", vec![]),
        (
            3,
            "2026-11-24T10:00:08Z",
            vec![Notice::MissedDeadline {
                scheduled: at("2026-11-24T10:00:06Z"),
            }],
        ),
    ];
    for (deadline, scheduled, notices) in cases {
        let mut sim = Sim::new(
            "@every 2s",
            "2026-11-24T10:00:00Z",
            ConcurrencyPolicy::Allow,
        );
        sim.cron.starting_deadline_seconds = Some(deadline);
        sim.run("2026-11-24T10:00:09Z", "2026-11-24T10:00:11Z");
        assert_eq!(sim.created_at(), [scheduled], "deadline {deadline}");
        assert_eq!(sim.distinct_notices(), notices, "deadline {deadline}");
    }
}

#[test]
fn a_zoned_schedule_follows_its_zone_across_a_daylight_saving_change() {
    // 09:00 in Berlin: 08:00Z before the change of 2026-03-29, 07:00Z from then on; each
    // run is still named by its (UTC) minute.
    let mut sim = Sim::new(
        "0 9 * * *",
        "2026-03-27T00:00:00Z",
        ConcurrencyPolicy::Allow,
    );
    sim.schedule = schedule("0 9 * * *", Some("Europe/Berlin"));
    sim.run("2026-03-27T00:00:00Z", "2026-03-30T12:00:00Z");
    let expected = [
        "2026-03-27T08:00:00Z",
        "2026-03-28T08:00:00Z",
        "2026-03-29T07:00:00Z",
        "2026-03-30T07:00:00Z",
    ];
    assert_eq!(sim.created_at(), expected);
    assert_eq!(sim.names(), expected.map(name_of));
}
