//! Container launch priority (OpenKruise's ContainerLaunchPriority): a pod that asks for
//! it (`apps.kruise.io/container-launch-priority: Ordered`, or containers with a
//! `KRUISE_CONTAINER_PRIORITY` env) starts its containers in priority order. At creation
//! the pod webhook gives every container below the highest priority a
//! `KRUISE_CONTAINER_BARRIER` env read from the key `p_<priority>` of the ConfigMap
//! `<pod>-barrier`; the kubelet cannot start a container whose key is missing
//! (`CreateContainerConfigError`, retried), and the controller adds each key once every
//! container of a higher priority is ready.
//!
//! - [`plan`]: the rules (pure): each container's priority, the webhook's env patch, the
//!   keys due on a running pod;
//! - [`barrier`]: what the controller does with the pod's barrier ConfigMap (pure);
//! - [`webhook`]: the route on the shared webhook server (`crate::admission`);
//! - [`controller`]: the controller keeping the barrier ConfigMaps, and its triggers.

pub mod barrier;
pub mod controller;
pub mod plan;
pub mod webhook;

pub use controller::LaunchPriorityController;
