//! The election loop against an in-process fake apiserver for Leases, to exercise what
//! the real one cannot be made to do on cue: hang, or answer 409 at a chosen moment.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::{Request, Response, StatusCode};
use k8s_openapi::api::coordination::v1::Lease;
use kube::client::Body;
use serde_json::json;

use super::*;

/// What the fake apiserver holds and how it misbehaves.
#[derive(Default)]
struct Fake {
    lease: Option<Lease>,
    resource_version: u64,
    /// Every request hangs forever.
    hang: bool,
    /// The next write answers 409 after another replica took the Lease.
    steal_on_next_write: bool,
    writes: Vec<(String, Option<String>)>,
}

type Shared = Arc<Mutex<Fake>>;

fn respond(code: StatusCode, body: serde_json::Value) -> Response<Body> {
    let mut response = Response::new(Body::from(body.to_string().into_bytes()));
    *response.status_mut() = code;
    response
}

fn status(code: StatusCode, reason: &str) -> Response<Body> {
    respond(
        code,
        json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
               "reason": reason, "message": reason, "code": code.as_u16()}),
    )
}

async fn serve(
    fake: Shared,
    request: Request<Body>,
) -> Result<Response<Body>, std::convert::Infallible> {
    let hang = fake.lock().map(|f| f.hang).unwrap_or(true);
    if hang {
        std::future::pending::<()>().await;
    }
    let method = request.method().clone();
    let bytes = http_body_util::BodyExt::collect(request.into_body())
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let mut f = fake.lock().expect("fake lock");
    if method == http::Method::GET {
        return Ok(match &f.lease {
            Some(lease) => respond(StatusCode::OK, json!(lease)),
            None => status(StatusCode::NOT_FOUND, "NotFound"),
        });
    }
    let Ok(mut lease) = serde_json::from_slice::<Lease>(&bytes) else {
        return Ok(status(StatusCode::BAD_REQUEST, "BadRequest"));
    };
    let sent_version = lease.metadata.resource_version.clone();
    f.writes.push((method.to_string(), sent_version.clone()));
    if f.steal_on_next_write {
        f.steal_on_next_write = false;
        f.resource_version += 1;
        f.lease = Some(held_by("other", f.resource_version));
        return Ok(status(StatusCode::CONFLICT, "Conflict"));
    }
    let current = f
        .lease
        .as_ref()
        .and_then(|l| l.metadata.resource_version.clone());
    if method == http::Method::PUT && sent_version != current {
        return Ok(status(StatusCode::CONFLICT, "Conflict"));
    }
    f.resource_version += 1;
    lease.metadata.resource_version = Some(f.resource_version.to_string());
    f.lease = Some(lease.clone());
    Ok(respond(StatusCode::OK, json!(lease)))
}

fn held_by(holder: &str, version: u64) -> Lease {
    let now = Timestamp::now();
    Lease {
        metadata: ObjectMeta {
            name: Some("lease".to_owned()),
            resource_version: Some(version.to_string()),
            ..ObjectMeta::default()
        },
        spec: Some(held_spec(
            holder,
            now,
            now,
            7,
            &Timings {
                lease_duration: Duration::from_secs(60),
                ..Timings::default()
            },
        )),
    }
}

fn start(fake: &Shared) -> (watch::Receiver<bool>, CancellationToken) {
    let (leading, stop, _) = start_observed(fake);
    (leading, stop)
}

/// Starts an elector; also returns its finished-rounds counter.
fn start_observed(
    fake: &Shared,
) -> (
    watch::Receiver<bool>,
    CancellationToken,
    watch::Receiver<u64>,
) {
    let service = {
        let fake = fake.clone();
        tower::service_fn(move |request| serve(fake.clone(), request))
    };
    let client = kube::Client::new(service, "default");
    let timings = Timings {
        lease_duration: Duration::from_millis(900),
        renew_deadline: Duration::from_millis(600),
        retry_period: Duration::from_millis(100),
    };
    let elector = Elector::new(client, "default", "lease", "me", timings);
    let leading = elector.leadership();
    let rounds = elector.rounds();
    let stop = CancellationToken::new();
    tokio::spawn(elector.run(stop.clone()));
    (leading, stop, rounds)
}

async fn becomes(leading: &mut watch::Receiver<bool>, value: bool, within: Duration) -> bool {
    tokio::time::timeout(within, leading.wait_for(|l| *l == value))
        .await
        .is_ok_and(|r| r.is_ok())
}

#[tokio::test]
async fn renewal_hanging_past_the_renew_deadline_loses_leadership() {
    let fake = Shared::default();
    let (mut leading, stop) = start(&fake);
    assert!(
        becomes(&mut leading, true, Duration::from_secs(2)).await,
        "never led"
    );
    fake.lock().expect("fake lock").hang = true;
    // At most the renew deadline since the last renewal, plus scheduling slack.
    assert!(
        becomes(&mut leading, false, Duration::from_millis(900)).await,
        "kept leading with a hung apiserver"
    );
    stop.cancel();
}

