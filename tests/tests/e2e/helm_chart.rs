//! The Helm chart `deploy/helm/stevedore` as rendered: it lints clean, renders what each
//! value says, shares its RBAC and admission policy with the kustomize manifests and is
//! accepted by the apiserver (a server-side dry run, which changes nothing, so this suite
//! overlaps the others). Installing it on the cluster is `helm_release`.

use anyhow::{Context, Result, anyhow, ensure};
use serde_json::{Value, json};
use stevedore_tests::helm::{Helm, chart_dir, container_env, find, objects};
use stevedore_tests::{cluster, run_in_namespace};

const RELEASE: &str = "stevedore";

/// The values every install must set (the chart refuses to render without them): the
/// images' registry (an example name) and the apiserver's address for the
/// NetworkPolicy (a documentation address).
const REQUIRED: [&str; 2] = [
    "images.registry=registry.example",
    "networkPolicy.apiserver[0].ipBlock.cidr=192.0.2.10/32",
];

/// `helm template` with the required values and then `sets`.
async fn render(helm: &Helm, namespace: &str, sets: &[&str]) -> Result<String> {
    let all: Vec<&str> = REQUIRED
        .iter()
        .copied()
        .chain(sets.iter().copied())
        .collect();
    helm.template(namespace, &all).await
}

#[tokio::test]
async fn chart_lints_clean() -> Result<()> {
    let helm = Helm::new(cluster().await?)?;
    let mut args = vec!["lint", "--strict"];
    for set in REQUIRED {
        args.extend(["--set", set]);
    }
    let chart = chart_dir().to_string_lossy().into_owned();
    args.push(&chart);
    let out = helm.helm(&args).await?;
    ensure!(out.contains("0 chart(s) failed"), "helm lint said: {out}");
    Ok(())
}

/// Whether the rendered control plane is required on control-plane nodes (or only
/// prefers them).
fn requires_control_plane_nodes(rendered: &str) -> Result<bool> {
    let objs = objects(rendered)?;
    let cp = find(&objs, "Deployment", "stevedore-controlplane")?;
    let node_affinity = &cp["spec"]["template"]["spec"]["affinity"]["nodeAffinity"];
    let required = &node_affinity["requiredDuringSchedulingIgnoredDuringExecution"];
    let preferred = &node_affinity["preferredDuringSchedulingIgnoredDuringExecution"];
    let role = "node-role.kubernetes.io/control-plane";
    let names_role = |v: &Value| v.to_string().contains(role);
    ensure!(
        names_role(required) != names_role(preferred),
        "expected the role in exactly one of required / preferred: {node_affinity}"
    );
    Ok(names_role(required))
}

/// `controlplane.placement`: controlPlaneNodes requires control-plane nodes, anywhere
/// prefers them, and auto (the default) looks at the cluster's nodes: this cluster has a
/// control-plane node, so a render that may look (`--dry-run=server`) requires one, and a
/// plain `helm template`, which cannot look, prefers one. A bad value is refused by name.
#[tokio::test]
async fn the_control_plane_placement_follows_the_clusters_control_plane_nodes() -> Result<()> {
    let helm = Helm::new(cluster().await?)?;
    let ns = "stevedore-system";
    let asked = helm.template(
        ns,
        &[
            REQUIRED[0],
            REQUIRED[1],
            "controlplane.placement=controlPlaneNodes",
        ],
    );
    ensure!(
        requires_control_plane_nodes(&asked.await?)?,
        "controlPlaneNodes"
    );
    let anywhere = helm.template(
        ns,
        &[REQUIRED[0], REQUIRED[1], "controlplane.placement=anywhere"],
    );
    ensure!(!requires_control_plane_nodes(&anywhere.await?)?, "anywhere");
    ensure!(
        !requires_control_plane_nodes(&render(&helm, ns, &[]).await?)?,
        "auto, no lookup"
    );

    let chart = chart_dir().to_string_lossy().into_owned();
    let mut args = vec![
        "template",
        RELEASE,
        &chart,
        "--namespace",
        ns,
        "--dry-run=server",
    ];
    for set in REQUIRED {
        args.extend(["--set", set]);
    }
    ensure!(
        requires_control_plane_nodes(&helm.helm(&args).await?)?,
        "auto, with lookup"
    );

    let refused = helm.template(
        ns,
        &[REQUIRED[0], REQUIRED[1], "controlplane.placement=nearby"],
    );
    let message = format!(
        "{:#}",
        refused.await.err().context("placement=nearby rendered")?
    );
    ensure!(
        message.contains("controlplane.placement") && message.contains("nearby"),
        "{message}"
    );
    Ok(())
}

