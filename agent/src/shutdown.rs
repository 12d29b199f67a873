//! The one shutdown signal every task of the agent watches.

use tokio::{
    signal::unix::{SignalKind, signal},
    task::JoinHandle,
};
use tokio_util::sync::CancellationToken;

/// Installs SIGINT and SIGTERM handlers that cancel `token` on the first signal.
/// Must be called within a Tokio runtime; fails if the handlers cannot be installed.
pub fn cancel_on_signal(token: CancellationToken) -> std::io::Result<JoinHandle<()>> {
    let mut terminate = signal(SignalKind::terminate())?;
    let mut interrupt = signal(SignalKind::interrupt())?;
    Ok(tokio::spawn(async move {
        let name = tokio::select! {
            _ = terminate.recv() => "SIGTERM",
            _ = interrupt.recv() => "SIGINT",
            () = token.cancelled() => return,
        };
        tracing::info!(signal = name, "shutting down");
        token.cancel();
    }))
}
