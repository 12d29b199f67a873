//! The budget webhook answers the apiserver only, and a forged review records nothing
//! (issue 28, item 4). On the local cluster the apiserver presents the client certificate
//! of `deploy/local/lib/certs.sh` (its admission configuration) and the control plane
//! trusts that CA (`deploy/local/controlplane`): a caller without that certificate is
//! refused, one with another CA's certificate fails the handshake, a review naming a
//! made-up pod (sent with the apiserver's own certificate, so only the pod check stands
//! in the way) leaves the budget as it was, and a real `kubectl delete pod` of a protected
//! pod is still refused through the apiserver.

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use anyhow::{Context as _, Result, bail, ensure};
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{ListParams, PostParams};
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair,
};
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use serde_json::{Value, json};
use stevedore_api::PodUnavailableBudget;
use stevedore_tests::test_nodes::{self, TestNode};
use stevedore_tests::{TestContext, invariant, poll_until, run_in_namespace};

const CONFIGURATION: &str = "stevedore-pod-budgets";
const SERVICE_HOST: &str = "stevedore-controlplane-webhook.kube-system.svc";
const REVIEW_PATH: &str = "/validate-pod-disruption";
const WEBHOOK_PORT: u16 = 9443;

/// A client certificate and key (PEM).
type Identity = (String, String);

/// The client certificate the local apiserver presents to the webhook (certs.sh).
fn apiserver_identity(ctx: &TestContext) -> Result<Identity> {
    let pki = ctx.cluster.state_dir.join("pki");
    let read = |name: &str| {
        std::fs::read_to_string(pki.join(name))
            .with_context(|| format!("reading {name} of the local cluster (made by cluster.sh up)"))
    };
    Ok((read("webhook-client.crt")?, read("webhook-client.key")?))
}

/// A client certificate for `cn` from a CA nobody trusts.
fn stranger_identity(cn: &str) -> Result<Identity> {
    let ca_key = KeyPair::generate()?;
    let mut ca = CertificateParams::default();
    ca.distinguished_name = DistinguishedName::new();
    ca.distinguished_name
        .push(DnType::CommonName, "stranger-ca");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.not_before = SystemTime::now().into();
    ca.self_signed(&ca_key)?;
    let issuer = Issuer::new(ca, ca_key);
    let key = KeyPair::generate()?;
    let mut leaf = CertificateParams::default();
    leaf.distinguished_name = DistinguishedName::new();
    leaf.distinguished_name.push(DnType::CommonName, cn);
    leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    leaf.not_before = SystemTime::now().into();
    let cert = leaf.signed_by(&key, &issuer)?;
    Ok((cert.pem(), key.serialize_pem()))
}

/// The webhook CA the control plane wrote into the configuration's caBundle.
async fn webhook_ca(ctx: &TestContext) -> Result<String> {
    let api = kube::Api::<ValidatingWebhookConfiguration>::all(ctx.client.clone());
    let configuration = api.get(CONFIGURATION).await?;
    let bundle = (configuration.webhooks.unwrap_or_default().into_iter())
        .find_map(|w| w.client_config.ca_bundle)
        .context("the webhook configuration has no caBundle yet")?;
    Ok(String::from_utf8(bundle.0)?)
}

/// The pod IP of every control-plane replica.
async fn replica_ips(ctx: &TestContext) -> Result<Vec<String>> {
    let lp = ListParams::default().labels("app.kubernetes.io/name=stevedore-controlplane");
    let pods = kube::Api::<Pod>::namespaced(ctx.client.clone(), "kube-system")
        .list(&lp)
        .await?;
    let ips: Vec<String> = (pods.items.into_iter())
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter_map(|p| p.status?.pod_ip)
        .collect();
    ensure!(!ips.is_empty(), "no control-plane replica has a pod IP");
    Ok(ips)
}

