//! Stevedore's node agent: pulls images through containerd with per-layer progress,
//! restarts containers in place and sets pod conditions, for pods of its own node.

pub mod admin;
pub mod apiserver;
pub mod auth;
pub mod config;
pub mod containerd_channel;
pub mod containers;
mod error_text;
pub mod images;
pub mod metrics;
pub mod node;
pub mod pods;
pub mod probes;
pub mod server;
pub mod serving;
pub mod shutdown;
pub mod telemetry;

/// Image references, parsed in `stevedore-parsers` (fuzzed there).
pub use stevedore_parsers::reference;
