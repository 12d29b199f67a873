//! A CSI host-path driver for Stevedore's local test cluster: each volume is a directory
//! under a state dir, its capacity is recorded in a JSON file (a directory has no size of
//! its own), and expansion records the new size. It serves CSI's Identity, Controller and
//! Node services on one Unix socket for the kubernetes-csi provisioner and resizer and for
//! the kubelet, and the kubelet's plugin registration API on a second socket in the
//! kubelet's `plugins_registry` directory (node-driver-registrar's job).

pub mod authority;
pub mod capacity;
pub mod controller;
pub mod frames;
pub mod identity;
pub mod layout;
pub mod mounts;
pub mod node;
pub mod registration;
pub mod serve;
pub mod state;
pub mod validate;

/// The CSI v1 subset this driver serves (`proto/csi/v1/csi.proto`).
pub mod csi {
    #![allow(clippy::all, clippy::pedantic, missing_docs, rust_2018_idioms)]
    tonic::include_proto!("csi.v1");
}

/// The kubelet's plugin registration API (`proto/pluginregistration/api.proto`).
pub mod pluginregistration {
    #![allow(clippy::all, clippy::pedantic, missing_docs, rust_2018_idioms)]
    tonic::include_proto!("pluginregistration");
}

/// The name the driver registers under: StorageClasses name it as their provisioner.
pub const DRIVER_NAME: &str = "hostpath.csi.stevedore.dev";
