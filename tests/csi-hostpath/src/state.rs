//! The driver's record of its volumes: each one's capacity, kept in a JSON file beside the
//! volume directories (a directory has no size; the record is the volume's size). The rules
//! (`VolumeTable`) are pure; `StateFile` loads and saves it whole, through a rename so a
//! crash never leaves half a file.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::capacity::{self, Bounds, CapacityError};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct VolumeRecord {
    pub capacity_bytes: i64,
}

#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VolumeTable {
    volumes: BTreeMap<String, VolumeRecord>,
}

#[derive(Debug, Error, PartialEq, Eq)]
pub enum TableError {
    #[error("volume {id:?} does not exist")]
    NotFound { id: String },
    #[error(
        "volume {id:?} already exists with {capacity_bytes} bytes, outside the requested capacity_range"
    )]
    ExistsWithOtherCapacity { id: String, capacity_bytes: i64 },
    #[error(transparent)]
    Capacity(#[from] CapacityError),
}

impl From<TableError> for tonic::Status {
    fn from(error: TableError) -> Self {
        let message = error.to_string();
        match error {
            TableError::NotFound { .. } => tonic::Status::not_found(message),
            TableError::ExistsWithOtherCapacity { .. } => tonic::Status::already_exists(message),
            TableError::Capacity(CapacityError::AboveMaximum(_))
            | TableError::Capacity(CapacityError::ShrinkRequested { .. }) => {
                tonic::Status::out_of_range(message)
            }
            TableError::Capacity(_) => tonic::Status::invalid_argument(message),
        }
    }
}

impl VolumeTable {
    pub fn get(&self, id: &str) -> Option<VolumeRecord> {
        self.volumes.get(id).copied()
    }

    /// Records a new volume, or returns the existing one of that name when it fits the
    /// bounds (CreateVolume is retried with the same name and must not make a second).
    pub fn create(&mut self, id: &str, bounds: Option<Bounds>) -> Result<VolumeRecord, TableError> {
        if let Some(existing) = self.get(id) {
            return match bounds {
                Some(b) if !b.admit(existing.capacity_bytes) => {
                    Err(TableError::ExistsWithOtherCapacity {
                        id: id.to_owned(),
                        capacity_bytes: existing.capacity_bytes,
                    })
                }
                _ => Ok(existing),
            };
        }
        let record = VolumeRecord {
            capacity_bytes: capacity::new_volume_capacity(bounds)?,
        };
        self.volumes.insert(id.to_owned(), record);
        Ok(record)
    }

    /// Forgets a volume; true when it was recorded (deleting an unknown one succeeds too).
    pub fn delete(&mut self, id: &str) -> bool {
        self.volumes.remove(id).is_some()
    }

    /// Records a volume's new capacity and returns it.
    pub fn expand(&mut self, id: &str, bounds: Option<Bounds>) -> Result<i64, TableError> {
        let record = self
            .volumes
            .get_mut(id)
            .ok_or_else(|| TableError::NotFound { id: id.to_owned() })?;
        record.capacity_bytes = capacity::expanded_capacity(record.capacity_bytes, bounds)?;
        Ok(record.capacity_bytes)
    }
}

#[derive(Debug, Error)]
pub enum StateFileError {
    #[error("reading the volume records {path}: {source}")]
    Read { path: PathBuf, source: io::Error },
    #[error("the volume records {path} are not valid JSON: {source}")]
    Parse {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("writing the volume records {path}: {source}")]
    Write { path: PathBuf, source: io::Error },
}

impl From<StateFileError> for tonic::Status {
    fn from(error: StateFileError) -> Self {
        tonic::Status::internal(error.to_string())
    }
}

/// Where the table lives on disk.
#[derive(Debug, Clone)]
pub struct StateFile {
    path: PathBuf,
}

