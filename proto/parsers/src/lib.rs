//! The parsers of outside input that the agent and the control plane share: image
//! references, registry documents and `WWW-Authenticate` challenges, pull secrets,
//! durations and int-or-percent values. Pure functions over plain types, no I/O.
//!
//! They are a crate of their own so the fuzz targets (`fuzz/`) build only this: a
//! sanitizer build of the whole agent and control plane took minutes, this takes seconds.
//! The agent and the control plane re-export these modules where they used to live.

pub mod auth_challenge;
pub mod docker_config;
pub mod duration;
pub mod int_or_percent;
pub mod oci;
pub mod platform;
pub mod reference;
