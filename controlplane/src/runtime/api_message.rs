//! The sentence a person reads for a failed apiserver call: the apiserver's own `message`,
//! never a Debug dump of the status. Here, below every controller, so the runtime's own
//! calls (its Deployment lookup, the Lease) say it the same way; `controller::api_error`
//! wraps it with what the controller was doing.

/// The sentence to show for `err`: the apiserver's message when it answered, otherwise the
/// client's own description (a connection refused, a timeout).
pub fn api_message(err: &kube::Error) -> String {
    match err {
        kube::Error::Api(status) if !status.message.is_empty() => status.message.clone(),
        kube::Error::Api(status) if !status.reason.is_empty() => {
            format!("the apiserver answered {} {}", status.code, status.reason)
        }
        kube::Error::Api(status) => format!("the apiserver answered {}", status.code),
        other => other.to_string(),
    }
}
