//! The Advanced StatefulSet controller, a second adapter of the shared pod-set engine
//! (`workload::plan`): pure rules for a pod's identity (`ordinals`), what the workload
//! says about itself (`adapter`) and one sync as a decision (`plan`).

pub mod adapter;
pub mod ordinals;
pub mod plan;
