//! How far a job's pulls got, as one number that moves while bytes flow (OpenKruise
//! reports 0% until a node finishes, kruise #1656) and never goes back while the set of
//! work stays the same size. Pure; shared by ImagePullJob (over nodes) and
//! ImageListPullJob (over images).

use crate::api::imagepulljob::PullProgress;

/// One unit of work: a node's pull, or an image's ImagePullJob.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Part {
    /// Pulled, or failed for good: counts fully.
    pub finished: bool,
    /// The share done while unfinished, in percent (0 to 100).
    pub percent: i32,
    pub bytes_done: i64,
    pub bytes_total: i64,
}

impl Part {
    /// A node's pull from the bytes its agent reported.
    pub fn from_bytes(finished: bool, bytes_done: i64, bytes_total: i64) -> Self {
        let percent = if bytes_total > 0 {
            let share =
                i128::from(bytes_done.clamp(0, bytes_total)) * 100 / i128::from(bytes_total);
            i32::try_from(share).unwrap_or(100)
        } else {
            0
        };
        Self {
            finished,
            percent,
            // A finished pull wrote everything, even when a node found the image present.
            bytes_done: if finished {
                bytes_done.max(bytes_total)
            } else {
                bytes_done
            },
            bytes_total,
        }
    }
}

/// The progress of `parts` (`desired` in all; parts not listed have not started), given
/// the last reported progress for `previous_desired` parts: the share of the parts
/// finished, each unfinished part by its own percent; below 100 until every part
/// finished; at least the last report when the number of parts is the same.
pub fn summarize(
    parts: &[Part],
    desired: usize,
    previous: Option<&PullProgress>,
    previous_desired: i32,
) -> PullProgress {
    let finished = parts.iter().filter(|p| p.finished).count();
    let sum: i64 = parts
        .iter()
        .map(|p| {
            if p.finished {
                100
            } else {
                i64::from(p.percent.clamp(0, 100))
            }
        })
        .sum();
    let mut percent = match i64::try_from(desired) {
        Ok(0) | Err(_) => 0,
        Ok(desired) => i32::try_from(sum / desired).unwrap_or(100),
    };
    if desired == 0 || finished >= desired {
        percent = 100;
    } else {
        percent = percent.min(99);
    }
    let same_work = i32::try_from(desired).is_ok_and(|d| d == previous_desired);
    if let Some(previous) = previous.filter(|_| same_work) {
        percent = percent.max(previous.percent);
    }
    PullProgress {
        percent,
        bytes_done: parts.iter().map(|p| p.bytes_done).sum(),
        bytes_total: parts.iter().map(|p| p.bytes_total).sum(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pulling(done: i64, total: i64) -> Part {
        Part::from_bytes(false, done, total)
    }

    fn done(total: i64) -> Part {
        Part::from_bytes(true, 0, total)
    }

    #[test]
    fn a_part_reads_its_percent_from_its_bytes() {
        let cases = [
            (pulling(0, 0), 0),
            (pulling(50, 0), 0),
            (pulling(25, 100), 25),
            (pulling(99, 100), 99),
            (pulling(150, 100), 100),
            (pulling(-5, 100), 0),
        ];
        for (part, want) in cases {
            assert_eq!(part.percent, want, "{part:?}");
        }
        assert_eq!(done(40).bytes_done, 40);
    }

    #[test]
    fn progress_counts_finished_parts_and_the_bytes_of_running_ones() {
        // (parts, desired, previous percent for the same desired, want percent)
        let cases: [(Vec<Part>, usize, Option<i32>, i32); 9] = [
            // Nothing started: 0.
            (vec![], 3, None, 0),
            // One of two pulling at half: a quarter, not stuck at 0 (kruise #1656).
            (vec![pulling(50, 100)], 2, None, 25),
            // One finished of three, one at 60%.
            (vec![done(10), pulling(60, 100)], 3, None, 53),
            // Every part at 100% of its bytes but none finished yet: below 100.
            (vec![pulling(10, 10), pulling(10, 10)], 2, None, 99),
            // All finished: 100.
            (vec![done(1), done(0)], 2, None, 100),
            // No work at all is finished work.
            (vec![], 0, None, 100),
            // A retry that starts over does not take the number back.
            (vec![pulling(0, 100)], 2, Some(40), 40),
            // The previous number stands only for the same amount of work.
            (vec![pulling(0, 100)], 2, None, 0),
            // Moving forward past the previous number.
            (vec![pulling(100, 100), done(5)], 2, Some(40), 99),
        ];
        for (parts, desired, previous, want) in cases {
            let previous = previous.map(|percent| PullProgress {
                percent,
                ..PullProgress::default()
            });
            let got = summarize(&parts, desired, previous.as_ref(), 2);
            assert_eq!(
                got.percent, want,
                "{parts:?} of {desired}, after {previous:?}"
            );
        }
    }

    #[test]
    fn a_different_amount_of_work_starts_from_what_is_seen() {
        let previous = PullProgress {
            percent: 80,
            ..PullProgress::default()
        };
        let got = summarize(&[done(1)], 4, Some(&previous), 2);
        assert_eq!(got.percent, 25);
    }

    #[test]
    fn bytes_are_summed() {
        let got = summarize(&[pulling(10, 100), done(30)], 3, None, 0);
        assert_eq!((got.bytes_done, got.bytes_total), (40, 130));
    }
}
