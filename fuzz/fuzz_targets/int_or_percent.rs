//! Int-or-percent fields (`maxUnavailable`, `maxSurge`, `partition`) scaled against a
//! replica count: no panic or overflow for any string and total, and a share stays
//! within `[0, total]` for a non-negative total.
#![no_main]

use libfuzzer_sys::fuzz_target;
use stevedore_parsers::int_or_percent::{IntOrPercent, scaled_share, scaled_value};

fuzz_target!(|input: (i32, bool, &str)| {
    let (total, round_up, text) = input;
    let value = IntOrPercent::Str(text);
    let _ = scaled_value("spec.field", value, total, round_up);
    if let Ok(share) = scaled_share("spec.field", value, total, round_up)
        && total >= 0
    {
        assert!((0..=total).contains(&share), "{text:?} of {total}: {share}");
    }
});
