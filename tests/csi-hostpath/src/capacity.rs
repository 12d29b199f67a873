//! Capacity arithmetic: what size a new volume gets and what an expansion leaves it at,
//! from the CSI `CapacityRange` (0 means "not given" for both bounds, as in the spec).

use thiserror::Error;

pub const GIB: i64 = 1 << 30;
/// The size of a volume whose claim asks for none (the spec lets the plugin choose).
pub const DEFAULT_CAPACITY_BYTES: i64 = GIB;
/// The largest volume this driver records. A directory holds what the disk holds; the bound
/// makes a mistyped request (`10Ti` for `10Gi`) fail visibly rather than be recorded.
pub const MAX_CAPACITY_BYTES: i64 = 1 << 40;

/// The bounds a request gives, as the CSI `CapacityRange`: 0 is "not given".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Bounds {
    pub required_bytes: i64,
    pub limit_bytes: i64,
}

#[derive(Debug, Error, PartialEq, Eq)]
pub enum CapacityError {
    #[error("capacity_range.required_bytes is negative ({0})")]
    NegativeRequired(i64),
    #[error("capacity_range.limit_bytes is negative ({0})")]
    NegativeLimit(i64),
    #[error(
        "capacity_range.required_bytes ({required}) is above capacity_range.limit_bytes ({limit})"
    )]
    RequiredAboveLimit { required: i64, limit: i64 },
    #[error(
        "capacity_range.required_bytes ({0}) is above the largest volume this driver makes ({MAX_CAPACITY_BYTES} bytes)"
    )]
    AboveMaximum(i64),
    #[error("capacity_range.required_bytes must be set to expand a volume")]
    ExpansionWithoutSize,
    #[error(
        "the volume already has {current} bytes, above capacity_range.limit_bytes ({limit}); volumes do not shrink"
    )]
    ShrinkRequested { current: i64, limit: i64 },
}

impl Bounds {
    fn checked(self) -> Result<Self, CapacityError> {
        let Bounds {
            required_bytes: required,
            limit_bytes: limit,
        } = self;
        if required < 0 {
            return Err(CapacityError::NegativeRequired(required));
        }
        if limit < 0 {
            return Err(CapacityError::NegativeLimit(limit));
        }
        if limit > 0 && required > limit {
            return Err(CapacityError::RequiredAboveLimit { required, limit });
        }
        if required > MAX_CAPACITY_BYTES {
            return Err(CapacityError::AboveMaximum(required));
        }
        Ok(self)
    }

    /// Whether a volume of `capacity` bytes satisfies these bounds (an existing volume
    /// answers a repeated CreateVolume only if it does).
    pub fn admit(self, capacity: i64) -> bool {
        capacity >= self.required_bytes && (self.limit_bytes == 0 || capacity <= self.limit_bytes)
    }
}

/// The capacity of a new volume: what is required, else the default (within the limit).
pub fn new_volume_capacity(bounds: Option<Bounds>) -> Result<i64, CapacityError> {
    let Some(bounds) = bounds else {
        return Ok(DEFAULT_CAPACITY_BYTES);
    };
    let bounds = bounds.checked()?;
    Ok(match (bounds.required_bytes, bounds.limit_bytes) {
        (0, 0) => DEFAULT_CAPACITY_BYTES,
        (0, limit) => DEFAULT_CAPACITY_BYTES.min(limit),
        (required, _) => required,
    })
}

/// The capacity after an expansion to `bounds` of a volume of `current` bytes. A request at
/// or below the current size succeeds and keeps it (the spec: the plugin may have expanded
/// already, so a retry must not fail).
pub fn expanded_capacity(current: i64, bounds: Option<Bounds>) -> Result<i64, CapacityError> {
    let bounds = bounds.unwrap_or_default().checked()?;
    if bounds.required_bytes == 0 {
        return Err(CapacityError::ExpansionWithoutSize);
    }
    if bounds.limit_bytes > 0 && current > bounds.limit_bytes {
        return Err(CapacityError::ShrinkRequested {
            current,
            limit: bounds.limit_bytes,
        });
    }
    Ok(current.max(bounds.required_bytes))
}

