//! Kubernetes Events for the pull failures of a node's agent, recorded by the control
//! plane on the agent's behalf: the agent's service account may not write Events
//! (docs/security.md, least privilege), and every failure already reaches the control
//! plane on the ImageList status stream. The Event goes on the Node, as the image list is
//! the node's, and names the image and the registry's (or containerd's) own message.
//!
//! A failing image is retried with backoff for as long as it stays in spec, so the
//! Events are rate-limited: one per image and reason (the failure's message) per
//! [`WINDOW`]. A status stream re-sent after a reconnect, or a retry failing the same
//! way, adds nothing within the window; a new reason is recorded at once. The limiters
//! live as long as the control-plane process ([`PullEventLimits`], one per node), since a
//! node's session starts again on each leadership term, and the last session's status
//! writes may not have landed yet. A failure the node's ImageList status already shows
//! (written by another control-plane process, whose limiter is gone) counts as recorded:
//! a new leader replaying the agent's stream adds nothing.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

use crate::api::imagelist::{ImagePullPhase, ImageStatus};

/// At most one Event per image and reason per this long.
pub const WINDOW: Duration = Duration::from_secs(10 * 60);
/// The Event's reason, as `kubectl get events` shows it.
pub const REASON: &str = "FailedPullImage";
/// The Event's action.
pub const ACTION: &str = "PullImage";

/// Whether `status` reports a failed pull attempt (rather than a wait, a pull in
/// progress, or a success).
pub fn is_failure(status: &ImageStatus) -> bool {
    matches!(
        status.phase,
        ImagePullPhase::Waiting | ImagePullPhase::Failed
    ) && status.attempts > 0
        && !status.message.is_empty()
}

/// The Event's note for a failed pull of `image`.
pub fn note(image: &str, status: &ImageStatus) -> String {
    let attempts = status.attempts;
    let tries = if attempts == 1 { "attempt" } else { "attempts" };
    format!(
        "Failed to pull image \"{image}\" ({attempts} {tries}): {}",
        status.message
    )
}

/// Which failures of one node were recorded when.
#[derive(Debug, Default)]
pub struct PullEventLimiter {
    recorded: HashMap<(String, String), Instant>,
}

impl PullEventLimiter {
    /// The note of the Event to record for `status` of `image` at `now`, if any: a
    /// failure whose image and message were not recorded within [`WINDOW`], and which
    /// `on_record` (the image's status as the ImageList holds it) does not already show.
    pub fn admit(
        &mut self,
        image: &str,
        status: &ImageStatus,
        on_record: Option<&ImageStatus>,
        now: Instant,
    ) -> Option<String> {
        // Forget what is out of the window, so the map holds only recent failures.
        self.recorded
            .retain(|_, at| now.saturating_duration_since(*at) < WINDOW);
        if !is_failure(status) {
            return None;
        }
        let key = (image.to_owned(), status.message.clone());
        if self.recorded.contains_key(&key) {
            return None;
        }
        self.recorded.insert(key, now);
        let reported_before =
            on_record.is_some_and(|old| is_failure(old) && old.message == status.message);
        (!reported_before).then(|| note(image, status))
    }
}

/// Every node's [`PullEventLimiter`], shared by all of that node's sessions for the life of
/// the process.
#[derive(Clone, Debug, Default)]
pub struct PullEventLimits(Arc<Mutex<HashMap<String, PullEventLimiter>>>);

