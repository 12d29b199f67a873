//! Admission rules (CEL) for a cron `schedule` and a `timeZone`, so that a malformed one is
//! refused when applied, naming the field, rather than reported later by the controller.
//!
//! The schedule rule is robfig/cron's standard language as a regular expression: five
//! fields with each field's value bounds (minute 0-59, hour 0-23, day of month 1-31, month
//! 1-12 or JAN-DEC, day of week 0-6 or SUN-SAT), lists, ranges, `*`, `?` and `/step` (a
//! positive step); the descriptors; `@every <duration>` in Go's duration syntax. What a
//! regular expression cannot see — a range whose start is past its end (`30-10`) — is still
//! refused by the controller's parser (`advancedcronjob::schedule`) with an event.
//!
//! The time-zone rules are Kubernetes' own CronJob validation (each `/`-separated part 1-14
//! of `A-Za-z.-_0-9+`, and not `Local`) and the names of the tz database compiled into the
//! controller ([`time_zone_known_rule`]), so admission and the controller agree on every
//! name. An `@every` of zero is refused ([`EVERY_NONZERO_RULE`]).

/// A value, range or `*`/`?`, with an optional positive step, over values matching `$v`.
macro_rules! cron_term {
    ($v:expr) => {
        concat!("([*?]|(", $v, ")(-(", $v, "))?)(/0*[1-9][0-9]*)?")
    };
}

/// A comma list of terms.
macro_rules! cron_field {
    ($v:expr) => {
        concat!(cron_term!($v), "(,", cron_term!($v), ")*")
    };
}

macro_rules! minute {
    () => {
        "[0-5]?[0-9]"
    };
}
macro_rules! hour {
    () => {
        "[01]?[0-9]|2[0-3]"
    };
}
macro_rules! day_of_month {
    () => {
        "0?[1-9]|[12][0-9]|3[01]"
    };
}
macro_rules! month {
    () => {
        "0?[1-9]|1[0-2]|jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec"
    };
}
macro_rules! day_of_week {
    () => {
        "0?[0-6]|sun|mon|tue|wed|thu|fri|sat"
    };
}

/// The schedule language as one RE2 expression (CEL's `matches`), case-insensitive as
/// robfig reads names.
macro_rules! schedule_regex {
    () => {
        concat!(
            "(?i)^[ \t]*(",
            cron_field!(minute!()),
            "[ \t]+",
            cron_field!(hour!()),
            "[ \t]+",
            cron_field!(day_of_month!()),
            "[ \t]+",
            cron_field!(month!()),
            "[ \t]+",
            cron_field!(day_of_week!()),
            "|@(yearly|annually|monthly|weekly|daily|midnight|hourly)",
            "|@every [ \t]*(([0-9]+([.][0-9]*)?|[.][0-9]+)(ns|us|µs|ms|s|m|h))+",
            ")[ \t]*$"
        )
    };
}

/// The schedule language as one regular expression, for the checks that the controller
/// parses exactly what admission lets through.
pub const SCHEDULE_REGEX: &str = schedule_regex!();

/// CEL: `spec.schedule` is in robfig/cron's standard language.
pub const SCHEDULE_RULE: &str = concat!("self.matches(r'", schedule_regex!(), "')");

/// What a refused schedule is told.
pub const SCHEDULE_MESSAGE: &str = "spec.schedule must be a cron schedule: five fields \
(minute 0-59, hour 0-23, day of month 1-31, month 1-12 or JAN-DEC, day of week 0-6 or \
SUN-SAT), each a comma list of *, ?, values and ranges with an optional /step; or one of \
@yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly; or @every <duration>";

/// An `@every` schedule whose duration has a digit other than 0: not `@every 0s`, `@every
/// 0h0m` or `@every 0.0s`.
macro_rules! every_nonzero_regex {
    () => {
        "^[ \t]*@every [ \t]*[^ \t]*[1-9]"
    };
}

/// An `@every` duration that is not zero, as one regular expression.
pub const EVERY_NONZERO_REGEX: &str = every_nonzero_regex!();

/// CEL: an `@every` duration is not zero. The controller (as robfig/cron) runs a duration
/// below one second every second, so `@every 0s` would start a Job every second; a
/// negative duration is already refused by [`SCHEDULE_RULE`] (no sign).
pub const EVERY_NONZERO_RULE: &str = concat!(
    "!self.matches(r'^[ \t]*@every') || self.matches(r'",
    every_nonzero_regex!(),
    "')"
);

