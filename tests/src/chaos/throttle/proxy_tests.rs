//! The proxy against a loopback echo server, in process (no cluster).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};

use super::bucket::Limit;
use super::proxy::Proxy;

const KIB: usize = 1024;

/// Echoes every connection's bytes back and closes its side when the client closes its.
async fn echo_server() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let address = listener.local_addr().expect("address");
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let (mut read, mut write) = stream.into_split();
                let _ = tokio::io::copy(&mut read, &mut write).await;
                let _ = write.shutdown().await;
            });
        }
    });
    address
}

async fn proxy_to(upstream: SocketAddr) -> Proxy {
    let loopback: SocketAddr = "127.0.0.1:0".parse().expect("address");
    Proxy::start(loopback, upstream.to_string())
        .await
        .expect("proxy")
}

/// Sends `payload` through `proxy`, closes the sending side and reads everything back.
async fn round_trip(proxy: &Proxy, payload: &[u8]) -> Vec<u8> {
    let stream = TcpStream::connect(proxy.address()).await.expect("connect");
    let (mut read, mut write) = stream.into_split();
    let payload = payload.to_vec();
    let sender = tokio::spawn(async move {
        write.write_all(&payload).await.expect("write");
        write.shutdown().await.expect("shutdown");
    });
    let mut back = Vec::new();
    read.read_to_end(&mut back).await.expect("read");
    sender.await.expect("sender");
    back
}

fn payload(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8).collect()
}

fn limited(kib_per_sec: usize, delay_ms: u64) -> Limit {
    Limit::Limited {
        bytes_per_sec: (kib_per_sec * KIB) as u64,
        delay: Duration::from_millis(delay_ms),
    }
}

#[tokio::test]
async fn bytes_pass_both_ways_unchanged_and_a_half_close_is_passed_on() {
    let proxy = proxy_to(echo_server().await).await;
    let sent = payload(512 * KIB);
    assert_eq!(round_trip(&proxy, &sent).await, sent);
}

#[tokio::test]
async fn a_limited_rate_holds_both_directions_to_it_together() {
    let proxy = proxy_to(echo_server().await).await;
    proxy.throttle().set(limited(64, 0));
    let sent = payload(32 * KIB);
    let started = Instant::now();
    let back = round_trip(&proxy, &sent).await;
    // 64 KiB pass in all (there and back); the bucket holds 16 KiB, so the rest take at
    // least 48 KiB / 64 KiB/s = 750 ms.
    assert_eq!(back, sent);
    let took = started.elapsed();
    assert!(took >= Duration::from_millis(700), "took {took:?}");
}

#[tokio::test]
async fn the_delay_is_added_to_every_chunk_each_way() {
    let proxy = proxy_to(echo_server().await).await;
    proxy.throttle().set(limited(100 * 1024, 150));
    let started = Instant::now();
    assert_eq!(round_trip(&proxy, b"ping").await, b"ping");
    let took = started.elapsed();
    assert!(took >= Duration::from_millis(300), "took {took:?}");
}

#[tokio::test]
async fn lifting_the_limit_releases_the_senders_waiting_on_it() {
    let proxy = proxy_to(echo_server().await).await;
    // At 1 KiB/s these 64 KiB (128 KiB both ways) would take about two minutes, and the
    // second chunk alone waits 16 s: only a sender woken by the change is done in 5 s.
    proxy.throttle().set(limited(1, 0));
    let sent = payload(64 * KIB);
    let throttle = proxy.throttle().clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        throttle.set(Limit::Unlimited);
    });
    let back = tokio::time::timeout(Duration::from_secs(5), round_trip(&proxy, &sent))
        .await
        .expect("the transfer went on at once after the limit was lifted");
    assert_eq!(back, sent);
    assert_eq!(proxy.throttle().limit(), Limit::Unlimited);
}

#[tokio::test]
async fn an_upstream_that_refuses_closes_the_clients_connection() {
    // A port that was free a moment ago: nothing listens there.
    let closed = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind")
        .local_addr()
        .expect("address");
    let proxy = proxy_to(closed).await;
    let mut stream = TcpStream::connect(proxy.address()).await.expect("connect");
    let mut buf = [0; 16];
    let read = tokio::time::timeout(Duration::from_secs(10), stream.read(&mut buf))
        .await
        .expect("the connection was closed, not left hanging");
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
}

#[tokio::test]
async fn dropping_the_proxy_closes_its_connections_and_its_port() {
    let proxy = proxy_to(echo_server().await).await;
    let address = proxy.address();
    let mut stream = TcpStream::connect(address).await.expect("connect");
    stream.write_all(b"ping").await.expect("write");
    let mut buf = [0; 4];
    stream.read_exact(&mut buf).await.expect("echo");
    drop(proxy);
    let read = tokio::time::timeout(Duration::from_secs(10), stream.read(&mut buf))
        .await
        .expect("the connection was closed");
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
    // The listener is gone with it (a moment after, as its task ends).
    let mut refused = false;
    for _ in 0..50 {
        if TcpStream::connect(address).await.is_err() {
            refused = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(refused, "the proxy's port still accepts connections");
}
