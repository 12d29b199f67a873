//! Keeping the served certificate current: from the CSR API (renewed at 80% of its
//! lifetime, retried with backoff, the current one served meanwhile), or from the
//! `--tls-cert`/`--tls-key` files (read again when they change).

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use tokio_util::sync::CancellationToken;

use super::csr::{CsrError, CsrSettings, Issued, request_certificate};
use super::resolver::{ServingCert, certified_key};

/// The share of a certificate's lifetime after which it is renewed (kubelet's rule:
/// renew well before expiry, so a control plane that is down for a while costs nothing).
pub const RENEW_AT: f64 = 0.8;

/// First and longest wait before asking again after a failed request.
pub const RETRY_FIRST: Duration = Duration::from_secs(5);
pub const RETRY_MAX: Duration = Duration::from_secs(300);

/// How often the certificate files are looked at for a change.
pub const FILE_POLL: Duration = Duration::from_secs(30);

/// Where certificates come from; the CSR API in the agent, a double in tests.
pub trait CertificateSource: Send + Sync {
    fn issue(&self) -> Pin<Box<dyn Future<Output = Result<Issued, CsrError>> + Send + '_>>;
}

/// The CSR API with the agent's own credentials.
pub struct KubeCsr {
    pub csrs: kube::Api<CertificateSigningRequest>,
    pub settings: CsrSettings,
}

impl CertificateSource for KubeCsr {
    fn issue(&self) -> Pin<Box<dyn Future<Output = Result<Issued, CsrError>> + Send + '_>> {
        Box::pin(request_certificate(&self.csrs, &self.settings))
    }
}

/// How long from `now` until a certificate valid from `not_before` to `not_after`
/// should be renewed: at [`RENEW_AT`] of its lifetime, at once if that has passed.
pub fn renew_after(not_before: SystemTime, not_after: SystemTime, now: SystemTime) -> Duration {
    let lifetime = not_after.duration_since(not_before).unwrap_or_default();
    let renew_at = not_before + lifetime.mul_f64(RENEW_AT);
    renew_at.duration_since(now).unwrap_or_default()
}

/// The wait after the `failures`-th failed request in a row: doubling from
/// [`RETRY_FIRST`] up to [`RETRY_MAX`].
pub fn retry_after(failures: u32) -> Duration {
    let doublings = failures.saturating_sub(1).min(16);
    RETRY_FIRST.saturating_mul(1 << doublings).min(RETRY_MAX)
}

/// Requests a certificate, serves it, and requests the next one when it is due, until
/// `shutdown`. A failed request leaves the current certificate in service and is
/// retried with backoff.
pub async fn keep_issued(
    source: impl CertificateSource,
    serving: Arc<ServingCert>,
    shutdown: CancellationToken,
) {
    let mut failures = 0;
    loop {
        let wait = match source.issue().await {
            Ok(issued) => match certified_key(&issued.cert_pem, &issued.key_pem) {
                Ok(key) => {
                    serving.replace(key);
                    failures = 0;
                    let wait = renew_after(issued.not_before, issued.not_after, SystemTime::now());
                    tracing::info!(renew_in = ?wait, "serving a newly issued certificate");
                    wait
                }
                Err(err) => {
                    failures += 1;
                    tracing::warn!(error = %err, "the issued certificate cannot be served");
                    retry_after(failures)
                }
            },
            Err(err) => {
                failures += 1;
                let wait = retry_after(failures);
                tracing::warn!(error = %err, retry_in = ?wait, "no serving certificate issued; keeping the current one");
                wait
            }
        };
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(wait) => {}
        }
    }
}

/// What identifies a version of the certificate files: modification time and size of
/// each (a Secret volume swaps both files at once through a symlink, which the
/// metadata, following it, sees).
type FileStamp = Option<[(SystemTime, u64); 2]>;

async fn stamp(cert: &Path, key: &Path) -> FileStamp {
    let one = |path: &Path| {
        let path = path.to_owned();
        async move {
            let meta = tokio::fs::metadata(&path).await.ok()?;
            Some((meta.modified().ok()?, meta.len()))
        }
    };
    Some([one(cert).await?, one(key).await?])
}

/// Serves the certificate in `cert`/`key` again each time the files change (looked at
/// every `period`), until `shutdown`. A pair that does not load (one file written, the
/// other not yet) is tried again at the next look; the current one stays meanwhile.
pub async fn reload_files(
    cert: PathBuf,
    key: PathBuf,
    serving: Arc<ServingCert>,
    period: Duration,
    shutdown: CancellationToken,
) {
    let mut served = stamp(&cert, &key).await;
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(period) => {}
        }
        let now = stamp(&cert, &key).await;
        if now == served || now.is_none() {
            continue;
        }
        match super::load_files(&cert, &key).await {
            Ok(next) => {
                serving.replace(next);
                served = now;
                tracing::info!(cert = %cert.display(), "serving the changed certificate files");
            }
            Err(err) => {
                tracing::warn!(error = %err, "the changed certificate files do not load yet");
            }
        }
    }
}

#[cfg(test)]
#[path = "renewal_tests.rs"]
mod tests;
