//! The control plane's memory during a run: the leader's resident set (VmRSS of its
//! process, read from /proc: the kubelet node is this machine), sampled every few
//! seconds; the peak is reported, and a peak above [`BOUND_KIB`] is a violation.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt as _;
use kube::api::Api;

use super::invariants::Violation;
use crate::TestContext;
use crate::controlplane::{self, SYSTEM_NAMESPACE};

/// A generous bound: 512 MiB. The control plane of a run uses a fraction of it; a leak
/// under hundreds of faults would cross it.
pub const BOUND_KIB: u64 = 512 * 1024;

/// The highest sample, and whose it was.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Peak {
    pub kib: u64,
    pub pod: String,
    /// When it was sampled, since the run began.
    pub at: Duration,
}

/// VmRSS in KiB from the text of /proc/PID/status. Pure.
pub fn vm_rss_kib(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// The peak as a broken promise, if it is above `bound_kib`. Pure.
pub fn over_bound(peak: &Peak, bound_kib: u64) -> Option<Violation> {
    (peak.kib > bound_kib).then(|| Violation {
        at: peak.at,
        rule: "memory",
        detail: format!(
            "the control plane's leader {} used {} MiB, above the bound of {} MiB",
            peak.pod,
            peak.kib / 1024,
            bound_kib / 1024
        ),
        ..Violation::default()
    })
}

/// One sample of the leader: its pod and VmRSS, when it and its process can be found.
pub async fn sample(ctx: &TestContext) -> Option<(String, u64)> {
    let leader = controlplane::leader(&ctx.client).await.ok()?;
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), SYSTEM_NAMESPACE);
    let uid = pods.get_opt(&leader).await.ok()??.uid()?;
    let pid = controlplane::control_plane_pid(&uid)?;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    Some((leader, vm_rss_kib(&status)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_resident_set_is_read_from_proc_status_and_a_peak_above_the_bound_is_reported() {
        let status = "Name:\tstevedore-contr\nVmPeak:\t  900000 kB\nVmRSS:\t   61234 kB\n";
        assert_eq!(vm_rss_kib(status), Some(61_234));
        assert_eq!(vm_rss_kib("Name:\tx\n"), None);
        let peak = |kib| Peak {
            kib,
            pod: "cp-a".into(),
            at: Duration::from_secs(9),
        };
        assert!(over_bound(&peak(BOUND_KIB), BOUND_KIB).is_none());
        let found = over_bound(&peak(BOUND_KIB + 1), BOUND_KIB).expect("over");
        assert_eq!(found.rule, "memory");
        assert!(found.detail.contains("cp-a"), "{}", found.detail);
    }
}
