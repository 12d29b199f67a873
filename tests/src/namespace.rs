//! One namespace per test, removed afterwards; diagnostics dumped when the test fails.

use std::future::Future;
use std::panic::AssertUnwindSafe;

use anyhow::{Result, anyhow};
use futures::FutureExt;
use k8s_openapi::api::core::v1::Namespace;
use kube::Api;
use kube::api::{DeleteParams, ObjectMeta, PostParams};

use crate::cluster::{ClusterInfo, cluster};
use crate::diagnostics::dump_diagnostics;

/// What a test body gets: the cluster, a client, and its own namespace.
#[derive(Clone)]
pub struct TestContext {
    pub cluster: &'static ClusterInfo,
    pub client: kube::Client,
    pub namespace: String,
}

impl TestContext {
    pub fn api<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        K::DynamicType: Default,
    {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    /// Runs kubectl in the test's namespace as a user would; its stdout, or an error
    /// quoting its stderr.
    pub async fn kubectl(&self, args: &[&str]) -> Result<String> {
        let output = tokio::process::Command::new(&self.cluster.kubectl)
            .env("KUBECONFIG", &self.cluster.kubeconfig)
            .arg("-n")
            .arg(&self.namespace)
            .args(args)
            .output()
            .await
            .map_err(|err| anyhow!("running kubectl {args:?}: {err}"))?;
        if !output.status.success() {
            return Err(anyhow!(
                "kubectl {args:?} failed: {}",
                String::from_utf8_lossy(&output.stderr).trim()
            ));
        }
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    }
}

/// A namespace name from the test name: lowercase, DNS-1123, unique per run.
pub fn namespace_name(test: &str) -> String {
    let slug: String = test
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    let slug = slug.trim_matches('-');
    let suffix = std::process::id() % 100_000;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos() % 10_000)
        .unwrap_or(0);
    let mut name = format!("t-{}", &slug[..slug.len().min(40)]);
    name.push_str(&format!("-{suffix}{nanos}"));
    name
}

/// Runs `body` in a fresh namespace. On error or panic the namespace's events, pod statuses
/// and component log tails are printed; the namespace is deleted either way.
pub async fn run_in_namespace<F, Fut>(test: &str, body: F) -> Result<()>
where
    F: FnOnce(TestContext) -> Fut,
    Fut: Future<Output = Result<()>>,
{
    let cluster = cluster().await?;
    let client = cluster.client().await?;
    let namespace = namespace_name(test);
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some(namespace.clone()),
            ..Default::default()
        },
        ..Default::default()
    };
    namespaces.create(&PostParams::default(), &ns).await?;
    let ctx = TestContext {
        cluster,
        client: client.clone(),
        namespace: namespace.clone(),
    };

    let outcome = AssertUnwindSafe(body(ctx)).catch_unwind().await;
    let result = match outcome {
        Ok(result) => result,
        Err(panic) => Err(anyhow!("test panicked: {}", panic_message(&panic))),
    };
    if let Err(err) = &result {
        eprintln!("test {test} failed: {err:#}");
        dump_diagnostics(&client, cluster, &namespace).await;
    }
    // Namespace deletion is asynchronous; the test does not wait for finalization.
    let _ = namespaces
        .delete(&namespace, &DeleteParams::background())
        .await;
    result
}

fn panic_message(panic: &Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
        .unwrap_or_else(|| "non-string panic".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespace_names_are_dns_labels() {
        for test in ["smoke::Deployment_Runs", "a_b", "x".repeat(80).as_str()] {
            let name = namespace_name(test);
            assert!(name.len() <= 63, "{name}");
            assert!(name.starts_with("t-"), "{name}");
            assert!(
                name.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'),
                "{name}"
            );
            assert!(!name.contains("--") || test.contains("::"), "{name}");
        }
    }
}
