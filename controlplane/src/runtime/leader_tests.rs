use k8s_openapi::jiff::SignedDuration;

use super::*;

const ME: &str = "replica-a";
const OTHER: &str = "replica-b";

/// A wall-clock origin for what the Lease says.
fn wall(offset: f64) -> Timestamp {
    Timestamp::from_second(1_800_000_000).expect("valid timestamp")
        + SignedDuration::from_secs_f64(offset)
}

/// A monotonic origin for what this candidate's own clock says.
fn mono_origin() -> Instant {
    Instant::now()
}

fn record(holder: Option<&str>, renewed_at: f64, transitions: i32) -> LeaseRecord {
    LeaseRecord {
        holder: holder.map(str::to_owned),
        renew_time: Some(wall(renewed_at)),
        acquire_time: Some(wall(0.0)),
        lease_duration: Duration::from_secs(15),
        transitions,
        resource_version: Some("7".to_owned()),
    }
}

/// (case, observed Lease and since when (own clock), now, my last renewal, expected);
/// times in seconds on this candidate's monotonic clock.
type Case = (
    &'static str,
    Option<(LeaseRecord, f64)>,
    f64,
    Option<f64>,
    Decision,
);

#[test]
fn decisions_follow_the_lease_and_the_own_clock() {
    let timings = Timings::default();
    let t0 = mono_origin();
    let at = |s: f64| t0 + Duration::from_secs_f64(s);
    let cases: Vec<Case> = vec![
        ("no lease → create", None, 0.0, None, Decision::Create),
        (
            "unchanged for less than the lease duration → wait",
            Some((record(Some(OTHER), 0.0, 3), 0.0)),
            14.9,
            None,
            Decision::Wait,
        ),
        (
            "unchanged for the lease duration → taken over, transitions incremented",
            Some((record(Some(OTHER), 0.0, 3), 0.0)),
            15.0,
            None,
            Decision::Acquire { transitions: 4 },
        ),
        (
            "renewTime an hour old by the wall clock, but just seen changing → wait",
            Some((record(Some(OTHER), -3600.0, 3), 10.0)),
            10.0,
            None,
            Decision::Wait,
        ),
        (
            "renewTime an hour in the future, but unchanged for the duration → taken over",
            Some((record(Some(OTHER), 3600.0, 3), 0.0)),
            15.0,
            None,
            Decision::Acquire { transitions: 4 },
        ),
        (
            "released lease (no holder) taken at once",
            Some((record(None, 0.0, 3), 0.0)),
            0.5,
            None,
            Decision::Acquire { transitions: 4 },
        ),
        (
            "empty holder counts as released",
            Some((
                LeaseRecord {
                    holder: Some(String::new()),
                    ..record(None, 0.0, 0)
                },
                0.0,
            )),
            0.5,
            None,
            Decision::Acquire { transitions: 1 },
        ),
        (
            "lease without a duration is expired at once",
            Some((
                LeaseRecord {
                    lease_duration: Duration::ZERO,
                    ..record(Some(OTHER), 0.0, 7)
                },
                0.0,
            )),
            0.0,
            None,
            Decision::Acquire { transitions: 8 },
        ),
        (
            "my own lease → renew",
            Some((record(Some(ME), 0.0, 1), 0.0)),
            2.0,
            Some(0.0),
            Decision::Renew,
        ),
        (
            "my own lease after a restart (not leading yet) → renew",
            Some((record(Some(ME), 0.0, 1), 20.0)),
            20.0,
            None,
            Decision::Renew,
        ),
        (
            "renew deadline missed → lost, even though the lease is still mine",
            Some((record(Some(ME), 0.0, 1), 0.0)),
            10.0,
            Some(0.0),
            Decision::Lost,
        ),
        (
            "renew deadline missed with no lease readable → lost",
            None,
            12.0,
            Some(0.0),
            Decision::Lost,
        ),
        (
            "someone else took over while I led → lost",
            Some((record(Some(OTHER), 4.0, 2), 5.0)),
            5.0,
            Some(3.0),
            Decision::Lost,
        ),
    ];
    for (case, observed, now, last, expected) in cases {
        let observed = observed.map(|(record, since)| Observation {
            record,
            since: at(since),
        });
        let got = decide(observed.as_ref(), at(now), ME, last.map(at), &timings);
        assert_eq!(got, expected, "{case}");
    }
}

