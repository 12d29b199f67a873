//! Durations: Go's reading of them, and the CRD's regex admitting exactly what parses.

use std::time::Duration;

use super::*;

#[test]
fn durations_parse_like_go() {
    let cases: [(&str, Result<Duration, ()>); 16] = [
        ("24h", Ok(Duration::from_secs(86_400))),
        ("30m", Ok(Duration::from_secs(1_800))),
        ("1h30m", Ok(Duration::from_secs(5_400))),
        ("1.5h", Ok(Duration::from_secs(5_400))),
        ("90s", Ok(Duration::from_secs(90))),
        ("1m0.5s", Ok(Duration::from_millis(60_500))),
        ("250ms", Ok(Duration::from_millis(250))),
        ("3us", Ok(Duration::from_micros(3))),
        ("7ns", Ok(Duration::from_nanos(7))),
        ("", Err(())),
        ("24", Err(())),
        ("h", Err(())),
        ("1d", Err(())),
        ("-1h", Err(())),
        ("1.h", Err(())),
        ("1h 30m", Err(())),
    ];
    for (input, want) in cases {
        assert_eq!(parse_duration(input).map_err(|_| ()), want, "{input:?}");
    }
    assert!(matches!(
        parse_duration("99999999999999999999999999999999999999999h"),
        Err(DurationError::Overflow { .. })
    ));
}

#[test]
fn a_non_duration_with_huge_numbers_is_a_syntax_error_not_an_overflow() {
    // Found by the `duration` fuzz target: the parser reported an overflow for input the
    // CRD's regex refuses (a term without a unit after one too large to represent).
    let regex = regex::Regex::new(DURATION_REGEX).expect("valid regex");
    for input in [
        "0h0h0h0h0h0h222222222222227222221111110h0h9",
        "99999999999999999999999999999999999999999h5",
        "340282366920938463463374607431768211456h",
    ] {
        let result = parse_duration(input);
        let admitted = regex.is_match(input);
        match result {
            Err(DurationError::Syntax { .. }) => assert!(!admitted, "{input:?}"),
            Err(DurationError::Overflow { .. }) => assert!(admitted, "{input:?}"),
            Ok(_) => panic!("{input:?} parsed"),
        }
    }
    assert!(matches!(
        parse_duration("222222222222227222221111110h1s"),
        Err(DurationError::Overflow { .. })
    ));
}

#[test]
fn the_duration_regex_admits_what_the_parser_reads() {
    let regex = regex::Regex::new(DURATION_REGEX).expect("valid regex");
    for input in [
        "24h", "1h30m", "1.5h", "250ms", "", "24", "1d", "-1h", "1.h", "0",
    ] {
        assert_eq!(
            regex.is_match(input),
            parse_duration(input).is_ok(),
            "{input:?}"
        );
    }
}
