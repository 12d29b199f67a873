//! What a pod-set kind's ControllerRevision records, and its `data` as OpenKruise writes
//! it: one format for CloneSet, Advanced StatefulSet and Advanced DaemonSet.

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, PodTemplateSpec};
use serde::{Deserialize, Serialize};

use super::revision::RevisionError;
use super::template_defaults;

/// What a pod-set revision records: the pod template, and for CloneSet the claim
/// templates too (OpenKruise's RecreatePodWhenChangeVCTInCloneSetGate puts both in the
/// revision, so a claim change is a new revision that can be told apart from an image
/// change).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RevisionSpec {
    pub template: PodTemplateSpec,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volume_claim_templates: Vec<PersistentVolumeClaim>,
}

/// What the adapter of a kind whose revisions record the pod template alone reads of a
/// revision (Advanced StatefulSet, Advanced DaemonSet).
impl From<RevisionSpec> for PodTemplateSpec {
    fn from(spec: RevisionSpec) -> Self {
        spec.template
    }
}

#[derive(Serialize, Deserialize)]
struct RevisionData {
    spec: RevisionSpec,
}

impl RevisionSpec {
    /// A revision of a kind whose revisions record the pod template alone (Advanced
    /// StatefulSet, Advanced DaemonSet: OpenKruise's `getPatch` keeps only the template).
    pub fn template_only(template: PodTemplateSpec) -> Self {
        Self {
            template,
            volume_claim_templates: Vec::new(),
        }
    }

    /// The ControllerRevision `data`: a patch replacing `spec.template` wholesale (as
    /// OpenKruise stores it), plus the claim templates when there are any; without the
    /// fields equal to the CRD's defaults, so defaulting never names a new revision.
    pub fn to_data(&self) -> Result<Vec<u8>, RevisionError> {
        let mut template = serde_json::to_value(&self.template)
            .map_err(|source| RevisionError::Serialize { source })?;
        if let serde_json::Value::Object(fields) = &mut template {
            fields.insert("$patch".to_owned(), "replace".into());
        }
        let mut spec = serde_json::json!({ "template": template });
        if !self.volume_claim_templates.is_empty() {
            spec["volumeClaimTemplates"] = serde_json::to_value(&self.volume_claim_templates)
                .map_err(|source| RevisionError::Serialize { source })?;
        }
        template_defaults::strip_revision_spec(&mut spec);
        serde_json::to_vec(&serde_json::json!({ "spec": spec }))
            .map_err(|source| RevisionError::Serialize { source })
    }

    /// Reads a revision's data back; `None` when it is not a pod-set revision.
    pub fn from_data(data: &[u8]) -> Option<Self> {
        let mut value: serde_json::Value = serde_json::from_slice(data).ok()?;
        if let Some(template) = value.pointer_mut("/spec/template")
            && let Some(fields) = template.as_object_mut()
        {
            fields.remove("$patch");
        }
        serde_json::from_value::<RevisionData>(value)
            .ok()
            .map(|d| d.spec)
    }
}
