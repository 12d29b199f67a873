//! The fault schedule: which fault, on what, after how long, all drawn from one seed.
//! Pure; the faults are carried out by [`super::faults`].

use std::fmt;
use std::time::Duration;

use super::rng::Rng;

/// The kinds of fault the harness injects.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FaultKind {
    /// SIGKILL of the control plane's leader (it cannot release its Lease).
    KillLeader,
    /// SIGKILL of the standby replica.
    KillStandby,
    /// etcd stopped (SIGSTOP) for a few seconds: every apiserver call hangs.
    PauseEtcd,
    /// A simulated node's Ready condition set False (kwok sets it back).
    NodeNotReady,
    /// A pod of a workload deleted behind its controller's back.
    DeletePod,
    /// A ControllerRevision of a workload deleted behind its controller's back.
    DeleteRevision,
    /// A user's edit of the template in the middle of a rollout (a new revision).
    UserEdit,
    /// kube-apiserver stopped (SIGTERM) and started again with the same arguments.
    RestartApiserver,
    /// A simulated node's agent killed (SIGKILL) and started again.
    KillAgent,
    /// A claim of a live StatefulSet ordinal deleted behind its controller's back.
    DeletePvc,
    /// The control plane webhook Service's EndpointSlices deleted (Kubernetes makes them
    /// again).
    DropWebhookEndpoints,
    /// The control plane's traffic to the apiserver slowed by the harness's proxy
    /// ([`super::throttle`]).
    ThrottleApiserver,
    /// The agent of a real node (one running a pod of the real CloneSet) killed: its pod
    /// deleted without grace, so the kubelet kills it and its DaemonSet starts another,
    /// perhaps while it recreates a container for a ContainerRecreateRequest.
    KillRealAgent,
}

impl FaultKind {
    pub const ALL: [FaultKind; 13] = [
        FaultKind::KillLeader,
        FaultKind::KillStandby,
        FaultKind::PauseEtcd,
        FaultKind::NodeNotReady,
        FaultKind::DeletePod,
        FaultKind::DeleteRevision,
        FaultKind::UserEdit,
        FaultKind::RestartApiserver,
        FaultKind::KillAgent,
        FaultKind::DeletePvc,
        FaultKind::DropWebhookEndpoints,
        FaultKind::ThrottleApiserver,
        FaultKind::KillRealAgent,
    ];

    /// The kind's name on the command line: `KillLeader` is `kill-leader`.
    pub fn flag(self) -> String {
        let mut out = String::new();
        for (i, c) in format!("{self:?}").chars().enumerate() {
            if c.is_ascii_uppercase() && i > 0 {
                out.push('-');
            }
            out.push(c.to_ascii_lowercase());
        }
        out
    }

    /// The kind named `flag` on the command line.
    pub fn from_flag(flag: &str) -> Option<FaultKind> {
        Self::ALL.into_iter().find(|k| k.flag() == flag)
    }

    /// How often the kind is drawn relative to the others: the faults that take the
    /// whole control plane away for a lease's length are rarer than the ones on one pod.
    fn weight(self) -> u64 {
        match self {
            FaultKind::KillLeader | FaultKind::KillStandby | FaultKind::PauseEtcd => 1,
            FaultKind::RestartApiserver | FaultKind::ThrottleApiserver => 1,
            FaultKind::KillRealAgent => 1,
            FaultKind::DeleteRevision | FaultKind::DeletePvc | FaultKind::DropWebhookEndpoints => 1,
            FaultKind::NodeNotReady | FaultKind::UserEdit | FaultKind::KillAgent => 2,
            FaultKind::DeletePod => 3,
        }
    }
}

/// One fault with what it acts on. `pick` chooses among what exists when the fault runs
/// (modulo their number), so the schedule does not depend on names the run creates.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fault {
    KillLeader,
    KillStandby,
    PauseEtcd { seconds: u64 },
    NodeNotReady { node: usize },
    DeletePod { set: usize, pick: u64 },
    DeleteRevision { set: usize, pick: u64 },
    UserEdit { set: usize },
    RestartApiserver,
    KillAgent { node: usize, seconds: u64 },
    DeletePvc { pick: u64 },
    DropWebhookEndpoints,
    ThrottleApiserver { seconds: u64 },
    KillRealAgent { pick: u64 },
}

