//! ContainerRecreateRequest: restart some containers of a pod in place through the agent
//! of the pod's node. `plan` is the request's state machine (pure); `agent` is the narrow
//! seam to the node agents; `budget` asks the shared disruption budgets before a start;
//! `reconcile` carries a plan out; `triggers` maps request and pod changes to requests;
//! `admission` is what the mutating webhook decides at create and update (pure), served
//! by `webhook`.

pub mod admission;
pub mod agent;
pub mod budget;
pub mod plan;
pub mod reconcile;
pub mod triggers;
pub mod webhook;

pub use reconcile::ContainerRecreateController;