/// POSTs `body` to `path` on `ip`:9443 over TLS, trusting `ca_pem` for the Service's name
/// and presenting `identity` when given: the HTTP status and body, or the handshake's
/// error (a blocking client in a thread of its own).
async fn post(
    ip: &str,
    ca_pem: &str,
    identity: Option<Identity>,
    path: &str,
    body: &Value,
) -> Result<(u16, String)> {
    let (ip, ca_pem, path, body) = (
        ip.to_owned(),
        ca_pem.to_owned(),
        path.to_owned(),
        body.to_string(),
    );
    tokio::task::spawn_blocking(move || {
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
            roots.add(cert?)?;
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots);
        let config = match identity {
            None => builder.with_no_client_auth(),
            Some((cert, key)) => {
                let chain = vec![CertificateDer::from_pem_slice(cert.as_bytes())?];
                builder.with_client_auth_cert(chain, PrivateKeyDer::from_pem_slice(key.as_bytes())?)?
            }
        };
        let name = ServerName::try_from(SERVICE_HOST)?;
        let connection = rustls::ClientConnection::new(Arc::new(config), name)?;
        let tcp = TcpStream::connect((ip.as_str(), WEBHOOK_PORT))?;
        tcp.set_read_timeout(Some(Duration::from_secs(10)))?;
        let mut tls = rustls::StreamOwned::new(connection, tcp);
        let request = format!(
            "POST {path} HTTP/1.1\r\nHost: {SERVICE_HOST}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        tls.write_all(request.as_bytes())?;
        let mut response = String::new();
        tls.read_to_string(&mut response)?;
        let status = (response.split_whitespace().nth(1))
            .and_then(|code| code.parse().ok())
            .with_context(|| format!("not an HTTP response: {response:?}"))?;
        let body = response
            .split_once("\r\n\r\n")
            .map(|(_, body)| body.to_owned())
            .unwrap_or_default();
        Ok((status, body))
    })
    .await?
}

/// A DELETE review of pod `pod` (UID `uid`, labels `app: <app>`) in `namespace`, by
/// `alice`, as a forger would write it.
fn forged_delete(namespace: &str, pod: &str, uid: &str, app: &str) -> Value {
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "forged-1",
            "kind": { "group": "", "version": "v1", "kind": "Pod" },
            "resource": { "group": "", "version": "v1", "resource": "pods" },
            "name": pod,
            "namespace": namespace,
            "operation": "DELETE",
            "userInfo": { "username": "alice" },
            "oldObject": {
                "apiVersion": "v1", "kind": "Pod",
                "metadata": { "name": pod, "namespace": namespace, "uid": uid, "labels": { "app": app } },
            },
        },
    })
}

/// A budget `name` of at most one unavailable pod among `app: <name>`, with three such
/// pods on a kwok node of the test's own, waited for until it allows one.
async fn budget_of_three(ctx: &TestContext, name: &str) -> Result<String> {
    let budget: PodUnavailableBudget = serde_json::from_value(json!({
        "apiVersion": "policy.kruise.io/v1alpha1",
        "kind": "PodUnavailableBudget",
        "metadata": { "name": name, "namespace": ctx.namespace },
        "spec": { "selector": { "matchLabels": { "app": name } }, "maxUnavailable": 1 },
    }))?;
    ctx.api::<PodUnavailableBudget>()
        .create(&PostParams::default(), &budget)
        .await?;
    let node = format!("{}-node", ctx.namespace);
    test_nodes::create(ctx, &node, TestNode::default()).await?;
    for i in 0..3 {
        let pod: Pod = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": { "name": format!("{name}-{i}"), "labels": { "app": name } },
            "spec": {
                "nodeName": node,
                "containers": [{ "name": "main", "image": ctx.cluster.image("web:v1") }],
            },
        }))?;
        ctx.api::<Pod>()
            .create(&PostParams::default(), &pod)
            .await?;
    }
    poll_until(
        "the budget allowing one disruption of three",
        Duration::from_secs(60),
        || async {
            let (allowed, disrupted) = allowance(ctx, name).await?;
            Ok((allowed == 1 && disrupted.is_empty()).then_some(()))
        },
    )
    .await?;
    Ok(node)
}

