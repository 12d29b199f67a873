//! The pure rules of the `Undecodable` condition: its reason, and the condition list an
//! object's status gets.

use serde_json::json;

use super::*;

const NOW: &str = "2030-01-02T03:04:05Z";
const EARLIER: &str = "2030-01-01T00:00:00Z";

fn wanted(message: &str) -> Wanted {
    Wanted {
        reason: "InvalidValue",
        message: message.to_owned(),
    }
}

fn undecodable(status: &str, reason: &str, message: &str) -> Value {
    json!({"type": UNDECODABLE, "status": status, "reason": reason, "message": message,
           "lastTransitionTime": EARLIER})
}

fn set(message: &str, since: &str) -> Value {
    json!({"type": UNDECODABLE, "status": "True", "reason": "InvalidValue",
           "message": message, "lastTransitionTime": since})
}

/// A condition of the kind's own, with a field only that kind has.
fn progressing() -> Value {
    json!({"type": "Progressing", "status": "True", "reason": "Updated", "message": "",
           "lastUpdateTime": EARLIER, "lastTransitionTime": EARLIER})
}

#[test]
fn the_condition_list_keeps_every_other_condition_and_changes_only_when_it_must() {
    let note = "The control plane cannot read the field spec.replicas of this CloneSet: x.";
    /// (case, the conditions now, the condition wanted, the conditions to write)
    type Case = (&'static str, Option<Value>, Option<Wanted>, Option<Value>);
    let cases: Vec<Case> = vec![
        (
            "no status yet: the list is this condition",
            None,
            Some(wanted(note)),
            Some(json!([set(note, NOW)])),
        ),
        (
            "added after the kind's own, which stays as it is",
            Some(json!([progressing()])),
            Some(wanted(note)),
            Some(json!([progressing(), set(note, NOW)])),
        ),
        (
            "already saying so: nothing to write (its own write's new version changes nothing)",
            Some(json!([progressing(), set(note, EARLIER)])),
            Some(wanted(note)),
            None,
        ),
        (
            "another message: replaced in its place, still true since it was",
            Some(json!([set("older", EARLIER), progressing()])),
            Some(wanted(note)),
            Some(json!([set(note, EARLIER), progressing()])),
        ),
        (
            "another reason: replaced",
            Some(json!([undecodable("True", "InvalidType", note)])),
            Some(wanted(note)),
            Some(json!([set(note, EARLIER)])),
        ),
        (
            "false before: true from now",
            Some(json!([undecodable("False", "InvalidValue", note)])),
            Some(wanted(note)),
            Some(json!([set(note, NOW)])),
        ),
        (
            "decodes again: removed, the rest kept",
            Some(json!([progressing(), set(note, EARLIER)])),
            None,
            Some(json!([progressing()])),
        ),
        (
            "decodes again and it was the only one: the list goes",
            Some(json!([set(note, EARLIER)])),
            None,
            Some(Value::Null),
        ),
        (
            "decodes again, never had it: nothing to write",
            Some(json!([progressing()])),
            None,
            None,
        ),
        (
            "decodes again, no status: nothing to write",
            None,
            None,
            None,
        ),
    ];
    for (case, current, wanted, expected) in cases {
        let got = conditions_after(current.as_ref(), wanted.as_ref(), NOW);
        assert_eq!(got, expected, "{case}");
    }
}

#[test]
fn the_reason_names_the_kind_of_problem_serde_found() {
    let cases = [
        (
            "invalid value: integer `2147483648`, expected a 32-bit integer",
            "InvalidValue",
        ),
        (
            "invalid type: boolean `true`, expected IntOrString",
            "InvalidType",
        ),
        ("missing field `selector`", "MissingField"),
        (
            "unknown variant `Sometimes`, expected one of `Always`, `Never`",
            "UnknownVariant",
        ),
        (
            "invalid length 3, expected a tuple of size 2",
            "InvalidLength",
        ),
        ("duplicate field `spec`", "DuplicateField"),
        ("unknown field `x`, expected `y`", "UnknownField"),
        ("premature end of input", "Unreadable"),
    ];
    for (error, expected) in cases {
        assert_eq!(reason(error), expected, "{error}");
    }
}

#[test]
fn the_message_is_the_events_note_cut_to_a_conditions_limit() {
    let report = |error: String| Undecodable {
        object: k8s_openapi::api::core::v1::ObjectReference {
            kind: Some("CloneSet".to_owned()),
            ..Default::default()
        },
        field: "spec.updateStrategy.maxUnavailable".to_owned(),
        error,
        last_good_kept: false,
    };
    let short = report("invalid value: integer `2147483648`, expected i32".to_owned());
    assert_eq!(
        Wanted::of(&short),
        Wanted {
            reason: "InvalidValue",
            message: short.note(),
        }
    );
    assert!(
        Wanted::of(&short)
            .message
            .contains("spec.updateStrategy.maxUnavailable")
    );
    let long = report(format!("unknown variant `{}`", "x".repeat(100_000)));
    assert_eq!(Wanted::of(&long).message.len(), MESSAGE_MAX_BYTES);
}
