//! Request validation: every refusal names the request field at fault, so the event the
//! sidecar or the kubelet records on the claim or pod says what to fix.

use std::path::Path;

use thiserror::Error;

use crate::csi::VolumeCapability;
use crate::csi::volume_capability::AccessType;
use crate::csi::volume_capability::access_mode::Mode;

/// Longest volume name or id accepted: it becomes a directory name.
const MAX_ID_LEN: usize = 128;

#[derive(Debug, Error, PartialEq, Eq)]
pub enum ValidationError {
    #[error("{field} is empty")]
    Empty { field: &'static str },
    #[error(
        "{field} {value:?} is not a volume name this driver accepts (letters, digits, '.', '_' and '-', at most {MAX_ID_LEN}, not '.' or '..')"
    )]
    BadId { field: &'static str, value: String },
    #[error("{field} {value:?} is not an absolute path")]
    RelativePath { field: &'static str, value: String },
    #[error("{field} has no access_type: a mount or block volume must be asked for")]
    NoAccessType { field: &'static str },
    #[error(
        "{field} asks for a block volume; this driver serves only mounted (filesystem) volumes"
    )]
    Block { field: &'static str },
    #[error("{field} has no access_mode")]
    NoAccessMode { field: &'static str },
    #[error(
        "{field} asks for access mode {mode}; a host-path volume lives on one node, so only single-node modes are served"
    )]
    MultiNode { field: &'static str, mode: String },
}

/// A volume name (CreateVolume) or id (every other call): it names a directory, so it may
/// not climb out of the volumes directory.
pub fn volume_id<'a>(field: &'static str, value: &'a str) -> Result<&'a str, ValidationError> {
    if value.is_empty() {
        return Err(ValidationError::Empty { field });
    }
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    if value.len() > MAX_ID_LEN || value == "." || value == ".." || !value.chars().all(allowed) {
        return Err(ValidationError::BadId {
            field,
            value: value.to_owned(),
        });
    }
    Ok(value)
}

/// A path the kubelet gives (target or volume path): absolute, never empty.
pub fn absolute_path<'a>(field: &'static str, value: &'a str) -> Result<&'a Path, ValidationError> {
    if value.is_empty() {
        return Err(ValidationError::Empty { field });
    }
    let path = Path::new(value);
    if !path.is_absolute() {
        return Err(ValidationError::RelativePath {
            field,
            value: value.to_owned(),
        });
    }
    Ok(path)
}

/// One volume capability: a mounted volume in a single-node access mode.
pub fn capability(
    field: &'static str,
    capability: &VolumeCapability,
) -> Result<(), ValidationError> {
    match capability.access_type {
        None => return Err(ValidationError::NoAccessType { field }),
        Some(AccessType::Block(_)) => return Err(ValidationError::Block { field }),
        Some(AccessType::Mount(_)) => {}
    }
    let mode = capability
        .access_mode
        .as_ref()
        .map(|m| Mode::try_from(m.mode).unwrap_or(Mode::Unknown))
        .ok_or(ValidationError::NoAccessMode { field })?;
    match mode {
        Mode::SingleNodeWriter
        | Mode::SingleNodeReaderOnly
        | Mode::SingleNodeSingleWriter
        | Mode::SingleNodeMultiWriter => Ok(()),
        Mode::Unknown => Err(ValidationError::NoAccessMode { field }),
        other => Err(ValidationError::MultiNode {
            field,
            mode: other.as_str_name().to_owned(),
        }),
    }
}

/// The capabilities of a CreateVolume or ValidateVolumeCapabilities request: at least one,
/// each served.
pub fn capabilities(
    field: &'static str,
    capabilities: &[VolumeCapability],
) -> Result<(), ValidationError> {
    if capabilities.is_empty() {
        return Err(ValidationError::Empty { field });
    }
    capabilities.iter().try_for_each(|c| capability(field, c))
}

impl From<ValidationError> for tonic::Status {
    fn from(error: ValidationError) -> Self {
        tonic::Status::invalid_argument(error.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::csi::volume_capability::{AccessMode, BlockVolume, MountVolume};

    fn cap(access: Option<AccessType>, mode: Option<Mode>) -> VolumeCapability {
        VolumeCapability {
            access_type: access,
            access_mode: mode.map(|m| AccessMode { mode: m as i32 }),
        }
    }

    fn mount() -> Option<AccessType> {
        Some(AccessType::Mount(MountVolume::default()))
    }

    #[test]
    fn volume_ids_that_name_a_directory_inside_the_volumes_dir() {
        let long = "a".repeat(MAX_ID_LEN + 1);
        let cases = [
            ("pvc-0d3c1e2f-aaaa-bbbb-cccc-0123456789ab", true),
            ("vol_1.data", true),
            ("", false),
            (".", false),
            ("..", false),
            ("a/b", false),
            ("../etc", false),
            ("with space", false),
            (long.as_str(), false),
        ];
        for (id, ok) in cases {
            assert_eq!(volume_id("volume_id", id).is_ok(), ok, "{id:?}");
        }
    }

    #[test]
    fn refusals_name_the_field() {
        assert_eq!(
            volume_id("name", "").expect_err("empty").to_string(),
            "name is empty"
        );
        assert_eq!(
            absolute_path("target_path", "rel/x")
                .expect_err("relative")
                .to_string(),
            "target_path \"rel/x\" is not an absolute path"
        );
    }

    #[test]
    fn capabilities_served_are_mounted_single_node_ones() {
        let block = Some(AccessType::Block(BlockVolume {}));
        let cases = [
            (
                "mount, single writer",
                cap(mount(), Some(Mode::SingleNodeWriter)),
                None,
            ),
            (
                "mount, reader",
                cap(mount(), Some(Mode::SingleNodeReaderOnly)),
                None,
            ),
            (
                "mount, one pod",
                cap(mount(), Some(Mode::SingleNodeSingleWriter)),
                None,
            ),
            (
                "block",
                cap(block, Some(Mode::SingleNodeWriter)),
                Some(ValidationError::Block { field: "f" }),
            ),
            (
                "no access type",
                cap(None, Some(Mode::SingleNodeWriter)),
                Some(ValidationError::NoAccessType { field: "f" }),
            ),
            (
                "no access mode",
                cap(mount(), None),
                Some(ValidationError::NoAccessMode { field: "f" }),
            ),
            (
                "unknown access mode",
                cap(mount(), Some(Mode::Unknown)),
                Some(ValidationError::NoAccessMode { field: "f" }),
            ),
            (
                "many nodes",
                cap(mount(), Some(Mode::MultiNodeMultiWriter)),
                Some(ValidationError::MultiNode {
                    field: "f",
                    mode: "MULTI_NODE_MULTI_WRITER".to_owned(),
                }),
            ),
        ];
        for (name, c, want) in cases {
            assert_eq!(capability("f", &c).err(), want, "{name}");
        }
    }

    #[test]
    fn a_request_needs_at_least_one_capability() {
        assert_eq!(
            capabilities("volume_capabilities", &[]),
            Err(ValidationError::Empty {
                field: "volume_capabilities"
            })
        );
    }
}
