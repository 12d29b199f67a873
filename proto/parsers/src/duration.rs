//! Durations written as Go writes them (`24h`, `30m`, `1h30m`, `1.5h`), the form CEL's
//! `duration()` reads. The CRDs accept only what [`DURATION_REGEX`] matches, and
//! [`parse_duration`] reads exactly that language, so a value the apiserver admitted
//! always parses here.

use std::time::Duration;

#[cfg(test)]
#[path = "duration_tests.rs"]
mod tests;

/// RE2: one or more `<number>[.<fraction>]<unit>` terms, units ns, us, ms, s, m, h.
/// Go also accepts a sign, a bare `0` and `µs`; the CRDs do not.
pub const DURATION_REGEX: &str = "^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$";

/// Why a string is not a duration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    #[error("{input:?} is not a duration: expected terms like 24h, 30m, 1h30m or 1.5h")]
    Syntax { input: String },
    #[error("{input:?} is too long a duration")]
    Overflow { input: String },
}

const NANOS_PER_UNIT: [(&str, u128); 6] = [
    ("ns", 1),
    ("us", 1_000),
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60_000_000_000),
    ("h", 3_600_000_000_000),
];

/// Parses a duration such as `24h`, `30m`, `1h30m` or `1.5h`.
pub fn parse_duration(input: &str) -> Result<Duration, DurationError> {
    let syntax = || DurationError::Syntax {
        input: input.to_owned(),
    };
    let overflow = || DurationError::Overflow {
        input: input.to_owned(),
    };
    if input.is_empty() {
        return Err(syntax());
    }
    let mut rest = input;
    let mut total: u128 = 0;
    // An overflow is reported only once the whole input is known to be a duration: a
    // value the CRD refuses is a syntax error, however large its numbers.
    let mut overflowed = false;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        if digits == 0 {
            return Err(syntax());
        }
        let (whole, after) = rest.split_at(digits);
        let (fraction, after) = match after.strip_prefix('.') {
            Some(after) => {
                let len = after
                    .find(|c: char| !c.is_ascii_digit())
                    .unwrap_or(after.len());
                if len == 0 {
                    return Err(syntax());
                }
                after.split_at(len)
            }
            None => ("", after),
        };
        let unit_len = after
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(after.len());
        let (unit, after) = after.split_at(unit_len);
        let (_, per_unit) = NANOS_PER_UNIT
            .iter()
            .find(|(name, _)| *name == unit)
            .ok_or_else(syntax)?;
        let Some(mut nanos) = whole
            .parse::<u128>()
            .ok()
            .and_then(|whole| whole.checked_mul(*per_unit))
        else {
            overflowed = true;
            rest = after;
            continue;
        };
        // Go's rounding: the fraction is truncated to whole nanoseconds.
        let mut scale = *per_unit;
        for digit in fraction.bytes().map(|b| u128::from(b - b'0')) {
            scale /= 10;
            // Below the next whole unit, so it overflows only when that unit would.
            nanos = nanos.saturating_add(digit * scale);
        }
        total = total.checked_add(nanos).unwrap_or_else(|| {
            overflowed = true;
            u128::MAX
        });
        rest = after;
    }
    if overflowed {
        return Err(overflow());
    }
    let secs = u64::try_from(total / 1_000_000_000).map_err(|_| overflow())?;
    // The remainder of a division by 10^9 always fits.
    let subsec = (total % 1_000_000_000) as u32;
    Ok(Duration::new(secs, subsec))
}
