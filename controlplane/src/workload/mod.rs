//! Machinery shared by every workload kind, as pure planners: observed state in, decisions
//! out, no client calls — so each rule is unit-tested here and the reconcilers stay thin.

pub mod actions;
pub mod adapter;
pub mod budget;
pub mod claim;
pub mod claim_resize;
pub mod deletion;
pub mod deletion_marks;
pub mod execute;
pub mod history;
pub mod inplace;
pub mod instance_id;
pub mod lifecycle;
pub mod node;
pub mod node_changes;
pub mod node_eval;
pub mod node_pin;
pub mod node_resources;
pub mod ordering;
pub mod ownership;
pub mod plan;
pub mod pod_view;
pub mod revision;
pub mod revision_adapter;
pub mod revision_spec;
pub mod rollout;
#[cfg(test)]
pub(crate) mod scripted_api;
pub mod selector;
pub mod selector_guard;
pub mod set_controller;
pub mod template_check;
pub mod template_defaults;
#[cfg(test)]
pub mod test_pods;
pub mod triggers;
pub mod update_guard;
pub mod update_hold;
