//! Bounded waits: every wait has a timeout and says what it waited for when it expires.

use std::future::Future;
use std::time::Duration;

use anyhow::{Result, bail};

/// Polls `check` every `interval` until it yields `Some`, or fails after `timeout`
/// naming `what`, with the last observation `check` reported through `Err`.
pub async fn poll_until<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Option<T>>>,
{
    let interval = Duration::from_millis(500);
    let deadline = tokio::time::Instant::now() + timeout;
    let mut last_error = None;
    loop {
        match check().await {
            Ok(Some(value)) => return Ok(value),
            Ok(None) => {}
            Err(err) => last_error = Some(err),
        }
        if tokio::time::Instant::now() >= deadline {
            match last_error {
                Some(err) => bail!("timed out after {timeout:?} waiting for {what}: {err:#}"),
                None => bail!("timed out after {timeout:?} waiting for {what}"),
            }
        }
        tokio::time::sleep(interval).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn returns_the_first_ready_value() {
        let mut calls = 0;
        let value = poll_until("three calls", Duration::from_secs(10), || {
            calls += 1;
            let n = calls;
            async move { Ok((n >= 3).then_some(n)) }
        })
        .await
        .expect("ready on the third call");
        assert_eq!(value, 3);
    }

    #[tokio::test(start_paused = true)]
    async fn times_out_naming_what_it_waited_for() {
        let err = poll_until::<(), _, _>("the moon", Duration::from_secs(2), || async { Ok(None) })
            .await
            .expect_err("never ready");
        assert!(err.to_string().contains("the moon"), "{err}");
    }
}
