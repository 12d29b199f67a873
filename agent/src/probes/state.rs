//! One probe's state as its results come in (pure), with the kubelet's threshold rule: a
//! result that repeats the last one extends its run, another starts a new run, and the
//! state moves only once a run reaches the threshold of its kind (`successThreshold`
//! successes, `failureThreshold` failures). Before either, the state is Unknown.

/// What one run of a probe found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeResult {
    Success,
    Failure,
}

/// A probe's state, as NodePodProbe status names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ProbeState {
    #[default]
    Unknown,
    Succeeded,
    Failed,
}

/// The thresholds a run must reach, each at least 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Thresholds {
    pub success: u32,
    pub failure: u32,
}

/// The state and the current run of equal results.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ProbeTracker {
    state: ProbeState,
    last: Option<ProbeResult>,
    run: u32,
}

impl ProbeTracker {
    pub fn state(&self) -> ProbeState {
        self.state
    }

    /// Takes one result; returns the new state when it changed.
    pub fn observe(&mut self, result: ProbeResult, thresholds: Thresholds) -> Option<ProbeState> {
        self.run = if self.last == Some(result) {
            self.run.saturating_add(1)
        } else {
            1
        };
        self.last = Some(result);
        let (threshold, reached) = match result {
            ProbeResult::Success => (thresholds.success, ProbeState::Succeeded),
            ProbeResult::Failure => (thresholds.failure, ProbeState::Failed),
        };
        if self.run < threshold.max(1) || self.state == reached {
            return None;
        }
        self.state = reached;
        Some(reached)
    }
}

#[cfg(test)]
mod tests {
    use super::ProbeResult::{Failure as F, Success as S};
    use super::ProbeState::{Failed, Succeeded, Unknown};
    use super::*;

    #[test]
    fn thresholds_decide_when_the_state_moves() {
        struct Case {
            name: &'static str,
            thresholds: (u32, u32),
            results: &'static [ProbeResult],
            /// The state after each result.
            states: &'static [ProbeState],
        }
        let cases = [
            Case {
                name: "defaults: one success is enough",
                thresholds: (1, 3),
                results: &[S],
                states: &[Succeeded],
            },
            Case {
                name: "failures below the threshold keep Unknown, the third fails",
                thresholds: (1, 3),
                results: &[F, F, F],
                states: &[Unknown, Unknown, Failed],
            },
            Case {
                name: "a success in between restarts the failure run",
                thresholds: (1, 3),
                results: &[S, F, F, S, F, F, F],
                states: &[
                    Succeeded, Succeeded, Succeeded, Succeeded, Succeeded, Succeeded, Failed,
                ],
            },
            Case {
                name: "success threshold 2 after a failure",
                thresholds: (2, 1),
                results: &[F, S, F, S, S],
                states: &[Failed, Failed, Failed, Failed, Succeeded],
            },
            Case {
                name: "a zero threshold counts as one",
                thresholds: (0, 0),
                results: &[F, S],
                states: &[Failed, Succeeded],
            },
        ];
        for case in cases {
            let thresholds = Thresholds {
                success: case.thresholds.0,
                failure: case.thresholds.1,
            };
            let mut tracker = ProbeTracker::default();
            let mut seen = Vec::new();
            for result in case.results {
                let before = tracker.state();
                let changed = tracker.observe(*result, thresholds);
                assert_eq!(
                    changed.is_some(),
                    tracker.state() != before,
                    "{}",
                    case.name
                );
                seen.push(tracker.state());
            }
            assert_eq!(seen, case.states, "{}", case.name);
        }
    }
}
