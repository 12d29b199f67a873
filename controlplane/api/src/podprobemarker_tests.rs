//! PodProbeMarker and NodePodProbe carry OpenKruise's names, scope and defaults; an
//! OpenKruise sample reads into the types; each refusal is a rule naming its field.

use kube::CustomResourceExt as _;
use serde_json::{Value, json};

use super::nodepodprobe::{NodePodProbe, probe_key, split_probe_key};
use super::podprobemarker::*;

fn spec_schema() -> Value {
    let crd = PodProbeMarker::crd();
    let schema = crd.spec.versions[0].schema.clone().expect("a schema");
    let root = serde_json::to_value(schema.open_api_v3_schema).expect("schema as JSON");
    root["properties"]["spec"].clone()
}

/// Every rule (and its message and field path) on a schema node.
fn rules(node: &Value) -> Vec<(String, String, String)> {
    node["x-kubernetes-validations"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            let text = |k: &str| r[k].as_str().unwrap_or_default().to_owned();
            (text("rule"), text("message"), text("fieldPath"))
        })
        .collect()
}

const OPENKRUISE_SAMPLE: &str = r#"
apiVersion: apps.kruise.io/v1alpha1
kind: PodProbeMarker
metadata:
  name: game-server-probe
  namespace: ns
spec:
  selector:
    matchLabels:
      app: game-server
  probes:
  - name: Idle
    containerName: game-server
    probe:
      exec:
        command:
        - /home/game/idle.sh
      initialDelaySeconds: 10
      timeoutSeconds: 3
      periodSeconds: 10
      successThreshold: 1
      failureThreshold: 3
    markerPolicy:
    - state: Succeeded
      labels:
        gameserver-idle: 'true'
      annotations:
        controller.kubernetes.io/pod-deletion-cost: '-10'
    - state: Failed
      labels:
        gameserver-idle: 'false'
    podConditionType: game.io/idle
"#;

#[test]
fn an_openkruise_sample_reads_into_the_types() {
    let marker: PodProbeMarker = serde_saphyr::from_str(OPENKRUISE_SAMPLE).expect("decodes");
    let probe = &marker.spec.probes[0];
    assert_eq!(probe.name, "Idle");
    assert_eq!(probe.pod_condition_type.as_deref(), Some("game.io/idle"));
    assert_eq!(probe.probe.timeout_seconds(), 3);
    assert_eq!(probe.probe.initial_delay_seconds(), 10);
    assert_eq!(probe.marker_policy[1].state, ProbeState::Failed);
    assert_eq!(
        probe.probe.exec.as_ref().map(|e| e.command.clone()),
        Some(vec!["/home/game/idle.sh".to_owned()])
    );
}

#[test]
fn names_scope_and_versions_are_openkruise_s() {
    let marker = PodProbeMarker::crd();
    assert_eq!(marker.spec.group, "apps.kruise.io");
    assert_eq!(marker.spec.scope, "Namespaced");
    assert_eq!(marker.spec.names.plural, "podprobemarkers");
    let node = NodePodProbe::crd();
    assert_eq!(node.spec.scope, "Cluster");
    assert_eq!(node.spec.names.plural, "nodepodprobes");
}

#[test]
fn probe_timing_defaults_are_core_v1_probe_s() {
    let probe = &spec_schema()["properties"]["probes"]["items"]["properties"]["probe"];
    for (field, default) in [
        ("timeoutSeconds", 1),
        ("periodSeconds", 10),
        ("successThreshold", 1),
        ("failureThreshold", 3),
    ] {
        assert_eq!(
            probe["properties"][field]["default"],
            json!(default),
            "{field}"
        );
    }
    let unset: ContainerProbeSpec = ContainerProbeSpec::default();
    assert_eq!(
        (
            unset.timeout_seconds(),
            unset.period_seconds(),
            unset.success_threshold(),
            unset.failure_threshold(),
            unset.initial_delay_seconds()
        ),
        (1, 10, 1, 3, 0)
    );
}

#[test]
fn every_refusal_names_its_field() {
    let spec = spec_schema();
    let probes = &spec["properties"]["probes"];
    let item = &probes["items"];
    let probe = &item["properties"]["probe"];
    let policy = &item["properties"]["markerPolicy"]["items"];
    let cases: [(&str, &Value, &str, &str); 8] = [
        ("unique names", probes, "q.name == p.name", "spec.probes"),
        (
            "unique conditions",
            probes,
            "q.podConditionType == p.podConditionType",
            "podConditionType",
        ),
        (
            "one handler",
            probe,
            "has(self.exec)",
            "exactly one handler",
        ),
        (
            "condition or policy",
            item,
            "has(self.markerPolicy)",
            "podConditionType or markerPolicy",
        ),
        ("reserved name", item, "!(self.name in", "spec.probes.name"),
        (
            "reserved condition",
            item,
            "!(self.podConditionType in",
            "spec.probes.podConditionType",
        ),
        (
            "policy state",
            policy,
            "self.state ==",
            "markerPolicy.state",
        ),
        ("selector", &spec, "oldSelf.selector", "spec.selector"),
    ];
    for (name, node, rule_part, message_part) in cases {
        let found = rules(node)
            .into_iter()
            .find(|(rule, _, _)| rule.contains(rule_part));
        let (_, message, _) = found.unwrap_or_else(|| panic!("{name}: no rule"));
        assert!(message.contains(message_part), "{name}: {message}");
    }
}

