//! Making the apiserver trust the webhook server: the webhook CA goes into the
//! `caBundle` of each admission webhook configuration it serves (the
//! ValidatingWebhookConfiguration of pod deletes and evictions, the
//! MutatingWebhookConfiguration of ContainerRecreateRequests) and of the
//! PodUnavailableBudget CRD's conversion webhook. The CRD ships without a `caBundle` and
//! with the manifests' namespace (`kube-system`); its service namespace is set here to the
//! one the control plane runs in, so an install in any namespace (the Helm chart) converts.

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
    WebhookClientConfig as AdmissionClientConfig,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, WebhookClientConfig,
};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::controller::api_error::{ApiError, api_error, status_code};

/// Who owns the conversion webhook's `caBundle` and service in the CRD's managed fields,
/// so a server-side apply of the CRD sees whose they are.
const FIELD_MANAGER: &str = "stevedore-controlplane";

/// The Service the apiserver calls, in the control plane's namespace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServiceRef<'a> {
    pub name: &'a str,
    pub namespace: &'a str,
}

/// An admission webhook configuration the apiserver calls this server through.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WebhookConfiguration {
    Validating(String),
    Mutating(String),
}

impl WebhookConfiguration {
    pub fn name(&self) -> &str {
        match self {
            Self::Validating(name) | Self::Mutating(name) => name,
        }
    }
}

/// Sets every webhook's `caBundle` in `configuration` to `ca_pem` (left alone when it is
/// so already). A configuration that is not installed is a warning, not an error: the
/// webhook then simply is not called.
pub async fn trust_in_configuration(
    client: &kube::Client,
    configuration: &WebhookConfiguration,
    ca_pem: &str,
) -> Result<(), ApiError> {
    let bundle = ByteString(ca_pem.as_bytes().to_vec());
    match configuration {
        WebhookConfiguration::Validating(name) => {
            let api: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
            trust_in(&api, name, &bundle, |c| {
                let webhooks = c.webhooks.iter_mut().flatten();
                webhooks.map(|w| &mut w.client_config).collect()
            })
            .await
        }
        WebhookConfiguration::Mutating(name) => {
            let api: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
            trust_in(&api, name, &bundle, |c| {
                let webhooks = c.webhooks.iter_mut().flatten();
                webhooks.map(|w| &mut w.client_config).collect()
            })
            .await
        }
    }
}

/// Reads the configuration `name`, sets the `caBundle` of every client config `configs`
/// finds in it, and writes it back unless it already trusted `bundle`.
async fn trust_in<K>(
    api: &Api<K>,
    name: &str,
    bundle: &ByteString,
    configs: impl Fn(&mut K) -> Vec<&mut AdmissionClientConfig>,
) -> Result<(), ApiError>
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug,
{
    let kind = K::kind(&()).into_owned();
    let reading = || format!("Reading the {kind} {name}");
    let Some(mut configuration) = api.get_opt(name).await.map_err(api_error(reading()))? else {
        tracing::warn!(
            configuration = name,
            %kind,
            "the webhook configuration is not installed: the apiserver does not call this webhook"
        );
        return Ok(());
    };
    let mut client_configs = configs(&mut configuration);
    if !needs_bundle(client_configs.iter().map(|c| c.ca_bundle.as_ref()), bundle) {
        return Ok(());
    }
    for config in client_configs.iter_mut() {
        config.ca_bundle = Some(bundle.clone());
    }
    match api
        .replace(name, &PostParams::default(), &configuration)
        .await
    {
        Ok(_) => Ok(()),
        // Another replica wrote it meanwhile; the CA is the same (one Secret).
        Err(err) if status_code(&err) == Some(409) => Ok(()),
        Err(err) => Err(api_error(format!(
            "Setting the caBundle of the {kind} {name}"
        ))(err)),
    }
}

/// Whether any of the webhooks' `caBundle`s is not `bundle` yet.
fn needs_bundle<'a>(
    mut current: impl Iterator<Item = Option<&'a ByteString>>,
    bundle: &ByteString,
) -> bool {
    current.any(|ca| ca != Some(bundle))
}

