//! The control plane's one Kubernetes client, without kube's client-side retries.
//!
//! kube retries a 429, 503 or 504 by default (15 times, backing off up to 1000 s). An
//! eviction that a PodDisruptionBudget refuses answers 429 — a budget's answer, not an
//! overloaded apiserver — so that policy held a reconcile inside one eviction for minutes
//! instead of reporting the disruption as held and coming back later. Every reconciler and
//! loop here already retries a failed call with its own backoff, so none is retried below.

/// Connects with the inferred configuration (in-cluster or kubeconfig).
pub async fn connect() -> Result<kube::Client, kube::Error> {
    let config = kube::Config::infer()
        .await
        .map_err(kube::Error::InferConfig)?;
    client_from(config)
}

/// A client for `config` that sends every request once.
pub fn client_from(mut config: kube::Config) -> Result<kube::Client, kube::Error> {
    config.default_retry = false;
    kube::Client::try_from(config)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use k8s_openapi::api::core::v1::Pod;
    use kube::api::{Api, EvictParams};
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    use tokio::net::TcpListener;

    use super::*;
    use crate::controller::api_error::status_code;

    /// An apiserver that refuses every eviction as a budget does, one request per
    /// connection; returns its URL and how many requests it answered.
    async fn refusing_apiserver() -> (String, Arc<AtomicUsize>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("address"));
        let answered = Arc::new(AtomicUsize::new(0));
        let count = Arc::clone(&answered);
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let mut request = vec![0_u8; 16 * 1024];
                let _ = stream.read(&mut request).await;
                count.fetch_add(1, Ordering::SeqCst);
                let body = r#"{"kind":"Status","apiVersion":"v1","status":"Failure","message":"Cannot evict pod as it would violate the pod's disruption budget.","reason":"TooManyRequests","code":429}"#;
                let response = format!(
                    "HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.write_all(response.as_bytes()).await;
            }
        });
        (url, answered)
    }

    #[tokio::test]
    async fn a_refused_eviction_is_sent_once_and_answered_at_once() {
        let (url, answered) = refusing_apiserver().await;
        let config = kube::Config::new(url.parse().expect("a URL"));
        let client = client_from(config).expect("a client");
        let pods: Api<Pod> = Api::namespaced(client, "ns");
        let evicted = tokio::time::timeout(
            Duration::from_secs(5),
            pods.evict("web-0", &EvictParams::default()),
        )
        .await
        .expect("answered without retrying");
        let err = evicted.expect_err("refused");
        assert_eq!(status_code(&err), Some(429), "{err}");
        assert_eq!(answered.load(Ordering::SeqCst), 1);
    }
}
