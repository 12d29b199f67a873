//! Content download: one blob from the registry into containerd's content store
//! (`blob`), and why a pull failed (`pull_error`), defined here, below the pipeline
//! and the pull that also produce it.

mod blob;
mod pull_error;

pub use blob::{Arrival, PARALLEL_BLOBS, Target, download, hold_existing_blob};
pub use pull_error::PullError;
