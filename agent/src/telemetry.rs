//! Logging set-up: `RUST_LOG`-style filtering (default `info`), text or JSON lines.

use tracing_subscriber::{EnvFilter, util::TryInitError};

use crate::config::LogFormat;

/// Installs the global tracing subscriber; fails if one is already installed.
pub fn init(format: LogFormat) -> Result<(), TryInitError> {
    use tracing_subscriber::{fmt, prelude::*};

    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let registry = tracing_subscriber::registry().with(filter);
    match format {
        LogFormat::Text => registry.with(fmt::layer()).try_init(),
        LogFormat::Json => registry.with(fmt::layer().json()).try_init(),
    }
}