/// Without a registry the chart renders nothing (a short image name could resolve on a
/// public default registry), nor without the apiserver's addresses while the
/// NetworkPolicy is on; each refusal says what to set.
#[tokio::test]
async fn the_chart_refuses_to_render_without_its_required_values() -> Result<()> {
    let helm = Helm::new(cluster().await?)?;
    let cases: [(&[&str], &str); 2] = [
        (&[REQUIRED[1]], "images.registry is required"),
        (&[REQUIRED[0]], "networkPolicy.apiserver is empty"),
    ];
    for (sets, said) in cases {
        let refused = helm.template("stevedore-system", sets).await;
        let message = format!("{:#}", refused.err().context("rendered")?);
        ensure!(message.contains(said), "{sets:?}: {message}");
    }
    let without_policy = [REQUIRED[0], "networkPolicy.enabled=false"];
    let objs = objects(&helm.template("stevedore-system", &without_policy).await?)?;
    ensure!(!objs.iter().any(|o| o["kind"] == "NetworkPolicy"));
    Ok(())
}

/// What a rendering with some `--set` values must show.
type Check = fn(&[Value]) -> Result<()>;

/// The value cases: a name, the `--set` values, and what the rendered objects must say.
fn value_cases() -> Vec<(&'static str, &'static [&'static str], Check)> {
    vec![
        ("defaults", &[], |objs| {
            let ds = find(objs, "DaemonSet", "stevedore-agent")?;
            let volume = &ds["spec"]["template"]["spec"]["volumes"][0]["hostPath"]["path"];
            ensure!(volume == "/run/containerd", "socket dir {volume}");
            let image = &ds["spec"]["template"]["spec"]["containers"][0]["image"];
            ensure!(
                image == "registry.example/stevedore/agent:0.1.0",
                "agent image {image}"
            );
            ensure!(container_env(ds, "STEVEDORE_METRICS_ADDR") == Some(&json!("127.0.0.1:10353")));
            let cp = find(objs, "Deployment", "stevedore-controlplane")?;
            ensure!(cp["spec"]["replicas"] == 2);
            ensure!(container_env(cp, "STEVEDORE_CONTROLLERS") == Some(&json!("*")));
            ensure!(container_env(cp, "STEVEDORE_METRICS_ADDR") == Some(&json!("127.0.0.1:10354")));
            ensure!(container_env(cp, "STEVEDORE_WEBHOOK_CLIENT_CA").is_none());
            // One replica stays through drains; only the apiserver reaches the webhook.
            let pdb = find(objs, "PodDisruptionBudget", "stevedore-controlplane")?;
            ensure!(pdb["spec"]["minAvailable"] == 1, "{pdb}");
            ensure!(
                pdb["spec"]["selector"]["matchLabels"]["app.kubernetes.io/name"]
                    == "stevedore-controlplane"
            );
            let policy = find(objs, "NetworkPolicy", "stevedore-controlplane")?;
            let want = json!([{
                "ports": [{ "port": "webhook", "protocol": "TCP" }],
                "from": [{ "ipBlock": { "cidr": "192.0.2.10/32" } }],
            }]);
            ensure!(policy["spec"]["ingress"] == want, "{policy}");
            ensure!(container_env(ds, "STEVEDORE_LOG_FORMAT") == Some(&json!("json")));
            // No dashboard by default.
            ensure!(!objs.iter().any(|o| o["kind"] == "ConfigMap"
                && o["metadata"]["name"] == "stevedore-grafana-dashboard"));
            // No metrics Service by default; the webhook's Service is always there.
            let metrics_service = |o: &Value| {
                o["kind"] == "Service" && o["metadata"]["name"] != "stevedore-controlplane-webhook"
            };
            find(objs, "Service", "stevedore-controlplane-webhook")?;
            ensure!(!objs.iter().any(|o| metrics_service(o)
                || o["kind"] == "RoleBinding"
                    && o["metadata"]["name"] == "stevedore-pull-secret-reader"));
            Ok(())
        }),
        (
            "k3s socket",
            &["agent.containerdSocket=/run/k3s/containerd/containerd.sock"],
            |objs| {
                let ds = find(objs, "DaemonSet", "stevedore-agent")?;
                let volume = &ds["spec"]["template"]["spec"]["volumes"][0]["hostPath"]["path"];
                ensure!(volume == "/run/k3s/containerd", "socket dir {volume}");
                let socket = container_env(ds, "STEVEDORE_CONTAINERD_SOCKET");
                ensure!(
                    socket == Some(&json!("/run/containerd/containerd.sock")),
                    "{socket:?}"
                );
                Ok(())
            },
        ),
        (
            "k3s registry configuration",
            &["agent.registryConfigDir=/var/lib/rancher/k3s/agent/etc/containerd/certs.d"],
            |objs| {
                let ds = find(objs, "DaemonSet", "stevedore-agent")?;
                let volumes = ds["spec"]["template"]["spec"]["volumes"]
                    .as_array()
                    .context("no volumes")?;
                let config = volumes
                    .iter()
                    .find(|v| v["name"] == "registry-config")
                    .context("no registry-config volume")?;
                let path = &config["hostPath"]["path"];
                ensure!(
                    path == "/var/lib/rancher/k3s/agent/etc/containerd/certs.d",
                    "registry config dir {path}"
                );
                Ok(())
            },
        ),
        (
            "custom socket",
            &["agent.containerdSocket=/var/run/ctr/custom.sock"],
            |objs| {
                let ds = find(objs, "DaemonSet", "stevedore-agent")?;
                let volume = &ds["spec"]["template"]["spec"]["volumes"][0]["hostPath"]["path"];
                ensure!(volume == "/var/run/ctr", "socket dir {volume}");
                let socket = container_env(ds, "STEVEDORE_CONTAINERD_SOCKET");
                ensure!(
                    socket == Some(&json!("/run/containerd/custom.sock")),
                    "{socket:?}"
                );
                Ok(())
            },
        ),
        (
            "images, ports, log, controllers",
            &[
                "images.registry=registry.example:5000",
                "images.tag=v9",
                "images.controlplane.tag=v10",
                "agent.ports.grpc=20350",
                "log.level=debug",
                "log.format=text",
                "controlplane.controllers={*,-broadcastjob}",
                "controlplane.replicas=3",
            ],
            |objs| {
                let ds = find(objs, "DaemonSet", "stevedore-agent")?;
                let cp = find(objs, "Deployment", "stevedore-controlplane")?;
                let image =
                    |o: &Value| o["spec"]["template"]["spec"]["containers"][0]["image"].clone();
                ensure!(
                    image(ds) == "registry.example:5000/stevedore/agent:v9",
                    "{}",
                    image(ds)
                );
                ensure!(
                    image(cp) == "registry.example:5000/stevedore/controlplane:v10",
                    "{}",
                    image(cp)
                );
                ensure!(container_env(ds, "STEVEDORE_GRPC_ADDR") == Some(&json!("0.0.0.0:20350")));
                ensure!(container_env(cp, "STEVEDORE_AGENT_PORT") == Some(&json!("20350")));
                ensure!(container_env(cp, "RUST_LOG") == Some(&json!("debug")));
                ensure!(container_env(ds, "STEVEDORE_LOG_FORMAT") == Some(&json!("text")));
                ensure!(
                    container_env(cp, "STEVEDORE_CONTROLLERS") == Some(&json!("*,-broadcastjob"))
                );
                ensure!(cp["spec"]["replicas"] == 3);
                Ok(())
            },
        ),
        (
            "the apiserver's webhook client certificate",
            &[
                "controlplane.webhookClient.ca=-----BEGIN CERTIFICATE-----",
                "controlplane.webhookClient.names={kube-apiserver-webhook}",
            ],
            |objs| {
                let configmap = find(objs, "ConfigMap", "stevedore-webhook-client-ca")?;
                ensure!(configmap["data"]["ca.crt"] == "-----BEGIN CERTIFICATE-----");
                let cp = find(objs, "Deployment", "stevedore-controlplane")?;
                ensure!(
                    container_env(cp, "STEVEDORE_WEBHOOK_CLIENT_CA")
                        == Some(&json!("/etc/stevedore/webhook-client-ca/ca.crt"))
                );
                ensure!(
                    container_env(cp, "STEVEDORE_WEBHOOK_CLIENT_NAMES")
                        == Some(&json!("kube-apiserver-webhook"))
                );
                let pod = &cp["spec"]["template"]["spec"];
                ensure!(
                    pod["volumes"][0]["configMap"]["name"] == "stevedore-webhook-client-ca",
                    "{pod}"
                );
                ensure!(
                    pod["containers"][0]["volumeMounts"][0]["mountPath"]
                        == "/etc/stevedore/webhook-client-ca",
                    "{pod}"
                );
                Ok(())
            },
        ),
        ("one replica", &["controlplane.replicas=1"], |objs| {
            // minAvailable 1 of one replica would block every drain of its node.
            ensure!(!objs.iter().any(|o| o["kind"] == "PodDisruptionBudget"));
            Ok(())
        }),
        (
            "pull secrets and metrics",
            &[
                "controlplane.pullSecretNamespaces={team-a,team-b}",
                "metrics.enabled=true",
                "metrics.serviceMonitor.enabled=true",
            ],
            |objs| {
                let bindings: Vec<_> = objs
                    .iter()
                    .filter(|o| {
                        o["kind"] == "RoleBinding"
                            && o["metadata"]["name"] == "stevedore-pull-secret-reader"
                    })
                    .map(|o| o["metadata"]["namespace"].clone())
                    .collect();
                ensure!(
                    bindings == [json!("team-a"), json!("team-b")],
                    "{bindings:?}"
                );
                let cp = find(objs, "Deployment", "stevedore-controlplane")?;
                ensure!(
                    container_env(cp, "STEVEDORE_METRICS_ADDR") == Some(&json!("0.0.0.0:10354"))
                );
                find(objs, "Service", "stevedore-controlplane-metrics")?;
                let policy = find(objs, "NetworkPolicy", "stevedore-controlplane")?;
                ensure!(
                    policy["spec"]["ingress"][1]
                        == json!({ "ports": [{ "port": "metrics", "protocol": "TCP" }] }),
                    "/metrics is admitted while metrics.enabled: {policy}"
                );
                let agent_monitor = find(objs, "ServiceMonitor", "stevedore-agent")?;
                ensure!(
                    agent_monitor["spec"]["endpoints"][0]["relabelings"][0]["targetLabel"]
                        == "node",
                    "the dashboard's per-node panels need the node label: {agent_monitor}"
                );
                find(objs, "ServiceMonitor", "stevedore-controlplane").map(|_| ())
            },
        ),
        (
            "grafana dashboard",
            &[
                "metrics.grafanaDashboard.enabled=true",
                "metrics.grafanaDashboard.namespace=monitoring",
            ],
            |objs| {
                let map = find(objs, "ConfigMap", "stevedore-grafana-dashboard")?;
                ensure!(map["metadata"]["namespace"] == "monitoring", "{map}");
                ensure!(
                    map["metadata"]["labels"]["grafana_dashboard"] == "1",
                    "the sidecar's label: {map}"
                );
                let text = map["data"]["stevedore.json"].as_str().unwrap_or("");
                let dashboard: Value = serde_json::from_str(text)
                    .map_err(|e| anyhow!("the dashboard is not JSON ({e}): {text}"))?;
                ensure!(dashboard["uid"] == "stevedore-overview", "{dashboard}");
                Ok(())
            },
        ),
    ]
}

/// Each value of the chart, rendered: what a person sets and what the objects then say.
#[tokio::test]
async fn values_render_into_the_objects_they_name() -> Result<()> {
    let helm = Helm::new(cluster().await?)?;
    for (name, sets, check) in value_cases() {
        let rendered = objects(&render(&helm, "stevedore-system", sets).await?)?;
        check(&rendered).map_err(|e| anyhow!("case {name}: {e:#}"))?;
    }
    Ok(())
}

/// The objects of the kustomize manifest `deploy/<manifest>`.
fn kustomize_objects(manifest: &str) -> Result<Vec<Value>> {
    let path = stevedore_tests::cluster::repo_root()
        .join("deploy")
        .join(manifest);
    objects(&std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?)
}

/// The chart's RBAC, admission policy and webhook are the kustomize manifests' own (files/ links to
/// them), moved into the release namespace: same rules, same policy.
#[tokio::test]
async fn chart_rbac_and_admission_policy_match_the_kustomize_manifests() -> Result<()> {
    let helm = Helm::new(cluster().await?)?;
    let chart = objects(&render(&helm, "stevedore-system", &[]).await?)?;
    let manifests = [
        "agent/rbac.yaml",
        "agent/client-role.yaml",
        "agent/admission-policy.yaml",
        "controlplane/rbac.yaml",
        "controlplane/webhook.yaml",
        "controlplane/disruption.yaml",
    ];
    for manifest in manifests {
        let kustomize = kustomize_objects(manifest)?;
        ensure!(!kustomize.is_empty(), "{manifest} holds no object");
        for object in &kustomize {
            let (kind, name) = (
                object["kind"].as_str().unwrap_or_default(),
                object["metadata"]["name"].as_str().unwrap_or_default(),
            );
            let rendered = find(&chart, kind, name)?;
            // As the chart's `stevedore.fromFile` moves them: namespaces and service
            // account names only (a selector naming kube-system stays as it is).
            let moved = serde_json::to_string(object)?
                .replace(
                    "\"namespace\":\"kube-system\"",
                    "\"namespace\":\"stevedore-system\"",
                )
                .replace(
                    "serviceaccount:kube-system:",
                    "serviceaccount:stevedore-system:",
                );
            ensure!(
                serde_json::from_str::<Value>(&moved)? == *rendered,
                "{kind} {name} differs:\nkustomize: {object}\nchart: {rendered}"
            );
        }
    }
    Ok(())
}

/// What a workload's pod template must keep from the kustomize manifest in the chart:
/// every env variable (by name), volume mount, volume (by name) and the container's
/// securityContext. The chart may add more (values); dropping one is drift.
fn pod_settings(workload: &Value) -> Vec<String> {
    let pod = &workload["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    let each = |list: &Value, f: &dyn Fn(&Value) -> String| -> Vec<String> {
        list.as_array().into_iter().flatten().map(f).collect()
    };
    let mut settings = each(&container["env"], &|e| format!("env {}", e["name"]));
    settings.extend(each(&container["volumeMounts"], &|m| {
        format!(
            "mount {} at {} readOnly {}",
            m["name"], m["mountPath"], m["readOnly"]
        )
    }));
    settings.extend(each(&pod["volumes"], &|v| format!("volume {}", v["name"])));
    settings.push(format!("securityContext {}", container["securityContext"]));
    for field in ["hostNetwork", "hostPID", "dnsPolicy", "serviceAccountName"] {
        settings.push(format!("{field} {}", pod[field]));
    }
    settings
}

/// The chart's agent DaemonSet and control-plane Deployment are hand-written templates of
/// the kustomize ones: each setting there must be in the chart too (a mirror mount or an
/// allocator setting added to one and not the other is caught here).
#[tokio::test]
async fn chart_workloads_keep_every_setting_of_the_kustomize_manifests() -> Result<()> {
    let helm = Helm::new(cluster().await?)?;
    let chart = objects(&render(&helm, "stevedore-system", &[]).await?)?;
    let workloads = [
        ("agent/daemonset.yaml", "DaemonSet", "stevedore-agent"),
        (
            "controlplane/deployment.yaml",
            "Deployment",
            "stevedore-controlplane",
        ),
    ];
    for (manifest, kind, name) in workloads {
        let kustomize = kustomize_objects(manifest)?;
        let wanted = pod_settings(find(&kustomize, kind, name)?);
        let rendered = pod_settings(find(&chart, kind, name)?);
        let missing: Vec<_> = wanted.iter().filter(|s| !rendered.contains(s)).collect();
        ensure!(
            missing.is_empty(),
            "the chart's {kind} {name} lacks what {manifest} has: {missing:?}"
        );
    }
    Ok(())
}

#[tokio::test]
async fn rendered_chart_is_accepted_by_the_apiserver() -> Result<()> {
    run_in_namespace("helm-dry-run", |ctx| async move {
        let helm = Helm::new(ctx.cluster)?;
        let pull = format!("controlplane.pullSecretNamespaces={{{}}}", ctx.namespace);
        let rendered = render(&helm, &ctx.namespace, &[&pull, "metrics.enabled=true"]).await?;
        let out = helm
            .kubectl(&["apply", "--dry-run=server", "-f", "-"], Some(&rendered))
            .await?;
        ensure!(
            out.contains("daemonset.apps/stevedore-agent"),
            "kubectl said: {out}"
        );
        Ok(())
    })
    .await
}