/// What a zero `@every` duration is told.
pub const EVERY_NONZERO_MESSAGE: &str =
    "spec.schedule: the @every duration must be above zero, such as @every 5m";

macro_rules! time_zone_regex {
    () => {
        "^[A-Za-z._0-9+-]{1,14}(/[A-Za-z._0-9+-]{1,14})*$"
    };
}

/// CEL: `spec.timeZone` is spelled as Kubernetes accepts for a CronJob.
pub const TIME_ZONE_RULE: &str = concat!(
    "self.matches('",
    time_zone_regex!(),
    "') && self.lowerAscii() != 'local'"
);

/// CEL: `spec.timeZone` is a name the controller resolves: one of the names of the tz
/// database compiled into it (chrono-tz's, the one `advancedcronjob::schedule` reads with
/// `Tz::from_str`, exact and case-sensitive), generated from that database so admission
/// and the controller agree on every name. Not an `enum`: the apiserver would list all of
/// the about 600 names in every refusal.
pub fn time_zone_known_rule() -> String {
    let names: Vec<String> = chrono_tz::TZ_VARIANTS
        .iter()
        .map(|zone| format!("'{}'", zone.name()))
        .collect();
    format!("self in [{}]", names.join(","))
}

/// What an unknown time zone is told, naming it.
pub const TIME_ZONE_KNOWN_MESSAGE: &str = "'spec.timeZone: ' + self + ' is not a time zone of the IANA database \
the control plane reads (names are case-sensitive, such as Europe/Berlin or UTC)'";

/// What a refused time zone is told.
pub const TIME_ZONE_MESSAGE: &str = "spec.timeZone must be the name of a time zone of the \
IANA database, such as Europe/Berlin or UTC (not Local)";

#[cfg(test)]
mod tests {
    use chrono_tz::Tz;
    use regex::Regex;

    fn schedule_regex() -> Regex {
        Regex::new(schedule_regex!()).expect("the schedule rule is a valid regex")
    }

    #[test]
    fn the_time_zone_list_is_exactly_what_the_controller_resolves() {
        use std::str::FromStr as _;
        let rule = super::time_zone_known_rule();
        let names: Vec<&str> = rule
            .trim_start_matches("self in [")
            .trim_end_matches(']')
            .split(',')
            .map(|quoted| quoted.trim_matches('\''))
            .collect();
        assert!(names.len() > 500, "{} names", names.len());
        for name in &names {
            assert!(
                Tz::from_str(name).is_ok(),
                "{name} is listed but not resolved"
            );
            assert!(!name.contains('\''), "{name} would break the CEL literal");
        }
        for resolved in [
            "UTC",
            "Europe/Berlin",
            "US/Eastern",
            "Etc/GMT+5",
            "America/Argentina/Buenos_Aires",
        ] {
            assert!(Tz::from_str(resolved).is_ok(), "{resolved}");
            assert!(
                names.contains(&resolved),
                "{resolved} is resolved but not listed"
            );
        }
        for refused in [
            "utc",
            "europe/berlin",
            "Mars/Olympus",
            "Local",
            "Europe/Berlin ",
        ] {
            assert!(Tz::from_str(refused).is_err(), "{refused}");
            assert!(!names.contains(&refused), "{refused}");
        }
    }

    #[test]
    fn a_reversed_range_passes_the_rule_and_is_left_to_the_controller() {
        assert!(schedule_regex().is_match("30-10 * * * *"));
    }

    #[test]
    fn time_zones_are_refused_as_kubernetes_refuses_them() {
        let regex = Regex::new(time_zone_regex!()).unwrap();
        let local = |z: &str| z.eq_ignore_ascii_case("local");
        for (zone, valid) in [
            ("UTC", true),
            ("Europe/Berlin", true),
            ("America/Argentina/Buenos_Aires", true),
            ("Etc/GMT+5", true),
            ("Local", false),
            ("local", false),
            ("", false),
            ("Europe/", false),
            ("/UTC", false),
            ("Europe/Berlin Time", false),
            ("Abcdefghijklmno", false),
        ] {
            assert_eq!(
                regex.is_match(zone) && !local(zone),
                valid,
                "time zone {zone:?}"
            );
        }
    }

    #[test]
    fn the_rules_are_cel_raw_strings_without_quotes_inside() {
        assert!(super::SCHEDULE_RULE.starts_with("self.matches(r'(?i)^"));
        assert_eq!(super::SCHEDULE_RULE.matches('\'').count(), 2);
        assert_eq!(super::TIME_ZONE_RULE.matches('\'').count(), 4);
    }
}
