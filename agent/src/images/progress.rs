//! Progress of one pull, as its watchers see it, and its wire form.

use stevedore_proto::stevedore::agent::v1 as api;

/// Where a pull reports its progress.
pub trait Report: Sync {
    /// Applies `update` to the current progress and tells watchers.
    fn report(&self, update: &mut dyn FnMut(&mut Progress));
}

impl Report for tokio::sync::watch::Sender<Progress> {
    fn report(&self, update: &mut dyn FnMut(&mut Progress)) {
        self.send_modify(|progress| update(progress));
    }
}

/// The stage a pull is in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Phase {
    /// Waiting for a pull slot (the concurrency cap).
    #[default]
    Queued,
    Resolving,
    /// Bytes are still to come; the layers already in may be unpacking meanwhile.
    Downloading,
    /// Every blob is in: the layers left are unpacking and the records follow.
    Unpacking,
    Done,
}

/// Download progress of one blob.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlobProgress {
    pub digest: String,
    pub media_type: String,
    pub done: u64,
    pub total: u64,
}

/// A snapshot of a running pull.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Progress {
    pub phase: Phase,
    /// The config and then each layer, in manifest order.
    pub blobs: Vec<BlobProgress>,
}

impl Progress {
    pub fn bytes_done(&self) -> u64 {
        self.blobs.iter().map(|b| b.done).sum()
    }

    pub fn bytes_total(&self) -> u64 {
        self.blobs.iter().map(|b| b.total).sum()
    }

    /// The wire message; `image_id` and `repo_digest` are filled in by the caller
    /// once the pull is done.
    pub fn to_proto(&self) -> api::PullProgress {
        let phase = match self.phase {
            Phase::Queued => api::PullPhase::Queued,
            Phase::Resolving => api::PullPhase::Resolving,
            Phase::Downloading => api::PullPhase::Downloading,
            Phase::Unpacking => api::PullPhase::Unpacking,
            Phase::Done => api::PullPhase::Done,
        };
        api::PullProgress {
            phase: phase.into(),
            layers: self
                .blobs
                .iter()
                .map(|b| api::LayerProgress {
                    digest: b.digest.clone(),
                    media_type: b.media_type.clone(),
                    bytes_done: b.done,
                    bytes_total: b.total,
                })
                .collect(),
            bytes_done: self.bytes_done(),
            bytes_total: self.bytes_total(),
            image_id: String::new(),
            repo_digest: String::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn totals_sum_the_blobs() {
        let blob = |done, total| BlobProgress {
            digest: "sha256:x".into(),
            media_type: "m".into(),
            done,
            total,
        };
        let progress = Progress {
            phase: Phase::Downloading,
            blobs: vec![blob(1, 10), blob(5, 5)],
        };
        assert_eq!(progress.bytes_done(), 6);
        assert_eq!(progress.bytes_total(), 15);
        let wire = progress.to_proto();
        assert_eq!(wire.phase, i32::from(api::PullPhase::Downloading));
        assert_eq!(wire.layers.len(), 2);
        assert_eq!((wire.bytes_done, wire.bytes_total), (6, 15));
    }
}
