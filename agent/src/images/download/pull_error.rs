//! Why a pull attempt failed: defined beside the downloads, below the pull and its
//! pipeline, which all produce it, so none of them imports the module that calls it.

use stevedore_parsers::oci::FormatError;

use crate::images::{registry::RegistryError, store::StoreError};

/// Why a pull attempt failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum PullError {
    #[error(transparent)]
    Registry(#[from] RegistryError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{0}")]
    Format(String),
}

impl From<FormatError> for PullError {
    fn from(err: FormatError) -> Self {
        Self::Format(err.to_string())
    }
}

impl PullError {
    /// Worth another attempt (network, registry 5xx, containerd busy).
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Registry(err) => err.is_retryable(),
            Self::Store(err) => err.is_retryable(),
            Self::Format(_) => false,
        }
    }
}
