//! `WWW-Authenticate` challenges as a registry sends them: reading each parameter never
//! panics, whatever the quoting.
#![no_main]

use libfuzzer_sys::fuzz_target;
use stevedore_parsers::auth_challenge::challenge_param;

fuzz_target!(|header: &str| {
    let params = header.strip_prefix("Bearer ").unwrap_or(header);
    for name in ["realm", "service", "scope", "error", ""] {
        if let Some(value) = challenge_param(params, name) {
            assert!(value.len() <= params.len());
        }
    }
});
