//! The signer loop: watches the CSRs of `stevedore.dev/agent-serving` and, while this
//! replica leads (the shared [`runner`](crate::controller::runner) gates it), carries out
//! [`next_step`] on each: the Approved or Denied condition through `/approval`, the
//! certificate or the Failed condition through `/status`. Every write is conditional on
//! the object's resourceVersion, so a write computed from a stale cache fails with 409
//! and is retried with backoff from the newer object.

use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::SystemTime;

use futures::StreamExt as _;
use k8s_openapi::ByteString;
use k8s_openapi::api::certificates::v1::{
    CertificateSigningRequest, CertificateSigningRequestCondition,
};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::PostParams;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Api, ResourceExt as _};
use tokio_util::sync::CancellationToken;

use super::approval::AGENT_SERVING_SIGNER;
use super::authority::Authority;
use super::decision::{Step, next_step, requester_node};
use crate::controller::api_error::{ApiError, api_error};
use crate::controller::queue::WorkQueue;
use crate::controller::runner::{Outcome, Reconciler};

/// Reason of the Approved condition the signer sets.
const APPROVED_REASON: &str = "AgentNodeVerified";
/// Reason of the Denied condition the signer sets.
const DENIED_REASON: &str = "AgentRequestRefused";
/// Reason of the Failed condition the signer sets.
const FAILED_REASON: &str = "SigningFailed";

/// Why one CSR could not be settled this time (it is retried).
#[derive(Debug, thiserror::Error)]
pub enum SignerError {
    #[error(transparent)]
    Api(#[from] ApiError),
}

/// Approves, denies and signs the agents' serving-certificate CSRs.
pub struct CsrSigner {
    csrs: Api<CertificateSigningRequest>,
    nodes: Api<Node>,
    store: Store<CertificateSigningRequest>,
    synced: Arc<AtomicBool>,
    authority: Arc<Authority>,
    agent_user: String,
}

impl CsrSigner {
    /// The signer, approving for `agent_user` (the agents' service-account user name) and
    /// signing with `authority`, and the watch that fills its cache and queues each CSR
    /// of our signer on `queue` as it changes; run the watch until `shutdown`.
    pub fn new(
        client: kube::Client,
        authority: Arc<Authority>,
        agent_user: String,
        queue: WorkQueue<String>,
        shutdown: CancellationToken,
    ) -> (Arc<Self>, impl Future<Output = ()> + Send + 'static) {
        let csrs = Api::<CertificateSigningRequest>::all(client.clone());
        let (store, writer) = reflector::store();
        let synced = Arc::new(AtomicBool::new(false));
        let watch = watch_csrs(csrs.clone(), writer, synced.clone(), queue, shutdown);
        let signer = Arc::new(Self {
            csrs,
            nodes: Api::all(client),
            store,
            synced,
            authority,
            agent_user,
        });
        (signer, watch)
    }

    /// The addresses of the Node the requester's token names, or None without one.
    async fn requester_addresses(
        &self,
        csr: &CertificateSigningRequest,
    ) -> Result<Option<(String, Vec<IpAddr>)>, ApiError> {
        let Some(node) = requester_node(csr) else {
            return Ok(None);
        };
        let found = self
            .nodes
            .get_opt(node)
            .await
            .map_err(api_error(format!("Reading Node {node}")))?;
        Ok(found.map(|found| (node.to_owned(), node_addresses(&found))))
    }

    async fn approve(&self, csr: CertificateSigningRequest, node: &str) -> Result<(), SignerError> {
        let message = format!("The request names only node {node} and its addresses.");
        let csr = with_condition(csr, "Approved", APPROVED_REASON, message);
        let name = csr.name_any();
        self.csrs
            .replace_subresource("approval", &name, &PostParams::default(), &csr)
            .await
            .map_err(api_error(format!("Approving CSR {name}")))?;
        tracing::info!(csr = %name, node, "approved an agent serving certificate");
        Ok(())
    }

    async fn deny(
        &self,
        csr: CertificateSigningRequest,
        reason: String,
    ) -> Result<(), SignerError> {
        let name = csr.name_any();
        tracing::info!(csr = %name, %reason, "denied an agent serving certificate");
        let csr = with_condition(csr, "Denied", DENIED_REASON, reason);
        self.csrs
            .replace_subresource("approval", &name, &PostParams::default(), &csr)
            .await
            .map_err(api_error(format!("Denying CSR {name}")))?;
        Ok(())
    }

