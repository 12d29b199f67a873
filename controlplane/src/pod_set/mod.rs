//! The one controller of every pod-set kind (CloneSet, Advanced StatefulSet, Advanced
//! DaemonSet): what a kind hands it (`kind::PodSetKind`) and the one sync that runs it
//! (`sync`), with what it reads before planning (`read`) and the pods it builds for the
//! shared executor (`pods`). It sits above the shared rules (`workload`) and the
//! pre-download (`predownload`) and below the kinds, which import it and never each
//! other.

pub mod kind;
pub mod pods;
mod read;
pub mod sync;
