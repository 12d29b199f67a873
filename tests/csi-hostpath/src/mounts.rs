//! Bind mounts, behind a narrow trait so the Node service's rules are tested with a
//! recording double, and the one real implementation runs mount(8) and reads
//! /proc/self/mountinfo. The kubelet runs on the host, so the driver's mount namespace
//! is the kubelet's.

use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;

use thiserror::Error;

#[derive(Debug, Error)]
pub enum MountError {
    #[error("running {command}: {source}")]
    Spawn { command: String, source: io::Error },
    #[error("{command} failed: {stderr}")]
    Failed { command: String, stderr: String },
    #[error("reading /proc/self/mountinfo: {0}")]
    MountInfo(io::Error),
}

impl From<MountError> for tonic::Status {
    fn from(error: MountError) -> Self {
        tonic::Status::internal(error.to_string())
    }
}

pub trait Mounter: Send + Sync + 'static {
    fn is_mount_point(&self, path: &Path) -> Result<bool, MountError>;
    /// Binds `source` onto the existing directory `target`, read-only when asked.
    fn bind(&self, source: &Path, target: &Path, readonly: bool) -> Result<(), MountError>;
    fn unmount(&self, target: &Path) -> Result<(), MountError>;
}

/// mount(8) and umount(8) on this host.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemMounter;

impl Mounter for SystemMounter {
    fn is_mount_point(&self, path: &Path) -> Result<bool, MountError> {
        let info =
            std::fs::read_to_string("/proc/self/mountinfo").map_err(MountError::MountInfo)?;
        Ok(mount_points(&info).iter().any(|p| p == path))
    }

    fn bind(&self, source: &Path, target: &Path, readonly: bool) -> Result<(), MountError> {
        run(
            "mount",
            &["--bind".as_ref(), source.as_os_str(), target.as_os_str()],
        )?;
        if readonly {
            // A bind mount takes its flags from a remount (mount(8), "bind mount operation").
            run(
                "mount",
                &[
                    "-o".as_ref(),
                    "remount,bind,ro".as_ref(),
                    target.as_os_str(),
                ],
            )?;
        }
        Ok(())
    }

    fn unmount(&self, target: &Path) -> Result<(), MountError> {
        run("umount", &[target.as_os_str()])
    }
}

fn run(program: &str, args: &[&std::ffi::OsStr]) -> Result<(), MountError> {
    let command = format!(
        "{program} {}",
        args.iter()
            .map(|a| a.to_string_lossy())
            .collect::<Vec<_>>()
            .join(" ")
    );
    let output = Command::new(program)
        .args(args)
        .output()
        .map_err(|source| MountError::Spawn {
            command: command.clone(),
            source,
        })?;
    if output.status.success() {
        return Ok(());
    }
    Err(MountError::Failed {
        command,
        stderr: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
    })
}

/// The mount points listed in a mountinfo text (proc(5): the fifth field, with spaces,
/// tabs, newlines and backslashes written as octal escapes).
pub fn mount_points(mountinfo: &str) -> Vec<PathBuf> {
    mountinfo
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        .map(|field| PathBuf::from(unescape_octal(field)))
        .collect()
}

fn unescape_octal(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escape = bytes
            .get(i + 1..i + 4)
            .filter(|d| bytes[i] == b'\\' && d.iter().all(|b| (b'0'..=b'7').contains(b)));
        match escape {
            Some(digits) => {
                let value = digits
                    .iter()
                    .fold(0u32, |acc, d| acc * 8 + u32::from(d - b'0'));
                out.push(u8::try_from(value).unwrap_or(b'?'));
                i += 4;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTINFO: &str = "\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
98 22 8:1 /vols/pvc-a /var/lib/k/pods/1/volumes/kubernetes.io~csi/pvc-a/mount rw shared:1 - ext4 /dev/sda1 rw
99 22 8:1 /x /mnt/with\\040space rw - ext4 /dev/sda1 rw
100 22 8:1 /y /mnt/back\\134slash rw - ext4 /dev/sda1 rw
";

    #[test]
    fn mount_points_are_the_fifth_field_unescaped() {
        let points = mount_points(MOUNTINFO);
        let want: Vec<PathBuf> = [
            "/",
            "/var/lib/k/pods/1/volumes/kubernetes.io~csi/pvc-a/mount",
            "/mnt/with space",
            "/mnt/back\\slash",
        ]
        .iter()
        .map(PathBuf::from)
        .collect();
        assert_eq!(points, want);
    }

    #[test]
    fn unescape_leaves_plain_and_short_backslashes() {
        let cases = [
            ("plain", "plain"),
            ("a\\040b", "a b"),
            ("tab\\011", "tab\t"),
            ("trailing\\", "trailing\\"),
            ("short\\04", "short\\04"),
            ("not-octal\\089", "not-octal\\089"),
        ];
        for (input, want) in cases {
            assert_eq!(unescape_octal(input), want, "{input}");
        }
    }
}
