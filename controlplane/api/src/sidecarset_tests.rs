//! The CRD carries OpenKruise's names, scope, defaults and columns; an OpenKruise
//! SidecarSet reads into the types; the select-everything rule is on the spec.

use kube::CustomResourceExt as _;
use serde_json::{Value, json};

use super::*;

fn version_schema() -> Value {
    let crd = SidecarSet::crd();
    let schema = crd.spec.versions[0].schema.clone().expect("a schema");
    serde_json::to_value(schema.open_api_v3_schema).expect("schema as JSON")
}

fn spec_schema() -> Value {
    version_schema()["properties"]["spec"].clone()
}

const OPENKRUISE_SAMPLE: &str = r#"
apiVersion: apps.kruise.io/v1alpha1
kind: SidecarSet
metadata:
  name: log-agent
spec:
  selector:
    matchLabels:
      app: web
  namespace: shop
  containers:
    - name: log-agent
      image: registry.example/log-agent:1.0
      podInjectPolicy: AfterAppContainer
      shareVolumePolicy:
        type: enabled
      transferEnv:
        - sourceContainerName: web
          envName: TZ
      volumeMounts:
        - name: logs
          mountPath: /var/log/app
  volumes:
    - name: logs
      emptyDir: {}
  imagePullSecrets:
    - name: pull
  patchPodMetadata:
    - annotations:
        example.com/log: "on"
      patchPolicy: Overwrite
  injectionStrategy:
    revision:
      customVersion: v1
      policy: Partial
  updateStrategy:
    type: RollingUpdate
    partition: 2
    maxUnavailable: 50%
    paused: true
    scatterStrategy:
      - key: zone
        value: a
"#;

#[test]
fn an_openkruise_sidecarset_reads_with_every_field() {
    let set: SidecarSet = serde_saphyr::from_str(OPENKRUISE_SAMPLE).expect("decodes");
    let spec = &set.spec;
    assert_eq!(spec.namespace, "shop");
    let sidecar = &spec.containers[0];
    assert_eq!(sidecar.container.name, "log-agent");
    assert_eq!(
        sidecar.container.image.as_deref(),
        Some("registry.example/log-agent:1.0")
    );
    assert_eq!(
        sidecar.pod_inject_policy,
        Some(PodInjectPolicy::AfterAppContainer)
    );
    assert!(sidecar.share_volume_policy.enabled());
    assert_eq!(sidecar.transfer_env[0].env_name, "TZ");
    assert_eq!(spec.volumes[0].name, "logs");
    assert_eq!(spec.image_pull_secrets[0].name, "pull");
    assert_eq!(
        spec.patch_pod_metadata[0].patch_policy,
        Some(PatchPolicy::Overwrite)
    );
    let revision = spec.injection_strategy.revision.as_ref().expect("revision");
    assert_eq!(revision.policy, Some(InjectRevisionPolicy::Partial));
    let update = &spec.update_strategy;
    assert_eq!(
        update.strategy_type(),
        SidecarSetUpdateStrategyType::RollingUpdate
    );
    assert_eq!(update.partition, Some(IntOrString::Int(2)));
    assert!(update.paused);
    let round_trip: Value = serde_json::to_value(&set).expect("serializes");
    assert_eq!(
        round_trip["spec"]["containers"][0]["podInjectPolicy"],
        "AfterAppContainer"
    );
    assert_eq!(
        round_trip["spec"]["containers"][0]["volumeMounts"][0]["name"],
        "logs"
    );
}

#[test]
fn the_crd_is_cluster_scoped_with_openkruise_columns() {
    let crd = SidecarSet::crd();
    assert_eq!(crd.spec.scope, "Cluster");
    assert_eq!(crd.spec.names.plural, "sidecarsets");
    let columns: Vec<_> = (crd.spec.versions[0]
        .additional_printer_columns
        .iter()
        .flatten())
    .map(|c| (c.name.as_str(), c.json_path.as_str()))
    .collect();
    assert_eq!(
        columns,
        [
            ("MATCHED", ".status.matchedPods"),
            ("UPDATED", ".status.updatedPods"),
            ("READY", ".status.readyPods"),
            ("AGE", ".metadata.creationTimestamp"),
        ]
    );
}

#[test]
fn defaults_are_openkruise_s() {
    let spec = spec_schema();
    let properties = &spec["properties"];
    assert_eq!(properties["revisionHistoryLimit"]["default"], json!(10));
    let update = &properties["updateStrategy"]["properties"];
    assert_eq!(update["type"]["default"], json!("RollingUpdate"));
    assert_eq!(update["maxUnavailable"]["default"], json!(1));
    let patch = &properties["patchPodMetadata"]["items"]["properties"];
    assert_eq!(patch["patchPolicy"]["default"], json!("Retain"));
}

#[test]
fn selecting_every_pod_of_the_cluster_is_refused_naming_the_selector() {
    let spec = spec_schema();
    let rules = spec["x-kubernetes-validations"].as_array().expect("rules");
    let rule = (rules.iter())
        .find(|r| r["rule"] == SELECTS_SOME_PODS_RULE)
        .expect("the rule is on the spec");
    assert_eq!(rule["fieldPath"], ".selector");
    assert!(
        rule["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("spec.selector:"))
    );
    // Each way out of the rule reads a field the schema declares.
    for field in ["selector", "namespace", "namespaceSelector"] {
        assert!(spec["properties"][field].is_object(), "{field}");
    }
}

#[test]
fn sidecar_names_are_unique_and_hot_upgrade_needs_its_empty_image() {
    let containers = &spec_schema()["properties"]["containers"];
    assert!(
        containers["x-kubernetes-validations"]
            .to_string()
            .contains("only once")
    );
    let item = &containers["items"];
    assert_eq!(item["required"], json!(["image", "name"]));
    let upgrade = &item["properties"]["upgradeStrategy"];
    let rules = &upgrade["x-kubernetes-validations"];
    assert_eq!(rules[0]["rule"], HOT_UPGRADE_EMPTY_IMAGE_RULE);
    assert_eq!(rules[0]["fieldPath"], ".hotUpgradeEmptyImage");
    assert!(
        rules[0]["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("hotUpgradeEmptyImage:")),
        "the message names the field"
    );
    // Both fields the item rules read are declared (CEL reads only declared fields).
    let item_rules = item["x-kubernetes-validations"].to_string();
    assert!(item_rules.contains("size(self.name) <= 61"), "{item_rules}");
    assert!(item_rules.contains("!= self.image"), "{item_rules}");
    let init = &spec_schema()["properties"]["initContainers"]["items"];
    assert!(init["properties"].get("podInjectPolicy").is_none());
    assert!(
        init["properties"]["upgradeStrategy"]["x-kubernetes-validations"]
            .to_string()
            .contains("containers only"),
        "an init container is never upgraded, so never hot"
    );
}

#[test]
fn an_openkruise_hot_upgrade_sidecar_reads() {
    let set: SidecarSet = serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1alpha1", "kind": "SidecarSet",
        "metadata": { "name": "mesh" },
        "spec": { "namespace": "shop", "containers": [{
            "name": "envoy", "image": "envoy:1",
            "upgradeStrategy": { "upgradeType": "HotUpgrade", "hotUpgradeEmptyImage": "empty:1" }
        }] },
    }))
    .expect("decodes");
    let strategy = &set.spec.containers[0].upgrade_strategy;
    assert!(strategy.is_hot());
    assert_eq!(strategy.hot_upgrade_empty_image, "empty:1");
    assert!(!SidecarContainerUpgradeStrategy::default().is_hot());
}
