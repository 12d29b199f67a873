//! The CRD conversion webhook's answers (pure): a `ConversionReview`
//! (`apiextensions.k8s.io/v1`) in, the same out, with every object in
//! `desiredAPIVersion` or a `Failure` whose message names the object and the field.
//!
//! Kind-agnostic here; each kind with versions that differ has its converter in a
//! module of its own ([`podunavailablebudget`], the only one: the other kinds' versions
//! share one schema and convert with `conversion: None`, `versions.rs`). The HTTPS
//! endpoint is the control plane's admission webhook server (`budget/webhook/server.rs`).

pub mod podunavailablebudget;

use kube::core::Status;
use kube::core::conversion::{ConversionRequest, ConversionResponse, ConversionReview};
use serde_json::Value;

/// The path the CRDs' `conversion.webhook.clientConfig.service` sends reviews to.
pub const CONVERSION_PATH: &str = "/convert";

/// The API group of the one kind converted here.
pub const POLICY_GROUP: &str = "policy.kruise.io";
/// The kind converted here.
pub const BUDGET_KIND: &str = "PodUnavailableBudget";
/// The version the apiserver stores budgets in.
pub const ALPHA: &str = "policy.kruise.io/v1alpha1";
/// The version with OpenKruise 1.9's spec fields.
pub const BETA: &str = "policy.kruise.io/v1beta1";

/// Why one object could not be converted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConversionError {
    #[error("the object is not a JSON object")]
    NotAnObject,
    #[error("{field} is missing or not a string")]
    MissingString { field: &'static str },
    #[error("{field} must be {expected}")]
    Malformed { field: String, expected: String },
    #[error(
        "kind {kind} in {api_version} is not converted by this webhook; it converts {BUDGET_KIND} between {ALPHA} and {BETA}"
    )]
    UnknownKind { kind: String, api_version: String },
    #[error(
        "desiredAPIVersion {0:?} is not served for {BUDGET_KIND}; it converts to {ALPHA} or {BETA}"
    )]
    UnknownDesiredVersion(String),
}

/// The answer to `review`: every object converted, or a failure naming the first that
/// could not be.
pub fn answer(review: ConversionReview) -> ConversionReview {
    let request = match ConversionRequest::from_review(review) {
        Ok(request) => request,
        Err(_) => {
            let status = Status::failure("The ConversionReview has no request.", "BadRequest");
            return ConversionResponse::invalid(status).into_review();
        }
    };
    let desired = request.desired_api_version.clone();
    let converted: Result<Vec<Value>, String> = request
        .objects
        .iter()
        .map(|object| {
            convert(object.clone(), &desired).map_err(|err| describe(object, &desired, &err))
        })
        .collect();
    let response = ConversionResponse::for_request(request);
    match converted {
        Ok(objects) => response.success(objects),
        Err(message) => response.failure(Status::failure(&message, "Invalid")),
    }
    .into_review()
}

/// `object` in `desired`; unchanged when it is already.
pub fn convert(object: Value, desired: &str) -> Result<Value, ConversionError> {
    if desired != ALPHA && desired != BETA {
        return Err(ConversionError::UnknownDesiredVersion(desired.to_owned()));
    }
    let api_version = string(&object, "apiVersion")?;
    let kind = string(&object, "kind")?;
    if kind != BUDGET_KIND || (api_version != ALPHA && api_version != BETA) {
        return Err(ConversionError::UnknownKind {
            kind: kind.to_owned(),
            api_version: api_version.to_owned(),
        });
    }
    match (api_version == ALPHA, desired == ALPHA) {
        (true, false) => podunavailablebudget::to_v1beta1(object, desired),
        (false, true) => podunavailablebudget::to_v1alpha1(object, desired),
        _ => Ok(object),
    }
}

fn string<'a>(object: &'a Value, field: &'static str) -> Result<&'a str, ConversionError> {
    if !object.is_object() {
        return Err(ConversionError::NotAnObject);
    }
    object
        .get(field)
        .and_then(Value::as_str)
        .ok_or(ConversionError::MissingString { field })
}

/// The sentence a failure carries: which object, to what, and why.
fn describe(object: &Value, desired: &str, err: &ConversionError) -> String {
    let name = |field: &str| {
        object
            .pointer(&format!("/metadata/{field}"))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    };
    let (namespace, name) = (name("namespace"), name("name"));
    let who = match (namespace.is_empty(), name.is_empty()) {
        (_, true) => "an object".to_owned(),
        (true, false) => name,
        (false, false) => format!("{namespace}/{name}"),
    };
    format!("Converting {who} to {desired} failed: {err}.")
}

#[cfg(test)]
mod tests;
