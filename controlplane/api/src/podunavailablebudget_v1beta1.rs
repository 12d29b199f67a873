//! PodUnavailableBudget also served as `policy.kruise.io/v1beta1`, as OpenKruise 1.9
//! serves it: the `v1alpha1` schema plus `spec.protectOperations` and
//! `spec.protectTotalReplicas`, the fields OpenKruise's `v1beta1` made of the `v1alpha1`
//! annotations `kruise.io/pub-protect-operations` and `pub.kruise.io/protect-total-replicas`.
//! The versions differ, so the CRD converts through the control plane's webhook
//! (`crate::conversion`); `v1alpha1` stays the storage version, so budgets already stored
//! need no migration and the controllers read no other version.
//!
//! OpenKruise's `v1beta1` also has `spec.ignoredPodSelector` (the PUB-side form of the
//! pod annotation `pub.kruise.io/no-protect`); it has no `v1alpha1` form to be stored in,
//! so it is not served: a strict client (`kubectl`) refuses it as an unknown field.

use std::collections::BTreeMap;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceConversion, CustomResourceDefinition, JSON, JSONSchemaProps,
    JSONSchemaPropsOrArray, ServiceReference, WebhookClientConfig, WebhookConversion,
};
use serde_json::Value;

use crate::conversion::CONVERSION_PATH;
use crate::conversion::podunavailablebudget::OPERATIONS;

/// The served version with the promoted fields.
pub const VERSION: &str = "v1beta1";

/// The Service in front of the control plane's webhook server, as deploy/controlplane/
/// webhook.yaml names it; the control plane sets the namespace it runs in at start.
pub const WEBHOOK_SERVICE: &str = "stevedore-controlplane-webhook";
/// The namespace the manifests install the control plane in.
pub const WEBHOOK_SERVICE_NAMESPACE: &str = "kube-system";
/// The Service's HTTPS port.
pub const WEBHOOK_SERVICE_PORT: i32 = 443;

/// `crd` (the `v1alpha1` PodUnavailableBudget) also served as `v1beta1`, converted by
/// the webhook. Left alone if it has no storage version to copy.
pub fn served_with_conversion(mut crd: CustomResourceDefinition) -> CustomResourceDefinition {
    let Some(mut beta) = crd.spec.versions.iter().find(|v| v.storage).cloned() else {
        return crd;
    };
    beta.name = VERSION.to_owned();
    beta.storage = false;
    beta.served = true;
    if let Some(spec) = beta
        .schema
        .as_mut()
        .and_then(|s| s.open_api_v3_schema.as_mut())
        .and_then(|root| root.properties.as_mut())
        .and_then(|properties| properties.get_mut("spec"))
    {
        let properties = spec.properties.get_or_insert_with(BTreeMap::new);
        properties.insert("protectOperations".into(), protect_operations());
        properties.insert("protectTotalReplicas".into(), protect_total_replicas());
    }
    crd.spec.versions.push(beta);
    crd.spec.conversion = Some(conversion_webhook());
    crd
}

/// `conversion: Webhook` through the webhook Service, without a `caBundle`: the control
/// plane writes its own CA there at start.
pub fn conversion_webhook() -> CustomResourceConversion {
    CustomResourceConversion {
        strategy: "Webhook".to_owned(),
        webhook: Some(WebhookConversion {
            conversion_review_versions: vec!["v1".to_owned()],
            client_config: Some(WebhookClientConfig {
                ca_bundle: None,
                url: None,
                service: Some(ServiceReference {
                    name: WEBHOOK_SERVICE.to_owned(),
                    namespace: WEBHOOK_SERVICE_NAMESPACE.to_owned(),
                    path: Some(CONVERSION_PATH.to_owned()),
                    port: Some(WEBHOOK_SERVICE_PORT),
                }),
            }),
        }),
    }
}

fn protect_operations() -> JSONSchemaProps {
    let operation = JSONSchemaProps {
        type_: Some("string".into()),
        enum_: Some(OPERATIONS.iter().map(|op| JSON(Value::from(*op))).collect()),
        ..JSONSchemaProps::default()
    };
    JSONSchemaProps {
        description: Some(
            "ProtectOperations are the disruptions the budget protects against (DELETE, UPDATE, EVICT, RESIZE); when empty, DELETE, UPDATE and EVICT. Stored as the v1alpha1 annotation kruise.io/pub-protect-operations.".into(),
        ),
        type_: Some("array".into()),
        items: Some(JSONSchemaPropsOrArray::Schema(Box::new(operation))),
        ..JSONSchemaProps::default()
    }
}

fn protect_total_replicas() -> JSONSchemaProps {
    JSONSchemaProps {
        description: Some(
            "ProtectTotalReplicas overrides the expected number of pods when they have no workload or the workload no scale subresource. Stored as the v1alpha1 annotation pub.kruise.io/protect-total-replicas.".into(),
        ),
        type_: Some("integer".into()),
        format: Some("int32".into()),
        minimum: Some(1.0),
        ..JSONSchemaProps::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PodUnavailableBudget;
    use kube::CustomResourceExt as _;

    #[test]
    fn v1beta1_is_the_v1alpha1_schema_plus_the_two_fields_never_stored() {
        let crd = served_with_conversion(PodUnavailableBudget::crd());
        let [alpha, beta] = &crd.spec.versions[..] else {
            panic!("two versions expected, got {:?}", crd.spec.versions);
        };
        assert_eq!((alpha.name.as_str(), alpha.storage), ("v1alpha1", true));
        assert_eq!(
            (beta.name.as_str(), beta.storage, beta.served),
            ("v1beta1", false, true)
        );
        assert_eq!(alpha.subresources, beta.subresources);
        assert_eq!(
            alpha.additional_printer_columns,
            beta.additional_printer_columns
        );
        let spec = |v: &k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinitionVersion| {
            v.schema.as_ref().unwrap().open_api_v3_schema.as_ref().unwrap().properties.as_ref().unwrap()["spec"].clone()
        };
        let (alpha_spec, mut beta_spec) = (spec(alpha), spec(beta));
        let beta_properties = beta_spec.properties.as_mut().unwrap();
        assert!(beta_properties.remove("protectOperations").is_some());
        assert_eq!(
            beta_properties
                .remove("protectTotalReplicas")
                .unwrap()
                .minimum,
            Some(1.0)
        );
        assert_eq!(alpha_spec, beta_spec);
    }

    #[test]
    fn the_crd_converts_through_the_webhook_service_without_a_ca_bundle() {
        let crd = served_with_conversion(PodUnavailableBudget::crd());
        let conversion = crd.spec.conversion.unwrap();
        assert_eq!(conversion.strategy, "Webhook");
        let webhook = conversion.webhook.unwrap();
        assert_eq!(webhook.conversion_review_versions, ["v1"]);
        let config = webhook.client_config.unwrap();
        assert!(config.ca_bundle.is_none() && config.url.is_none());
        let service = config.service.unwrap();
        assert_eq!(
            (
                service.name.as_str(),
                service.namespace.as_str(),
                service.path.as_deref(),
                service.port
            ),
            (
                "stevedore-controlplane-webhook",
                "kube-system",
                Some("/convert"),
                Some(443)
            )
        );
    }
}