/// A requested range, as the tests of every module here write one.
#[cfg(test)]
pub(crate) fn bounds(required_bytes: i64, limit_bytes: i64) -> Option<Bounds> {
    Some(Bounds {
        required_bytes,
        limit_bytes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_volume_capacity_follows_the_range() {
        let cases = [
            ("no range", None, Ok(DEFAULT_CAPACITY_BYTES)),
            ("empty range", bounds(0, 0), Ok(DEFAULT_CAPACITY_BYTES)),
            ("limit below the default", bounds(0, 5), Ok(5)),
            ("limit above the default", bounds(0, 2 * GIB), Ok(GIB)),
            ("required", bounds(3 * GIB, 0), Ok(3 * GIB)),
            ("required equals limit", bounds(7, 7), Ok(7)),
            (
                "negative required",
                bounds(-1, 0),
                Err(CapacityError::NegativeRequired(-1)),
            ),
            (
                "negative limit",
                bounds(0, -2),
                Err(CapacityError::NegativeLimit(-2)),
            ),
            (
                "required above limit",
                bounds(8, 7),
                Err(CapacityError::RequiredAboveLimit {
                    required: 8,
                    limit: 7,
                }),
            ),
            (
                "above the maximum",
                bounds(MAX_CAPACITY_BYTES + 1, 0),
                Err(CapacityError::AboveMaximum(MAX_CAPACITY_BYTES + 1)),
            ),
        ];
        for (name, range, want) in cases {
            assert_eq!(new_volume_capacity(range), want, "{name}");
        }
    }

    #[test]
    fn expansion_grows_never_shrinks_and_needs_a_size() {
        let cases = [
            ("grows to required", GIB, bounds(2 * GIB, 0), Ok(2 * GIB)),
            (
                "within the limit",
                GIB,
                bounds(2 * GIB, 3 * GIB),
                Ok(2 * GIB),
            ),
            (
                "retry at the same size",
                2 * GIB,
                bounds(2 * GIB, 0),
                Ok(2 * GIB),
            ),
            (
                "smaller request keeps the size",
                2 * GIB,
                bounds(GIB, 0),
                Ok(2 * GIB),
            ),
            (
                "no range",
                GIB,
                None,
                Err(CapacityError::ExpansionWithoutSize),
            ),
            (
                "no required size",
                GIB,
                bounds(0, 5 * GIB),
                Err(CapacityError::ExpansionWithoutSize),
            ),
            (
                "limit below the current size",
                3 * GIB,
                bounds(GIB, 2 * GIB),
                Err(CapacityError::ShrinkRequested {
                    current: 3 * GIB,
                    limit: 2 * GIB,
                }),
            ),
            (
                "above the maximum",
                GIB,
                bounds(MAX_CAPACITY_BYTES + 1, 0),
                Err(CapacityError::AboveMaximum(MAX_CAPACITY_BYTES + 1)),
            ),
        ];
        for (name, current, range, want) in cases {
            assert_eq!(expanded_capacity(current, range), want, "{name}");
        }
    }

    #[test]
    fn admit_checks_both_bounds() {
        let b = |r, l| Bounds {
            required_bytes: r,
            limit_bytes: l,
        };
        assert!(b(5, 0).admit(5));
        assert!(b(5, 0).admit(50));
        assert!(!b(5, 0).admit(4));
        assert!(b(5, 10).admit(10));
        assert!(!b(5, 10).admit(11));
        assert!(b(0, 0).admit(0));
    }

    #[test]
    fn errors_name_the_field() {
        let message = new_volume_capacity(bounds(8, 7))
            .expect_err("8 above 7")
            .to_string();
        assert_eq!(
            message,
            "capacity_range.required_bytes (8) is above capacity_range.limit_bytes (7)"
        );
    }
}
