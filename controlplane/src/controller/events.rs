//! Kubernetes Events on the objects the controllers change, so `kubectl describe` tells a
//! user what happened and why. Publishing is best effort: a failed Event is logged and
//! never fails the reconcile that caused it.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};

/// An Event a plan decided on, for the reconcile that carries the plan out to publish.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlannedEvent {
    pub warning: bool,
    pub reason: &'static str,
    pub note: String,
}

/// Publishes Events as one reporting controller.
#[derive(Clone)]
pub struct EventSink {
    recorder: Recorder,
    client: kube::Client,
    reporter: Reporter,
}

impl EventSink {
    /// `instance` is the replica's identity (pod name), shown as the reporting instance.
    pub fn new(client: kube::Client, instance: &str) -> Self {
        let reporter = Reporter {
            controller: "stevedore-controlplane".to_owned(),
            instance: Some(instance.to_owned()),
        };
        Self {
            recorder: Recorder::new(client.clone(), reporter.clone()),
            client,
            reporter,
        }
    }

    /// A Warning event of its own, never folded into a series. The recorder folds an
    /// event into the last one with the same object, reason and action, whatever its note
    /// (events.k8s.io/v1 series, as client-go does): the later note is lost, only a count
    /// goes up. For a caller that rate-limits by note itself (a node's pull failures, one
    /// per image and message), each note it lets through is an Event a user can read.
    pub async fn warning_unfolded(
        &self,
        object: &ObjectReference,
        reason: &str,
        action: &str,
        note: String,
    ) {
        let event = Event {
            type_: EventType::Warning,
            reason: reason.to_owned(),
            note: Some(truncate(note, NOTE_MAX_BYTES)),
            action: action.to_owned(),
            secondary: None,
        };
        // A recorder of its own has no earlier event to fold this one into.
        let recorder = Recorder::new(self.client.clone(), self.reporter.clone());
        if let Err(err) = recorder.publish(&event, object).await {
            tracing::warn!(error = %err, reason, "could not publish an event");
        }
    }

    /// A Normal event.
    pub async fn normal(&self, object: &ObjectReference, reason: &str, action: &str, note: String) {
        self.publish(object, EventType::Normal, reason, action, note)
            .await;
    }

    /// A Warning event.
    pub async fn warning(
        &self,
        object: &ObjectReference,
        reason: &str,
        action: &str,
        note: String,
    ) {
        self.publish(object, EventType::Warning, reason, action, note)
            .await;
    }

    /// Each of `events` on `object`, a Warning or a Normal event as it says.
    pub async fn publish_planned(
        &self,
        object: &ObjectReference,
        action: &str,
        events: &[PlannedEvent],
    ) {
        for event in events {
            let type_ = if event.warning {
                EventType::Warning
            } else {
                EventType::Normal
            };
            self.publish(object, type_, event.reason, action, event.note.clone())
                .await;
        }
    }

    /// A Warning or Normal event on `object`, about `related` too when given (an event
    /// with a related object is its own, never folded into a series with others that
    /// differ only in their note).
    pub async fn publish_about(
        &self,
        object: &ObjectReference,
        related: Option<ObjectReference>,
        warning: bool,
        reason: &str,
        action: &str,
        note: String,
    ) {
        let type_ = if warning {
            EventType::Warning
        } else {
            EventType::Normal
        };
        self.publish_with(object, related, type_, reason, action, note)
            .await;
    }

    async fn publish(
        &self,
        object: &ObjectReference,
        type_: EventType,
        reason: &str,
        action: &str,
        note: String,
    ) {
        self.publish_with(object, None, type_, reason, action, note)
            .await;
    }

    async fn publish_with(
        &self,
        object: &ObjectReference,
        related: Option<ObjectReference>,
        type_: EventType,
        reason: &str,
        action: &str,
        note: String,
    ) {
        let event = Event {
            type_,
            reason: reason.to_owned(),
            note: Some(truncate(note, NOTE_MAX_BYTES)),
            action: action.to_owned(),
            secondary: related,
        };
        if let Err(err) = self.recorder.publish(&event, object).await {
            tracing::warn!(error = %err, reason, "could not publish an event");
        }
    }
}

/// The apiserver refuses an Event whose `note` is longer (events.k8s.io/v1 validation,
/// `NoteLengthLimit`), so a long note would lose the whole Event.
pub const NOTE_MAX_BYTES: usize = 1024;

/// `note` cut to at most `max` bytes, on a character boundary.
pub(crate) fn truncate(mut note: String, max: usize) -> String {
    if note.len() > max {
        let mut end = max;
        while !note.is_char_boundary(end) {
            end -= 1;
        }
        note.truncate(end);
    }
    note
}

#[cfg(test)]
mod tests {
    #[test]
    fn notes_are_cut_on_char_boundaries() {
        assert_eq!(super::truncate("abc".into(), 5), "abc");
        assert_eq!(super::truncate("abcdef".into(), 3), "abc");
        assert_eq!(super::truncate("aé".into(), 2), "a");
    }
}
