//! The run's nodes: simulated nodes with real agents (`deploy/local/sim-agents.sh`), so
//! in-place updates, image pulls and container restarts go through agents that a fault
//! can kill. Every workload of the run is pinned to them ([`Placement`]); nothing else
//! lands there (their taint names the run's prefix).

use anyhow::Result;
use serde_json::{Value, json};

use crate::TestContext;
use crate::sim::SimAgents;

/// The label and taint sim-agents.sh puts on its nodes, valued with their prefix.
const SIMULATED: &str = "stevedore.dev/simulated";

/// Where the run's pods go: the simulated nodes of one prefix.
#[derive(Clone, Debug)]
pub struct Placement {
    pub prefix: String,
}

impl Placement {
    /// The node selector of a pod template (and of an ImagePullJob's node selector).
    pub fn node_selector(&self) -> Value {
        json!({ SIMULATED: self.prefix })
    }

    /// kwok's taint and the simulated nodes' own.
    pub fn tolerations(&self) -> Value {
        json!([
            { "key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule" },
            { "key": SIMULATED, "operator": "Equal", "value": self.prefix, "effect": "NoSchedule" },
        ])
    }
}

/// The prefix of a run's nodes: `chaos-` and the run's namespace suffix, so two runs on
/// one cluster never share nodes.
pub fn prefix_of(namespace: &str) -> String {
    let suffix = namespace.rsplit('-').next().unwrap_or_default();
    format!("chaos-{suffix}")
}

/// The run's nodes with their agents; dropped, they go.
pub struct Pool {
    pub sim: SimAgents,
    pub placement: Placement,
}

impl Pool {
    pub fn up(ctx: &TestContext, count: usize) -> Result<Self> {
        let prefix = prefix_of(&ctx.namespace);
        let sim = SimAgents::up(ctx.cluster, &prefix, count)?;
        Ok(Self {
            sim,
            placement: Placement { prefix },
        })
    }

    pub fn nodes(&self) -> Vec<String> {
        (0..self.sim.count).map(|i| self.sim.node(i)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_runs_prefix_is_chaos_and_its_namespace_suffix() {
        assert_eq!(prefix_of("t-chaos-4321"), "chaos-4321");
        assert_eq!(prefix_of("plain"), "chaos-plain");
    }
}
