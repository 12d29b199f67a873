//! Logging set-up: `RUST_LOG` filtering (default `info`), text or JSON lines.
//!
//! `RUST_LOG` takes a level or comma-separated `target=level` directives
//! (`info,stevedore_agent::images=debug`), parsed by tracing-subscriber's `Targets`.
//! `EnvFilter`'s span and field filters are not supported: they need its regex engine,
//! ~0.5 MiB of code resident in every agent (docs/pull-engine.md, "Memory").

use std::str::FromStr as _;

use tracing_subscriber::{filter::Targets, util::TryInitError};

use crate::config::LogFormat;

/// The filter when `RUST_LOG` is unset or not understood.
const DEFAULT_FILTER: &str = "info";

/// Installs the global tracing subscriber; fails if one is already installed. A
/// `RUST_LOG` that does not parse is reported (as a warning, once logging is up) and the
/// default used instead.
pub fn init(format: LogFormat) -> Result<(), TryInitError> {
    use tracing_subscriber::{fmt, prelude::*};

    let (filter, refused) = log_filter(std::env::var("RUST_LOG").ok().as_deref());
    let registry = tracing_subscriber::registry().with(filter);
    match format {
        LogFormat::Text => registry.with(fmt::layer()).try_init(),
        LogFormat::Json => registry.with(fmt::layer().json()).try_init(),
    }?;
    if let Some(message) = refused {
        tracing::warn!("{message}");
    }
    Ok(())
}

/// The filter `rust_log` asks for, else the default and a sentence saying why.
fn log_filter(rust_log: Option<&str>) -> (Targets, Option<String>) {
    let default = || Targets::from_str(DEFAULT_FILTER).unwrap_or_default();
    match rust_log.map(str::trim).filter(|v| !v.is_empty()) {
        None => (default(), None),
        Some(value) => match Targets::from_str(value) {
            Ok(targets) => (targets, None),
            Err(err) => (
                default(),
                Some(format!(
                    "RUST_LOG={value:?} is not a level or a list of target=level directives \
                     ({err}); logging at {DEFAULT_FILTER}"
                )),
            ),
        },
    }
}

#[cfg(test)]
mod tests {
    use tracing::Level;

    use super::log_filter;

    #[test]
    fn rust_log_sets_levels_per_target_and_a_bad_value_falls_back_to_info() {
        for (rust_log, target, level, enabled, refused) in [
            (None, "stevedore_agent", Level::INFO, true, false),
            (None, "stevedore_agent", Level::DEBUG, false, false),
            (Some(""), "h2", Level::INFO, true, false),
            (Some("debug"), "h2", Level::DEBUG, true, false),
            (
                Some("warn,stevedore_agent=debug"),
                "stevedore_agent::images",
                Level::DEBUG,
                true,
                false,
            ),
            (
                Some("warn,stevedore_agent=debug"),
                "h2",
                Level::INFO,
                false,
                false,
            ),
            (
                Some("stevedore_agent[pull{image=x}]=trace"),
                "h2",
                Level::INFO,
                true,
                true,
            ),
        ] {
            let (filter, message) = log_filter(rust_log);
            assert_eq!(
                filter.would_enable(target, &level),
                enabled,
                "{rust_log:?} {target} {level}"
            );
            assert_eq!(message.is_some(), refused, "{rust_log:?}: {message:?}");
            if let Some(message) = message {
                assert!(message.contains("RUST_LOG="), "{message}");
            }
        }
    }
}
