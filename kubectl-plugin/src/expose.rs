//! `expose <kind>/<name>`: a Service for a workload's pods, as `kubectl expose` makes one
//! for a Deployment: the workload's `matchLabels` as its selector, its labels, and the
//! ports given (or the pod template's container ports).

use anyhow::{Result, anyhow};
use k8s_openapi::api::core::v1::Service;
use kube::api::PostParams;
use kube::{Api, Client};
use serde_json::{Map, Value, json};

use crate::apiserver;
use crate::cli::{ExposeArgs, Output};
use crate::output;
use crate::workload_api::dynamic_api;

fn service_ports(object: &Value, args: &ExposeArgs) -> Result<Vec<Value>, String> {
    if let Some(port) = args.port {
        let target = args.target_port.clone().unwrap_or_else(|| port.to_string());
        let target = target.parse::<i32>().map_or(json!(target), |n| json!(n));
        return Ok(vec![
            json!({ "protocol": args.protocol, "port": port, "targetPort": target }),
        ]);
    }
    let declared: Vec<&Value> = object
        .pointer("/spec/template/spec/containers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| c.get("ports").and_then(Value::as_array))
        .flatten()
        .collect();
    if declared.is_empty() {
        return Err("give --port: the pod template declares no container port".to_owned());
    }
    Ok(declared
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let number = p.get("containerPort").cloned().unwrap_or_default();
            let name = p
                .get("name")
                .and_then(Value::as_str)
                .map_or_else(|| format!("port-{}", i + 1), str::to_owned);
            let protocol = p.get("protocol").cloned().unwrap_or_else(|| json!("TCP"));
            let mut port = json!({ "protocol": protocol, "port": number, "targetPort": number });
            if declared.len() > 1 {
                port["name"] = json!(name);
            }
            port
        })
        .collect())
}

/// The Service exposing `object` (the workload as JSON).
pub fn service_for(object: &Value, args: &ExposeArgs) -> Result<Value, String> {
    let selector = object.pointer("/spec/selector");
    if selector
        .and_then(|s| s.get("matchExpressions"))
        .is_some_and(|e| e.as_array().is_some_and(|a| !a.is_empty()))
    {
        return Err(
            "its selector has matchExpressions, which a Service selector cannot express".to_owned(),
        );
    }
    let labels: Map<String, Value> = selector
        .and_then(|s| s.get("matchLabels"))
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    if labels.is_empty() {
        return Err("its selector has no matchLabels to select the pods with".to_owned());
    }
    let name = match &args.name {
        Some(name) => name.clone(),
        None => object
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned(),
    };
    Ok(json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": name,
            "labels": object.pointer("/metadata/labels").cloned().unwrap_or_else(|| json!({})),
        },
        "spec": {
            "type": args.type_,
            "selector": labels,
            "ports": service_ports(object, args)?,
        }
    }))
}

pub async fn run(client: &Client, namespace: &str, args: ExposeArgs, out: Output) -> Result<u8> {
    let target = &args.workload;
    let object = dynamic_api(client, namespace, target.kind)
        .get(&target.name)
        .await
        .map_err(|e| apiserver::error(format!("reading {target} in namespace {namespace}"), e))?;
    let service = service_for(&serde_json::to_value(object)?, &args)
        .map_err(|e| anyhow!("cannot expose {target}: {e}"))?;
    let service: Service = serde_json::from_value(service)?;
    let name = service.metadata.name.clone().unwrap_or_default();
    Api::<Service>::namespaced(client.clone(), namespace)
        .create(&PostParams::default(), &service)
        .await
        .map_err(|e| {
            apiserver::error(
                format!("creating Service {name} in namespace {namespace}"),
                e,
            )
        })?;
    let message = format!("service/{name} exposed");
    if !output::structured(out, &json!({ "service": name, "message": message }))? {
        output::line(&message)?;
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::WorkloadRef;

    fn args(port: Option<i32>, target_port: Option<&str>) -> ExposeArgs {
        ExposeArgs {
            workload: "cloneset/web".parse::<WorkloadRef>().expect("a ref"),
            port,
            target_port: target_port.map(str::to_owned),
            name: None,
            protocol: "TCP".to_owned(),
            type_: "ClusterIP".to_owned(),
        }
    }

    fn cloneset(selector: Value, ports: Value) -> Value {
        json!({
            "metadata": { "name": "web", "labels": { "tier": "front" } },
            "spec": {
                "selector": selector,
                "template": { "spec": { "containers": [{ "name": "web", "ports": ports }] } }
            }
        })
    }

    #[test]
    fn a_service_selecting_the_workloads_pods() {
        let object = cloneset(json!({ "matchLabels": { "app": "web" } }), json!([]));
        let service = service_for(&object, &args(Some(80), Some("8080"))).expect("a service");
        assert_eq!(service["metadata"]["name"], "web");
        assert_eq!(service["metadata"]["labels"], json!({ "tier": "front" }));
        assert_eq!(service["spec"]["selector"], json!({ "app": "web" }));
        assert_eq!(
            service["spec"]["ports"],
            json!([{ "protocol": "TCP", "port": 80, "targetPort": 8080 }])
        );
        let named = service_for(&object, &args(Some(80), Some("http"))).expect("a named target");
        assert_eq!(named["spec"]["ports"][0]["targetPort"], "http");
    }

    #[test]
    fn ports_from_the_template_when_none_is_given() {
        let ports = json!([{ "containerPort": 80, "name": "http" }, { "containerPort": 9090 }]);
        let object = cloneset(json!({ "matchLabels": { "app": "web" } }), ports);
        let service = service_for(&object, &args(None, None)).expect("a service");
        assert_eq!(
            service["spec"]["ports"],
            json!([
                { "name": "http", "protocol": "TCP", "port": 80, "targetPort": 80 },
                { "name": "port-2", "protocol": "TCP", "port": 9090, "targetPort": 9090 }
            ])
        );
        let bare = cloneset(json!({ "matchLabels": { "app": "web" } }), json!([]));
        assert!(
            service_for(&bare, &args(None, None))
                .unwrap_err()
                .contains("--port")
        );
    }

    #[test]
    fn selectors_a_service_cannot_express() {
        let expressions = json!({ "matchExpressions": [{ "key": "app", "operator": "Exists" }] });
        let refused =
            service_for(&cloneset(expressions, json!([])), &args(Some(80), None)).unwrap_err();
        assert!(refused.contains("matchExpressions"), "{refused}");
    }
}