impl StateFile {
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into() }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The recorded table; an absent file is an empty table (the driver's first start).
    pub fn load(&self) -> Result<VolumeTable, StateFileError> {
        let text = match std::fs::read_to_string(&self.path) {
            Ok(text) => text,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(VolumeTable::default()),
            Err(source) => {
                return Err(StateFileError::Read {
                    path: self.path.clone(),
                    source,
                });
            }
        };
        serde_json::from_str(&text).map_err(|source| StateFileError::Parse {
            path: self.path.clone(),
            source,
        })
    }

    pub fn save(&self, table: &VolumeTable) -> Result<(), StateFileError> {
        let write_error = |source| StateFileError::Write {
            path: self.path.clone(),
            source,
        };
        let text = serde_json::to_string_pretty(table).map_err(io::Error::other);
        let text = text.map_err(write_error)?;
        let tmp = self.path.with_extension("json.tmp");
        std::fs::write(&tmp, text).map_err(write_error)?;
        std::fs::rename(&tmp, &self.path).map_err(write_error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capacity::{DEFAULT_CAPACITY_BYTES, GIB, bounds};

    #[test]
    fn create_is_idempotent_by_name_within_the_bounds() {
        let mut table = VolumeTable::default();
        let first = table.create("pvc-a", bounds(GIB, 0)).expect("created");
        assert_eq!(first.capacity_bytes, GIB);
        let cases = [
            ("same request", bounds(GIB, 0), Ok(first)),
            ("no bounds", None, Ok(first)),
            ("smaller request", bounds(1, 0), Ok(first)),
            (
                "larger request",
                bounds(2 * GIB, 0),
                Err(TableError::ExistsWithOtherCapacity {
                    id: "pvc-a".to_owned(),
                    capacity_bytes: GIB,
                }),
            ),
            (
                "limit below",
                bounds(0, GIB - 1),
                Err(TableError::ExistsWithOtherCapacity {
                    id: "pvc-a".to_owned(),
                    capacity_bytes: GIB,
                }),
            ),
        ];
        for (name, b, want) in cases {
            assert_eq!(table.create("pvc-a", b), want, "{name}");
        }
    }

    #[test]
    fn expand_records_the_new_capacity_of_a_known_volume() {
        let mut table = VolumeTable::default();
        table.create("pvc-a", None).expect("created");
        assert_eq!(table.expand("pvc-a", bounds(2 * GIB, 0)), Ok(2 * GIB));
        assert_eq!(table.get("pvc-a").map(|r| r.capacity_bytes), Some(2 * GIB));
        assert_eq!(
            table.expand("pvc-b", bounds(2 * GIB, 0)),
            Err(TableError::NotFound {
                id: "pvc-b".to_owned()
            })
        );
        assert_eq!(
            table.expand("pvc-a", None),
            Err(TableError::Capacity(CapacityError::ExpansionWithoutSize))
        );
    }

    #[test]
    fn delete_forgets_and_tolerates_unknown_volumes() {
        let mut table = VolumeTable::default();
        table.create("pvc-a", None).expect("created");
        assert!(table.delete("pvc-a"));
        assert!(!table.delete("pvc-a"));
        assert_eq!(table.get("pvc-a"), None);
    }

    #[test]
    fn errors_map_to_the_grpc_codes_the_sidecars_expect() {
        let code = |e: TableError| tonic::Status::from(e).code();
        let not_found = TableError::NotFound { id: "x".to_owned() };
        assert_eq!(code(not_found), tonic::Code::NotFound);
        let exists = TableError::ExistsWithOtherCapacity {
            id: "x".to_owned(),
            capacity_bytes: 1,
        };
        assert_eq!(code(exists), tonic::Code::AlreadyExists);
        let huge = TableError::Capacity(CapacityError::AboveMaximum(1));
        assert_eq!(code(huge), tonic::Code::OutOfRange);
        let no_size = TableError::Capacity(CapacityError::ExpansionWithoutSize);
        assert_eq!(code(no_size), tonic::Code::InvalidArgument);
    }

    #[test]
    fn the_file_round_trips_and_starts_empty() {
        let dir = tempfile::tempdir().expect("temp dir");
        let file = StateFile::new(dir.path().join("volumes.json"));
        assert_eq!(file.load().expect("absent file"), VolumeTable::default());
        let mut table = VolumeTable::default();
        table.create("pvc-a", None).expect("created");
        file.save(&table).expect("saved");
        let loaded = file.load().expect("loaded");
        assert_eq!(
            loaded.get("pvc-a").map(|r| r.capacity_bytes),
            Some(DEFAULT_CAPACITY_BYTES)
        );
    }

    #[test]
    fn a_corrupt_file_is_an_error_that_names_it() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("volumes.json");
        std::fs::write(&path, "{not json").expect("written");
        let error = StateFile::new(&path).load().expect_err("corrupt");
        assert!(
            error
                .to_string()
                .contains("volumes.json are not valid JSON"),
            "{error}"
        );
    }
}
