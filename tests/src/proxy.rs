//! A TCP proxy on 127.0.0.1 in front of a registry, for fault tests: it can be taken
//! down (connections accepted and closed at once, open ones cut) and brought back, and
//! it can throttle what flows back to the client so a pull takes long enough to watch.
//! Agents pull through it as from any registry on this machine (plain HTTP).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Mutex, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

const CHUNK: usize = 16 * 1024;

/// What the proxy does now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Settings {
    up: bool,
    /// Bytes per second from the registry to the client, shared by all connections.
    rate: Option<u64>,
}

/// A running proxy; stops when dropped.
pub struct Proxy {
    addr: SocketAddr,
    settings: watch::Sender<Settings>,
    stop: CancellationToken,
}

impl Proxy {
    /// Listens on a free port of 127.0.0.1, forwarding to `upstream` (`host:port`); up
    /// and unthrottled.
    pub async fn start(upstream: &str) -> Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .context("binding the proxy")?;
        let addr = listener.local_addr()?;
        let (settings, _) = watch::channel(Settings {
            up: true,
            rate: None,
        });
        let stop = CancellationToken::new();
        let pacer = Arc::new(Mutex::new(Instant::now()));
        tokio::spawn(accept(
            listener,
            upstream.to_owned(),
            settings.subscribe(),
            pacer,
            stop.clone(),
        ));
        Ok(Self {
            addr,
            settings,
            stop,
        })
    }

    /// `127.0.0.1:PORT`, the registry domain of images pulled through the proxy.
    pub fn host(&self) -> String {
        self.addr.to_string()
    }

    /// Refuses service: new connections are closed at once, open ones are cut.
    pub fn down(&self) {
        self.settings.send_modify(|s| s.up = false);
    }

    /// Serves again.
    pub fn up(&self) {
        self.settings.send_modify(|s| s.up = true);
    }

    /// Limits the bytes per second sent back to clients (all together); `None` lifts it.
    pub fn throttle(&self, bytes_per_second: Option<u64>) {
        self.settings.send_modify(|s| s.rate = bytes_per_second);
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
    settings: watch::Receiver<Settings>,
    pacer: Arc<Mutex<Instant>>,
    stop: CancellationToken,
) {
    accept_until(listener, stop, |client| {
        if !settings.borrow().up {
            return None; // down: the connection is closed at once
        }
        let (upstream, settings, pacer) = (upstream.clone(), settings.clone(), Arc::clone(&pacer));
        Some(async move {
            let Ok(server) = TcpStream::connect(&upstream).await else {
                return;
            };
            let mut down = settings.clone();
            tokio::select! {
                _ = down.wait_for(|s| !s.up) => {}
                _ = relay(client, server, settings, pacer) => {}
            }
        })
    })
    .await;
}

/// Accepts connections on `listener` until `stop`, handing each to `serve`, whose future
/// runs on a task of its own until it ends or `stop`; a client `serve` answers `None` for
/// is closed at once. A failed accept (out of descriptors, a reset before accept) is that
/// client's loss alone: listening goes on. The test proxies' shared loop.
pub async fn accept_until<F, Fut>(listener: TcpListener, stop: CancellationToken, serve: F)
where
    F: Fn(TcpStream) -> Option<Fut>,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    loop {
        let accepted = tokio::select! {
            () = stop.cancelled() => return,
            accepted = listener.accept() => accepted,
        };
        let Ok((client, _)) = accepted else { continue };
        let Some(serving) = serve(client) else {
            continue;
        };
        let stop = stop.clone();
        tokio::spawn(async move {
            tokio::select! {
                () = stop.cancelled() => {}
                () = serving => {}
            }
        });
    }
}

/// Copies both ways until either side closes; the way back is paced.
async fn relay(
    client: TcpStream,
    server: TcpStream,
    settings: watch::Receiver<Settings>,
    pacer: Arc<Mutex<Instant>>,
) -> std::io::Result<()> {
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    let outbound = async {
        tokio::io::copy(&mut client_read, &mut server_write).await?;
        server_write.shutdown().await
    };
    let inbound = async {
        let mut buffer = vec![0u8; CHUNK];
        loop {
            let n = server_read.read(&mut buffer).await?;
            if n == 0 {
                return client_write.shutdown().await;
            }
            let rate = settings.borrow().rate;
            if let Some(rate) = rate {
                pace(&pacer, n, rate).await;
            }
            client_write.write_all(&buffer[..n]).await?;
        }
    };
    tokio::try_join!(outbound, inbound).map(|_| ())
}

/// Waits for `n` bytes' turn at `rate` bytes per second across all connections.
async fn pace(pacer: &Mutex<Instant>, n: usize, rate: u64) {
    let cost = Duration::from_secs_f64(n as f64 / rate.max(1) as f64);
    let start = {
        let mut next = pacer.lock().await;
        let start = (*next).max(Instant::now());
        *next = start + cost;
        start
    };
    tokio::time::sleep_until(start).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An upstream that answers every connection with `reply` and closes.
    async fn upstream(reply: &'static [u8]) -> Result<String> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?.to_string();
        tokio::spawn(async move {
            while let Ok((mut conn, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut request = [0u8; 64];
                    let _ = conn.read(&mut request).await;
                    let _ = conn.write_all(reply).await;
                });
            }
        });
        Ok(addr)
    }

    async fn fetch(addr: &str) -> Result<Vec<u8>> {
        let mut conn = TcpStream::connect(addr).await?;
        conn.write_all(b"ping").await?;
        let mut reply = Vec::new();
        conn.read_to_end(&mut reply).await?;
        Ok(reply)
    }

    #[tokio::test]
    async fn forwards_when_up_and_closes_connections_when_down() -> Result<()> {
        let proxy = Proxy::start(&upstream(b"pong").await?).await?;
        assert_eq!(fetch(&proxy.host()).await?, b"pong");
        proxy.down();
        assert!(
            fetch(&proxy.host()).await.map_or(true, |r| r.is_empty()),
            "a down proxy answers nothing"
        );
        proxy.up();
        assert_eq!(fetch(&proxy.host()).await?, b"pong");
        Ok(())
    }

    #[tokio::test(start_paused = true)]
    async fn throttling_paces_the_way_back() -> Result<()> {
        let pacer = Mutex::new(Instant::now());
        let started = Instant::now();
        for _ in 0..4 {
            pace(&pacer, 1000, 1000).await;
        }
        // Four seconds' worth of bytes: the fourth chunk may start after three seconds.
        assert_eq!(started.elapsed(), Duration::from_secs(3));
        Ok(())
    }
}
