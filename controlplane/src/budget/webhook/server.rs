//! The webhook's HTTPS endpoint: a serving certificate from the webhook CA (a Secret
//! the first replica creates), the CA put into the ValidatingWebhookConfiguration, and
//! `POST /validate-pod-disruption` answered from the shared caches and budgets.

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
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use kube::runtime::reflector::ObjectRef;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::review::{AdmissionReview, Disruption, Exempt, Screen, Verdict, refusal, respond};
use crate::budget::admission::{KubeBudgets, Recording};
use crate::caches::Stores;
use crate::certs::{AuthorityError, CaSecretError};
use crate::controller::api_error::{ApiError, api_error, status_code};
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
    /// The ValidatingWebhookConfiguration whose `caBundle` is set to the CA.
    pub configuration: String,
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

/// Makes the serving certificate, trusts its CA in the webhook configuration, and
/// returns the server, which runs until `shutdown`.
pub async fn start(
    client: kube::Client,
    stores: Stores,
    config: WebhookConfig,
    shutdown: CancellationToken,
) -> Result<impl Future<Output = ()> + Send + 'static, WebhookError> {
    let secrets = Api::namespaced(client.clone(), &config.namespace);
    let authority = crate::certs::load_or_create(&secrets, &config.ca_secret).await?;
    let names = service_names(&config.service, &config.namespace);
    let identity = authority.issue_server(&names, SystemTime::now())?;
    trust_ca(&client, &config.configuration, authority.cert_pem()).await?;
    let handler = Arc::new(Handler {
        client,
        stores,
        exempt: config.exempt,
    });
    let router = Router::new()
        .route(REVIEW_PATH, post(review))
        .with_state(handler);
    let tls = server_config(&identity.cert_pem, &identity.key_pem)?;
    let addr = config.addr;
    let tcp = TcpListener::bind(addr)
        .await
        .map_err(|source| WebhookError::Serve { addr, source })?;
    let listener =
        TlsListener::new(tcp, tls).map_err(|source| WebhookError::Serve { addr, source })?;
    tracing::info!(%addr, "serving the PodUnavailableBudget admission webhook");
    Ok(async move {
        let served = axum::serve(listener, router)
            .with_graceful_shutdown(shutdown.cancelled_owned())
            .await;
        if let Err(err) = served {
            tracing::error!(%addr, error = %err, "the admission webhook stopped serving");
        }
    })
}

/// The DNS names the apiserver may use for the Service.
fn service_names(service: &str, namespace: &str) -> Vec<String> {
    vec![
        format!("{service}.{namespace}.svc"),
        format!("{service}.{namespace}.svc.cluster.local"),
    ]
}

/// Sets every webhook's `caBundle` in `name` to `ca_pem` (left alone when it is so
/// already). A configuration that is not installed is a warning, not an error: the
/// webhook then simply is not called.
async fn trust_ca(client: &kube::Client, name: &str, ca_pem: &str) -> Result<(), ApiError> {
    let api: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let reading = || format!("Reading the ValidatingWebhookConfiguration {name}");
    let Some(mut configuration) = api.get_opt(name).await.map_err(api_error(reading()))? else {
        tracing::warn!(
            configuration = name,
            "the ValidatingWebhookConfiguration is not installed: deletes and evictions from outside are not checked against PodUnavailableBudgets"
        );
        return Ok(());
    };
    let bundle = k8s_openapi::ByteString(ca_pem.as_bytes().to_vec());
    let webhooks = configuration.webhooks.get_or_insert_with(Vec::new);
    if webhooks
        .iter()
        .all(|w| w.client_config.ca_bundle.as_ref() == Some(&bundle))
    {
        return Ok(());
    }
    for webhook in webhooks.iter_mut() {
        webhook.client_config.ca_bundle = Some(bundle.clone());
    }
    match api
        .replace(name, &PostParams::default(), &configuration)
        .await
    {
        Ok(_) => Ok(()),
        // Another replica wrote it meanwhile; the CA is the same (one Secret).
        Err(err) if status_code(&err) == Some(409) => Ok(()),
        Err(err) => Err(api_error(format!(
            "Setting the caBundle of the ValidatingWebhookConfiguration {name}"
        ))(err)),
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
