//! What the agent serves: the pull manager ([`manager`]: joined pulls per image and
//! credential, cap, retries), how failed pulls map to gRPC codes ([`failure`]), the
//! node's desired image list ([`image_list`], pure; [`list_runner`] drives it) and the
//! `ImageService` gRPC API over them (`grpc`).

pub mod failure;
mod grpc;
pub mod image_list;
pub mod list_runner;
pub mod manager;

pub use grpc::{AgentImageService, ConnectError, ImageServiceImpl};
