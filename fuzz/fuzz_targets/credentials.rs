//! Pull secrets as the control plane reads them (`.dockerconfigjson`, `.dockercfg`, the
//! base64 `auth` field) and the registry keys they name: no panic on any secret.
#![no_main]

use std::collections::BTreeMap;

use libfuzzer_sys::fuzz_target;
use stevedore_parsers::docker_config::{
    credentials_from_secret, normalize_registry_key, registry_of,
};

fuzz_target!(|data: &[u8]| {
    for key in [".dockerconfigjson", ".dockercfg"] {
        let secret = BTreeMap::from([(key.to_owned(), data.to_vec())]);
        if let Ok(by_registry) = credentials_from_secret(&secret) {
            for registry in by_registry.keys() {
                let _ = normalize_registry_key(registry);
            }
        }
    }
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = (registry_of(text), normalize_registry_key(text));
    }
});
