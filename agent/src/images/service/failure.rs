//! How a pull ended when it did not succeed, classified once so that every caller
//! (the gRPC stream, the image list) reports the same code: invalid reference →
//! INVALID_ARGUMENT, missing repository or tag → NOT_FOUND, 401 → UNAUTHENTICATED,
//! 403 → PERMISSION_DENIED, registry or containerd unreachable → UNAVAILABLE, deadline
//! → DEADLINE_EXCEEDED, an image we cannot use → FAILED_PRECONDITION.

use std::time::Duration;

use tonic::{Code, Status};

use crate::images::{pipeline::PullError, registry::RegistryError};

/// The class of a failed pull; each maps to one gRPC code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    InvalidArgument,
    NotFound,
    Unauthenticated,
    PermissionDenied,
    Unavailable,
    DeadlineExceeded,
    FailedPrecondition,
    Cancelled,
    Internal,
}

impl FailureKind {
    pub fn code(self) -> Code {
        match self {
            Self::InvalidArgument => Code::InvalidArgument,
            Self::NotFound => Code::NotFound,
            Self::Unauthenticated => Code::Unauthenticated,
            Self::PermissionDenied => Code::PermissionDenied,
            Self::Unavailable => Code::Unavailable,
            Self::DeadlineExceeded => Code::DeadlineExceeded,
            Self::FailedPrecondition => Code::FailedPrecondition,
            Self::Cancelled => Code::Cancelled,
            Self::Internal => Code::Internal,
        }
    }
}

/// A failed pull: its class, a message for people, and the attempts it took.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct PullFailure {
    pub kind: FailureKind,
    pub message: String,
    pub attempts: u32,
}

impl PullFailure {
    pub fn from_error(error: &PullError, attempts: u32) -> Self {
        Self {
            kind: classify(error),
            message: error.to_string(),
            attempts,
        }
    }

    /// A pull that went `timeout` without writing a byte or beginning a step.
    pub fn stalled(timeout: Duration, attempts: u32) -> Self {
        Self {
            kind: FailureKind::DeadlineExceeded,
            message: format!("pull made no progress for {}s", timeout.as_secs()),
            attempts,
        }
    }

    pub fn cancelled() -> Self {
        Self {
            kind: FailureKind::Cancelled,
            message: "the agent is shutting down".to_owned(),
            attempts: 0,
        }
    }

    pub fn internal(message: &str) -> Self {
        Self {
            kind: FailureKind::Internal,
            message: message.to_owned(),
            attempts: 0,
        }
    }

    pub fn to_status(&self) -> Status {
        Status::new(self.kind.code(), self.message.clone())
    }
}

fn classify(error: &PullError) -> FailureKind {
    match error {
        PullError::Registry(err) => match err {
            RegistryError::NotFound { .. } => FailureKind::NotFound,
            RegistryError::Unauthorized { .. } => FailureKind::Unauthenticated,
            RegistryError::Forbidden { .. } => FailureKind::PermissionDenied,
            RegistryError::Unreachable { .. } => FailureKind::Unavailable,
            RegistryError::Server { status, .. } if *status >= 500 || *status == 429 => {
                FailureKind::Unavailable
            }
            RegistryError::Server { .. }
            | RegistryError::Protocol { .. }
            | RegistryError::TooLarge { .. }
            | RegistryError::Corrupt { .. }
            | RegistryError::Unverifiable { .. }
            | RegistryError::InsecureRealm { .. } => FailureKind::Internal,
            RegistryError::Hosts(_) => FailureKind::FailedPrecondition,
        },
        PullError::Store(err) => match err.code {
            Code::Unavailable | Code::ResourceExhausted | Code::Aborted => FailureKind::Unavailable,
            _ => FailureKind::Internal,
        },
        PullError::Format(_) => FailureKind::FailedPrecondition,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::images::store::StoreError;

    #[test]
    fn every_error_maps_to_its_code() {
        let url = || "u".to_owned();
        let cases: Vec<(PullError, Code)> = vec![
            (
                RegistryError::NotFound {
                    what: "manifest",
                    url: url(),
                }
                .into(),
                Code::NotFound,
            ),
            (
                RegistryError::Unauthorized { url: url() }.into(),
                Code::Unauthenticated,
            ),
            (
                RegistryError::Forbidden { url: url() }.into(),
                Code::PermissionDenied,
            ),
            (
                RegistryError::Unreachable {
                    url: url(),
                    detail: "refused".into(),
                }
                .into(),
                Code::Unavailable,
            ),
            (
                RegistryError::Server {
                    status: 502,
                    url: url(),
                }
                .into(),
                Code::Unavailable,
            ),
            (
                RegistryError::Server {
                    status: 400,
                    url: url(),
                }
                .into(),
                Code::Internal,
            ),
            (
                RegistryError::Corrupt {
                    reference: url(),
                    detail: String::new(),
                }
                .into(),
                Code::Internal,
            ),
            (
                StoreError {
                    operation: "x".into(),
                    code: Code::Unavailable,
                    message: String::new(),
                }
                .into(),
                Code::Unavailable,
            ),
            (
                StoreError {
                    operation: "x".into(),
                    code: Code::DataLoss,
                    message: String::new(),
                }
                .into(),
                Code::Internal,
            ),
            (
                PullError::Format("no linux/amd64".into()),
                Code::FailedPrecondition,
            ),
        ];
        for (error, code) in cases {
            let failure = PullFailure::from_error(&error, 2);
            assert_eq!(failure.to_status().code(), code, "{error}");
            assert_eq!(failure.attempts, 2);
        }
        assert_eq!(
            PullFailure::stalled(Duration::from_secs(5), 1)
                .to_status()
                .code(),
            Code::DeadlineExceeded
        );
    }
}
