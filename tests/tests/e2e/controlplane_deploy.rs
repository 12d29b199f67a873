//! E2E: the control plane as deployed by `deploy/local/run.sh` (deploy/controlplane) — two
//! ready replicas in kube-system with exactly one leader, hardened containers, no shared
//! token for the agents (it requests one per node), and RBAC that grants what the
//! reconcilers need and nothing broader.

use std::time::Duration;

use anyhow::{Context as _, Result, bail, ensure};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::rbac::v1::{ClusterRole, Role};
use kube::Api;
use kube::api::{ListParams, PostParams};
use stevedore_tests::pods::is_ready;
use stevedore_tests::{ClusterInfo, TestContext, poll_until, run_in_namespace};

const NAMESPACE: &str = "kube-system";
const NAME: &str = "stevedore-controlplane";
const SERVICE_ACCOUNT: &str = "system:serviceaccount:kube-system:stevedore-controlplane";
/// The prefix of the per-node audiences of the agents' tokens.
const AGENT_AUDIENCE: &str = "stevedore-agent";
const READY: Duration = Duration::from_secs(180);
/// The one CRD the control plane may read and patch (its conversion webhook).
const PUB_CRD: &str = "podunavailablebudgets.policy.kruise.io";

/// The two Ready, non-terminating replicas of the Deployment, once it has rolled out.
async fn replicas(client: &kube::Client) -> Result<Vec<Pod>> {
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), NAMESPACE);
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let lp = ListParams::default().labels("app.kubernetes.io/name=stevedore-controlplane");
    poll_until("two Ready control-plane replicas", READY, || async {
        let Some(deployment) = deployments.get_opt(NAME).await? else {
            bail!("no Deployment {NAMESPACE}/{NAME}: deploy it with deploy/local/run.sh (or cluster.sh deploy)");
        };
        let wanted = deployment.spec.as_ref().and_then(|s| s.replicas);
        ensure!(wanted == Some(2), "spec.replicas is {wanted:?}, not 2");
        let status = deployment.status.unwrap_or_default();
        let ready: Vec<Pod> = pods
            .list(&lp)
            .await?
            .items
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none() && is_ready(p))
            .collect();
        Ok((status.ready_replicas == Some(2)
            && status.updated_replicas == Some(2)
            && status.replicas == Some(2)
            && ready.len() == 2)
            .then_some(ready))
    })
    .await
}

fn name(pod: &Pod) -> &str {
    pod.metadata.name.as_deref().unwrap_or_default()
}

/// The `stevedore_controlplane_leader` gauge of a replica, read through port-forward
/// (metrics listen on the pod's localhost only).
async fn leader_gauge(cluster: &ClusterInfo, pod: &Pod) -> Result<u8> {
    let metrics = stevedore_tests::metrics::pod_metrics(
        cluster,
        NAMESPACE,
        name(pod),
        stevedore_tests::metrics::CONTROLPLANE_METRICS_PORT,
    )
    .await?;
    metrics
        .lines()
        .find_map(|l| l.strip_prefix("stevedore_controlplane_leader "))
        .context("no stevedore_controlplane_leader in /metrics")?
        .trim()
        .parse()
        .context("leader gauge")
}

