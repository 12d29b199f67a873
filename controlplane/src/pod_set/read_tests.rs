//! Which claims a pod-set sync reads, by the kind's scope.

use std::sync::Arc;

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use super::*;

fn claim(name: &str, namespace: &str, controller_uid: Option<&str>) -> Arc<PersistentVolumeClaim> {
    let owner = |uid: &str| OwnerReference {
        uid: uid.to_owned(),
        controller: Some(true),
        ..OwnerReference::default()
    };
    Arc::new(PersistentVolumeClaim {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(namespace.to_owned()),
            owner_references: controller_uid.map(|uid| vec![owner(uid)]),
            ..ObjectMeta::default()
        },
        ..PersistentVolumeClaim::default()
    })
}

#[test]
fn a_kind_reads_the_claims_of_its_scope() {
    let cached = || {
        vec![
            claim("mine", "ns", Some("set-uid")),
            claim("other-set", "ns", Some("other-uid")),
            claim("unowned", "ns", None),
            claim("elsewhere", "other-ns", Some("set-uid")),
        ]
    };
    let cases: [(ClaimScope, &[&str]); 3] = [
        (ClaimScope::None, &[]),
        (ClaimScope::Controlled, &["mine"]),
        (ClaimScope::Namespace, &["mine", "other-set", "unowned"]),
    ];
    for (scope, want) in cases {
        let read = claims_in_scope(scope, cached(), "ns", "set-uid");
        let names: Vec<_> = read
            .iter()
            .map(|c| c.metadata.name.as_deref().unwrap_or(""))
            .collect();
        assert_eq!(names, want, "{scope:?}");
    }
}