impl Fault {
    pub fn kind(&self) -> FaultKind {
        match self {
            Fault::KillLeader => FaultKind::KillLeader,
            Fault::KillStandby => FaultKind::KillStandby,
            Fault::PauseEtcd { .. } => FaultKind::PauseEtcd,
            Fault::NodeNotReady { .. } => FaultKind::NodeNotReady,
            Fault::DeletePod { .. } => FaultKind::DeletePod,
            Fault::DeleteRevision { .. } => FaultKind::DeleteRevision,
            Fault::UserEdit { .. } => FaultKind::UserEdit,
            Fault::RestartApiserver => FaultKind::RestartApiserver,
            Fault::KillAgent { .. } => FaultKind::KillAgent,
            Fault::DeletePvc { .. } => FaultKind::DeletePvc,
            Fault::DropWebhookEndpoints => FaultKind::DropWebhookEndpoints,
            Fault::ThrottleApiserver { .. } => FaultKind::ThrottleApiserver,
            Fault::KillRealAgent { .. } => FaultKind::KillRealAgent,
        }
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fault::KillLeader => write!(f, "kill the leader"),
            Fault::KillStandby => write!(f, "kill the standby"),
            Fault::PauseEtcd { seconds } => write!(f, "pause etcd for {seconds} s"),
            Fault::NodeNotReady { node } => write!(f, "node {node} NotReady"),
            Fault::DeletePod { set, pick } => write!(f, "delete a pod of set {set} (pick {pick})"),
            Fault::DeleteRevision { set, pick } => {
                write!(f, "delete a revision of set {set} (pick {pick})")
            }
            Fault::UserEdit { set } => write!(f, "user edit of set {set}"),
            Fault::RestartApiserver => write!(f, "restart the apiserver"),
            Fault::KillAgent { node, seconds } => {
                write!(f, "kill the agent of node {node} for {seconds} s")
            }
            Fault::DeletePvc { pick } => {
                write!(f, "delete a claim of the StatefulSet (pick {pick})")
            }
            Fault::DropWebhookEndpoints => write!(f, "drop the webhook's endpoints"),
            Fault::ThrottleApiserver { seconds } => {
                write!(f, "throttle the apiserver for {seconds} s")
            }
            Fault::KillRealAgent { pick } => {
                write!(f, "kill the agent of a real node (pick {pick})")
            }
        }
    }
}

/// A fault and the wait before it (after the previous one).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    pub after: Duration,
    pub fault: Fault,
}

/// What a schedule is drawn over.
#[derive(Clone, Debug)]
pub struct Shape {
    pub faults: usize,
    /// Waits are drawn between half and one and a half times this.
    pub mean_gap: Duration,
    pub sets: usize,
    pub nodes: usize,
    pub kinds: Vec<FaultKind>,
}

/// The schedule of `shape.faults` faults for `seed`: the same seed and shape always give
/// the same steps. Empty when no kind is enabled.
pub fn plan(seed: u64, shape: &Shape) -> Vec<Step> {
    let total: u64 = shape.kinds.iter().map(|k| k.weight()).sum();
    if total == 0 {
        return Vec::new();
    }
    let mut rng = Rng::new(seed);
    let gap_ms = u64::try_from(shape.mean_gap.as_millis()).unwrap_or(u64::MAX);
    (0..shape.faults)
        .map(|_| {
            let after = Duration::from_millis(rng.between(gap_ms / 2, gap_ms + gap_ms / 2));
            let kind = weighted(&mut rng, &shape.kinds, total);
            Step {
                after,
                fault: fault_of(kind, &mut rng, shape),
            }
        })
        .collect()
}

fn weighted(rng: &mut Rng, kinds: &[FaultKind], total: u64) -> FaultKind {
    let mut ticket = rng.below(total);
    for kind in kinds {
        if ticket < kind.weight() {
            return *kind;
        }
        ticket -= kind.weight();
    }
    kinds[kinds.len() - 1]
}

fn fault_of(kind: FaultKind, rng: &mut Rng, shape: &Shape) -> Fault {
    let set = usize::try_from(rng.below(shape.sets as u64)).unwrap_or(0);
    let node = usize::try_from(rng.below(shape.nodes as u64)).unwrap_or(0);
    match kind {
        FaultKind::KillLeader => Fault::KillLeader,
        FaultKind::KillStandby => Fault::KillStandby,
        FaultKind::PauseEtcd => Fault::PauseEtcd {
            seconds: rng.between(1, 4),
        },
        FaultKind::NodeNotReady => Fault::NodeNotReady { node },
        FaultKind::DeletePod => Fault::DeletePod {
            set,
            pick: rng.next_u64(),
        },
        FaultKind::DeleteRevision => Fault::DeleteRevision {
            set,
            pick: rng.next_u64(),
        },
        FaultKind::UserEdit => Fault::UserEdit { set },
        FaultKind::RestartApiserver => Fault::RestartApiserver,
        FaultKind::KillAgent => Fault::KillAgent {
            node,
            seconds: rng.between(1, 6),
        },
        FaultKind::DeletePvc => Fault::DeletePvc {
            pick: rng.next_u64(),
        },
        FaultKind::DropWebhookEndpoints => Fault::DropWebhookEndpoints,
        FaultKind::ThrottleApiserver => Fault::ThrottleApiserver {
            seconds: rng.between(2, 8),
        },
        FaultKind::KillRealAgent => Fault::KillRealAgent {
            pick: rng.next_u64(),
        },
    }
}