#[test]
fn reserved_conditions_are_in_both_rules() {
    let item = &spec_schema()["properties"]["probes"]["items"];
    let all = rules(item);
    for condition in RESERVED_CONDITIONS {
        let quoted = format!("'{condition}'");
        let refused = all
            .iter()
            .filter(|(rule, _, _)| rule.contains(&quoted))
            .count();
        assert_eq!(refused, 2, "{condition}");
    }
}

#[test]
fn condition_types_are_qualified_names() {
    let regex = regex::Regex::new(CONDITION_TYPE_REGEX).expect("regex");
    for (value, ok) in [
        ("game.io/idle", true),
        ("Healthy", true),
        ("a_b.c-d", true),
        ("bad/", false),
        ("/x", false),
        ("has space", false),
        ("-x", false),
    ] {
        assert_eq!(regex.is_match(value), ok, "{value:?}");
    }
}

#[test]
fn probe_keys_join_and_split() {
    assert_eq!(probe_key("m", "Idle"), "m#Idle");
    assert_eq!(split_probe_key("m#Idle"), Some(("m", "Idle")));
    assert_eq!(split_probe_key("plain"), None);
}

/// The schema of a NodePodProbe's probe (`spec.podProbes[].probes[].probe`).
fn node_probe_schema() -> Value {
    let crd = NodePodProbe::crd();
    let schema = crd.spec.versions[0].schema.clone().expect("a schema");
    let root = serde_json::to_value(schema.open_api_v3_schema).expect("schema as JSON");
    root["properties"]["spec"]["properties"]["podProbes"]["items"]["properties"]["probes"]["items"]
        ["properties"]["probe"]
        .clone()
}

/// The apiserver costs a rule for every instance of its node: string conversions and
/// regexes over an int-or-string, whose length no schema bounds, exceed its budget.
#[test]
fn marker_port_rules_compare_sizes_and_numbers_only() {
    let probe = &spec_schema()["properties"]["probes"]["items"]["properties"]["probe"];
    for handler in ["tcpSocket", "httpGet"] {
        let port = &probe["properties"][handler]["properties"]["port"];
        assert_eq!(port["x-kubernetes-int-or-string"], json!(true), "{handler}");
        let port_rules = rules(port);
        assert!(
            port_rules
                .iter()
                .any(|(rule, message, _)| rule == PORT_RULE && message == PORT_MESSAGE),
            "{handler}: {port_rules:?}"
        );
        for (rule, _, _) in &port_rules {
            assert!(
                !rule.contains("matches(") && !rule.contains("string("),
                "{handler}: {rule}"
            );
        }
    }
}

#[test]
fn node_probe_ports_are_numbers_and_its_probe_has_one_handler() {
    let probe = node_probe_schema();
    for handler in ["tcpSocket", "httpGet"] {
        let port = &probe["properties"][handler]["properties"]["port"];
        assert_eq!(
            (&port["type"], &port["minimum"], &port["maximum"]),
            (&json!("integer"), &json!(1.0), &json!(65535.0)),
            "{handler}"
        );
        assert!(rules(port).is_empty(), "{handler}: {:?}", rules(port));
    }
    let handler_rules = rules(&probe);
    assert!(
        handler_rules
            .iter()
            .any(|(rule, _, _)| rule == ONE_HANDLER_RULE),
        "{handler_rules:?}"
    );
    let request: NodePodProbe = serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1alpha1", "kind": "NodePodProbe",
        "metadata": { "name": "n1" },
        "spec": { "podProbes": [{ "name": "p", "namespace": "ns", "uid": "u", "probes": [
            { "name": "m#t", "containerName": "c", "probe": { "tcpSocket": { "port": 8080 } } },
        ] }] },
    }))
    .expect("a NodePodProbe with a numeric port decodes");
    let port = (request.spec.pod_probes[0].probes[0]
        .probe
        .tcp_socket
        .as_ref())
    .map(|t| t.port);
    assert_eq!(port, Some(PortNumber(8080)));
}