#[test]
fn any_change_of_the_record_restarts_the_lease_clock() {
    let t0 = mono_origin();
    let seen = Observation {
        record: record(Some(OTHER), 0.0, 3),
        since: t0,
    };
    let later = t0 + Duration::from_secs(9);
    let base = record(Some(OTHER), 0.0, 3);
    // (case, record read at `later`, whether the clock restarts)
    let cases: Vec<(&str, LeaseRecord, bool)> = vec![
        ("identical", base.clone(), false),
        (
            "renewed",
            LeaseRecord {
                renew_time: Some(wall(2.0)),
                ..base.clone()
            },
            true,
        ),
        (
            "renewed with a clock that went backwards",
            LeaseRecord {
                renew_time: Some(wall(-100.0)),
                ..base.clone()
            },
            true,
        ),
        (
            "new holder",
            LeaseRecord {
                holder: Some("replica-c".to_owned()),
                ..base.clone()
            },
            true,
        ),
        (
            "new acquireTime",
            LeaseRecord {
                acquire_time: Some(wall(1.0)),
                ..base.clone()
            },
            true,
        ),
        (
            "transitions moved",
            LeaseRecord {
                transitions: 4,
                ..base.clone()
            },
            true,
        ),
        (
            "only the resourceVersion moved",
            LeaseRecord {
                resource_version: Some("8".to_owned()),
                ..base.clone()
            },
            true,
        ),
    ];
    for (case, read, restarts) in cases {
        let next = Observation::next(Some(&seen), read.clone(), later);
        assert_eq!(next.record, read, "{case}");
        let want = if restarts { later } else { t0 };
        assert_eq!(next.since, want, "{case}");
    }
    let first = Observation::next(None, base, later);
    assert_eq!(first.since, later, "a first read starts the clock");
    assert!(!first.expired(later + Duration::from_millis(14_900)));
    assert!(first.expired(later + Duration::from_secs(15)));
}

#[test]
fn record_reads_a_lease() {
    let spec = held_spec(OTHER, wall(5.0), wall(1.0), 2, &Timings::default());
    let lease = Lease {
        metadata: kube::api::ObjectMeta {
            resource_version: Some("42".to_owned()),
            ..kube::api::ObjectMeta::default()
        },
        spec: Some(spec),
    };
    let record = LeaseRecord::from_lease(&lease);
    assert_eq!(record.holder.as_deref(), Some(OTHER));
    assert_eq!(record.renew_time, Some(wall(5.0)));
    assert_eq!(record.acquire_time, Some(wall(1.0)));
    assert_eq!(record.lease_duration, Duration::from_secs(15));
    assert_eq!(record.transitions, 2);
    assert_eq!(record.resource_version.as_deref(), Some("42"));
}

#[test]
fn empty_spec_is_free_and_expired() {
    let record = LeaseRecord::from_spec(None);
    assert_eq!(record.holder, None);
    let t0 = mono_origin();
    assert!(Observation::next(None, record, t0).expired(t0));
    let negative = LeaseSpec {
        lease_duration_seconds: Some(-5),
        renew_time: Some(MicroTime(wall(0.0))),
        ..LeaseSpec::default()
    };
    assert_eq!(
        LeaseRecord::from_spec(Some(&negative)).lease_duration,
        Duration::ZERO
    );
}

#[test]
fn lease_duration_is_rounded_up_to_whole_seconds() {
    let timings = Timings {
        lease_duration: Duration::from_millis(2500),
        ..Timings::default()
    };
    let spec = held_spec(ME, wall(0.0), wall(0.0), 0, &timings);
    assert_eq!(spec.lease_duration_seconds, Some(3));
    let tiny = Timings {
        lease_duration: Duration::from_millis(1),
        ..Timings::default()
    };
    assert_eq!(
        held_spec(ME, wall(0.0), wall(0.0), 0, &tiny).lease_duration_seconds,
        Some(1)
    );
}

#[test]
fn release_clears_the_holder_and_keeps_the_history() {
    let held = held_spec(ME, wall(3.0), wall(1.0), 4, &Timings::default());
    let released = released_spec(&held, wall(4.0));
    assert_eq!(released.holder_identity, None);
    assert_eq!(released.lease_transitions, Some(4));
    assert_eq!(released.acquire_time, held.acquire_time);
    let t0 = mono_origin();
    let observed = Observation::next(None, LeaseRecord::from_spec(Some(&released)), t0);
    assert_eq!(
        decide(Some(&observed), t0, OTHER, None, &Timings::default()),
        Decision::Acquire { transitions: 5 }
    );
}

#[test]
fn timings_are_checked_as_client_go_checks_them() {
    let s = Duration::from_secs;
    let ms = Duration::from_millis;
    let cases = [
        ("client-go's defaults", s(15), s(10), s(2), Ok(())),
        ("short, for a fast failover", s(4), s(3), s(1), Ok(())),
        ("sub-second retry", s(3), s(2), ms(500), Ok(())),
        (
            "zero lease",
            s(0),
            s(10),
            s(2),
            Err(TimingsError::Zero {
                flag: "lease-duration",
            }),
        ),
        (
            "zero retry",
            s(15),
            s(10),
            s(0),
            Err(TimingsError::Zero {
                flag: "retry-period",
            }),
        ),
        (
            "lease equal to the renew deadline",
            s(10),
            s(10),
            s(2),
            Err(TimingsError::LeaseNotAfterRenew {
                lease: s(10),
                renew: s(10),
            }),
        ),
        (
            "renew deadline within one jittered retry",
            s(15),
            ms(2400),
            s(2),
            Err(TimingsError::RenewNotAfterRetry {
                renew: ms(2400),
                retry: s(2),
            }),
        ),
    ];
    for (case, lease, renew, retry, expected) in cases {
        let got = Timings::new(lease, renew, retry).map(|_| ());
        assert_eq!(got, expected, "{case}");
    }
    let made = Timings::new(s(4), s(3), s(1)).expect("valid timings");
    assert_eq!(
        (made.lease_duration, made.renew_deadline, made.retry_period),
        (s(4), s(3), s(1))
    );
}
