use k8s_openapi::jiff::SignedDuration;

use super::*;

const ME: &str = "replica-a";
const OTHER: &str = "replica-b";

fn t0() -> Timestamp {
    Timestamp::from_second(1_800_000_000).expect("valid timestamp")
}

fn at(offset: f64) -> Timestamp {
    t0() + SignedDuration::from_secs_f64(offset)
}

fn record(holder: Option<&str>, renewed_at: f64, transitions: i32) -> LeaseRecord {
    LeaseRecord {
        holder: holder.map(str::to_owned),
        renew_time: Some(at(renewed_at)),
        lease_duration: Duration::from_secs(15),
        transitions,
    }
}

/// (case, observed Lease, now, my last renewal, expected decision); times in seconds.
type Case = (
    &'static str,
    Option<LeaseRecord>,
    f64,
    Option<f64>,
    Decision,
);

#[test]
fn decisions_follow_the_lease_and_the_clock() {
    let timings = Timings::default();
    let cases: Vec<Case> = vec![
        ("no lease → create", None, 0.0, None, Decision::Create),
        (
            "fresh lease held by another → wait",
            Some(record(Some(OTHER), 0.0, 3)),
            14.9,
            None,
            Decision::Wait,
        ),
        (
            "expired lease taken over, transitions incremented",
            Some(record(Some(OTHER), 0.0, 3)),
            15.0,
            None,
            Decision::Acquire { transitions: 4 },
        ),
        (
            "released lease (no holder) taken at once",
            Some(record(None, 0.0, 3)),
            0.5,
            None,
            Decision::Acquire { transitions: 4 },
        ),
        (
            "empty holder counts as released",
            Some(LeaseRecord {
                holder: Some(String::new()),
                ..record(None, 0.0, 0)
            }),
            0.5,
            None,
            Decision::Acquire { transitions: 1 },
        ),
        (
            "lease without renewTime is expired",
            Some(LeaseRecord {
                renew_time: None,
                ..record(Some(OTHER), 0.0, 7)
            }),
            0.0,
            None,
            Decision::Acquire { transitions: 8 },
        ),
        (
            "my own lease → renew",
            Some(record(Some(ME), 0.0, 1)),
            2.0,
            Some(0.0),
            Decision::Renew,
        ),
        (
            "my own lease after a restart (not leading yet) → renew",
            Some(record(Some(ME), 0.0, 1)),
            20.0,
            None,
            Decision::Renew,
        ),
        (
            "renew deadline missed → lost, even though the lease is still mine",
            Some(record(Some(ME), 0.0, 1)),
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
            Some(record(Some(OTHER), 4.0, 2)),
            5.0,
            Some(3.0),
            Decision::Lost,
        ),
        (
            "clock went backwards: not expired",
            Some(record(Some(OTHER), 10.0, 0)),
            5.0,
            None,
            Decision::Wait,
        ),
    ];
    for (case, observed, now, last, expected) in cases {
        let got = decide(observed.as_ref(), at(now), ME, last.map(at), &timings);
        assert_eq!(got, expected, "{case}");
    }
}

#[test]
fn record_reads_a_lease_spec() {
    let spec = held_spec(OTHER, at(5.0), at(1.0), 2, &Timings::default());
    let record = LeaseRecord::from_spec(Some(&spec));
    assert_eq!(record.holder.as_deref(), Some(OTHER));
    assert_eq!(record.renew_time, Some(at(5.0)));
    assert_eq!(record.lease_duration, Duration::from_secs(15));
    assert_eq!(record.transitions, 2);
    assert!(!record.expired(at(19.9)));
    assert!(record.expired(at(20.0)));
}

#[test]
fn empty_spec_is_free_and_expired() {
    let record = LeaseRecord::from_spec(None);
    assert_eq!(record.holder, None);
    assert!(record.expired(t0()));
    let negative = LeaseSpec {
        lease_duration_seconds: Some(-5),
        renew_time: Some(MicroTime(t0())),
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
    let spec = held_spec(ME, t0(), t0(), 0, &timings);
    assert_eq!(spec.lease_duration_seconds, Some(3));
    let tiny = Timings {
        lease_duration: Duration::from_millis(1),
        ..Timings::default()
    };
    assert_eq!(
        held_spec(ME, t0(), t0(), 0, &tiny).lease_duration_seconds,
        Some(1)
    );
}

#[test]
fn release_clears_the_holder_and_keeps_the_history() {
    let held = held_spec(ME, at(3.0), at(1.0), 4, &Timings::default());
    let released = released_spec(&held, at(4.0));
    assert_eq!(released.holder_identity, None);
    assert_eq!(released.lease_transitions, Some(4));
    assert_eq!(released.acquire_time, held.acquire_time);
    let record = LeaseRecord::from_spec(Some(&released));
    assert_eq!(
        decide(Some(&record), at(4.1), OTHER, None, &Timings::default()),
        Decision::Acquire { transitions: 5 }
    );
}
