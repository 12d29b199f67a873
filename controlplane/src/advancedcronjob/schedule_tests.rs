use super::*;

fn at(text: &str) -> Timestamp {
    text.parse().expect("test timestamp")
}

fn next(schedule: &str, zone: Option<&str>, after: &str) -> String {
    Schedule::parse(schedule, zone, Tz::UTC)
        .unwrap_or_else(|e| panic!("{schedule}: {e}"))
        .next_after(at(after))
        .map_or_else(|| "never".to_owned(), |t| t.to_string())
}

#[test]
fn next_times_follow_robfig_standard_semantics() {
    let cases = [
        // (schedule, zone, after, next, why)
        (
            "*/1 * * * *",
            None,
            "2026-11-24T10:00:30Z",
            "2026-11-24T10:01:00Z",
            "every minute",
        ),
        (
            "*/15 * * * *",
            None,
            "2026-11-24T10:00:00Z",
            "2026-11-24T10:15:00Z",
            "strictly after",
        ),
        (
            "5-10/5 3 * * *",
            None,
            "2026-11-24T03:05:00Z",
            "2026-11-24T03:10:00Z",
            "range with step",
        ),
        (
            "0 0 * * MON-FRI",
            None,
            "2026-11-28T12:00:00Z",
            "2026-11-30T00:00:00Z",
            "names: Sat → Mon",
        ),
        (
            "0 0 1 JAN *",
            None,
            "2026-11-24T00:00:00Z",
            "2027-01-01T00:00:00Z",
            "month name",
        ),
        (
            "0 0 ? * 0",
            None,
            "2026-11-24T00:00:00Z",
            "2026-11-29T00:00:00Z",
            "? is *; 0 is Sunday",
        ),
        // Day-of-month and day-of-week both restricted: either matches (cron's OR).
        (
            "0 0 13 * 5",
            None,
            "2026-11-01T00:00:00Z",
            "2026-11-06T00:00:00Z",
            "OR: Friday 6th",
        ),
        (
            "0 0 13 * 5",
            None,
            "2026-11-07T00:00:00Z",
            "2026-11-13T00:00:00Z",
            "OR: the 13th",
        ),
        // One of them `*`: the other alone decides (AND with everything).
        (
            "0 0 13 * *",
            None,
            "2026-11-07T00:00:00Z",
            "2026-11-13T00:00:00Z",
            "dom only",
        ),
        (
            "@hourly",
            None,
            "2026-11-24T10:20:00Z",
            "2026-11-24T11:00:00Z",
            "@hourly",
        ),
        (
            "@daily",
            None,
            "2026-11-24T10:20:00Z",
            "2026-11-25T00:00:00Z",
            "@daily",
        ),
        (
            "@midnight",
            None,
            "2026-11-24T10:20:00Z",
            "2026-11-25T00:00:00Z",
            "@midnight",
        ),
        (
            "@weekly",
            None,
            "2026-11-24T10:20:00Z",
            "2026-11-29T00:00:00Z",
            "@weekly: Sunday",
        ),
        (
            "@monthly",
            None,
            "2026-11-24T10:20:00Z",
            "2026-12-01T00:00:00Z",
            "@monthly",
        ),
        (
            "@yearly",
            None,
            "2026-11-24T10:20:00Z",
            "2027-01-01T00:00:00Z",
            "@yearly",
        ),
        (
            "@annually",
            None,
            "2026-11-24T10:20:00Z",
            "2027-01-01T00:00:00Z",
            "@annually",
        ),
        (
            "@every 90s",
            None,
            "2026-11-24T10:20:00.700Z",
            "2026-11-24T10:21:30Z",
            "@every",
        ),
        (
            "@every 1h30m",
            None,
            "2026-11-24T10:20:00Z",
            "2026-11-24T11:50:00Z",
            "@every h+m",
        ),
        (
            "@every 10ms",
            None,
            "2026-11-24T10:20:00Z",
            "2026-11-24T10:20:01Z",
            "@every ≥ 1s",
        ),
        (
            "0 0 30 2 *",
            None,
            "2026-11-24T00:00:00Z",
            "never",
            "February 30th never comes",
        ),
        // Time zones: 09:00 in Berlin is 08:00Z in winter, 07:00Z after the March change.
        (
            "0 9 * * *",
            Some("Europe/Berlin"),
            "2026-03-28T08:00:00Z",
            "2026-03-29T07:00:00Z",
            "DST start",
        ),
        (
            "0 9 * * *",
            Some("Europe/Berlin"),
            "2026-10-24T07:00:00Z",
            "2026-10-25T08:00:00Z",
            "DST end",
        ),
        (
            "0 0 * * *",
            Some("Asia/Shanghai"),
            "2026-11-24T00:00:00Z",
            "2026-11-24T16:00:00Z",
            "UTC+8",
        ),
    ];
    for (schedule, zone, after, expected, why) in cases {
        assert_eq!(
            next(schedule, zone, after),
            expected,
            "{why}: {schedule} after {after}"
        );
    }
}

#[test]
fn a_repeated_local_hour_runs_once() {
    // 01:30 happens twice in New York on 2026-11-01 (EDT, then EST): one run.
    let schedule = Schedule::parse("30 1 * * *", Some("America/New_York"), Tz::UTC).unwrap();
    let first = schedule.next_after(at("2026-11-01T04:00:00Z")).unwrap();
    let second = schedule.next_after(first).unwrap();
    assert_eq!(first.to_string(), "2026-11-01T05:30:00Z");
    assert_eq!(second.to_string(), "2026-11-02T06:30:00Z");
}

#[test]
fn the_default_zone_applies_when_none_is_named() {
    let schedule = Schedule::parse("0 9 * * *", None, Tz::Asia__Tokyo).unwrap();
    let next = schedule.next_after(at("2026-11-24T00:00:00Z")).unwrap();
    assert_eq!(next.to_string(), "2026-11-25T00:00:00Z");
}

#[test]
fn what_robfig_refuses_is_refused_naming_the_field() {
    let cases = [
        // (schedule, zone, message fragment)
        ("TZ=UTC 0 0 * * *", None, "use spec.timeZone"),
        ("CRON_TZ=Europe/Berlin 0 0 * * *", None, "use spec.timeZone"),
        (
            "0 0 * * *",
            Some("Mars/Olympus"),
            "spec.timeZone \"Mars/Olympus\"",
        ),
        ("0 0 * *", None, "expected 5 fields"),
        ("0 0 0 * * *", None, "expected 5 fields"),
        ("0 0 L * *", None, "day-of-month field has \"L\""),
        ("0 0 15W * *", None, "day-of-month field has \"15W\""),
        ("0 0 * * 5#3", None, "day-of-week field has \"5#3\""),
        ("0 0 * * +1", None, "day-of-week field has \"+1\""),
        (
            "0 0 * * 7",
            None,
            "day-of-week field has 7, beyond its range 0-6",
        ),
        ("0 0 * * 1-7/2", None, "day-of-week field has 7"),
        ("61 * * * *", None, "spec.schedule \"61 * * * *\""),
        ("*/0 * * * *", None, "spec.schedule"),
        ("@fortnightly", None, "unknown descriptor"),
        ("@every soon", None, "not a duration"),
        ("", None, "expected 5 fields"),
    ];
    for (schedule, zone, fragment) in cases {
        let err = Schedule::parse(schedule, zone, Tz::UTC)
            .expect_err(schedule)
            .to_string();
        assert!(err.contains(fragment), "{schedule}: {err}");
    }
}
