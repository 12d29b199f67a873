//! containerd as the pull needs it: the [`ImageStore`] contract (`image_store`) and
//! its implementation over containerd's gRPC services ([`containerd`]), which writes
//! through `content_writer`, resumes `partial_downloads` and finds
//! [`orphan_leases`] over the namespaced channel of `containerd_conn`; and what the
//! pull and the service do with a store: [`source_label`] (distribution source labels),
//! `records` (image records, all or none), [`inventory`] (the images present).

pub mod containerd;
mod containerd_conn;
mod content_writer;
mod image_store;
pub mod inventory;
pub mod orphan_leases;
mod partial_downloads;
pub(super) mod records;
pub mod source_label;

pub use containerd::ContainerdStore;
pub use image_store::{
    BlobWriter, CRI_IMAGE_LABEL, CRI_PINNED_LABEL, ImageRecord, ImageStore, LeaseId, StoreError,
    is_pinned,
};
