//! gRPC channels the agent tests open.

use std::path::PathBuf;

use anyhow::Result;
use stevedore_proto::stevedore::agent::v1::{
    self as api, image_service_client::ImageServiceClient,
};
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

/// Removes `image` from the node through the agent's image service.
pub async fn remove_image(client: &ImageServiceClient<Channel>, image: &str) -> Result<()> {
    client
        .clone()
        .remove_image(api::RemoveImageRequest {
            image: image.to_owned(),
        })
        .await?;
    Ok(())
}

/// The image as the agent finds it on the node, or `None` when the node lacks it.
pub async fn image_status(
    client: &ImageServiceClient<Channel>,
    image: &str,
) -> Result<Option<api::Image>> {
    let response = client
        .clone()
        .image_status(api::ImageStatusRequest {
            image: image.to_owned(),
        })
        .await?;
    Ok(response.into_inner().image)
}
