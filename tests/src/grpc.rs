//! gRPC channels the agent tests open.

use std::path::PathBuf;

use anyhow::Result;
use tonic::transport::{Channel, Endpoint};

/// A channel over the agent's root-only Unix socket at `path` (no token needed there).
pub async fn unix_channel(path: PathBuf) -> Result<Channel> {
    Ok(Endpoint::from_static("http://agent.invalid")
        .connect_with_connector(tower::service_fn(move |_| {
            let path = path.clone();
            async move {
                Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(
                    tokio::net::UnixStream::connect(path).await?,
                ))
            }
        }))
        .await?)
}
