//! The event behind each change of the Progressing reason.

#![allow(
    clippy::type_complexity,
    reason = "case tables are tuples read in one place"
)]

use super::*;

fn status_saying(reason: Option<&str>) -> CloneSetStatus {
    CloneSetStatus {
        replicas: 3,
        available_replicas: 2,
        updated_replicas: 2,
        updated_available_replicas: Some(1),
        expected_updated_replicas: 3,
        update_revision: "web-6d8f7c9b5".to_owned(),
        conditions: reason
            .map(|reason| CloneSetCondition {
                type_: PROGRESSING.to_owned(),
                status: "True".to_owned(),
                reason: reason.to_owned(),
                message: "CloneSet revision web-6d8f7c9b5 has timed out progressing".to_owned(),
                ..CloneSetCondition::default()
            })
            .into_iter()
            .collect(),
        ..CloneSetStatus::default()
    }
}

#[test]
fn an_event_for_each_change_of_reason() {
    // (name, old reason (None: no condition), old status exists, new reason, want event)
    let cases: Vec<(&str, Option<&str>, bool, Option<&str>, Option<(bool, &str)>)> = vec![
        (
            "first status",
            None,
            false,
            Some(REASON_UPDATED),
            Some((false, REASON_UPDATED)),
        ),
        (
            "under way, still under way",
            Some(REASON_UPDATED),
            true,
            Some(REASON_UPDATED),
            None,
        ),
        (
            "the deadline passed: a warning",
            Some(REASON_UPDATED),
            true,
            Some(REASON_DEADLINE_EXCEEDED),
            Some((true, REASON_DEADLINE_EXCEEDED)),
        ),
        (
            "complete",
            Some(REASON_DEADLINE_EXCEEDED),
            true,
            Some(REASON_AVAILABLE),
            Some((false, REASON_AVAILABLE)),
        ),
        (
            "deadline removed: no condition, no event",
            Some(REASON_UPDATED),
            true,
            None,
            None,
        ),
    ];
    for (name, old_reason, old_exists, new_reason, want) in cases {
        let old = status_saying(old_reason);
        let old = old_exists.then_some(&old);
        let got = progress_event(old, &status_saying(new_reason));
        assert_eq!(
            got.as_ref().map(|e| (e.warning, e.reason.as_str())),
            want,
            "{name}"
        );
    }
}

#[test]
fn the_event_note_carries_the_counts() {
    let event = progress_event(None, &status_saying(Some(REASON_DEADLINE_EXCEEDED))).unwrap();
    assert_eq!(
        event.note,
        "CloneSet revision web-6d8f7c9b5 has timed out progressing: 2 of 3 pods updated to \
         revision web-6d8f7c9b5, 1 of them available; 2 of 3 pods available."
    );
}
