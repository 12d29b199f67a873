//! Bounded waits: every wait has a timeout and says what it waited for when it expires.

use std::future::Future;
use std::time::Duration;

use anyhow::{Result, bail};

/// A rule that must hold at every observation of a wait, not just eventually: returned
/// through `check`'s `Err` (see [`invariant`]), it ends the wait at once. Any other error
/// is an observation not made yet (a failed list, an object not there) and is retried.
#[derive(Debug)]
pub struct InvariantBroken(pub String);

impl std::fmt::Display for InvariantBroken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for InvariantBroken {}

/// `Err(InvariantBroken)` with `message()` unless `holds`.
pub fn invariant(holds: bool, message: impl FnOnce() -> String) -> Result<()> {
    if holds {
        Ok(())
    } else {
        Err(InvariantBroken(message()).into())
    }
}

/// Polls `check` every `interval` until it yields `Some`, or fails after `timeout`
/// naming `what`, with the last observation `check` reported through `Err`. An
/// [`InvariantBroken`] error fails the wait at once.
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
            Err(err) if err.downcast_ref::<InvariantBroken>().is_some() => {
                bail!("while waiting for {what}: {err:#}")
            }
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

    #[tokio::test(start_paused = true)]
    async fn a_broken_invariant_ends_the_wait_at_once_while_other_errors_are_retried() {
        let mut calls = 0;
        let err = poll_until::<(), _, _>("the sun", Duration::from_secs(60), || {
            calls += 1;
            let n = calls;
            async move {
                anyhow::ensure!(n > 1, "not listed yet");
                invariant(n < 3, || format!("broken at call {n}"))?;
                Ok(None)
            }
        })
        .await
        .expect_err("the invariant breaks on the third call");
        assert_eq!(calls, 3);
        assert!(err.to_string().contains("broken at call 3"), "{err}");
    }
}