/// The budget's `unavailableAllowed` and the pods in its `disruptedPods`.
async fn allowance(ctx: &TestContext, name: &str) -> Result<(i32, Vec<String>)> {
    let budget = ctx.api::<PodUnavailableBudget>().get(name).await?;
    let Some(status) = budget.status else {
        return Ok((-1, Vec::new()));
    };
    let disrupted = status.disrupted_pods.into_keys().collect();
    Ok((status.unavailable_allowed, disrupted))
}

/// Waits until the budget again allows one disruption with nothing recorded against it.
/// A forged review that counted would leave its record for two minutes, so a short wait
/// still catches it; what it forgives is a pod that a busy kwok node reports unready for
/// a moment (once in a CI run: "allowed 0, disrupted []"), which no review caused. The
/// failure names every number the budget reported and which pods were not ready.
async fn budget_untouched_by_forgeries(ctx: &TestContext, name: &str) -> Result<()> {
    poll_until(
        "the budget untouched by a forged review",
        Duration::from_secs(15),
        || async {
            let budget = ctx.api::<PodUnavailableBudget>().get(name).await?;
            let status = budget.status.unwrap_or_default();
            let recorded = !status.disrupted_pods.is_empty() || !status.unavailable_pods.is_empty();
            invariant(!recorded, || {
                format!(
                    "a forged review drained the budget: disrupted {:?}, unavailable {:?}",
                    status.disrupted_pods.keys().collect::<Vec<_>>(),
                    status.unavailable_pods.keys().collect::<Vec<_>>()
                )
            })?;
            if status.unavailable_allowed == 1 {
                return Ok(Some(()));
            }
            bail!(
                "the budget allows {} (available {} of desired {}); pods not ready: {:?}",
                status.unavailable_allowed,
                status.current_available,
                status.desired_available,
                pods_not_ready(ctx).await?
            )
        },
    )
    .await
}

/// The names of this test's pods whose Ready condition is not True.
async fn pods_not_ready(ctx: &TestContext) -> Result<Vec<String>> {
    let pods = ctx.api::<Pod>().list(&Default::default()).await?;
    Ok(pods
        .items
        .into_iter()
        .filter(|pod| {
            !pod.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
        })
        .filter_map(|pod| pod.metadata.name)
        .collect())
}

/// Removes the budget first (or it would hold the deletes), the pods, then the node.
async fn clean_up(ctx: &TestContext, name: &str, node: &str) {
    let _ = ctx
        .api::<PodUnavailableBudget>()
        .delete(name, &Default::default())
        .await;
    let now = kube::api::DeleteParams {
        grace_period_seconds: Some(0),
        ..Default::default()
    };
    let pods = ctx.api::<Pod>();
    let _ = pods.delete_collection(&now, &Default::default()).await;
    let _ = poll_until("the test's pods gone", Duration::from_secs(30), || async {
        Ok(ctx
            .api::<Pod>()
            .list(&Default::default())
            .await?
            .items
            .is_empty()
            .then_some(()))
    })
    .await;
    let _ = kube::Api::<Node>::all(ctx.client.clone())
        .delete(node, &Default::default())
        .await;
}