#[tokio::test]
async fn two_ready_replicas_and_exactly_one_leader() -> Result<()> {
    run_in_namespace("controlplane-deploy-leader", |ctx| async move {
        let pods = replicas(&ctx.client).await?;
        let names: Vec<&str> = pods.iter().map(name).collect();
        let leases: Api<Lease> = Api::namespaced(ctx.client.clone(), NAMESPACE);
        // Right after a rollout the Lease may still name a replaced replica until the
        // new ones take over; wait until it names one of the current replicas, and both
        // replicas' gauges agree with it.
        let holder = poll_until(
            "the Lease held by a current replica whose gauge reads 1, the other's 0",
            Duration::from_secs(60),
            || async {
                let lease = leases.get(NAME).await?;
                let holder = lease.spec.and_then(|s| s.holder_identity);
                let Some(holder) = holder.filter(|h| names.contains(&h.as_str())) else {
                    return Ok(None);
                };
                for pod in &pods {
                    let gauge = leader_gauge(ctx.cluster, pod).await?;
                    let expected = u8::from(name(pod) == holder);
                    if gauge != expected {
                        bail!(
                            "{} reports leader {gauge}, Lease holder is {holder}",
                            name(pod)
                        );
                    }
                }
                Ok(Some(holder))
            },
        )
        .await?;
        // Two replicas on one node still must not both lead: check a few more times.
        for _ in 0..4 {
            tokio::time::sleep(Duration::from_secs(1)).await;
            let leaders: Vec<&str> = futures::future::try_join_all(
                pods.iter().map(|pod| leader_gauge(ctx.cluster, pod)),
            )
            .await?
            .into_iter()
            .zip(&names)
            .filter(|(gauge, _)| *gauge == 1)
            .map(|(_, n)| *n)
            .collect();
            ensure!(
                leaders == [holder.as_str()],
                "leaders {leaders:?}, Lease holder {holder}"
            );
        }
        Ok(())
    })
    .await
}

/// Asks the apiserver whether the control plane's service account may do something.
async fn allowed(ctx: &TestContext, attributes: ResourceAttributes) -> Result<bool> {
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(SERVICE_ACCOUNT.into()),
            groups: Some(vec![
                "system:serviceaccounts".into(),
                "system:serviceaccounts:kube-system".into(),
                "system:authenticated".into(),
            ]),
            resource_attributes: Some(attributes),
            ..Default::default()
        },
        ..Default::default()
    };
    let reviewed = Api::<SubjectAccessReview>::all(ctx.client.clone())
        .create(&PostParams::default(), &review)
        .await?;
    Ok(reviewed.status.is_some_and(|s| s.allowed))
}

/// `verb group/resource[/subresource] [name] in namespace` as review attributes.
fn attrs(
    verb: &str,
    group: &str,
    resource: &str,
    namespace: Option<&str>,
    name: Option<&str>,
) -> ResourceAttributes {
    let (resource, subresource) = match resource.split_once('/') {
        Some((r, s)) => (r, Some(s.to_owned())),
        None => (resource, None),
    };
    ResourceAttributes {
        verb: Some(verb.into()),
        group: Some(group.into()),
        resource: Some(resource.into()),
        subresource,
        namespace: namespace.map(Into::into),
        name: name.map(Into::into),
        ..Default::default()
    }
}