    async fn fail(
        &self,
        csr: CertificateSigningRequest,
        reason: String,
    ) -> Result<(), SignerError> {
        let name = csr.name_any();
        tracing::warn!(csr = %name, %reason, "an approved agent serving certificate cannot be issued");
        let csr = with_condition(csr, "Failed", FAILED_REASON, reason);
        self.write_status(&csr, "Marking as failed").await
    }

    async fn write_status(
        &self,
        csr: &CertificateSigningRequest,
        action: &str,
    ) -> Result<(), SignerError> {
        let name = csr.name_any();
        self.csrs
            .replace_status(&name, &PostParams::default(), csr)
            .await
            .map_err(api_error(format!("{action} CSR {name}")))?;
        Ok(())
    }
}

impl Reconciler for CsrSigner {
    type Key = String;
    type Error = SignerError;
    const KIND: &'static str = "CertificateSigningRequest";

    async fn reconcile(&self, name: &String) -> Result<Outcome, SignerError> {
        let Some(csr) = self.store.get(&ObjectRef::new(name)) else {
            return Ok(Outcome::Done);
        };
        let known = self.requester_addresses(&csr).await?;
        let addresses = |node: &str| {
            known
                .as_ref()
                .filter(|(name, _)| name == node)
                .map(|(_, addresses)| addresses.clone())
        };
        let mut csr = (*csr).clone();
        match next_step(&csr, &self.agent_user, addresses) {
            Step::Nothing => {}
            Step::Approve { node } => self.approve(csr, &node).await?,
            Step::Deny(reason) => self.deny(csr, reason).await?,
            Step::Sign(parsed) => match self.authority.sign(&parsed, SystemTime::now()) {
                Ok(pem) => {
                    csr.status.get_or_insert_with(Default::default).certificate =
                        Some(ByteString(pem.into_bytes()));
                    self.write_status(&csr, "Issuing the certificate of")
                        .await?;
                    tracing::info!(csr = %name, "issued an agent serving certificate");
                }
                // The same request would fail the same way again: say so, as the
                // built-in signers do, instead of retrying forever.
                Err(err) => {
                    let reason = format!("The certificate cannot be made: {err}.");
                    self.fail(csr, reason).await?;
                }
            },
            Step::Fail(reason) => self.fail(csr, reason).await?,
        }
        Ok(Outcome::Done)
    }

    fn all_keys(&self) -> Vec<String> {
        self.store
            .state()
            .iter()
            .map(|csr| csr.name_any())
            .collect()
    }

    fn caches_synced(&self) -> bool {
        self.synced.load(Ordering::Acquire)
    }
}

/// Every IP address the Node reports (InternalIP, ExternalIP).
fn node_addresses(node: &Node) -> Vec<IpAddr> {
    let addresses = node.status.as_ref().and_then(|s| s.addresses.as_ref());
    addresses
        .into_iter()
        .flatten()
        .filter_map(|address| address.address.parse().ok())
        .collect()
}

fn with_condition(
    mut csr: CertificateSigningRequest,
    type_: &str,
    reason: &str,
    message: String,
) -> CertificateSigningRequest {
    let now = Time(Timestamp::now());
    let status = csr.status.get_or_insert_with(Default::default);
    status
        .conditions
        .get_or_insert_with(Vec::new)
        .push(CertificateSigningRequestCondition {
            type_: type_.to_owned(),
            status: "True".to_owned(),
            reason: Some(reason.to_owned()),
            message: Some(message),
            last_update_time: Some(now.clone()),
            last_transition_time: Some(now),
        });
    csr
}

/// Watches our signer's CSRs (a field selector: other signers' requests are never
/// fetched) into the cache and queues each one that changes.
async fn watch_csrs(
    csrs: Api<CertificateSigningRequest>,
    writer: reflector::store::Writer<CertificateSigningRequest>,
    synced: Arc<AtomicBool>,
    queue: WorkQueue<String>,
    shutdown: CancellationToken,
) {
    let config =
        watcher::Config::default().fields(&format!("spec.signerName={AGENT_SERVING_SIGNER}"));
    let events = watcher(csrs, config)
        .default_backoff()
        .reflect(writer)
        .take_until(shutdown.cancelled_owned());
    let mut events = std::pin::pin!(events);
    while let Some(event) = events.next().await {
        match event {
            Ok(watcher::Event::Apply(csr) | watcher::Event::InitApply(csr)) => {
                queue.add(csr.name_any());
            }
            Ok(watcher::Event::InitDone) => synced.store(true, Ordering::Release),
            Ok(watcher::Event::Init | watcher::Event::Delete(_)) => {}
            Err(err) => tracing::warn!(error = %err, "watching agent serving CSRs"),
        }
    }
}
