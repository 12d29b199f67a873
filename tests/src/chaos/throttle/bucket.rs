//! A token bucket over bytes, with the clock passed in, so its arithmetic is tested
//! without waiting. Pure; [`super::proxy`] sleeps for what it says.

use std::time::{Duration, Instant};

/// How fast bytes may pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limit {
    Unlimited,
    /// `bytes_per_sec` on average over every connection together, and `delay` added
    /// before each chunk is forwarded (latency on top of the bandwidth).
    Limited {
        bytes_per_sec: u64,
        delay: Duration,
    },
}

/// The most a read forwards in one piece; a limited bucket holds at least this much, so
/// one chunk never waits for more tokens than the bucket can hold.
pub const CHUNK: usize = 16 * 1024;

#[derive(Debug)]
pub struct Bucket {
    limit: Limit,
    /// Bytes that may pass at `at` without waiting; negative when senders already took
    /// more than there was (the debt later senders wait out, in order).
    tokens: f64,
    at: Instant,
}

impl Bucket {
    pub fn new(limit: Limit, now: Instant) -> Bucket {
        let mut bucket = Bucket {
            limit,
            tokens: 0.0,
            at: now,
        };
        bucket.set(limit, now);
        bucket
    }

    pub fn limit(&self) -> Limit {
        self.limit
    }

    /// Changes the rate; the bucket starts full, and any debt is forgiven (the senders
    /// waiting on it are woken by the proxy and go on at once).
    pub fn set(&mut self, limit: Limit, now: Instant) {
        self.limit = limit;
        self.tokens = self.burst();
        self.at = now;
    }

    /// Takes `bytes` out of the bucket at `now`; how long the sender must wait before
    /// they may pass (zero when the bucket held them).
    pub fn reserve(&mut self, now: Instant, bytes: usize) -> Duration {
        let Limit::Limited { bytes_per_sec, .. } = self.limit else {
            return Duration::ZERO;
        };
        let rate = bytes_per_sec.max(1) as f64;
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + elapsed * rate).min(self.burst());
        self.at = now.max(self.at);
        self.tokens -= bytes as f64;
        if self.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-self.tokens / rate)
        }
    }

    /// The latency added before each chunk.
    pub fn delay(&self) -> Duration {
        match self.limit {
            Limit::Unlimited => Duration::ZERO,
            Limit::Limited { delay, .. } => delay,
        }
    }

    /// What a full bucket holds: a quarter of a second's bytes, and never less than a
    /// chunk.
    fn burst(&self) -> f64 {
        match self.limit {
            Limit::Unlimited => 0.0,
            Limit::Limited { bytes_per_sec, .. } => (bytes_per_sec / 4).max(CHUNK as u64) as f64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KIB: u64 = 1024;

    fn limited(kib_per_sec: u64) -> Limit {
        Limit::Limited {
            bytes_per_sec: kib_per_sec * KIB,
            delay: Duration::from_millis(50),
        }
    }

    fn whole_ms(d: Duration) -> u64 {
        (d.as_secs_f64() * 1000.0).round() as u64
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// Each row: the limit, then (milliseconds since the start, bytes asked) in order, and
    /// the wait each request is told, in milliseconds.
    #[test]
    fn a_sender_waits_for_the_bytes_the_bucket_lacks_and_the_bucket_refills_at_the_rate() {
        type Row<'a> = (&'a str, Limit, &'a [(u64, usize)], &'a [u64]);
        let rows: &[Row<'_>] = &[
            (
                "unlimited never waits",
                Limit::Unlimited,
                &[(0, 1 << 30), (0, 1 << 30)],
                &[0, 0],
            ),
            (
                // 64 KiB/s holds a 16 KiB burst: the first chunk passes, the second waits
                // 16 KiB / 64 KiB/s = 250 ms, the third another 250 ms behind it.
                "a burst then the rate",
                limited(64),
                &[(0, 16 * 1024), (0, 16 * 1024), (0, 16 * 1024)],
                &[0, 250, 500],
            ),
            (
                // After 125 ms, 8 KiB came back: 16 KiB waits for the other 8 KiB.
                "tokens come back with time",
                limited(64),
                &[(0, 16 * 1024), (125, 16 * 1024)],
                &[0, 125],
            ),
            (
                // A long idle never stores more than the burst.
                "an idle bucket holds no more than its burst",
                limited(64),
                &[(10_000, 16 * 1024), (10_000, 16 * 1024)],
                &[0, 250],
            ),
            (
                // 1000 KiB/s holds a quarter second (256,000 bytes), more than a chunk.
                "a fast bucket holds a quarter second",
                limited(1000),
                &[(0, 256_000), (0, 1024)],
                &[0, 1],
            ),
        ];
        for (name, limit, asks, waits) in rows {
            let start = Instant::now();
            let mut bucket = Bucket::new(*limit, start);
            let got: Vec<u64> = asks
                .iter()
                .map(|(at, bytes)| whole_ms(bucket.reserve(start + ms(*at), *bytes)))
                .collect();
            assert_eq!(&got, waits, "{name}");
        }
    }

    #[test]
    fn a_new_limit_forgives_the_debt_and_unlimited_adds_no_delay() {
        let start = Instant::now();
        let mut bucket = Bucket::new(limited(64), start);
        assert_eq!(bucket.delay(), ms(50));
        bucket.reserve(start, 1024 * 1024);
        assert!(bucket.reserve(start, 1) > Duration::from_secs(15));
        bucket.set(limited(64), start);
        assert_eq!(bucket.reserve(start, 1024), Duration::ZERO);
        bucket.set(Limit::Unlimited, start);
        assert_eq!(bucket.reserve(start, 1 << 30), Duration::ZERO);
        assert_eq!(bucket.delay(), Duration::ZERO);
        assert_eq!(bucket.limit(), Limit::Unlimited);
    }
}
