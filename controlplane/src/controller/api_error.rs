//! Errors of calls to the apiserver as people read them: the apiserver's own `message`
//! (`Pod "web-x" is invalid: spec.containers[0].image: Required value`), never a Debug
//! dump of the status. Every controller's events, conditions and logs go through here.

pub use crate::runtime::api_message::api_message;

/// A failed apiserver call: what the controller was doing, and the apiserver's message.
#[derive(Debug, thiserror::Error)]
#[error("{action}: {message}")]
pub struct ApiError {
    pub action: String,
    pub message: String,
    #[source]
    pub source: kube::Error,
}

impl ApiError {
    /// The HTTP status code the apiserver answered with, if it answered.
    pub fn code(&self) -> Option<u16> {
        status_code(&self.source)
    }
}

/// Wraps a failed call with what the controller was doing, for `map_err`.
pub fn api_error(action: impl Into<String>) -> impl FnOnce(kube::Error) -> ApiError {
    let action = action.into();
    move |source| ApiError {
        action,
        message: api_message(&source),
        source,
    }
}

/// The HTTP status code of an apiserver answer.
pub fn status_code(err: &kube::Error) -> Option<u16> {
    match err {
        kube::Error::Api(status) => Some(status.code),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use kube::core::Status;

    use super::*;

    fn refused(code: u16, reason: &str, message: &str) -> kube::Error {
        kube::Error::Api(Status::failure(message, reason).with_code(code).boxed())
    }

    #[test]
    fn quotes_the_apiserver_message_not_a_debug_dump() {
        let message = "Pod \"web-x\" is invalid: spec.containers[0].image: Required value";
        let err: ApiError = api_error("creating pod web-x")(refused(422, "Invalid", message));
        let shown = err.to_string();
        assert_eq!(shown, format!("creating pod web-x: {message}"));
        assert!(!shown.contains("Status {"), "{shown}");
        assert_eq!(err.code(), Some(422));
    }

    #[test]
    fn falls_back_to_reason_and_code() {
        assert_eq!(
            api_message(&refused(503, "ServiceUnavailable", "")),
            "the apiserver answered 503 ServiceUnavailable"
        );
        assert_eq!(
            api_message(&refused(500, "", "")),
            "the apiserver answered 500"
        );
    }
}
