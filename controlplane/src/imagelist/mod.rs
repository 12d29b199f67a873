//! Per-node image lists: the ImageList objects, what is sent to each agent (`desired`), the
//! status coming back (`status`), the distributor that moves both (`distributor`), and
//! the Events it records for the agent's pull failures (`pull_events`).

pub mod desired;
pub mod distributor;
pub mod freshest;
pub mod pull_events;
pub mod pull_secrets;
pub mod status;

pub use distributor::Distributor;
