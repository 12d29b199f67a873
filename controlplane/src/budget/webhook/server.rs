//! The webhook server's HTTPS endpoint: a serving certificate from the webhook CA (a
//! Secret the first replica creates), the CA put where the apiserver looks for it
//! (`trust`), and two routes: `POST /validate-pod-disruption` answered from the shared
//! caches and budgets, and `POST /convert` (CRD conversion, `crate::conversion`).
//!
//! `/convert` is always served: the PodUnavailableBudget CRD converts through it whenever
//! its `conversion.strategy` is `Webhook`, so turning the admission webhook off
//! (`--controllers *,-podunavailablebudget-webhook`) must not stop `v1beta1` reads. The
//! switch leaves out the admission route (and the ValidatingWebhookConfiguration's
//! `caBundle`) only; the configuration's `failurePolicy: Ignore` then lets deletes through.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::SystemTime;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use kube::core::conversion::ConversionReview;
use kube::runtime::reflector::ObjectRef;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::review::{AdmissionReview, Disruption, Exempt, Screen, Verdict, refusal, respond};
use super::trust::{ServiceRef, trust_in_conversion, trust_in_validating_configuration};
use crate::budget::admission::{KubeBudgets, Recording};
use crate::caches::Stores;
use crate::certs::{AuthorityError, CaSecretError};
use crate::controller::api_error::ApiError;
use crate::conversion::CONVERSION_PATH;
use crate::runtime::tls_listener::{TlsError, TlsListener, server_config};
use crate::workload::budget::{Admission, DisruptionKind};

/// The path the ValidatingWebhookConfiguration sends reviews to.
pub const REVIEW_PATH: &str = "/validate-pod-disruption";

/// Where and as what the webhook serves.
#[derive(Clone, Debug)]
pub struct WebhookConfig {
    pub addr: SocketAddr,
    /// Namespace of the Service, the CA Secret and the control plane.
    pub namespace: String,
    /// The Service the apiserver calls (its DNS names go into the certificate).
    pub service: String,
    /// The Secret keeping the webhook CA.
    pub ca_secret: String,
    /// Owner the CA Secret is made with (the control plane's Deployment).
    pub ca_owner: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference>,
    /// The ValidatingWebhookConfiguration whose `caBundle` is set to the CA.
    pub configuration: String,
    /// The CRD whose conversion webhook is pointed at the Service and trusts the CA.
    pub conversion_crd: String,
    /// Whether pod deletes and evictions are reviewed (`podunavailablebudget-webhook`).
    pub review_disruptions: bool,
    pub exempt: Exempt,
}

