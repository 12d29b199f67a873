//! The clocks leader election reads, behind a trait so a test can give one replica a clock
//! that disagrees with everyone else's.

use std::time::Duration;

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use tokio::time::Instant;

/// Where the elector gets the time.
pub trait Clock: Send + Sync + 'static {
    /// Monotonic time: every election decision is timed on it, and only against other
    /// readings of the same clock.
    fn monotonic(&self) -> Instant;
    /// Wall time, written into the Lease (`acquireTime`, `renewTime`) for people to read;
    /// never compared with another replica's.
    fn wall(&self) -> Timestamp;
}

/// The machine's clocks (tokio's monotonic clock, so paused-time tests control it).
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn monotonic(&self) -> Instant {
        Instant::now()
    }

    fn wall(&self) -> Timestamp {
        Timestamp::now()
    }
}

/// The machine's clocks shifted by a fixed offset, as on a replica whose clock is wrong.
#[derive(Debug, Clone, Copy)]
pub struct SkewedClock {
    /// Positive: this replica's clocks run ahead of the machine's.
    pub offset: SignedDuration,
}

impl Clock for SkewedClock {
    fn monotonic(&self) -> Instant {
        let now = Instant::now();
        let by = Duration::try_from(self.offset.abs()).unwrap_or(Duration::ZERO);
        if self.offset.is_negative() {
            // Close to boot an instant cannot go that far back; then it is not skewed back.
            now.checked_sub(by).unwrap_or(now)
        } else {
            now + by
        }
    }

    fn wall(&self) -> Timestamp {
        Timestamp::now()
            .checked_add(self.offset)
            .unwrap_or_else(|_| Timestamp::now())
    }
}
