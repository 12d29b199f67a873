//! Durations as the CRDs carry them (`pullInterval`, ...): the parser accepts exactly what
//! the CRD's regex admits (save values too long to represent), and never panics.
#![no_main]

use std::sync::LazyLock;

use libfuzzer_sys::fuzz_target;
use regex::Regex;
use stevedore_parsers::duration::{DURATION_REGEX, DurationError, parse_duration};

static ADMITTED: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(DURATION_REGEX).expect("the CRD's regex compiles"));

fuzz_target!(|input: &str| {
    let admitted = ADMITTED.is_match(input);
    match parse_duration(input) {
        Ok(_) => assert!(admitted, "{input:?} parsed but the CRD refuses it"),
        Err(DurationError::Overflow { .. }) => assert!(admitted, "{input:?}"),
        Err(DurationError::Syntax { .. }) => {
            assert!(!admitted, "{input:?} admitted by the CRD but not parsed");
        }
    }
});
