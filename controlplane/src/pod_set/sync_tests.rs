//! The requeue every pod-set sync asks for: the soonest of what its steps asked.

use std::time::Duration;

use super::*;

#[test]
fn the_sync_looks_again_at_the_soonest_requeue_asked_for() {
    let secs = |s| Some(Duration::from_secs(s));
    let cases: [(&[Option<Duration>], Outcome); 4] = [
        (&[], Outcome::Done),
        (&[None, None], Outcome::Done),
        (
            &[secs(15), None, secs(3)],
            Outcome::RequeueAfter(Duration::from_secs(3)),
        ),
        (
            &[Some(Duration::ZERO), secs(15)],
            Outcome::RequeueAfter(Duration::ZERO),
        ),
    ];
    for (requeues, want) in cases {
        assert_eq!(soonest(requeues.iter().copied()), want, "{requeues:?}");
    }
}
