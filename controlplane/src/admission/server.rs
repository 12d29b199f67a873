//! The control plane's HTTPS endpoint for the apiserver's webhook calls: a serving
//! certificate from the webhook CA (a Secret the first replica creates), the CA put where
//! the apiserver looks for it (`trust`), `POST /convert` (CRD conversion,
//! `crate::conversion`) and the admission routes each webhook brings (the
//! PodUnavailableBudget's `budget::webhook`, the ContainerRecreateRequest's
//! `containerrecreate::webhook`).
//!
//! With `--webhook-client-ca` the admission routes answer only a caller whose client
//! certificate that CA signed (`caller`): the apiserver, given an `AdmissionConfiguration`
//! that presents one. `/convert` stays open to any caller: the apiserver's CRD conversion
//! client presents no client certificate whatever its configuration, and a conversion
//! only translates the objects it is sent, changing nothing.
//!
//! `/convert` is always served: the PodUnavailableBudget CRD converts through it whenever
//! its `conversion.strategy` is `Webhook`, so turning an admission webhook off must not
//! stop `v1beta1` reads.

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::SystemTime;

use axum::Router;
use axum::body::Bytes;
use axum::extract::connect_info::Connected;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::serve::IncomingStream;
use kube::api::Api;
use kube::core::conversion::ConversionReview;
use rustls::pki_types::CertificateDer;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::caller::{CallerPolicy, admit_caller};
use super::trust::{ServiceRef, WebhookConfiguration, trust_in_configuration, trust_in_conversion};
use crate::certs::{AuthorityError, CaSecretError};
use crate::controller::api_error::ApiError;
use crate::conversion::CONVERSION_PATH;
use crate::runtime::tls_listener::{
    ClientRoots, TlsError, TlsListener, server_config, verified_peer,
};

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
    /// The webhook configurations whose `caBundle` is set to the CA: those of the
    /// admission routes this replica serves.
    pub configurations: Vec<WebhookConfiguration>,
    /// The CRD whose conversion webhook is pointed at the Service and trusts the CA.
    pub conversion_crd: String,
    /// The callers whose reviews are answered; `None` answers any caller.
    pub callers: Option<Callers>,
}

/// The apiserver's webhook client, as `--webhook-client-ca` and `--webhook-client-names`
/// describe it.
#[derive(Clone, Debug)]
pub struct Callers {
    /// PEM bundle of the CA that signs the apiserver's webhook client certificate.
    pub ca_file: PathBuf,
    pub policy: CallerPolicy,
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
    #[error("reading the webhook client CA {path} (--webhook-client-ca): {source}")]
    ClientCa {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the webhook client CA {path} (--webhook-client-ca): {source}")]
    ClientRoots {
        path: PathBuf,
        #[source]
        source: TlsError,
    },
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
    // A client CA that cannot be read stops the start before anything is written.
    let roots = match &config.callers {
        Some(callers) => Some(client_roots(&callers.ca_file).await?),
        None => None,
    };
    let secrets = Api::namespaced(client.clone(), &config.namespace);
    let authority =
        crate::certs::load_or_create(&secrets, &config.ca_secret, config.ca_owner.as_ref()).await?;
    let names = service_names(&config.service, &config.namespace);
    let identity = authority.issue_server(&names, SystemTime::now())?;
    for configuration in &config.configurations {
        trust_in_configuration(client, configuration, authority.cert_pem()).await?;
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
    let tls = server_config(&identity.cert_pem, &identity.key_pem, roots.as_ref())?;
    let addr = config.addr;
    let tcp = TcpListener::bind(addr)
        .await
        .map_err(|source| WebhookError::Serve { addr, source })?;
    let listener =
        TlsListener::new(tcp, tls).map_err(|source| WebhookError::Serve { addr, source })?;
    Ok(Prepared { listener, config })
}

impl Prepared {
    /// The server, answering until `shutdown`: `/convert` and the `admission` routes
    /// (each webhook's, merged), the latter only for the callers `--webhook-client-ca`
    /// admits.
    pub fn serve(
        self,
        admission: Router,
        shutdown: CancellationToken,
    ) -> impl Future<Output = ()> + Send + 'static {
        let Prepared { listener, config } = self;
        let addr = config.addr;
        let authenticated = config.callers.is_some();
        let router = routes(admission, config.callers.map(|c| c.policy));
        let configurations: Vec<&str> = (config.configurations.iter())
            .map(WebhookConfiguration::name)
            .collect();
        tracing::info!(
            %addr,
            ?configurations,
            callers_authenticated = authenticated,
            "serving the webhooks (CRD conversion and admission)"
        );
        async move {
            let app = router.into_make_service_with_connect_info::<Caller>();
            let served = axum::serve(listener, app)
                .with_graceful_shutdown(shutdown.cancelled_owned())
                .await;
            if let Err(err) = served {
                tracing::error!(%addr, error = %err, "the webhook stopped serving");
            }
        }
    }
}

/// The CA bundle of `--webhook-client-ca`. Read once at start: a new CA takes a restart
/// (`kubectl rollout restart`), as the apiserver's own new client certificate does.
async fn client_roots(path: &PathBuf) -> Result<ClientRoots, WebhookError> {
    let pem = tokio::fs::read_to_string(path)
        .await
        .map_err(|source| WebhookError::ClientCa {
            path: path.clone(),
            source,
        })?;
    ClientRoots::from_pem(&pem).map_err(|source| WebhookError::ClientRoots {
        path: path.clone(),
        source,
    })
}

/// What a connection's TLS handshake established about its client.
#[derive(Clone, Debug)]
pub struct Caller {
    pub addr: SocketAddr,
    /// The client certificate it presented, verified against `--webhook-client-ca`.
    pub certificate: Option<CertificateDer<'static>>,
}

impl Connected<IncomingStream<'_, TlsListener>> for Caller {
    fn connect_info(stream: IncomingStream<'_, TlsListener>) -> Self {
        Caller {
            addr: *stream.remote_addr(),
            certificate: verified_peer(stream.io()),
        }
    }
}

/// Answers a request only for a caller `policy` admits (`caller::admit_caller`); others
/// get 403 with the reason.
async fn require_caller(
    State(policy): State<Option<Arc<CallerPolicy>>>,
    ConnectInfo(caller): ConnectInfo<Caller>,
    request: Request,
    next: Next,
) -> Response {
    let presented = caller.certificate.as_ref().map(|c| c.as_ref());
    match admit_caller(policy.as_deref(), presented) {
        Ok(()) => next.run(request).await,
        Err(message) => {
            tracing::warn!(peer = %caller.addr, %message, "refused a review from an unknown caller");
            (StatusCode::FORBIDDEN, message).into_response()
        }
    }
}

/// The routes: `/convert` for anyone, the admission routes for the callers `policy`
/// admits.
fn routes(admission: Router, policy: Option<CallerPolicy>) -> Router {
    let guard = middleware::from_fn_with_state(policy.map(Arc::new), require_caller);
    Router::new()
        .route(CONVERSION_PATH, post(convert))
        .merge(admission.route_layer(guard))
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

#[cfg(test)]
#[path = "server_tests.rs"]
mod server_tests;

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
