//! Generates the agent API's tonic/prost code and a file descriptor set (for server
//! reflection) from `stevedore/agent/v1/*.proto`. Needs `protoc` (Debian:
//! `protobuf-compiler`), whose bundled include dir provides the well-known types.

use std::{env, error::Error, path::PathBuf};

const PROTO_ROOT: &str = "stevedore/agent/v1";
const PROTOS: [&str; 6] = ["common", "images", "containers", "pods", "node", "probes"];

fn main() -> Result<(), Box<dyn Error>> {
    let out_dir = PathBuf::from(env::var("OUT_DIR")?);
    let protos: Vec<String> = PROTOS
        .iter()
        .map(|name| format!("{PROTO_ROOT}/{name}.proto"))
        .collect();

    println!("cargo:rerun-if-changed={PROTO_ROOT}");
    tonic_prost_build::configure()
        .file_descriptor_set_path(out_dir.join("stevedore_descriptor.bin"))
        .compile_protos(&protos, &[String::from(".")])?;
    Ok(())
}
