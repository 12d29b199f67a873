//! Image references as the agent parses them (gRPC requests, ImageList keys): no panic,
//! and a parsed reference prints as a reference that parses back to itself.
#![no_main]

use libfuzzer_sys::fuzz_target;
use stevedore_parsers::reference::{Reference, is_image_id};

fuzz_target!(|input: &str| {
    let _ = is_image_id(input);
    let Ok(reference) = Reference::parse_normalized(input) else {
        return;
    };
    let printed = reference.to_string();
    let again = Reference::parse_normalized(&printed).expect("a printed reference parses");
    assert_eq!(again.to_string(), printed, "printing is stable");
    let _ = (reference.repository(), reference.repo_tag());
    let _ = reference.repo_digest(reference.manifest_reference());
});
