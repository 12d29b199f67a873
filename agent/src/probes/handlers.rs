//! The network probes, run from the node's network namespace (the agent runs with
//! `hostNetwork`) to the pod's IP: a TCP connect, and an HTTP GET whose status from 200
//! to 399 is success, as the kubelet's probes judge them. Each is bounded by the probe's
//! timeout; a timeout is a failure saying so.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use tokio::net::TcpStream;

use super::state::ProbeResult;
use crate::error_text::error_chain;

/// The longest message a probe reports (NodePodProbe status holds it for every probe).
pub const MAX_MESSAGE_BYTES: usize = 1024;

/// What one run of a probe found, and why in words when it failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub result: ProbeResult,
    pub message: String,
}

impl Outcome {
    pub fn success() -> Self {
        Self {
            result: ProbeResult::Success,
            message: String::new(),
        }
    }

    /// A failure, its message cut to [`MAX_MESSAGE_BYTES`] on a character boundary.
    pub fn failure(message: impl Into<String>) -> Self {
        let mut message = message.into();
        if message.len() > MAX_MESSAGE_BYTES {
            let mut end = MAX_MESSAGE_BYTES;
            while !message.is_char_boundary(end) {
                end -= 1;
            }
            message.truncate(end);
        }
        Self {
            result: ProbeResult::Failure,
            message,
        }
    }
}

/// Connects to `ip:port`; success once the connection is open (then closed).
pub async fn tcp(ip: IpAddr, port: u16, timeout: Duration) -> Outcome {
    let address = SocketAddr::new(ip, port);
    match tokio::time::timeout(timeout, TcpStream::connect(address)).await {
        Ok(Ok(_)) => Outcome::success(),
        Ok(Err(err)) => Outcome::failure(format!("dial tcp {address}: {err}")),
        Err(_) => Outcome::failure(format!(
            "dial tcp {address}: timed out after {}s",
            timeout.as_secs_f32()
        )),
    }
}

/// An HTTP GET to probe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpGet {
    pub ip: IpAddr,
    pub port: u16,
    pub path: String,
    pub https: bool,
    pub headers: Vec<(String, String)>,
}

impl HttpGet {
    /// `http[s]://ip:port/path` (IPv6 addresses bracketed).
    pub fn url(&self) -> String {
        let scheme = if self.https { "https" } else { "http" };
        let path = if self.path.is_empty() {
            "/"
        } else {
            &self.path
        };
        format!("{scheme}://{}{path}", SocketAddr::new(self.ip, self.port))
    }
}

/// The client every HTTP probe shares: no proxy, no pooled connections (each probe
/// opens its own, as the kubelet's do), certificates not verified (as the kubelet).
pub fn http_client() -> Result<reqwest::Client, reqwest::Error> {
    // reqwest is built without a bundled crypto provider; the workspace uses ring.
    // An error only means a provider is already installed.
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .no_proxy()
        .pool_max_idle_per_host(0)
        .user_agent(concat!("stevedore-agent-probe/", env!("CARGO_PKG_VERSION")))
        .danger_accept_invalid_certs(true)
        .build()
}

