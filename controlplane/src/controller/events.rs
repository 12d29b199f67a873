//! Kubernetes Events on the objects the controllers change, so `kubectl describe` tells a
//! user what happened and why. Publishing is best effort and never holds up the caller:
//! an Event is queued, and one task per sink sends the queue in order, as client-go's
//! event broadcaster does. A reconcile that creates 500 pods once waited for 500 Event
//! writes one after another (about 12 s on a loaded apiserver) before its next step. A
//! full queue drops the Event (client-go: 1,000 queued, `DropIfChannelFull`), and a
//! failed write is logged; neither fails the reconcile that caused it.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use tokio::sync::mpsc;

/// Events queued at most, across a sink's clones; more are dropped until it drains.
pub const QUEUED_EVENTS: usize = 1000;

/// An Event a plan decided on, for the reconcile that carries the plan out to publish.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlannedEvent {
    pub warning: bool,
    pub reason: &'static str,
    pub note: String,
}

/// Publishes Events as one reporting controller; clones share the queue and its task.
#[derive(Clone)]
pub struct EventSink {
    queue: mpsc::Sender<Queued>,
    dropped: Arc<AtomicU64>,
}

/// One Event waiting to be sent.
struct Queued {
    object: ObjectReference,
    event: Event,
    /// Sent by a recorder of its own, so never folded into an earlier series.
    unfolded: bool,
}

impl EventSink {
    /// `instance` is the replica's identity (pod name), shown as the reporting instance.
    /// Starts the task that sends the queue; it ends when the last clone is dropped.
    pub fn new(client: kube::Client, instance: &str) -> Self {
        Self::with_capacity(client, instance, QUEUED_EVENTS)
    }

    fn with_capacity(client: kube::Client, instance: &str, capacity: usize) -> Self {
        let reporter = Reporter {
            controller: "stevedore-controlplane".to_owned(),
            instance: Some(instance.to_owned()),
        };
        let (queue, queued) = mpsc::channel(capacity);
        tokio::spawn(send_queued(queued, client, reporter));
        Self {
            queue,
            dropped: Arc::default(),
        }
    }

    /// Events dropped so far because the queue was full.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    fn enqueue(&self, object: &ObjectReference, event: Event, unfolded: bool) {
        let reason = event.reason.clone();
        let queued = Queued {
            object: object.clone(),
            event,
            unfolded,
        };
        if self.queue.try_send(queued).is_err() {
            let dropped = self.dropped.fetch_add(1, Ordering::Relaxed) + 1;
            // Once per thousand, not once per Event: a flood is when this happens.
            if dropped % 1000 == 1 {
                tracing::warn!(reason, dropped, "the event queue is full; dropping events");
            }
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
        self.enqueue(object, event, true);
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
        self.enqueue(object, event, false);
    }
}

/// Sends the queued Events in order until every sink clone is gone.
async fn send_queued(mut queued: mpsc::Receiver<Queued>, client: kube::Client, reporter: Reporter) {
    let recorder = Recorder::new(client.clone(), reporter.clone());
    while let Some(Queued {
        object,
        event,
        unfolded,
    }) = queued.recv().await
    {
        let sent = if unfolded {
            // A recorder of its own has no earlier event to fold this one into.
            let recorder = Recorder::new(client.clone(), reporter.clone());
            recorder.publish(&event, &object).await
        } else {
            recorder.publish(&event, &object).await
        };
        if let Err(err) = sent {
            let reason = event.reason;
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
    use std::time::Duration;

    use k8s_openapi::api::core::v1::ObjectReference;
    use serde_json::json;

    use super::EventSink;
    use crate::workload::scripted_api::ScriptedApi;

    fn clone_set() -> ObjectReference {
        ObjectReference {
            api_version: Some("apps.kruise.io/v1alpha1".into()),
            kind: Some("CloneSet".into()),
            namespace: Some("ns".into()),
            name: Some("web".into()),
            ..ObjectReference::default()
        }
    }

    #[tokio::test]
    async fn events_are_sent_in_the_order_published() {
        let api = ScriptedApi::new(vec![(201, json!({})); 3]);
        let sink = EventSink::new(api.client(), "test");
        for pod in ["web-a", "web-b", "web-c"] {
            let note = format!("succeed to create pod {pod}");
            // About the pod, as the executor sends them: not folded into one series.
            let related = ObjectReference {
                kind: Some("Pod".into()),
                name: Some(pod.into()),
                ..ObjectReference::default()
            };
            (sink.publish_about(
                &clone_set(),
                Some(related),
                false,
                "SuccessfulCreate",
                "Create",
                note,
            ))
            .await;
        }
        for _ in 0..200 {
            if api.sent().len() == 3 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let notes: Vec<_> = api.sent().iter().map(|s| s.body["note"].clone()).collect();
        assert_eq!(
            notes,
            [
                "succeed to create pod web-a",
                "succeed to create pod web-b",
                "succeed to create pod web-c"
            ]
        );
        assert_eq!(sink.dropped(), 0);
    }

    #[tokio::test]
    async fn publishing_never_waits_for_the_apiserver_and_a_full_queue_drops() {
        // An apiserver that never answers: the sending task holds the first Event.
        let service = tower::service_fn(|_request| {
            std::future::pending::<
                Result<http::Response<kube::client::Body>, std::convert::Infallible>,
            >()
        });
        let sink = EventSink::with_capacity(kube::Client::new(service, "default"), "test", 2);
        let publishing = async {
            for n in 0..5 {
                sink.normal(
                    &clone_set(),
                    "SuccessfulDelete",
                    "Delete",
                    format!("pod {n}"),
                )
                .await;
                tokio::task::yield_now().await;
            }
        };
        tokio::time::timeout(Duration::from_secs(5), publishing)
            .await
            .expect("publishing waited for the apiserver");
        // One in flight, two queued, two dropped.
        assert_eq!(sink.dropped(), 2);
    }

    #[test]
    fn notes_are_cut_on_char_boundaries() {
        assert_eq!(super::truncate("abc".into(), 5), "abc");
        assert_eq!(super::truncate("abcdef".into(), 3), "abc");
        assert_eq!(super::truncate("aé".into(), 2), "a");
    }
}
