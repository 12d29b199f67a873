//! The containerd the agent's suites run against, chosen in one place so the same suites
//! run against Debian's 1.6 (the cluster's, by default) and containerd 2.x.
//!
//! By default it is the cluster's own containerd, the one kubelet uses (and with it the
//! `ctr` of the same build, `STEVEDORE_CTR` of the env file). Setting
//! `STEVEDORE_TEST_CONTAINERD_SOCK` (and `STEVEDORE_TEST_CTR`) in the test's environment
//! points the suites at another one, such as the containerd 2.x that
//! `deploy/local/cluster.sh containerd2 up` starts beside the cluster's;
//! `cluster.sh containerd2 env` prints both exports. Kubelet never uses that one, so
//! the tests that need kubelet's pods on the containerd under test say they are skipped.

use std::collections::HashMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context as _, Result, ensure};

/// The test's own environment variable naming the containerd socket to test against.
pub const SOCKET_VAR: &str = "STEVEDORE_TEST_CONTAINERD_SOCK";
/// The `ctr` binary that goes with [`SOCKET_VAR`]'s containerd.
pub const CTR_VAR: &str = "STEVEDORE_TEST_CTR";

/// A containerd the tests talk to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Containerd {
    pub socket: PathBuf,
    /// The `ctr` of the same build (any ctr speaks to both majors, but its output and
    /// defaults follow its own version).
    pub ctr: PathBuf,
    /// Whether kubelet runs its pods on this containerd.
    pub kubelets: bool,
}

impl Containerd {
    /// Chooses the containerd under test: the override of the test's environment
    /// (`process_env`: [`SOCKET_VAR`], [`CTR_VAR`]) or else the cluster's (`kubelet_socket`,
    /// `cluster_ctr`).
    pub fn choose(
        kubelet_socket: &Path,
        cluster_ctr: &Path,
        process_env: &HashMap<String, String>,
    ) -> Self {
        let Some(socket) = process_env.get(SOCKET_VAR).filter(|s| !s.is_empty()) else {
            return Self {
                socket: kubelet_socket.to_owned(),
                ctr: cluster_ctr.to_owned(),
                kubelets: true,
            };
        };
        let socket = PathBuf::from(socket);
        Self {
            kubelets: socket == kubelet_socket,
            ctr: process_env
                .get(CTR_VAR)
                .filter(|c| !c.is_empty())
                .map_or_else(|| PathBuf::from("ctr"), PathBuf::from),
            socket,
        }
    }

    /// True when kubelet runs its pods here; otherwise prints why `test` is skipped,
    /// so a run against containerd 2.x beside the cluster's says what it did not cover.
    /// Written to stderr directly: libtest captures `eprintln!` of passing tests.
    pub fn runs_kubelets_pods(&self, test: &str) -> bool {
        if !self.kubelets {
            let _ = writeln!(
                std::io::stderr(),
                "skipped {test}: it needs kubelet's pods on the containerd under test, and \
                 {SOCKET_VAR} points at {}, which kubelet does not use",
                self.socket.display()
            );
        }
        self.kubelets
    }

    /// `ctr -n k8s.io ARGS` against this containerd; its stdout, or an error with stderr.
    pub fn ctr(&self, args: &[&str]) -> Result<String> {
        let output = Command::new(&self.ctr)
            .arg("--address")
            .arg(&self.socket)
            .args(["-n", "k8s.io"])
            .args(args)
            .output()
            .with_context(|| format!("running {}", self.ctr.display()))?;
        ensure!(
            output.status.success(),
            "ctr {args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    }

    /// The server's version as containerd reports it (`1.6.20~ds1`, `v2.3.7`).
    pub fn server_version(&self) -> Result<String> {
        let output = Command::new(&self.ctr)
            .arg("--address")
            .arg(&self.socket)
            .arg("version")
            .output()
            .with_context(|| format!("running {} version", self.ctr.display()))?;
        ensure!(output.status.success(), "ctr version: {output:?}");
        server_version_of(&String::from_utf8_lossy(&output.stdout))
            .context("ctr version printed no server version")
    }
}

/// The `Version:` line of the `Server:` part of `ctr version`'s output.
fn server_version_of(ctr_version: &str) -> Option<String> {
    ctr_version
        .lines()
        .skip_while(|line| line.trim() != "Server:")
        .find_map(|line| line.trim().strip_prefix("Version:"))
        .map(|v| v.trim().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn the_choice_of_containerd() {
        let kubelet = Path::new("/run/k/containerd.sock");
        let cluster_ctr = Path::new("/usr/bin/ctr");
        let cases = [
            // (test's environment, socket, ctr, kubelet's)
            (env(&[]), "/run/k/containerd.sock", "/usr/bin/ctr", true),
            (
                env(&[(SOCKET_VAR, "")]),
                "/run/k/containerd.sock",
                "/usr/bin/ctr",
                true,
            ),
            (
                env(&[
                    (SOCKET_VAR, "/run/k/containerd2/containerd.sock"),
                    (CTR_VAR, "/c2/ctr"),
                ]),
                "/run/k/containerd2/containerd.sock",
                "/c2/ctr",
                false,
            ),
            (
                env(&[(SOCKET_VAR, "/other.sock")]),
                "/other.sock",
                "ctr",
                false,
            ),
            (
                env(&[(SOCKET_VAR, "/run/k/containerd.sock"), (CTR_VAR, "/c2/ctr")]),
                "/run/k/containerd.sock",
                "/c2/ctr",
                true,
            ),
        ];
        for (process_env, socket, ctr, kubelets) in cases {
            let chosen = Containerd::choose(kubelet, cluster_ctr, &process_env);
            let expected = Containerd {
                socket: socket.into(),
                ctr: ctr.into(),
                kubelets,
            };
            assert_eq!(chosen, expected, "{process_env:?}");
        }
    }

    #[test]
    fn server_version_is_read_from_the_server_part() {
        let v16 = "Client:\n  Version:  1.6.20~ds1\n  Revision: 1.6.20~ds1-1\n  Go version: go1.19\n\n\
                   Server:\n  Version:  1.6.20~ds1\n  Revision: 1.6.20~ds1-1\n  UUID: x\n";
        assert_eq!(server_version_of(v16).as_deref(), Some("1.6.20~ds1"));
        let v2 = "Client:\n  Version:  1.6.20~ds1\n\nServer:\n  Version:  v2.3.7\n  Revision: \n";
        assert_eq!(server_version_of(v2).as_deref(), Some("v2.3.7"));
        assert_eq!(server_version_of("Client:\n  Version:  1.6\n"), None);
    }
}
