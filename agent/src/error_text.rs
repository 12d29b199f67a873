//! Errors as one line of text for the messages a person reads.

/// An error and its sources on one line (reqwest's top-level message alone hides the
/// cause, e.g. "connection refused").
pub(crate) fn error_chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
