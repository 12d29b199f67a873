//! The API's admission rules (CEL in the CRDs, in the `stevedore-api` crate) agree with
//! what the controllers parse and write: a schedule admitted is a schedule the
//! AdvancedCronJob controller runs, a `reserveOrdinals` entry admitted is one the
//! StatefulSet controller reads, and the labels the selectors may not name are the ones
//! the controllers put on pods. Here, not in the API crate, because they need both.

use chrono_tz::Tz;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use regex::Regex;

use crate::advancedcronjob::schedule::Schedule;
use crate::api::cron_rules::{EVERY_NONZERO_REGEX, SCHEDULE_REGEX};
use crate::api::statefulset::{RESERVE_ORDINAL_REGEX, RESERVE_ORDINAL_RULE, RESERVE_RANGE_REGEX};
use crate::api::workload_rules::CONTROLLER_OWNED_POD_LABELS;
use crate::cloneset::pods::INSTANCE_ID_LABEL;
use crate::statefulset::ordinals::{POD_INDEX_LABEL, POD_NAME_LABEL, ReservedOrdinals};
use crate::workload::lifecycle::STATE_LABEL;
use crate::workload::revision_adapter::{CONTROLLER_REVISION_HASH_LABEL, POD_TEMPLATE_HASH_LABEL};

fn schedule_regex() -> Regex {
    Regex::new(SCHEDULE_REGEX).expect("the schedule rule is a valid regex")
}

#[test]
fn the_rule_accepts_what_the_controller_parses_and_refuses_the_rest() {
    // (schedule, accepted by robfig/cron's standard parser)
    let cases: &[(&str, bool)] = &[
        ("*/1 * * * *", true),
        ("0 0 * * *", true),
        ("5,10-20/5 1-23/2 1,15 JAN-MAR mon-fri", true),
        ("0 12 ? * SUN", true),
        ("  59 23 31 12 6  ", true),
        ("0 0 1 1 *", true),
        ("@hourly", true),
        ("@Daily", true),
        ("@every 1h30m", true),
        ("@every 90s", true),
        ("@every 1.5h", true),
        ("60 * * * *", false),
        ("* 24 * * *", false),
        ("* * 0 * *", false),
        ("* * 32 * *", false),
        ("* * * 13 *", false),
        ("* * * * 7", false),
        ("* * * * 5-7", false),
        ("* * * * */7", true),
        ("* * * *", false),
        ("* * * * * *", false),
        ("*/0 * * * *", false),
        ("L * * * *", false),
        ("* * 15W * *", false),
        ("* * * * 5#3", false),
        ("@fortnightly", false),
        ("@every", false),
        ("@every 5", false),
        ("", false),
        ("TZ=UTC 0 * * * *", false),
        ("0 0 * foo *", false),
    ];
    let regex = schedule_regex();
    for (schedule, valid) in cases {
        assert_eq!(regex.is_match(schedule), *valid, "rule on {schedule:?}");
        let parsed = Schedule::parse(schedule, Some("UTC"), Tz::UTC).map(|_| ());
        assert_eq!(parsed.is_ok(), *valid, "parser on {schedule:?}: {parsed:?}");
    }
}

#[test]
fn a_zero_every_is_refused_though_the_controller_would_run_it_every_second() {
    let nonzero = Regex::new(EVERY_NONZERO_REGEX).expect("valid");
    let every = Regex::new(r"^[ \t]*@every").expect("valid");
    let admitted =
        |s: &str| schedule_regex().is_match(s) && (!every.is_match(s) || nonzero.is_match(s));
    for (schedule, valid) in [
        ("@every 0s", false),
        ("@every 0h0m0s", false),
        ("@every 0.0s", false),
        ("@every 00m", false),
        (" @every   0s ", false),
        ("@every -1s", false),
        ("@every 1s", true),
        ("@every 0.5s", true),
        ("@every 0h1m", true),
        ("@every 10s", true),
        ("@every\t5m", false),
        ("0 * * * *", true),
        ("@hourly", true),
    ] {
        assert_eq!(admitted(schedule), valid, "{schedule:?}");
        // What the rules admit, the controller parses.
        if valid {
            assert!(
                Schedule::parse(schedule, None, Tz::UTC).is_ok(),
                "{schedule:?}"
            );
        }
    }
    // The controller reads a zero duration as one second: only admission refuses it.
    assert!(Schedule::parse("@every 0s", None, Tz::UTC).is_ok());
    assert!(Schedule::parse("@every\t5m", None, Tz::UTC).is_err());
}

#[test]
fn the_controller_owned_labels_are_the_ones_the_controllers_write() {
    let written = [
        INSTANCE_ID_LABEL,
        CONTROLLER_REVISION_HASH_LABEL,
        POD_TEMPLATE_HASH_LABEL,
        POD_NAME_LABEL,
        POD_INDEX_LABEL,
        STATE_LABEL,
    ];
    let mut listed = CONTROLLER_OWNED_POD_LABELS.to_vec();
    listed.sort_unstable();
    let mut written = written.to_vec();
    written.sort_unstable();
    assert_eq!(listed, written);
}

/// The admission rule on a `reserveOrdinals` entry, read in Rust (its regexes and the
/// i32 and from <= to comparisons), admits exactly what the controller parses.
#[test]
fn the_reserve_ordinals_rule_admits_exactly_what_the_controller_parses() {
    for regex in [RESERVE_ORDINAL_REGEX, RESERVE_RANGE_REGEX] {
        assert!(
            RESERVE_ORDINAL_RULE.contains(&format!("matches('{regex}')")),
            "{regex}"
        );
    }
    let single = regex::Regex::new(RESERVE_ORDINAL_REGEX).expect("valid");
    let range = regex::Regex::new(RESERVE_RANGE_REGEX).expect("valid");
    let max = i64::from(i32::MAX);
    // What the rule computes, step by step as CEL does.
    let admitted = |text: &str| {
        if single.is_match(text) {
            text.parse::<i64>().is_ok_and(|n| n <= max)
        } else if range.is_match(text) {
            let (from, to) = text.split_once('-').expect("a range");
            let (from, to) = (
                from.parse::<i64>().expect("digits"),
                to.parse::<i64>().expect("digits"),
            );
            from <= to && to <= max
        } else {
            false
        }
    };
    let long_zeros = format!("{}7", "0".repeat(25));
    for text in [
        "0",
        "7",
        "3-5",
        "5-5",
        "2147483647",
        "0-2147483647",
        "2147483648",
        "1-2147483648",
        "9999999999",
        "99999999999",
        "5-3",
        "-1",
        "1-",
        "-",
        "",
        " 1",
        "1 ",
        "+1",
        "1-2-3",
        "a",
        "1.5",
        "0x1",
        "007",
        "007-010",
        long_zeros.as_str(),
        "1e3",
    ] {
        let controller = ReservedOrdinals::parse(&[IntOrString::String(text.to_owned())]).is_ok();
        assert_eq!(admitted(text), controller, "{text:?}");
    }
    assert!(ReservedOrdinals::parse(&[IntOrString::Int(-1)]).is_err());
    assert!(ReservedOrdinals::parse(&[IntOrString::Int(i32::MAX)]).is_ok());
    assert!(RESERVE_ORDINAL_RULE.contains("int(self) >= 0 && int(self) <= 2147483647"));
}
