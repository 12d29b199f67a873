#![allow(clippy::unwrap_used)]

//! The CRDs' CEL rules for image references (controlplane `api::image_reference`) and the
//! agent's parser (`agent/src/reference.rs`) accept the same references: a reference the
//! control plane admits is one the agent can pull, and the reverse. Property-tested on
//! references generated from the grammar, near misses of it, and noise. No cluster.
//!
//! The two differ where the CEL rules document it: CEL counts the 255-character name limit
//! as written, the agent after normalisation (`nginx` → `docker.io/library/nginx`, up to
//! 18 characters more); and CEL caps the whole reference at 512 characters, which the
//! agent's limits (name 255, tag 128, digest) can exceed by a few.

use std::sync::LazyLock;

use proptest::prelude::*;
use regex::Regex;
use stevedore_agent::reference::Reference;
use stevedore_api::image_reference::{
    HEX_NAME_REGEX, NAME_MAX_LENGTH, NAME_PREFIX_REGEX, REFERENCE_MAX_LENGTH, REFERENCE_REGEX,
};

static REFERENCE: LazyLock<Regex> = LazyLock::new(|| Regex::new(REFERENCE_REGEX).unwrap());
static NAME_PREFIX: LazyLock<Regex> = LazyLock::new(|| Regex::new(NAME_PREFIX_REGEX).unwrap());
static HEX_NAME: LazyLock<Regex> = LazyLock::new(|| Regex::new(HEX_NAME_REGEX).unwrap());

/// The longest prefix normalisation adds to a name (`docker.io/library/`).
const NORMALISATION_PREFIX: usize = "docker.io/library/".len();

/// Whether the CRD's CEL rules admit `input` (RE2 and Rust's regex agree on these
/// expressions: no backreferences or lookaround, leftmost-first `find`).
fn cel_admits(input: &str) -> bool {
    let name_len = NAME_PREFIX.find(input).map_or(0, |m| m.len());
    input.len() <= REFERENCE_MAX_LENGTH
        && REFERENCE.is_match(input)
        && !HEX_NAME.is_match(input)
        && name_len <= NAME_MAX_LENGTH
}

fn agree(input: &str) -> Result<(), TestCaseError> {
    let agent = Reference::parse_normalized(input);
    let cel = cel_admits(input);
    match (&agent, cel) {
        (Ok(_), true) | (Err(_), false) => Ok(()),
        (Ok(_), false) => {
            prop_assert!(
                input.len() > REFERENCE_MAX_LENGTH,
                "the agent parses {input:?}, CEL refuses it"
            );
            Ok(())
        }
        (Err(err), true) => {
            let name_len = NAME_PREFIX.find(input).map_or(0, |m| m.len());
            prop_assert!(
                name_len + NORMALISATION_PREFIX > NAME_MAX_LENGTH,
                "CEL admits {input:?}, the agent refuses it: {err}"
            );
            Ok(())
        }
    }
}

/// The reference grammar itself, unanchored, as a generator.
fn grammar() -> impl Strategy<Value = String> {
    let unanchored = REFERENCE_REGEX
        .trim_start_matches('^')
        .trim_end_matches('$');
    proptest::string::string_regex(unanchored).unwrap()
}

/// References put together from plausible pieces, valid and not: upper case, odd
/// separators, ports, long names, tags and digests of every length and algorithm.
fn near_misses() -> impl Strategy<Value = String> {
    let domain = prop_oneof![
        Just(String::new()),
        Just("localhost/".to_owned()),
        Just("localhost:5000/".to_owned()),
        "[a-zA-Z0-9_-]{1,10}([.][a-zA-Z0-9-]{0,8}){0,2}(:[0-9a-z]{0,6})?/",
    ];
    let path = prop_oneof![
        "[a-z0-9._-]{1,12}(/[a-zA-Z0-9._-]{0,12}){0,3}",
        "[a-f0-9]{62,66}",
        "[a-z]{200,260}(/[a-z]{1,20})?",
    ];
    let tag = prop_oneof![
        Just(String::new()),
        ":[a-zA-Z0-9_.-]{0,130}",
        ":[.-][a-z]{0,3}",
    ];
    let digest = prop_oneof![
        Just(String::new()),
        "@sha256:[0-9a-f]{64}",
        "@sha512:[0-9a-f]{128}",
        "@sha(256|384|512):[0-9a-fA-F]{62,66}",
        "@[a-z0-9]{0,8}:?[0-9a-f]{0,8}",
    ];
    (domain, path, tag, digest).prop_map(|(d, p, t, g)| format!("{d}{p}{t}{g}"))
}

proptest! {
    // Grammar-generated references are long (tags to 128, digests to 128 hex): fewer.
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn grammar_references_are_judged_alike(input in grammar()) {
        agree(&input)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4000))]

    #[test]
    fn near_misses_are_judged_alike(input in near_misses()) {
        agree(&input)?;
    }

    #[test]
    fn noise_is_judged_alike(input in "[a-zA-Z0-9._:/@_-]{0,40}") {
        agree(&input)?;
    }
}

#[test]
fn known_cases_are_judged_alike() {
    for input in [
        "nginx",
        "127.0.0.1:5000/stevedore/web:v1",
        "my_reg.io/x",
        "Upper/case",
        "localhost/a__b",
        "a..b",
        "x:",
        "x@sha256:",
    ] {
        agree(input).unwrap();
    }
}
