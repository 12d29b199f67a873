//! The Stevedore node agent's gRPC API (package `stevedore.agent.v1`), generated from
//! the `.proto` files under `stevedore/agent/v1/` by `build.rs`.

/// Encoded `google.protobuf.FileDescriptorSet` of the agent API, including the
/// well-known types it imports; register it with server reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] = tonic::include_file_descriptor_set!("stevedore_descriptor");

pub mod stevedore {
    pub mod agent {
        /// Version 1 of the agent API.
        pub mod v1 {
            #![allow(clippy::all, clippy::pedantic, clippy::nursery)]
            tonic::include_proto!("stevedore.agent.v1");
        }
    }
}

#[cfg(test)]
mod tests {
    use prost::Message;
    use prost_types::FileDescriptorSet;

    use super::FILE_DESCRIPTOR_SET;

    #[test]
    fn descriptor_set_declares_every_agent_service() {
        let set = FileDescriptorSet::decode(FILE_DESCRIPTOR_SET).expect("valid descriptor set");
        let services: Vec<String> = set
            .file
            .iter()
            .flat_map(|file| {
                let package = file.package().to_owned();
                file.service
                    .iter()
                    .map(move |svc| format!("{package}.{}", svc.name()))
            })
            .collect();

        for expected in [
            "stevedore.agent.v1.ImageService",
            "stevedore.agent.v1.ContainerService",
            "stevedore.agent.v1.PodService",
            "stevedore.agent.v1.NodeService",
        ] {
            assert!(
                services.iter().any(|s| s == expected),
                "{expected} missing from {services:?}"
            );
        }
    }

    #[test]
    fn descriptor_set_bundles_imported_well_known_types() {
        let set = FileDescriptorSet::decode(FILE_DESCRIPTOR_SET).expect("valid descriptor set");
        assert!(
            set.file
                .iter()
                .any(|f| f.name() == "google/protobuf/timestamp.proto")
        );
    }
}