impl PullEventLimits {
    /// [`PullEventLimiter::admit`] on `node`'s limiter.
    pub fn admit(
        &self,
        node: &str,
        image: &str,
        status: &ImageStatus,
        on_record: Option<&ImageStatus>,
        now: Instant,
    ) -> Option<String> {
        let mut nodes = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        (nodes.entry(node.to_owned()).or_default()).admit(image, status, on_record, now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(phase: ImagePullPhase, attempts: i32, message: &str) -> ImageStatus {
        ImageStatus {
            phase,
            attempts,
            message: message.to_owned(),
            ..ImageStatus::default()
        }
    }

    #[test]
    fn only_a_failed_attempt_with_a_message_is_a_failure() {
        use ImagePullPhase::*;
        let cases = [
            (status(Waiting, 1, "manifest unknown"), true),
            (status(Failed, 4, "manifest unknown"), true),
            (status(Waiting, 0, ""), false),
            // The control plane's own messages (refused secret) come with no attempt.
            (status(Failed, 0, "the pull secret is refused"), false),
            (status(Pulling, 2, "manifest unknown"), false),
            (status(Succeeded, 1, ""), false),
            (status(Waiting, 1, ""), false),
        ];
        for (status, expected) in cases {
            assert_eq!(is_failure(&status), expected, "{status:?}");
        }
    }

    #[test]
    fn the_note_names_the_image_the_attempts_and_the_message() {
        let failed = status(ImagePullPhase::Failed, 3, "registry: manifest unknown");
        assert_eq!(
            note("r.test/app:v9", &failed),
            "Failed to pull image \"r.test/app:v9\" (3 attempts): registry: manifest unknown"
        );
        let first = status(ImagePullPhase::Waiting, 1, "refused");
        assert!(note("a", &first).contains("(1 attempt)"));
    }

    #[tokio::test(start_paused = true)]
    async fn one_event_per_image_and_reason_per_window() {
        let mut limiter = PullEventLimiter::default();
        let start = Instant::now();
        let unknown = status(ImagePullPhase::Waiting, 1, "manifest unknown");
        let retried = status(ImagePullPhase::Failed, 4, "manifest unknown");
        let refused = status(ImagePullPhase::Failed, 5, "unauthorized");

        assert!(limiter.admit("a", &unknown, None, start).is_some());
        // Retries failing the same way within the window: nothing.
        assert!(limiter.admit("a", &unknown, None, start).is_none());
        assert!(
            limiter
                .admit("a", &retried, None, start + WINDOW / 2)
                .is_none()
        );
        // Another image, or another reason, is recorded at once.
        assert!(
            limiter
                .admit("b", &unknown, None, start + WINDOW / 2)
                .is_some()
        );
        assert!(
            limiter
                .admit("a", &refused, None, start + WINDOW / 2)
                .is_some()
        );
        // A success in between does not reset the window.
        let ok = status(ImagePullPhase::Succeeded, 1, "");
        assert!(limiter.admit("a", &ok, None, start + WINDOW / 2).is_none());
        assert!(
            limiter
                .admit("a", &unknown, None, start + WINDOW / 2)
                .is_none()
        );
        // Once the window has passed, the same failure is recorded again.
        assert!(limiter.admit("a", &retried, None, start + WINDOW).is_some());
        assert_eq!(limiter.recorded.len(), 3, "the expired entry was replaced");
    }

    #[tokio::test(start_paused = true)]
    async fn a_failure_the_image_list_already_shows_is_not_recorded_again() {
        let now = Instant::now();
        let unknown = status(ImagePullPhase::Waiting, 1, "manifest unknown");
        let later = status(ImagePullPhase::Failed, 3, "manifest unknown");
        let refused = status(ImagePullPhase::Failed, 3, "unauthorized");
        let pulling = status(ImagePullPhase::Pulling, 1, "");
        let cases = [
            ("nothing on record", None, true),
            ("the list shows a pull in progress", Some(&pulling), true),
            ("the list shows this failure", Some(&unknown), false),
            ("the list shows it after more attempts", Some(&later), false),
            ("the list shows another reason", Some(&refused), true),
        ];
        for (case, on_record, recorded) in cases {
            // A fresh limiter: a new session, leader term or process.
            let mut limiter = PullEventLimiter::default();
            let admitted = limiter.admit("a", &unknown, on_record, now).is_some();
            assert_eq!(admitted, recorded, "{case}");
            // Either way the retries of this session add nothing.
            assert!(limiter.admit("a", &unknown, None, now).is_none(), "{case}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_new_session_of_a_node_does_not_record_what_the_last_one_did() {
        let limits = PullEventLimits::default();
        let now = Instant::now();
        let unknown = status(ImagePullPhase::Waiting, 1, "manifest unknown");
        // The first session records it; its status write never landed (on_record None).
        assert!(limits.admit("n1", "a", &unknown, None, now).is_some());
        // A session of the next leadership term, sharing the limits, sees it again.
        let next_term = limits.clone();
        assert!(next_term.admit("n1", "a", &unknown, None, now).is_none());
        // Another node's failure is its own.
        assert!(next_term.admit("n2", "a", &unknown, None, now).is_some());
    }
}
