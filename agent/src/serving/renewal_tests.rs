use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::*;
use crate::serving::tests::Pki;

#[test]
fn renewal_is_due_at_eighty_percent_of_the_lifetime() {
    let start = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
    let hours = |h: u64| Duration::from_secs(h * 3600);
    let cases = [
        (
            "just issued",
            hours(0),
            hours(24),
            hours(0),
            Duration::from_secs(69_120),
        ),
        (
            "half way",
            hours(0),
            hours(24),
            hours(12),
            Duration::from_secs(25_920),
        ),
        ("past 80%", hours(0), hours(24), hours(20), Duration::ZERO),
        ("expired", hours(0), hours(24), hours(30), Duration::ZERO),
        ("backdated", hours(0), hours(10), hours(1), hours(7)),
        ("no lifetime", hours(5), hours(5), hours(0), hours(5)),
    ];
    for (name, not_before, not_after, now, due) in cases {
        let due_in = renew_after(start + not_before, start + not_after, start + now);
        assert_eq!(due_in, due, "{name}");
    }
}

#[test]
fn retries_double_from_five_seconds_to_five_minutes() {
    let secs: Vec<u64> = (1..=9).map(|n| retry_after(n).as_secs()).collect();
    assert_eq!(secs, [5, 10, 20, 40, 80, 160, 300, 300, 300]);
    assert_eq!(retry_after(u32::MAX), RETRY_MAX);
}

/// Answers with the queued results in turn, counting requests.
struct Scripted {
    answers: Mutex<VecDeque<Result<Issued, CsrError>>>,
    requests: Arc<AtomicUsize>,
}

impl CertificateSource for Scripted {
    fn issue(&self) -> Pin<Box<dyn Future<Output = Result<Issued, CsrError>> + Send + '_>> {
        self.requests.fetch_add(1, Ordering::SeqCst);
        let answer = self
            .answers
            .lock()
            .expect("lock")
            .pop_front()
            .unwrap_or_else(|| Err(refused()));
        Box::pin(async move { answer })
    }
}

fn refused() -> CsrError {
    CsrError::Denied {
        name: "csr".into(),
        reason: "no".into(),
    }
}

/// A certificate valid for `lifetime` from now.
fn issued(pair: &(String, String), lifetime: Duration) -> Issued {
    let now = SystemTime::now();
    Issued {
        csr: "csr".into(),
        cert_pem: pair.0.clone(),
        key_pem: pair.1.clone(),
        not_before: now,
        not_after: now + lifetime,
    }
}

#[tokio::test(start_paused = true)]
async fn a_failure_keeps_the_current_certificate_and_renewal_comes_at_eighty_percent() {
    let pki = Pki::new();
    let (placeholder, first, second) = (pki.leaf(), pki.leaf(), pki.leaf());
    let lifetime = Duration::from_secs(100);
    let requests = Arc::new(AtomicUsize::new(0));
    let source = Scripted {
        answers: Mutex::new(VecDeque::from([
            Err(refused()),
            Ok(issued(&first, lifetime)),
            Ok(issued(&second, lifetime)),
        ])),
        requests: requests.clone(),
    };
    let serving = ServingCert::new(certified_key(&placeholder.0, &placeholder.1).expect("pair"));
    let served = |pair: &(String, String)| {
        use rustls::pki_types::{CertificateDer, pem::PemObject as _};
        let der = CertificateDer::from_pem_slice(pair.0.as_bytes()).expect("PEM");
        serving.current().cert[0] == der
    };
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(keep_issued(source, serving.clone(), shutdown.clone()));

    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(requests.load(Ordering::SeqCst), 1);
    assert!(
        served(&placeholder),
        "a failed request keeps the current one"
    );

    tokio::time::sleep(RETRY_FIRST).await;
    assert_eq!(
        requests.load(Ordering::SeqCst),
        2,
        "retried after the backoff"
    );
    assert!(served(&first));

    tokio::time::sleep(Duration::from_secs(70)).await;
    assert_eq!(requests.load(Ordering::SeqCst), 2, "not renewed before 80%");
    tokio::time::sleep(Duration::from_secs(15)).await;
    assert_eq!(requests.load(Ordering::SeqCst), 3, "renewed at 80%");
    assert!(served(&second));

    shutdown.cancel();
    task.await.expect("loop ends on shutdown");
}