/// GETs the URL; a status from 200 to 399 is success.
pub async fn http(client: &reqwest::Client, get: &HttpGet, timeout: Duration) -> Outcome {
    let url = get.url();
    let mut request = client.get(&url).timeout(timeout);
    for (name, value) in &get.headers {
        request = request.header(name, value);
    }
    match request.send().await {
        Ok(response) if (200..400).contains(&response.status().as_u16()) => Outcome::success(),
        Ok(response) => Outcome::failure(format!(
            "HTTP probe failed with statuscode: {}",
            response.status().as_u16()
        )),
        Err(err) if err.is_timeout() => Outcome::failure(format!(
            "Get {url}: timed out after {}s",
            timeout.as_secs_f32()
        )),
        Err(err) => Outcome::failure(format!("Get {url}: {}", error_chain(&err))),
    }
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    use tokio::net::TcpListener;

    use super::*;

    const LOOPBACK: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);
    const TIMEOUT: Duration = Duration::from_secs(2);

    /// A loopback listener answering every connection with `status`; returns its port.
    async fn http_server(status: u16) -> u16 {
        let listener = TcpListener::bind((LOOPBACK, 0)).await.expect("bind");
        let port = listener.local_addr().expect("address").port();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let mut request = [0_u8; 1024];
                let _ = socket.read(&mut request).await;
                let answer = format!(
                    "HTTP/1.1 {status} X\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                );
                let _ = socket.write_all(answer.as_bytes()).await;
            }
        });
        port
    }

    /// A port nothing listens on: bound, then closed.
    async fn closed_port() -> u16 {
        let listener = TcpListener::bind((LOOPBACK, 0)).await.expect("bind");
        listener.local_addr().expect("address").port()
    }

    #[tokio::test]
    async fn tcp_succeeds_on_a_listener_and_fails_on_a_closed_port() {
        let open = http_server(200).await;
        assert_eq!(tcp(LOOPBACK, open, TIMEOUT).await, Outcome::success());
        let closed = closed_port().await;
        let outcome = tcp(LOOPBACK, closed, TIMEOUT).await;
        assert_eq!(outcome.result, ProbeResult::Failure);
        assert!(
            outcome.message.contains(&format!("127.0.0.1:{closed}")),
            "{}",
            outcome.message
        );
    }

    #[tokio::test]
    async fn http_judges_by_status_code() {
        let client = http_client().expect("client");
        for (status, result) in [
            (200, ProbeResult::Success),
            (302, ProbeResult::Success),
            (399, ProbeResult::Success),
            (404, ProbeResult::Failure),
            (500, ProbeResult::Failure),
        ] {
            let get = HttpGet {
                ip: LOOPBACK,
                port: http_server(status).await,
                path: "/healthz".into(),
                https: false,
                headers: vec![("X-Probe".into(), "1".into())],
            };
            let outcome = http(&client, &get, TIMEOUT).await;
            assert_eq!(outcome.result, result, "{status}: {}", outcome.message);
            if result == ProbeResult::Failure {
                assert!(
                    outcome.message.contains(&status.to_string()),
                    "{}",
                    outcome.message
                );
            }
        }
    }

    #[tokio::test]
    async fn http_fails_on_a_closed_port_and_a_silent_server_times_out() {
        let client = http_client().expect("client");
        let mut get = HttpGet {
            ip: LOOPBACK,
            port: closed_port().await,
            path: String::new(),
            https: false,
            headers: Vec::new(),
        };
        assert_eq!(
            http(&client, &get, TIMEOUT).await.result,
            ProbeResult::Failure
        );

        // Accepts and never answers.
        let listener = TcpListener::bind((LOOPBACK, 0)).await.expect("bind");
        get.port = listener.local_addr().expect("address").port();
        let held = tokio::spawn(async move {
            let mut sockets = Vec::new();
            while let Ok((socket, _)) = listener.accept().await {
                sockets.push(socket);
            }
        });
        let outcome = http(&client, &get, Duration::from_millis(200)).await;
        assert_eq!(outcome.result, ProbeResult::Failure);
        assert!(outcome.message.contains("timed out"), "{}", outcome.message);
        held.abort();
    }

    #[test]
    fn urls_and_long_messages() {
        let get = HttpGet {
            ip: "fd00::1".parse().expect("ip"),
            port: 80,
            path: String::new(),
            https: true,
            headers: Vec::new(),
        };
        assert_eq!(get.url(), "https://[fd00::1]:80/");
        let long = Outcome::failure("é".repeat(MAX_MESSAGE_BYTES));
        assert!(long.message.len() <= MAX_MESSAGE_BYTES);
    }
}