/// Without the apiserver's client certificate a review is refused (403 naming why), and
/// with another CA's certificate the handshake fails; the budget is untouched either way.
#[tokio::test]
async fn a_caller_without_the_apiservers_certificate_is_refused() -> Result<()> {
    run_in_namespace("webhook-auth", |ctx| async move {
        let name = "guarded";
        let node = budget_of_three(&ctx, name).await?;
        let outcome = async {
            let ca = webhook_ca(&ctx).await?;
            let pod = ctx.api::<Pod>().get(&format!("{name}-0")).await?;
            let uid = pod.metadata.uid.context("the pod has no UID")?;
            let review = forged_delete(&ctx.namespace, &format!("{name}-0"), &uid, name);
            for ip in replica_ips(&ctx).await? {
                let (status, body) = post(&ip, &ca, None, REVIEW_PATH, &review).await?;
                ensure!(
                    status == 403 && body.contains("--webhook-client-ca"),
                    "replica {ip} answered a caller without a client certificate: {status} {body}"
                );
                let stranger = stranger_identity("stevedore-webhook-client")?;
                let handshake = post(&ip, &ca, Some(stranger), REVIEW_PATH, &review).await;
                if let Ok((status, body)) = handshake {
                    bail!("replica {ip} answered another CA's certificate: {status} {body}");
                }
            }
            let (allowed, disrupted) = allowance(&ctx, name).await?;
            ensure!(
                allowed == 1 && disrupted.is_empty(),
                "refused reviews changed the budget: allowed {allowed}, disrupted {disrupted:?}"
            );
            Ok(())
        }
        .await;
        clean_up(&ctx, name, &node).await;
        outcome
    })
    .await
}

/// A review naming a made-up pod, or a real pod's name with another UID, is answered and
/// never recorded, even from the apiserver's own certificate; a real `kubectl delete pod`
/// of a protected pod is still refused once the budget is spent.
#[tokio::test]
async fn a_forged_review_leaves_the_budget_and_a_real_delete_is_still_checked() -> Result<()> {
    run_in_namespace("webhook-forged", |ctx| async move {
        let name = "guarded";
        let node = budget_of_three(&ctx, name).await?;
        let outcome = async {
            let ca = webhook_ca(&ctx).await?;
            let identity = apiserver_identity(&ctx)?;
            let ip = replica_ips(&ctx).await?.remove(0);
            let forgeries = [
                forged_delete(
                    &ctx.namespace,
                    "made-up",
                    "00000000-0000-0000-0000-000000000001",
                    name,
                ),
                forged_delete(
                    &ctx.namespace,
                    &format!("{name}-1"),
                    "00000000-0000-0000-0000-000000000002",
                    name,
                ),
            ];
            for review in &forgeries {
                let (status, body) =
                    post(&ip, &ca, Some(identity.clone()), REVIEW_PATH, review).await?;
                let answer: Value = serde_json::from_str(&body)
                    .with_context(|| format!("not an AdmissionReview: {status} {body}"))?;
                ensure!(
                    status == 200 && answer["response"]["allowed"] == true,
                    "a forged review was not answered: {status} {body}"
                );
                budget_untouched_by_forgeries(&ctx, name).await?;
            }

            // Through the apiserver, once the budget allows nothing, a real delete is
            // refused naming the budget. (A budget over bare pods counts the pods that
            // are not terminating, so a first delete would not spend its allowance for
            // good: the next pod's delete sees one pod fewer and one allowed again.)
            ctx.api::<PodUnavailableBudget>()
                .patch(
                    name,
                    &kube::api::PatchParams::default(),
                    &kube::api::Patch::Merge(json!({ "spec": { "maxUnavailable": 0 } })),
                )
                .await?;
            poll_until(
                "the budget allowing no disruption",
                Duration::from_secs(30),
                || async { Ok((allowance(&ctx, name).await?.0 == 0).then_some(())) },
            )
            .await?;
            let refused = ctx
                .kubectl(&["delete", "pod", &format!("{name}-1"), "--wait=false"])
                .await;
            let said = format!(
                "{:#}",
                refused
                    .err()
                    .context("a delete the budget does not allow went through")?
            );
            ensure!(
                said.contains("PodUnavailableBudget guarded"),
                "the refusal names the budget: {said}"
            );
            Ok(())
        }
        .await;
        clean_up(&ctx, name, &node).await;
        outcome
    })
    .await
}
