//! An AdvancedCronJob's `schedule` and `timeZone`, read as OpenKruise reads them
//! (robfig/cron's standard parser): five fields (minute hour day-of-month month
//! day-of-week) with lists, ranges, steps, `?`, month and weekday names; the descriptors
//! `@yearly @annually @monthly @weekly @daily @midnight @hourly`; and `@every <duration>`.
//! Day-of-month and day-of-week combine with OR unless one of them is `*` or `?`, as in
//! cron. Matching and time-zone arithmetic are croner's; this module only decides which
//! language is accepted, so that what croner would also accept beyond robfig's
//! (`L`, `W`, `#`, a seconds field) is refused with a message naming the field.

use std::str::FromStr as _;
use std::time::Duration;

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};
use k8s_openapi::jiff::Timestamp;

use crate::api::duration::parse_duration;

/// Why a schedule or time zone is refused; the message names the field and the value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    #[error(
        "spec.schedule {schedule:?} sets a time zone inside the schedule, which is not \
         supported: use spec.timeZone"
    )]
    ZoneInSchedule { schedule: String },
    #[error("spec.timeZone {zone:?} is not a time zone of the IANA database")]
    UnknownZone { zone: String },
    #[error("spec.schedule {schedule:?} is not a cron schedule: {reason}")]
    Invalid { schedule: String, reason: String },
}

/// A parsed schedule in its time zone.
#[derive(Debug, Clone)]
pub struct Schedule {
    rule: Rule,
    zone: Tz,
}

#[derive(Debug, Clone)]
enum Rule {
    Cron(Box<Cron>),
    /// `@every d`: runs `d` apart, counted from the previous run (robfig's
    /// ConstantDelaySchedule: whole seconds, at least one).
    Every(Duration),
}

const DESCRIPTORS: [(&str, &str); 7] = [
    ("@yearly", "0 0 1 1 *"),
    ("@annually", "0 0 1 1 *"),
    ("@monthly", "0 0 1 * *"),
    ("@weekly", "0 0 * * 0"),
    ("@daily", "0 0 * * *"),
    ("@midnight", "0 0 * * *"),
    ("@hourly", "0 * * * *"),
];

const FIELDS: [&str; 5] = ["minute", "hour", "day-of-month", "month", "day-of-week"];

impl Schedule {
    /// Parses `schedule` in `time_zone` (an IANA name), or in `default_zone` when unset.
    pub fn parse(
        schedule: &str,
        time_zone: Option<&str>,
        default_zone: Tz,
    ) -> Result<Self, ScheduleError> {
        let zone = match time_zone {
            Some(name) => Tz::from_str(name).map_err(|_| ScheduleError::UnknownZone {
                zone: name.to_owned(),
            })?,
            None => default_zone,
        };
        let trimmed = schedule.trim();
        if trimmed.starts_with("TZ=") || trimmed.starts_with("CRON_TZ=") {
            return Err(ScheduleError::ZoneInSchedule {
                schedule: schedule.to_owned(),
            });
        }
        let invalid = |reason: String| ScheduleError::Invalid {
            schedule: schedule.to_owned(),
            reason,
        };
        let rule = if let Some(every) = trimmed.strip_prefix("@every ") {
            let every = parse_duration(every.trim()).map_err(|e| invalid(e.to_string()))?;
            Rule::Every(every.max(Duration::from_secs(1)))
        } else {
            let fields = expand_descriptor(trimmed).map_err(&invalid)?;
            check_fields(&fields).map_err(&invalid)?;
            let parser = CronParser::builder()
                .seconds(Seconds::Disallowed)
                .year(Year::Disallowed)
                .dom_and_dow(false)
                .build();
            let cron = parser.parse(&fields).map_err(|e| invalid(e.to_string()))?;
            Rule::Cron(Box::new(cron))
        };
        Ok(Self { rule, zone })
    }

