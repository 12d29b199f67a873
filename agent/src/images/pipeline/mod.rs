//! One pull ([`pull`]): its downloads and unpacking overlapped
//! (`download_and_unpack`), each layer unpacked when `unpack_schedule` (pure) lets it.

mod download_and_unpack;
pub mod pull;
mod unpack_schedule;

pub use pull::{PullError, PulledImage};
