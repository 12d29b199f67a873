//! A TCP proxy whose bytes, both ways and over every connection, pass one shared
//! [`Bucket`]. It never looks inside the stream, so TLS passes through untouched: the
//! client verifies the apiserver's certificate against the address it dialled.

use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::bucket::{Bucket, CHUNK, Limit};

/// The rate every connection of a proxy shares; cloned handles change the same one.
#[derive(Clone)]
pub struct Throttle {
    shared: Arc<Shared>,
}

struct Shared {
    bucket: Mutex<Bucket>,
    /// Wakes the senders waiting on the old rate when it changes.
    changed: Notify,
}

impl Throttle {
    pub fn new(limit: Limit) -> Throttle {
        Throttle {
            shared: Arc::new(Shared {
                bucket: Mutex::new(Bucket::new(limit, Instant::now())),
                changed: Notify::new(),
            }),
        }
    }

    pub fn set(&self, limit: Limit) {
        self.bucket().set(limit, Instant::now());
        self.shared.changed.notify_waiters();
    }

    pub fn limit(&self) -> Limit {
        self.bucket().limit()
    }

    /// Waits until `bytes` may pass, and the added delay; a change of rate ends the wait.
    pub async fn pass(&self, bytes: usize) {
        let changed = self.shared.changed.notified();
        tokio::pin!(changed);
        // Registered before the bucket is read, so a change in between still wakes it.
        changed.as_mut().enable();
        let wait = {
            let mut bucket = self.bucket();
            bucket.reserve(Instant::now(), bytes) + bucket.delay()
        };
        if wait.is_zero() {
            return;
        }
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            () = changed => {}
        }
    }

    fn bucket(&self) -> std::sync::MutexGuard<'_, Bucket> {
        // The bucket's arithmetic cannot leave it half-updated: a poisoned lock is usable.
        self.shared
            .bucket
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// A running proxy; dropping it stops it and closes every connection through it.
pub struct Proxy {
    address: SocketAddr,
    throttle: Throttle,
    stop: CancellationToken,
}

impl Proxy {
    /// Listens on `listen` (port 0 picks a free one) and forwards every connection to
    /// `upstream`, unthrottled until [`Throttle::set`].
    pub async fn start(listen: SocketAddr, upstream: String) -> io::Result<Proxy> {
        let listener = TcpListener::bind(listen).await?;
        let proxy = Proxy {
            address: listener.local_addr()?,
            throttle: Throttle::new(Limit::Unlimited),
            stop: CancellationToken::new(),
        };
        tokio::spawn(accept(
            listener,
            upstream,
            proxy.throttle.clone(),
            proxy.stop.clone(),
        ));
        Ok(proxy)
    }

    /// Where clients connect.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    pub fn throttle(&self) -> &Throttle {
        &self.throttle
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

async fn accept(
    listener: TcpListener,
    upstream: String,
    throttle: Throttle,
    stop: CancellationToken,
) {
    crate::proxy::accept_until(listener, stop, |client| {
        let (upstream, throttle) = (upstream.clone(), throttle.clone());
        Some(async move {
            let _ = connect(client, &upstream, throttle).await;
        })
    })
    .await;
}

/// Carries one connection until both sides have closed; an upstream that does not
/// answer (the apiserver restarting) closes the client's connection, as it would have
/// been refused without the proxy.
async fn connect(client: TcpStream, upstream: &str, throttle: Throttle) -> io::Result<()> {
    let server = TcpStream::connect(upstream).await?;
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    tokio::try_join!(
        forward(client_read, server_write, &throttle),
        forward(server_read, client_write, &throttle),
    )?;
    Ok(())
}

/// Copies one direction chunk by chunk, each through the throttle; the end of the
/// stream is passed on as a half-close, so the other direction may still finish.
async fn forward(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    throttle: &Throttle,
) -> io::Result<()> {
    let mut chunk = vec![0; CHUNK];
    loop {
        let read = from.read(&mut chunk).await?;
        if read == 0 {
            return to.shutdown().await;
        }
        throttle.pass(read).await;
        to.write_all(&chunk[..read]).await?;
    }
}
