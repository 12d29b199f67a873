//! What every trigger loop does with one receive from a watch's broadcast: queue the keys
//! the change maps to, queue every key when the receiver fell behind (events were lost),
//! and stop when the watch is gone.

use std::sync::Arc;

use tokio::sync::broadcast::error::RecvError;

use super::queue::WorkQueue;

/// One receive, mapped to keys.
#[derive(Debug, PartialEq, Eq)]
pub enum Received<K> {
    Keys(Vec<K>),
    /// The receiver fell behind and missed events.
    Lagged,
    /// The watch is gone.
    Closed,
}

/// Maps a received object with `map`.
pub fn received<T, K>(
    received: Result<Arc<T>, RecvError>,
    map: impl FnOnce(&Arc<T>) -> Vec<K>,
) -> Received<K> {
    match received {
        Ok(object) => Received::Keys(map(&object)),
        Err(RecvError::Lagged(_)) => Received::Lagged,
        Err(RecvError::Closed) => Received::Closed,
    }
}

impl<K: Clone + Eq + std::hash::Hash + Send + 'static> Received<K> {
    /// Queues the keys, or every key of `kind` (`all`) after a lag; `false` once the
    /// watch is closed and the loop should end.
    pub fn queue(self, queue: &WorkQueue<K>, kind: &str, all: impl FnOnce() -> Vec<K>) -> bool {
        let keys = match self {
            Self::Keys(keys) => keys,
            Self::Lagged => {
                tracing::warn!(kind, "fell behind the watch events; queueing every object");
                all()
            }
            Self::Closed => return false,
        };
        keys.into_iter().for_each(|key| queue.add(key));
        true
    }
}

#[cfg(test)]
mod tests {
    use tokio::sync::broadcast;

    use super::*;
    use crate::controller::queue::Backoff;

    #[tokio::test]
    async fn keys_are_queued_a_lag_queues_everything_and_a_close_ends() {
        let (tx, mut rx) = broadcast::channel::<Arc<&str>>(1);
        tx.send(Arc::new("a")).expect("send");
        let got = received(rx.recv().await, |s| vec![s.to_string()]);
        assert_eq!(got, Received::Keys(vec!["a".to_owned()]));
        let queue = WorkQueue::new(Backoff::default());
        assert!(got.queue(&queue, "Toy", || unreachable!("no lag")));

        tx.send(Arc::new("b")).expect("send");
        tx.send(Arc::new("c")).expect("send");
        let got = received(rx.recv().await, |s| vec![s.to_string()]);
        assert_eq!(got, Received::Lagged);
        assert!(got.queue(&queue, "Toy", || vec!["x".to_owned(), "y".to_owned()]));
        let mut queued = Vec::new();
        for _ in 0..3 {
            queued.push(queue.next().await.expect("a key"));
        }
        queued.sort();
        assert_eq!(queued, ["a", "x", "y"]);

        drop(tx);
        let _ = rx.recv().await; // "c"
        let got = received(rx.recv().await, |s| vec![s.to_string()]);
        assert!(!got.queue(&queue, "Toy", Vec::new));
    }
}
