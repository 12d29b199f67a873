//! Which permission each RPC needs: a pure table from gRPC path to the
//! SubjectAccessReview attributes (subresource of `agents`, verb).

/// The permission a call needs on `agents.stevedore.dev/<node>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Access {
    /// `images`, `containers`, `pods` or `node`.
    pub subresource: &'static str,
    /// `get` for reads, `update` for changes.
    pub verb: &'static str,
}

/// What guards one path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// Health and reflection: no token needed.
    Public,
    /// A token with this permission is needed.
    Check(Access),
    /// Not an API of the agent: refused whatever the token.
    Deny,
}

const GET: &str = "get";
const UPDATE: &str = "update";

/// Every agent method with the permission it needs.
const METHODS: [(&str, &str, &str); 12] = [
    (
        "/stevedore.agent.v1.ImageService/PullImage",
        "images",
        UPDATE,
    ),
    ("/stevedore.agent.v1.ImageService/ListImages", "images", GET),
    (
        "/stevedore.agent.v1.ImageService/ImageStatus",
        "images",
        GET,
    ),
    (
        "/stevedore.agent.v1.ImageService/RemoveImage",
        "images",
        UPDATE,
    ),
    (
        "/stevedore.agent.v1.ImageService/ApplyImageList",
        "images",
        UPDATE,
    ),
    (
        "/stevedore.agent.v1.ImageService/WatchImageList",
        "images",
        GET,
    ),
    (
        "/stevedore.agent.v1.ContainerService/RestartContainers",
        "containers",
        UPDATE,
    ),
    (
        "/stevedore.agent.v1.ContainerService/WatchRestart",
        "containers",
        GET,
    ),
    (
        "/stevedore.agent.v1.PodService/SetPodCondition",
        "pods",
        UPDATE,
    ),
    ("/stevedore.agent.v1.NodeService/GetNodeInfo", "node", GET),
    (
        "/stevedore.agent.v1.ProbeService/ApplyPodProbes",
        "probes",
        UPDATE,
    ),
    (
        "/stevedore.agent.v1.ProbeService/WatchPodProbes",
        "probes",
        GET,
    ),
];

/// Services anyone may call.
const PUBLIC_SERVICES: [&str; 3] = [
    "/grpc.health.v1.Health/",
    "/grpc.reflection.v1.ServerReflection/",
    "/grpc.reflection.v1alpha.ServerReflection/",
];

/// The rule for a request path (`/package.Service/Method`).
pub fn rule_for(path: &str) -> Rule {
    if let Some((_, subresource, verb)) = METHODS.iter().find(|(p, _, _)| *p == path) {
        return Rule::Check(Access { subresource, verb });
    }
    if PUBLIC_SERVICES.iter().any(|prefix| {
        path.strip_prefix(prefix)
            .is_some_and(|method| !method.is_empty() && !method.contains('/'))
    }) {
        return Rule::Public;
    }
    Rule::Deny
}

/// The path as a `'static` label if it is a method the agent serves.
pub fn known_method(path: &str) -> Option<&'static str> {
    METHODS
        .iter()
        .map(|(p, _, _)| *p)
        .find(|p| *p == path)
        .or_else(|| {
            const PUBLIC_METHODS: [&str; 5] = [
                "/grpc.health.v1.Health/Check",
                "/grpc.health.v1.Health/Watch",
                "/grpc.health.v1.Health/List",
                "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
                "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
            ];
            PUBLIC_METHODS.into_iter().find(|p| *p == path)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(subresource: &'static str, verb: &'static str) -> Rule {
        Rule::Check(Access { subresource, verb })
    }

    #[test]
    fn table() {
        let cases = [
            (
                "/stevedore.agent.v1.ImageService/PullImage",
                check("images", "update"),
            ),
            (
                "/stevedore.agent.v1.ImageService/ListImages",
                check("images", "get"),
            ),
            (
                "/stevedore.agent.v1.ImageService/ImageStatus",
                check("images", "get"),
            ),
            (
                "/stevedore.agent.v1.ImageService/RemoveImage",
                check("images", "update"),
            ),
            (
                "/stevedore.agent.v1.ImageService/ApplyImageList",
                check("images", "update"),
            ),
            (
                "/stevedore.agent.v1.ImageService/WatchImageList",
                check("images", "get"),
            ),
            (
                "/stevedore.agent.v1.ContainerService/RestartContainers",
                check("containers", "update"),
            ),
            (
                "/stevedore.agent.v1.ContainerService/WatchRestart",
                check("containers", "get"),
            ),
            (
                "/stevedore.agent.v1.PodService/SetPodCondition",
                check("pods", "update"),
            ),
            (
                "/stevedore.agent.v1.NodeService/GetNodeInfo",
                check("node", "get"),
            ),
            ("/grpc.health.v1.Health/Check", Rule::Public),
            ("/grpc.health.v1.Health/Watch", Rule::Public),
            (
                "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
                Rule::Public,
            ),
            (
                "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
                Rule::Public,
            ),
            // Fail closed on anything else, including look-alikes.
            ("/stevedore.agent.v1.PodService/DeletePod", Rule::Deny),
            (
                "/stevedore.agent.v1.PodService/SetPodCondition/x",
                Rule::Deny,
            ),
            ("/grpc.health.v1.Health/", Rule::Deny),
            ("/grpc.health.v1.Health/Check/../../x", Rule::Deny),
            ("/", Rule::Deny),
            ("", Rule::Deny),
        ];
        for (path, expected) in cases {
            assert_eq!(rule_for(path), expected, "{path}");
        }
    }

    #[test]
    fn every_method_of_the_api_is_in_the_table() {
        use prost::Message as _;
        let set = prost_types::FileDescriptorSet::decode(stevedore_proto::FILE_DESCRIPTOR_SET)
            .expect("valid descriptor set");
        for file in set
            .file
            .iter()
            .filter(|f| f.package() == "stevedore.agent.v1")
        {
            for service in &file.service {
                for method in &service.method {
                    let path = format!("/{}.{}/{}", file.package(), service.name(), method.name());
                    assert!(
                        matches!(rule_for(&path), Rule::Check(_)),
                        "{path} has no rule"
                    );
                    assert_eq!(known_method(&path), Some(path.as_str()));
                }
            }
        }
    }

    #[test]
    fn unknown_paths_have_no_metric_label() {
        assert_eq!(known_method("/x.Y/Z"), None);
        assert_eq!(
            known_method("/grpc.health.v1.Health/Check"),
            Some("/grpc.health.v1.Health/Check")
        );
    }
}
