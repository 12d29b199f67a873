//! The Advanced StatefulSet controller, a second adapter of the shared pod-set engine
//! (`workload::plan`): pure rules for a pod's identity (`ordinals`), what the workload
//! says about itself (`adapter`), one sync as a decision (`plan`) and its status (`status`).

pub mod adapter;
pub mod ordinals;
pub mod plan;
pub mod status;
