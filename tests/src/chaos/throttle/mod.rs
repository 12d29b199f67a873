//! The apiserver throttled for the control plane: a TCP proxy owned by the harness
//! ([`proxy`]) listens on the node's address, which the apiserver's certificate names
//! (`deploy/local/lib/certs.sh`: `IP:$NODE_IP`), so the control plane's TLS to the
//! apiserver goes through it unchanged; the control plane's Deployment is pointed at it
//! for the run ([`routing`], [`route`]), and the `throttle-apiserver` fault slows every
//! byte both ways to [`FAULT_LIMIT`] for a few seconds through one shared token bucket
//! ([`bucket`]).

pub mod bucket;
pub mod proxy;
pub mod route;
pub mod routing;

#[cfg(test)]
mod proxy_tests;

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use anyhow::{Context as _, Result};
use kube::config::{KubeConfigOptions, Kubeconfig};

use self::bucket::Limit;
use self::proxy::{Proxy, Throttle};
use self::routing::Route;
use crate::TestContext;

/// What the fault slows the control plane's apiserver traffic to: slow enough that lists
/// and watches lag by seconds, fast enough that a Lease renewal (a few KiB) still gets
/// through well inside its 10 s deadline, so the fault slows the control plane and
/// never severs it.
pub const FAULT_LIMIT: Limit = Limit::Limited {
    bytes_per_sec: 64 * 1024,
    delay: Duration::from_millis(50),
};

/// The proxy with the control plane routed through it. Dropped without [`stop`], the
/// route is restored first (its field comes first) and the proxy goes with it.
///
/// [`stop`]: Throttled::stop
pub struct Throttled {
    route: Route,
    proxy: Proxy,
}

impl Throttled {
    /// Starts the proxy on the node's address and routes the control plane through it;
    /// the rollout goes on meanwhile ([`Throttled::wait_routed`]).
    pub async fn start(ctx: &TestContext) -> Result<Throttled> {
        let node_ip: IpAddr = (ctx.cluster.node_ip.parse())
            .with_context(|| format!("the node IP {:?} is no address", ctx.cluster.node_ip))?;
        let upstream = apiserver_address(ctx).await?;
        let proxy = Proxy::start(SocketAddr::new(node_ip, 0), upstream)
            .await
            .with_context(|| format!("starting the apiserver proxy on {node_ip}"))?;
        let route = routing::route(ctx, proxy.address()).await?;
        Ok(Throttled { route, proxy })
    }

    pub fn throttle(&self) -> &Throttle {
        self.proxy.throttle()
    }

    pub fn address(&self) -> SocketAddr {
        self.proxy.address()
    }

    /// Waits until both control plane replicas run routed through the proxy.
    pub async fn wait_routed(&self, ctx: &TestContext) -> Result<()> {
        routing::wait_rolled_out(ctx).await
    }

    /// Routes the control plane back and waits for it; the proxy serves the old replicas
    /// until then.
    pub async fn stop(self, ctx: &TestContext) -> Result<()> {
        let Throttled { route, proxy } = self;
        proxy.throttle().set(Limit::Unlimited);
        let restored = route.restore(ctx).await;
        drop(proxy);
        restored
    }
}

/// `host:port` of the apiserver as the harness reaches it (its kubeconfig).
async fn apiserver_address(ctx: &TestContext) -> Result<String> {
    let kubeconfig = Kubeconfig::read_from(&ctx.cluster.kubeconfig)
        .with_context(|| format!("reading {}", ctx.cluster.kubeconfig.display()))?;
    let config =
        kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?;
    let url = config.cluster_url;
    let host = url.host().context("the kubeconfig's server has no host")?;
    Ok(format!("{host}:{}", url.port_u16().unwrap_or(443)))
}

/// Sets the throttle back to unlimited when dropped, so a fault that times out or is
/// cancelled never leaves the control plane slowed.
struct Slowed<'a>(&'a Throttle);

impl Drop for Slowed<'_> {
    fn drop(&mut self) {
        self.0.set(Limit::Unlimited);
    }
}

/// The fault: the control plane's apiserver traffic held to [`FAULT_LIMIT`] for
/// `seconds`, then unlimited again.
pub async fn slow_down(throttle: &Throttle, seconds: u64) -> String {
    throttle.set(FAULT_LIMIT);
    let slowed = Slowed(throttle);
    tokio::time::sleep(Duration::from_secs(seconds)).await;
    drop(slowed);
    format!(
        "held the control plane's apiserver traffic to 64 KiB/s with 50 ms per chunk for \
         {seconds} s"
    )
}
