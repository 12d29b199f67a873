//! Int-or-percent values (`maxUnavailable`, `maxSurge`, `partition`, a budget's
//! `minAvailable`) scaled against a replica count the way Kubernetes' `intstr` scales
//! them. The values come as a borrowed [`IntOrPercent`], so this crate needs no
//! Kubernetes types; the control plane converts its `IntOrString` fields.

#[cfg(test)]
#[path = "int_or_percent_tests.rs"]
mod tests;

/// An int-or-string field's value: an integer, or a string that should be `"N%"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IntOrPercent<'a> {
    Int(i32),
    Str(&'a str),
}

/// A bad int-or-percent value, naming the field so the message is actionable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IntOrPercentError {
    /// A string that does not end in `%` (Kubernetes accepts strings only as percentages).
    #[error("{field}: {value:?} is not a percentage; use an integer or a string like \"20%\"")]
    NotAPercentage {
        /// The field path.
        field: &'static str,
        /// The value as written.
        value: String,
    },
    /// A percentage whose number does not parse.
    #[error("{field}: {value:?} is not a valid percentage")]
    InvalidNumber {
        /// The field path.
        field: &'static str,
        /// The value as written.
        value: String,
    },
    /// Below zero.
    #[error("{field}: {value} must not be negative")]
    Negative {
        /// The field path.
        field: &'static str,
        /// The value as written.
        value: String,
    },
    /// A percentage above 100% where the field is a share of the replicas.
    #[error("{field}: {value} must be at most 100%")]
    AboveHundredPercent {
        /// The field path.
        field: &'static str,
        /// The value as written.
        value: String,
    },
    /// The scaled value does not fit in an i32.
    #[error("{field}: {value} of {total} replicas is out of range")]
    OutOfRange {
        /// The field path.
        field: &'static str,
        /// The value as written.
        value: String,
        /// The total it was scaled against.
        total: i32,
    },
}

/// `intstr.GetScaledValueFromIntOrPercent`: an integer as is; `"N%"` of `total`, rounded up
/// or down. Like Kubernetes it accepts negative values and percentages above 100%; use
/// [`scaled_share`] for fields where those are invalid.
pub fn scaled_value(
    field: &'static str,
    value: IntOrPercent<'_>,
    total: i32,
    round_up: bool,
) -> Result<i32, IntOrPercentError> {
    let percent = match value {
        IntOrPercent::Int(int) => return Ok(int),
        IntOrPercent::Str(text) => parse_percent(field, text)?,
    };
    let product = i64::from(percent) * i64::from(total);
    // Integer floor/ceil equal Go's math.Floor/Ceil of product/100 for every i32 input.
    let scaled = if round_up {
        -(-product).div_euclid(100)
    } else {
        product.div_euclid(100)
    };
    i32::try_from(scaled).map_err(|_| IntOrPercentError::OutOfRange {
        field,
        value: describe(value),
        total,
    })
}

/// [`scaled_value`] for a share of the replicas (partition, maxUnavailable, maxSurge): also
/// refuses negative values and percentages above 100%, which admission should have caught.
pub fn scaled_share(
    field: &'static str,
    value: IntOrPercent<'_>,
    total: i32,
    round_up: bool,
) -> Result<i32, IntOrPercentError> {
    match value {
        IntOrPercent::Int(int) if int < 0 => Err(IntOrPercentError::Negative {
            field,
            value: int.to_string(),
        }),
        IntOrPercent::Str(text) => {
            let percent = parse_percent(field, text)?;
            if percent < 0 {
                Err(IntOrPercentError::Negative {
                    field,
                    value: text.to_owned(),
                })
            } else if percent > 100 {
                Err(IntOrPercentError::AboveHundredPercent {
                    field,
                    value: text.to_owned(),
                })
            } else {
                scaled_value(field, value, total, round_up)
            }
        }
        IntOrPercent::Int(_) => scaled_value(field, value, total, round_up),
    }
}

fn parse_percent(field: &'static str, text: &str) -> Result<i32, IntOrPercentError> {
    let Some(number) = text.strip_suffix('%') else {
        return Err(IntOrPercentError::NotAPercentage {
            field,
            value: text.to_owned(),
        });
    };
    number
        .parse::<i32>()
        .map_err(|_| IntOrPercentError::InvalidNumber {
            field,
            value: text.to_owned(),
        })
}

fn describe(value: IntOrPercent<'_>) -> String {
    match value {
        IntOrPercent::Int(int) => int.to_string(),
        IntOrPercent::Str(text) => text.to_owned(),
    }
}