#[tokio::test]
async fn writes_carry_the_read_resource_version_and_a_conflict_is_reread_not_overwritten() {
    let fake = Shared::default();
    let (mut leading, stop) = start(&fake);
    assert!(
        becomes(&mut leading, true, Duration::from_secs(2)).await,
        "never led"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    fake.lock().expect("fake lock").steal_on_next_write = true;
    assert!(
        becomes(&mut leading, false, Duration::from_secs(1)).await,
        "kept leading after another replica took the Lease"
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    let f = fake.lock().expect("fake lock");
    let holder = f
        .lease
        .as_ref()
        .and_then(|l| l.spec.as_ref()?.holder_identity.clone());
    assert_eq!(
        holder.as_deref(),
        Some("other"),
        "the stolen Lease was overwritten"
    );
    let (first, renewals) = f.writes.split_first().expect("at least one write");
    assert_eq!(first, &("POST".to_owned(), None));
    assert!(renewals.len() >= 2, "{:?}", f.writes);
    for (method, version) in renewals {
        assert_eq!(method, "PUT");
        assert!(version.is_some(), "a renewal without resourceVersion");
    }
    drop(f);
    stop.cancel();
}

/// Another holder renewing every `every`, with a `renewTime` an hour behind the real clock
/// (its clock is wrong), until `stop`.
fn renew_as_other_with_a_wrong_clock(fake: &Shared, every: Duration, stop: CancellationToken) {
    let fake = fake.clone();
    tokio::spawn(async move {
        while !stop.is_cancelled() {
            {
                let mut f = fake.lock().expect("fake lock");
                f.resource_version += 1;
                let mut lease = held_by("other", f.resource_version);
                if let Some(spec) = lease.spec.as_mut() {
                    spec.lease_duration_seconds = Some(1);
                    let behind =
                        Timestamp::now() - k8s_openapi::jiff::SignedDuration::from_hours(1);
                    spec.renew_time = Some(
                        k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(behind),
                    );
                }
                f.lease = Some(lease);
            }
            tokio::time::sleep(every).await;
        }
    });
}

#[tokio::test]
async fn a_lease_renewed_with_an_old_renew_time_is_not_taken_until_it_stops_changing() {
    let fake = Shared::default();
    let renewing = CancellationToken::new();
    renew_as_other_with_a_wrong_clock(&fake, Duration::from_millis(200), renewing.clone());
    let (leading, stop, mut rounds) = start_observed(&fake);
    // Rounds, not time: enough for several lease durations (1 s) at the 100 ms retry.
    for _ in 0..40 {
        rounds.changed().await.expect("elector alive");
        assert!(
            !*leading.borrow(),
            "took over a lease its holder keeps renewing"
        );
    }
    let holder = fake
        .lock()
        .expect("fake lock")
        .lease
        .as_ref()
        .and_then(|l| l.spec.as_ref()?.holder_identity.clone());
    assert_eq!(holder.as_deref(), Some("other"));

    // Once the holder stops renewing, the lease expires on this replica's own clock.
    renewing.cancel();
    let mut leading = leading;
    assert!(
        becomes(&mut leading, true, Duration::from_secs(5)).await,
        "never took over the abandoned lease"
    );
    stop.cancel();
}

#[tokio::test]
async fn each_term_is_counted_before_leadership_turns_true() {
    let fake = Shared::default();
    let service = {
        let fake = fake.clone();
        tower::service_fn(move |request| serve(fake.clone(), request))
    };
    let timings = Timings {
        lease_duration: Duration::from_millis(900),
        renew_deadline: Duration::from_millis(600),
        retry_period: Duration::from_millis(100),
    };
    let elector = Elector::new(
        kube::Client::new(service, "default"),
        "default",
        "lease",
        "me",
        timings,
    );
    let mut leading = elector.leadership();
    let terms = elector.terms();
    let stop = CancellationToken::new();
    tokio::spawn(elector.run(stop.clone()));
    for term in 1..=2 {
        assert!(
            becomes(&mut leading, true, Duration::from_secs(2)).await,
            "never led"
        );
        assert_eq!(*terms.borrow(), term, "leading before the term was counted");
        fake.lock().expect("fake lock").steal_on_next_write = true;
        assert!(becomes(&mut leading, false, Duration::from_secs(2)).await);
        // Let the stolen lease lapse: released, so the next term starts at once.
        if let Some(spec) = fake
            .lock()
            .expect("fake lock")
            .lease
            .as_mut()
            .and_then(|l| l.spec.as_mut())
        {
            spec.holder_identity = None;
        }
    }
    stop.cancel();
}
