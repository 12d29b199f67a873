//! Scratch space for a test's own processes: a directory removed when dropped, and a
//! loopback address to listen on.

use std::path::{Path, PathBuf};

use anyhow::Result;

/// A directory of the test's own under the system's temporary directory, named after
/// `name` and this process, emptied when made and removed when dropped.
pub struct ScratchDir(PathBuf);

impl ScratchDir {
    pub fn new(name: &str) -> Result<Self> {
        let dir = std::env::temp_dir().join(format!("stevedore-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        Ok(Self(dir))
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `127.0.0.1:<port>` of a port that was free a moment ago, for a child process to listen
/// on (a process of ours would bind port 0 itself instead).
pub fn free_loopback_addr() -> Result<String> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?.to_string())
}
