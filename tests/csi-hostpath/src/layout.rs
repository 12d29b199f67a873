//! Where the driver keeps things under its state dir: one directory per volume and the
//! JSON record of their capacities beside them.

use std::path::{Path, PathBuf};

use crate::state::StateFile;

#[derive(Debug, Clone)]
pub struct Layout {
    root: PathBuf,
}

impl Layout {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    pub fn volumes_dir(&self) -> PathBuf {
        self.root.join("volumes")
    }

    /// The directory of volume `id`; the id was validated (`validate::volume_id`), so it
    /// names a direct child of the volumes dir.
    pub fn volume_dir(&self, id: &str) -> PathBuf {
        self.volumes_dir().join(id)
    }

    pub fn state_file(&self) -> StateFile {
        StateFile::new(self.root.join("volumes.json"))
    }

    pub fn root(&self) -> &Path {
        &self.root
    }
}