/// Points the conversion webhook of the CRD `name` at `service` and trusts `ca_pem` for
/// it. A CRD that is not installed, or that converts without a webhook (applied from an
/// older release), is a warning: its other versions are then simply not served.
pub async fn trust_in_conversion(
    client: &kube::Client,
    name: &str,
    service: ServiceRef<'_>,
    ca_pem: &str,
) -> Result<(), ApiError> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let reading = || format!("Reading the CustomResourceDefinition {name}");
    let Some(crd) = api.get_opt(name).await.map_err(api_error(reading()))? else {
        tracing::warn!(crd = name, "the CRD is not installed: nothing to convert");
        return Ok(());
    };
    let Some(current) = webhook_client_config(&crd) else {
        tracing::warn!(
            crd = name,
            "the CRD converts without a webhook: apply this release's CRD to serve its other versions"
        );
        return Ok(());
    };
    let bundle = ByteString(ca_pem.as_bytes().to_vec());
    if trusts(current, &service, &bundle) {
        return Ok(());
    }
    let patch = json!({ "spec": { "conversion": { "webhook": { "clientConfig": {
        "caBundle": bundle,
        "service": { "name": service.name, "namespace": service.namespace },
    } } } } });
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    };
    api.patch(name, &params, &Patch::Merge(&patch))
        .await
        .map_err(api_error(format!(
            "Setting the conversion webhook's caBundle and service of the CustomResourceDefinition {name}"
        )))?;
    tracing::info!(
        crd = name,
        namespace = service.namespace,
        "the CRD's conversion webhook trusts this control plane"
    );
    Ok(())
}

/// The CRD's conversion webhook client config, if it converts through a webhook.
fn webhook_client_config(crd: &CustomResourceDefinition) -> Option<&WebhookClientConfig> {
    let conversion = crd.spec.conversion.as_ref()?;
    if conversion.strategy != "Webhook" {
        return None;
    }
    conversion.webhook.as_ref()?.client_config.as_ref()
}

/// Whether `config` already calls `service` and trusts `bundle`.
fn trusts(config: &WebhookClientConfig, service: &ServiceRef<'_>, bundle: &ByteString) -> bool {
    let calls_service = config
        .service
        .as_ref()
        .is_some_and(|s| s.name == service.name && s.namespace == service.namespace);
    calls_service && config.ca_bundle.as_ref() == Some(bundle)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::ServiceReference;

    use super::*;
    use crate::api::PodUnavailableBudget;
    use crate::api::podunavailablebudget_v1beta1::served_with_conversion;
    use kube::CustomResourceExt as _;

    fn config(namespace: &str, ca: Option<&str>) -> WebhookClientConfig {
        WebhookClientConfig {
            ca_bundle: ca.map(|ca| ByteString(ca.as_bytes().to_vec())),
            service: Some(ServiceReference {
                name: "stevedore-controlplane-webhook".into(),
                namespace: namespace.into(),
                path: Some("/convert".into()),
                port: Some(443),
            }),
            url: None,
        }
    }

    #[test]
    fn a_conversion_is_patched_unless_it_calls_this_namespace_with_this_ca() {
        let service = ServiceRef {
            name: "stevedore-controlplane-webhook",
            namespace: "stevedore",
        };
        let ca = ByteString(b"CA".to_vec());
        let cases = [
            (config("kube-system", None), false),
            (config("stevedore", None), false),
            (config("kube-system", Some("CA")), false),
            (config("stevedore", Some("old CA")), false),
            (config("stevedore", Some("CA")), true),
        ];
        for (config, trusted) in cases {
            assert_eq!(trusts(&config, &service, &ca), trusted, "{config:?}");
        }
    }

    #[test]
    fn a_configuration_is_written_unless_every_webhook_trusts_the_ca() {
        let ca = ByteString(b"CA".to_vec());
        let old = ByteString(b"old CA".to_vec());
        let cases: [(&str, Vec<Option<&ByteString>>, bool); 5] = [
            ("no webhooks", vec![], false),
            ("one trusting", vec![Some(&ca)], false),
            ("one without a bundle", vec![None], true),
            ("one with the old CA", vec![Some(&ca), Some(&old)], true),
            ("both trusting", vec![Some(&ca), Some(&ca)], false),
        ];
        for (case, current, written) in cases {
            assert_eq!(needs_bundle(current.into_iter(), &ca), written, "{case}");
        }
    }

    #[test]
    fn only_a_webhook_conversion_is_touched() {
        let crd = served_with_conversion(PodUnavailableBudget::crd());
        assert!(webhook_client_config(&crd).is_some());
        let mut older = crd.clone();
        older.spec.conversion = None;
        assert!(webhook_client_config(&older).is_none());
    }
}
