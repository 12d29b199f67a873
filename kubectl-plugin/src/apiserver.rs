//! Errors from the apiserver as a person reads them: what the plugin was doing and the
//! apiserver's own message, not the client's debug dump of its Status.

/// `doing` (a phrase such as "reading cloneset.apps.kruise.io/web") with the apiserver's
/// message quoted, or the client's error when there is no apiserver answer.
pub fn error(doing: impl std::fmt::Display, error: kube::Error) -> anyhow::Error {
    match error {
        kube::Error::Api(status) if !status.message.is_empty() => {
            anyhow::anyhow!("{doing}: the apiserver said \"{}\"", status.message)
        }
        other => anyhow::Error::new(other).context(doing.to_string()),
    }
}
