//! The one way the agent reaches containerd: a lazily connected gRPC channel over its Unix
//! socket, shared by the image store and the container runtime. Lazy, so the agent starts
//! (and reports not-ready) while containerd is down, and reconnects when it returns.

use std::path::PathBuf;

use tonic::transport::{Channel, Endpoint};

pub fn lazy_channel(socket: PathBuf) -> Channel {
    // The URI is never resolved: the connector below dials the socket.
    Endpoint::from_static("http://containerd.invalid").connect_with_connector_lazy(
        tower::service_fn(move |_| {
            let socket = socket.clone();
            async move {
                Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(
                    tokio::net::UnixStream::connect(socket).await?,
                ))
            }
        }),
    )
}
