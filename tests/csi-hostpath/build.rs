//! Generates the tonic/prost code of the CSI subset and of the kubelet's plugin
//! registration API from `proto/`. Needs `protoc` (Debian: `protobuf-compiler`), whose
//! bundled include dir provides `google/protobuf/wrappers.proto`.

use std::error::Error;

const PROTOS: [&str; 2] = [
    "proto/csi/v1/csi.proto",
    "proto/pluginregistration/api.proto",
];

fn main() -> Result<(), Box<dyn Error>> {
    println!("cargo:rerun-if-changed=proto");
    tonic_prost_build::configure().compile_protos(&PROTOS, &["proto"])?;
    Ok(())
}
