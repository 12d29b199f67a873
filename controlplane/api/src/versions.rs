//! The API versions each kind is served in, as OpenKruise 1.9 serves them.
//!
//! OpenKruise 1.9 serves Advanced StatefulSet in `v1beta1` (storage) and `v1alpha1`, and
//! added `v1beta1` for BroadcastJob, AdvancedCronJob, ImagePullJob,
//! ImageListPullJob, NodeImage, Advanced DaemonSet and SidecarSet; CloneSet stayed
//! `v1alpha1` only (its `v1beta1` came later, with other defaults, e.g. `disablePVCReuse:
//! true`, so serving a `v1beta1` CloneSet with the `v1alpha1` schema would read YAML written
//! for that release wrongly). ImagePullJob's two versions have the same schema, so the
//! extra version is the storage version's schema under another name, with `conversion:
//! None`: the apiserver converts by rewriting `apiVersion`, no webhook needed. The storage
//! version stays `v1alpha1`, the one existing objects are stored in. PodUnavailableBudget's
//! `v1beta1` differs from its `v1alpha1` and converts through a webhook
//! (`podunavailablebudget_v1beta1.rs`). SidecarSet is served in `v1alpha1` only: its
//! `v1beta1` moves `namespace`/`namespaceSelector` under `specificNamespace` and adds
//! `customVersion`, so it needs a conversion webhook of its own (not written yet).

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceConversion, CustomResourceDefinition,
};

/// The conversion strategy for versions whose schemas are identical.
const NO_CONVERSION: &str = "None";

/// `crd` also served in each of `versions`, each with the schema, subresources and
/// columns of its storage version, never stored.
pub fn also_served(
    mut crd: CustomResourceDefinition,
    versions: &[&str],
) -> CustomResourceDefinition {
    let Some(storage) = crd.spec.versions.iter().find(|v| v.storage).cloned() else {
        return crd;
    };
    for name in versions {
        let mut version = storage.clone();
        version.name = (*name).to_owned();
        version.storage = false;
        version.served = true;
        crd.spec.versions.push(version);
    }
    crd.spec.conversion = Some(CustomResourceConversion {
        strategy: NO_CONVERSION.to_owned(),
        webhook: None,
    });
    crd
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crds;

    fn served(crd: &CustomResourceDefinition) -> Vec<(&str, bool)> {
        crd.spec
            .versions
            .iter()
            .filter(|v| v.served)
            .map(|v| (v.name.as_str(), v.storage))
            .collect()
    }

    #[test]
    fn each_kind_is_served_in_openkruise_1_9_versions_with_one_storage_version() {
        let expected: [(&str, &[(&str, bool)]); 13] = [
            ("clonesets.apps.kruise.io", &[("v1alpha1", true)]),
            (
                "imagepulljobs.apps.kruise.io",
                &[("v1alpha1", true), ("v1beta1", false)],
            ),
            ("imagelists.stevedore.dev", &[("v1alpha1", true)]),
            (
                "broadcastjobs.apps.kruise.io",
                &[("v1alpha1", true), ("v1beta1", false)],
            ),
            (
                "advancedcronjobs.apps.kruise.io",
                &[("v1alpha1", true), ("v1beta1", false)],
            ),
            (
                "statefulsets.apps.kruise.io",
                &[("v1beta1", true), ("v1alpha1", false)],
            ),
            (
                "podunavailablebudgets.policy.kruise.io",
                &[("v1alpha1", true), ("v1beta1", false)],
            ),
            (
                "daemonsets.apps.kruise.io",
                &[("v1alpha1", true), ("v1beta1", false)],
            ),
            (
                "containerrecreaterequests.apps.kruise.io",
                &[("v1alpha1", true)],
            ),
            (
                "imagelistpulljobs.apps.kruise.io",
                &[("v1alpha1", true), ("v1beta1", false)],
            ),
            ("sidecarsets.apps.kruise.io", &[("v1alpha1", true)]),
            ("podprobemarkers.apps.kruise.io", &[("v1alpha1", true)]),
            ("nodepodprobes.apps.kruise.io", &[("v1alpha1", true)]),
        ];
        let crds = crds();
        assert_eq!(crds.len(), expected.len());
        for (crd, (name, versions)) in crds.iter().zip(expected) {
            assert_eq!(crd.metadata.name.as_deref(), Some(name));
            assert_eq!(served(crd), versions, "{name}");
        }
    }

    #[test]
    fn extra_versions_share_the_storage_schema_without_a_webhook() {
        let crds = crds();
        let jobs = &crds[1];
        let (alpha, beta) = (&jobs.spec.versions[0], &jobs.spec.versions[1]);
        assert_eq!(alpha.schema, beta.schema);
        assert_eq!(alpha.subresources, beta.subresources);
        assert_eq!(
            alpha.additional_printer_columns,
            beta.additional_printer_columns
        );
        let conversion = jobs.spec.conversion.as_ref().expect("a conversion stanza");
        assert_eq!(conversion.strategy, "None");
        assert!(conversion.webhook.is_none());
    }

    #[test]
    fn a_crd_without_a_storage_version_is_left_alone() {
        let mut crd = crds().remove(0);
        for version in &mut crd.spec.versions {
            version.storage = false;
        }
        let before = crd.clone();
        assert_eq!(also_served(crd, &["v1beta1"]), before);
    }
}
