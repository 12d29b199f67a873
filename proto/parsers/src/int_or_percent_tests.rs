//! Int-or-percent scaling: Kubernetes' rounding, and errors that name the field.

use super::*;

fn int(value: i32) -> IntOrPercent<'static> {
    IntOrPercent::Int(value)
}

fn pct(value: &str) -> IntOrPercent<'_> {
    IntOrPercent::Str(value)
}

#[test]
fn scaled_values_round_like_kubernetes() {
    let cases: &[(IntOrPercent<'_>, i32, bool, i32)] = &[
        (int(5), 10, true, 5),
        (int(5), 10, false, 5),
        (int(-3), 10, true, -3),
        (pct("50%"), 10, true, 5),
        (pct("25%"), 10, true, 3),
        (pct("25%"), 10, false, 2),
        (pct("0%"), 10, true, 0),
        (pct("100%"), 7, false, 7),
        (pct("33%"), 3, true, 1),
        (pct("33%"), 3, false, 0),
        (pct("1%"), 1, true, 1),
        (pct("1%"), 1, false, 0),
        (pct("20%"), 0, true, 0),
        (pct("150%"), 10, true, 15),
        (pct("-10%"), 10, true, -1),
        (pct("-15%"), 10, true, -1),
        (pct("-15%"), 10, false, -2),
        (pct("+20%"), 10, true, 2),
    ];
    for (value, total, round_up, want) in cases {
        assert_eq!(
            scaled_value("f", *value, *total, *round_up),
            Ok(*want),
            "{value:?} of {total}, round_up={round_up}"
        );
    }
}

#[test]
fn bad_int_or_percent_values_name_the_field() {
    let field = "spec.updateStrategy.maxSurge";
    let invalid = |v: &str| IntOrPercentError::InvalidNumber {
        field,
        value: v.to_owned(),
    };
    let not_percent = |v: &str| IntOrPercentError::NotAPercentage {
        field,
        value: v.to_owned(),
    };
    let cases: &[(IntOrPercent<'_>, IntOrPercentError)] = &[
        (pct("abc%"), invalid("abc%")),
        (pct("%"), invalid("%")),
        (pct("1.5%"), invalid("1.5%")),
        (pct("50 %"), invalid("50 %")),
        (pct("abc"), not_percent("abc")),
        (pct("5"), not_percent("5")),
        (pct(""), not_percent("")),
    ];
    for (value, want) in cases {
        let got = scaled_value(field, *value, 10, true);
        assert_eq!(got.as_ref(), Err(want), "{value:?}");
        let message = want.to_string();
        assert!(
            message.starts_with("spec.updateStrategy.maxSurge: "),
            "{message}"
        );
    }
    assert_eq!(
        scaled_value(field, pct("200%"), i32::MAX, true),
        Err(IntOrPercentError::OutOfRange {
            field,
            value: "200%".into(),
            total: i32::MAX
        })
    );
}

#[test]
fn shares_refuse_negative_and_above_hundred_percent() {
    let field = "spec.updateStrategy.partition";
    let cases: &[(IntOrPercent<'_>, Result<i32, IntOrPercentError>)] = &[
        (pct("100%"), Ok(10)),
        (int(20), Ok(20)),
        (
            pct("150%"),
            Err(IntOrPercentError::AboveHundredPercent {
                field,
                value: "150%".into(),
            }),
        ),
        (
            pct("101%"),
            Err(IntOrPercentError::AboveHundredPercent {
                field,
                value: "101%".into(),
            }),
        ),
        (
            pct("-1%"),
            Err(IntOrPercentError::Negative {
                field,
                value: "-1%".into(),
            }),
        ),
        (
            int(-1),
            Err(IntOrPercentError::Negative {
                field,
                value: "-1".into(),
            }),
        ),
        (
            pct("abc%"),
            Err(IntOrPercentError::InvalidNumber {
                field,
                value: "abc%".into(),
            }),
        ),
    ];
    for (value, want) in cases {
        assert_eq!(&scaled_share(field, *value, 10, true), want, "{value:?}");
    }
    let message = IntOrPercentError::AboveHundredPercent {
        field,
        value: "150%".into(),
    }
    .to_string();
    assert_eq!(
        message,
        "spec.updateStrategy.partition: 150% must be at most 100%"
    );
}
