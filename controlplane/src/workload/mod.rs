//! Shared workload machinery: pure planners that every workload reconciler reuses.
//! Each planner takes observed facts and returns plain action values; none does I/O.

pub mod deletion;
pub mod inplace;
pub mod lifecycle;