#[tokio::test]
async fn rbac_grants_the_reconcilers_needs_and_no_more() -> Result<()> {
    run_in_namespace("controlplane-deploy-rbac", |ctx| async move {
        let ns = Some(ctx.namespace.as_str());
        let node = Some(ctx.cluster.node_name.as_str());
        let lease = Some(NAME);
        let must = [
            // The agents' API, through the binding to stevedore:agent-client.
            attrs("update", "stevedore.dev", "agents/pods", None, node),
            attrs("update", "stevedore.dev", "agents/images", None, node),
            attrs("get", "stevedore.dev", "agents/node", None, node),
            attrs("update", "stevedore.dev", "agents/probes", None, node),
            // A CloneSet controller's writes.
            attrs("create", "", "pods", ns, None),
            attrs("update", "", "pods", ns, Some("p")),
            attrs("delete", "", "pods", ns, Some("p")),
            attrs("patch", "", "pods/status", ns, Some("p")),
            // In-place resize of container resources.
            attrs("patch", "", "pods/resize", ns, Some("p")),
            attrs("create", "", "persistentvolumeclaims", ns, None),
            attrs("create", "apps", "controllerrevisions", ns, None),
            attrs("watch", "", "nodes", None, None),
            attrs(
                "update",
                "apps.kruise.io",
                "clonesets/status",
                ns,
                Some("c"),
            ),
            attrs(
                "update",
                "apps.kruise.io",
                "clonesets/finalizers",
                ns,
                Some("c"),
            ),
            attrs("create", "events.k8s.io", "events", ns, None),
            attrs("create", "", "events", ns, None),
            // Later reconcilers and the ImageList distributor.
            attrs("create", "apps.kruise.io", "broadcastjobs", ns, None),
            attrs(
                "update",
                "policy.kruise.io",
                "podunavailablebudgets/status",
                ns,
                Some("b"),
            ),
            attrs("create", "stevedore.dev", "imagelists", None, None),
            attrs("update", "stevedore.dev", "imagelists/status", None, node),
            // Tokens for the agents, each for one node's audience, of its own account.
            attrs(
                "create",
                "",
                "serviceaccounts/token",
                Some(NAMESPACE),
                Some("stevedore-controlplane"),
            ),
            // The webhook CA and its namespace in the PodUnavailableBudget CRD's conversion.
            attrs(
                "get",
                "apiextensions.k8s.io",
                "customresourcedefinitions",
                None,
                Some(PUB_CRD),
            ),
            attrs(
                "patch",
                "apiextensions.k8s.io",
                "customresourcedefinitions",
                None,
                Some(PUB_CRD),
            ),
            // Its own Lease.
            attrs(
                "create",
                "coordination.k8s.io",
                "leases",
                Some(NAMESPACE),
                None,
            ),
            attrs(
                "update",
                "coordination.k8s.io",
                "leases",
                Some(NAMESPACE),
                lease,
            ),
        ];
        let must_not = [
            // No Secrets without a namespace's grant (least_privilege.rs checks one that
            // grants it), and never discovering or changing them.
            attrs("get", "", "secrets", ns, Some("pull")),
            attrs("get", "", "secrets", None, Some("pull")),
            attrs("list", "", "secrets", ns, None),
            attrs("watch", "", "secrets", None, None),
            attrs("update", "", "secrets", ns, Some("pull")),
            // Leases: only its own, only in its namespace.
            attrs(
                "update",
                "coordination.k8s.io",
                "leases",
                Some(NAMESPACE),
                Some("kube-scheduler"),
            ),
            attrs("create", "coordination.k8s.io", "leases", ns, None),
            attrs("get", "coordination.k8s.io", "leases", ns, lease),
            // Nodes are read only; CloneSets are the users'.
            attrs("update", "", "nodes", None, node),
            attrs("patch", "", "nodes/status", None, node),
            attrs("create", "apps.kruise.io", "clonesets", ns, None),
            attrs("delete", "apps.kruise.io", "clonesets", ns, Some("c")),
            // No CRD but the PodUnavailableBudget one, and that one only patched.
            attrs(
                "patch",
                "apiextensions.k8s.io",
                "customresourcedefinitions",
                None,
                Some("clonesets.apps.kruise.io"),
            ),
            attrs(
                "list",
                "apiextensions.k8s.io",
                "customresourcedefinitions",
                None,
                None,
            ),
            attrs(
                "delete",
                "apiextensions.k8s.io",
                "customresourcedefinitions",
                None,
                Some(PUB_CRD),
            ),
            // Nothing outside the design's kinds.
            attrs("create", "apps", "deployments", ns, None),
            attrs("create", "", "pods/exec", ns, Some("p")),
            attrs("create", "", "serviceaccounts/token", ns, Some("default")),
            attrs(
                "create",
                "",
                "serviceaccounts/token",
                Some(NAMESPACE),
                Some("stevedore-agent"),
            ),
            attrs(
                "create",
                "rbac.authorization.k8s.io",
                "clusterrolebindings",
                None,
                None,
            ),
            attrs(
                "create",
                "authentication.k8s.io",
                "tokenreviews",
                None,
                None,
            ),
        ];
        let mut wrong = Vec::new();
        for (expected, list) in [(true, &must[..]), (false, &must_not[..])] {
            for attributes in list {
                if allowed(&ctx, attributes.clone()).await? != expected {
                    wrong.push(format!(
                        "{} {}/{}{} name={:?} ns={:?}: expected allowed={expected}",
                        attributes.verb.as_deref().unwrap_or_default(),
                        attributes.group.as_deref().unwrap_or_default(),
                        attributes.resource.as_deref().unwrap_or_default(),
                        attributes
                            .subresource
                            .as_deref()
                            .map(|s| format!("/{s}"))
                            .unwrap_or_default(),
                        attributes.name,
                        attributes.namespace,
                    ));
                }
            }
        }
        ensure!(
            wrong.is_empty(),
            "RBAC of {SERVICE_ACCOUNT}:\n{}",
            wrong.join("\n")
        );

        // No wildcard in any rule of its roles.
        let role = Api::<ClusterRole>::all(ctx.client.clone())
            .get("stevedore:controlplane")
            .await?;
        let lease_role = Api::<Role>::namespaced(ctx.client.clone(), NAMESPACE)
            .get("stevedore:controlplane:leader-election")
            .await?;
        let rules = role
            .rules
            .unwrap_or_default()
            .into_iter()
            .chain(lease_role.rules.unwrap_or_default());
        for rule in rules {
            let fields = [
                rule.api_groups.clone().unwrap_or_default(),
                rule.resources.clone().unwrap_or_default(),
                rule.verbs.clone(),
            ];
            ensure!(
                !fields.iter().flatten().any(|v| v.contains('*')),
                "wildcard in {rule:?}"
            );
        }
        Ok(())
    })
    .await
}

