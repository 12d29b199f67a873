//! Registry documents as the pull engine reads them: media-type sniffing, platform
//! selection in an index, manifests and configs (diff IDs, chain IDs). No panic on any
//! body.
#![no_main]

use libfuzzer_sys::fuzz_target;
use stevedore_parsers::oci;
use stevedore_parsers::platform::Platform;

fuzz_target!(|body: &[u8]| {
    let _ = oci::sniff_media_type(body);
    // This machine's platform, and an ARM one whose variant fallbacks are walked.
    let arm = Platform::new("linux", "arm", Some("v7"));
    for platform in [Platform::host(), &arm] {
        if let Ok(chosen) = oci::select_platform(body, platform) {
            assert!(oci::is_manifest(&chosen.media_type));
        }
    }
    let layers = oci::parse_manifest(body).map_or(0, |m| m.layers.len());
    for count in [layers, 1] {
        if let Ok(diff_ids) = oci::diff_ids(body, count) {
            assert_eq!(oci::chain_ids(&diff_ids).len(), diff_ids.len());
        }
    }
});
