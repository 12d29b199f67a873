//! Per-node image lists: the ImageList objects, what is sent to each agent (`desired`), the
//! status coming back (`status`), and the distributor that moves both (`distributor`).

pub mod desired;
pub mod distributor;
pub mod freshest;
pub mod pull_secrets;
pub mod status;

pub use distributor::Distributor;
