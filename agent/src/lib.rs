//! Stevedore's node agent: pulls images through containerd with per-layer progress,
//! restarts containers in place and sets pod conditions, for pods of its own node.

pub mod config;
pub mod images;
pub mod reference;
pub mod server;
pub mod shutdown;
pub mod telemetry;