    /// The first scheduled time strictly after `after`, or `None` if there is none (a
    /// date that never comes, such as February 30th).
    pub fn next_after(&self, after: Timestamp) -> Option<Timestamp> {
        match &self.rule {
            Rule::Every(every) => {
                // Whole seconds, as robfig rounds: the sub-second part of `after` is dropped.
                let secs = i64::try_from(every.as_secs()).ok()?;
                Timestamp::from_second(after.as_second().checked_add(secs)?).ok()
            }
            Rule::Cron(cron) => {
                let after = DateTime::<Utc>::from_timestamp(after.as_second(), 0)?
                    .with_timezone(&self.zone);
                let next = cron.find_next_occurrence(&after, false).ok()?;
                Timestamp::from_second(next.timestamp()).ok()
            }
        }
    }

    /// The last scheduled time after `from` and at or before `until`, found without
    /// walking every time in between (for a long outage or clock jump).
    pub fn last_at_or_before(&self, from: Timestamp, until: Timestamp) -> Option<Timestamp> {
        let found = match &self.rule {
            Rule::Every(every) => {
                let step = i64::try_from(every.as_secs()).ok()?;
                let steps = (until.as_second() - from.as_second()).div_euclid(step);
                Timestamp::from_second(from.as_second().checked_add(steps.checked_mul(step)?)?)
                    .ok()?
            }
            Rule::Cron(cron) => {
                let until = DateTime::<Utc>::from_timestamp(until.as_second(), 0)?
                    .with_timezone(&self.zone);
                let found = cron.find_previous_occurrence(&until, true).ok()?;
                Timestamp::from_second(found.timestamp()).ok()?
            }
        };
        (found > from).then_some(found)
    }
}

/// The five fields a descriptor stands for, or the schedule itself.
fn expand_descriptor(schedule: &str) -> Result<String, String> {
    if !schedule.starts_with('@') {
        return Ok(schedule.to_owned());
    }
    DESCRIPTORS
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case(schedule))
        .map(|(_, fields)| (*fields).to_owned())
        .ok_or_else(|| {
            "unknown descriptor: expected @yearly, @annually, @monthly, @weekly, @daily, \
             @midnight, @hourly or @every <duration>"
                .to_owned()
        })
}

/// robfig's standard language: exactly five fields, each a comma list of `*`, `?`, a
/// number or a three-letter name, or a range of those, optionally with `/step`.
fn check_fields(fields: &str) -> Result<(), String> {
    let parts: Vec<&str> = fields.split_whitespace().collect();
    if parts.len() != FIELDS.len() {
        return Err(format!(
            "expected 5 fields (minute hour day-of-month month day-of-week), found {}",
            parts.len()
        ));
    }
    for (part, name) in parts.iter().zip(FIELDS) {
        for term in part.split(',') {
            if !is_robfig_term(term) {
                return Err(format!(
                    "the {name} field has {term:?}, which is not a value, range or step"
                ));
            }
        }
    }
    check_day_of_week(parts[4])
}

/// robfig's day of week is 0-6 (Sunday is 0 only); croner would also take 7.
fn check_day_of_week(field: &str) -> Result<(), String> {
    let values = field
        .split(',')
        .map(|term| term.split_once('/').map_or(term, |(range, _)| range))
        .flat_map(|range| range.split('-'));
    match values
        .filter_map(|v| v.parse::<u32>().ok())
        .find(|v| *v > 6)
    {
        Some(v) => Err(format!(
            "the day-of-week field has {v}, beyond its range 0-6 (Sunday is 0)"
        )),
        None => Ok(()),
    }
}

fn is_robfig_term(term: &str) -> bool {
    let (range, step) = match term.split_once('/') {
        Some((range, step)) => (range, Some(step)),
        None => (term, None),
    };
    let step_ok = step.is_none_or(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()));
    let value = |v: &str| {
        !v.is_empty()
            && (v.bytes().all(|b| b.is_ascii_digit())
                || (v.len() == 3 && v.bytes().all(|b| b.is_ascii_alphabetic())))
    };
    let range_ok = match range {
        "*" | "?" => true,
        _ => match range.split_once('-') {
            Some((low, high)) => value(low) && value(high),
            None => value(range),
        },
    };
    step_ok && range_ok
}

#[cfg(test)]
#[path = "schedule_tests.rs"]
mod tests;