/// Why the webhook could not start.
#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    #[error("the webhook CA: {0}")]
    Ca(#[from] CaSecretError),
    #[error("the webhook's serving certificate: {0}")]
    Certificate(#[from] AuthorityError),
    #[error(transparent)]
    Api(#[from] ApiError),
    #[error("the webhook's TLS configuration: {0}")]
    Tls(#[from] TlsError),
    #[error("listening for the webhook on {addr}: {source}")]
    Serve {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
}

/// A webhook server that is trusted and listening, not yet answering.
pub struct Prepared {
    listener: TlsListener,
    config: WebhookConfig,
}

/// Makes the serving certificate, trusts its CA where the apiserver calls the server,
/// and listens. Done before the control plane reports ready, so the apiserver can
/// convert as soon as the Service sends it here; calls wait in the listen queue until
/// [`Prepared::serve`].
pub async fn prepare(
    client: &kube::Client,
    config: WebhookConfig,
) -> Result<Prepared, WebhookError> {
    let secrets = Api::namespaced(client.clone(), &config.namespace);
    let authority =
        crate::certs::load_or_create(&secrets, &config.ca_secret, config.ca_owner.as_ref()).await?;
    let names = service_names(&config.service, &config.namespace);
    let identity = authority.issue_server(&names, SystemTime::now())?;
    if config.review_disruptions {
        trust_in_validating_configuration(client, &config.configuration, authority.cert_pem())
            .await?;
    }
    let service = ServiceRef {
        name: &config.service,
        namespace: &config.namespace,
    };
    trust_in_conversion(
        client,
        &config.conversion_crd,
        service,
        authority.cert_pem(),
    )
    .await?;
    let tls = server_config(&identity.cert_pem, &identity.key_pem)?;
    let addr = config.addr;
    let tcp = TcpListener::bind(addr)
        .await
        .map_err(|source| WebhookError::Serve { addr, source })?;
    let listener =
        TlsListener::new(tcp, tls).map_err(|source| WebhookError::Serve { addr, source })?;
    Ok(Prepared { listener, config })
}

impl Prepared {
    /// The server, answering until `shutdown`.
    pub fn serve(
        self,
        client: kube::Client,
        stores: Stores,
        shutdown: CancellationToken,
    ) -> impl Future<Output = ()> + Send + 'static {
        let Prepared { listener, config } = self;
        let addr = config.addr;
        let mut router = Router::new().route(CONVERSION_PATH, post(convert));
        if config.review_disruptions {
            let handler = Arc::new(Handler {
                client,
                stores,
                exempt: config.exempt,
            });
            router = router.route(REVIEW_PATH, post(review).with_state(handler));
        }
        tracing::info!(
            %addr,
            review_disruptions = config.review_disruptions,
            "serving the webhook (CRD conversion, PodUnavailableBudget admission)"
        );
        async move {
            let served = axum::serve(listener, router)
                .with_graceful_shutdown(shutdown.cancelled_owned())
                .await;
            if let Err(err) = served {
                tracing::error!(%addr, error = %err, "the webhook stopped serving");
            }
        }
    }
}

/// The DNS names the apiserver may use for the Service.
fn service_names(service: &str, namespace: &str) -> Vec<String> {
    vec![
        format!("{service}.{namespace}.svc"),
        format!("{service}.{namespace}.svc.cluster.local"),
    ]
}

/// A ConversionReview answered (`crate::conversion`); a body that is none is a 400.
async fn convert(body: Bytes) -> Response {
    let review: ConversionReview = match serde_json::from_slice(&body) {
        Ok(review) => review,
        Err(err) => {
            let message = format!("The request is not a ConversionReview: {err}.");
            return (StatusCode::BAD_REQUEST, message).into_response();
        }
    };
    let answer = crate::conversion::answer(review);
    if let Some(failure) = answer.response.as_ref().filter(|r| r.result.is_failure()) {
        tracing::warn!(message = %failure.result.message, "refused a conversion");
    }
    match serde_json::to_vec(&answer) {
        Ok(body) => ([(header::CONTENT_TYPE, "application/json")], body).into_response(),
        Err(err) => {
            let message = format!("The ConversionReview answer could not be written: {err}.");
            (StatusCode::INTERNAL_SERVER_ERROR, message).into_response()
        }
    }
}

/// What a review is answered from.
struct Handler {
    client: kube::Client,
    stores: Stores,
    exempt: Exempt,
}

async fn review(State(handler): State<Arc<Handler>>, body: Bytes) -> Response {
    let review: AdmissionReview = match serde_json::from_slice(&body) {
        Ok(review) => review,
        Err(err) => {
            let message = format!("The request is not an AdmissionReview: {err}.");
            return (StatusCode::BAD_REQUEST, message).into_response();
        }
    };
    let Some(request) = review.request else {
        let message = "The AdmissionReview has no request.";
        return (StatusCode::BAD_REQUEST, message).into_response();
    };
    let verdict = match super::review::screen(&request, &handler.exempt) {
        Screen::Pass(_) => Verdict::Allow,
        Screen::Check(disruption) => handler.decide(&disruption).await,
    };
    if let Verdict::Deny(message) = &verdict {
        tracing::info!(
            namespace = request.namespace.as_deref().unwrap_or(""),
            pod = %request.name,
            user = %request.user_info.username,
            %message,
            "refused a disruption"
        );
    }
    let body = respond(&request.uid, &verdict).to_string();
    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
}

impl Handler {
    async fn decide(&self, disruption: &Disruption) -> Verdict {
        let pod = match &disruption.old {
            Some(pod) => Some((**pod).clone()),
            None => self.pod(disruption).await,
        };
        // A pod that is gone has nothing left to disrupt; the apiserver says so itself.
        let Some(pod) = pod else {
            return Verdict::Allow;
        };
        let budgets = KubeBudgets {
            client: &self.client,
            stores: &self.stores,
            namespace: &disruption.namespace,
        };
        let recording = if disruption.dry_run {
            Recording::DryRun
        } else {
            Recording::Record
        };
        match budgets
            .admit_pod(&pod, DisruptionKind::Delete, recording)
            .await
        {
            Ok(Admission::Allowed { .. }) => Verdict::Allow,
            Ok(Admission::Held(message)) => Verdict::Deny(refusal(disruption, &message)),
            // Refused rather than let through unchecked: the caller tries again.
            Err(err) => Verdict::Deny(refusal(
                disruption,
                &format!("its PodUnavailableBudgets could not be checked: {err}"),
            )),
        }
    }

    /// The pod an eviction names: from the cache, or read when the cache lags.
    async fn pod(&self, disruption: &Disruption) -> Option<Pod> {
        let key = ObjectRef::new(&disruption.pod).within(&disruption.namespace);
        if let Some(pod) = self.stores.pods.get(&key) {
            return Some((*pod).clone());
        }
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &disruption.namespace);
        api.get_opt(&disruption.pod).await.ok().flatten()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    async fn post_convert(body: &str) -> (StatusCode, String) {
        let response = convert(Bytes::from(body.to_owned())).await;
        let status = response.status();
        let body = axum::body::to_bytes(response.into_body(), 1 << 20)
            .await
            .unwrap_or_default();
        (status, String::from_utf8_lossy(&body).into_owned())
    }

    #[tokio::test]
    async fn a_conversion_review_is_answered_as_json() {
        let review = json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "ConversionReview",
            "request": { "uid": "u1", "desiredAPIVersion": "policy.kruise.io/v1beta1", "objects": [] },
        });
        let (status, body) = post_convert(&review.to_string()).await;
        assert_eq!(status, StatusCode::OK);
        let answer: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(answer["response"]["uid"], "u1");
        assert_eq!(answer["response"]["result"]["status"], "Success");
    }

    #[tokio::test]
    async fn a_body_that_is_no_conversion_review_is_a_bad_request() {
        let (status, body) = post_convert("{").await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert!(
            body.starts_with("The request is not a ConversionReview"),
            "{body}"
        );
    }
}