/// No replica holds a shared token for the agents (the control plane requests one per
/// node, see the RBAC test), and each runs as a non-root user without capabilities,
/// privilege escalation or an unconfined seccomp profile.
#[tokio::test]
async fn replicas_hold_no_shared_agent_token_and_run_unprivileged() -> Result<()> {
    run_in_namespace("controlplane-deploy-token", |ctx| async move {
        for pod in replicas(&ctx.client).await? {
            let spec = pod.spec.as_ref().context("pod without spec")?;
            let container = &spec.containers[0];
            // A projected token with an audience would be one credential for every
            // node's agent, replayable by root on any node that receives it.
            let shared = spec
                .volumes
                .iter()
                .flatten()
                .filter_map(|v| v.projected.as_ref())
                .filter_map(|p| p.sources.as_ref())
                .flatten()
                .filter_map(|s| s.service_account_token.as_ref())
                .find(|t| {
                    t.audience
                        .as_deref()
                        .is_some_and(|a| a.starts_with(AGENT_AUDIENCE))
                });
            ensure!(
                shared.is_none(),
                "a shared agent token is projected: {shared:?}"
            );

            // The running process, seen from the host.
            let id = pod
                .status
                .as_ref()
                .and_then(|s| s.container_statuses.as_ref())
                .and_then(|c| c.first())
                .and_then(|c| c.container_id.as_deref())
                .and_then(|id| id.strip_prefix("containerd://"))
                .context("no containerd container ID")?;
            let proc_status = process_status(id)?;
            for (field, expected) in [
                ("Uid:", "65532\t65532\t65532\t65532"),
                ("CapEff:", "0000000000000000"),
                ("CapBnd:", "0000000000000000"),
                ("NoNewPrivs:", "1"),
                // 2 = filter mode: a seccomp profile is applied (RuntimeDefault).
                ("Seccomp:", "2"),
            ] {
                let value = proc_status
                    .lines()
                    .find_map(|l| l.strip_prefix(field))
                    .map(str::trim);
                ensure!(
                    value == Some(expected),
                    "{} {field} {value:?}, expected {expected}",
                    name(&pod)
                );
            }
            ensure!(
                container
                    .security_context
                    .as_ref()
                    .and_then(|s| s.read_only_root_filesystem)
                    == Some(true),
                "root filesystem not read-only"
            );
        }
        Ok(())
    })
    .await
}

/// `/proc/<pid>/status` of the container's main process, found by its cgroup.
fn process_status(container_id: &str) -> Result<String> {
    for entry in std::fs::read_dir("/proc")? {
        let dir = entry?.path();
        let is_pid = dir
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()));
        if !is_pid {
            continue;
        }
        let Ok(cgroup) = std::fs::read_to_string(dir.join("cgroup")) else {
            continue;
        };
        let Ok(comm) = std::fs::read_to_string(dir.join("comm")) else {
            continue;
        };
        if cgroup.contains(container_id) && comm.trim().starts_with("stevedore-contr") {
            return Ok(std::fs::read_to_string(dir.join("status"))?);
        }
    }
    bail!(
        "no stevedore-controlplane process in container {container_id} (tests run on the node, as root)"
    )
}
