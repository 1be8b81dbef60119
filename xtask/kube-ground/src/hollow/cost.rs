//! What the hollow process costs, so that benches can report it: CPU seconds and peak RSS (from
//! `getrusage`), the requests it sent to the API server, and the pods it serves. Logged every
//! `--cost-every` and once more when it is asked to stop.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use kube::client::ClientBuilder;
use kube::{Client, Config};

#[derive(Default)]
pub struct Counters {
    /// Every request sent to the API server (a watch counts once, when it starts).
    pub requests: AtomicU64,
    /// Pods given to a hollow worker since the start.
    pub pods_started: AtomicU64,
    /// Pods a hollow worker holds now.
    pub pods_now: AtomicU64,
}

/// A client like `Client::try_default`'s that counts its requests in `counters` and sends at
/// most `in_flight` at a time, as a kubelet's client is rate-limited.
pub async fn client(counters: Arc<Counters>, in_flight: usize) -> anyhow::Result<Client> {
    let config = Config::infer().await?;
    let count = tower::util::MapRequestLayer::new(move |req| {
        counters.requests.fetch_add(1, Ordering::Relaxed);
        req
    });
    Ok(ClientBuilder::try_from(config)?
        .with_layer(&tower::limit::ConcurrencyLimitLayer::new(in_flight))
        .with_layer(&count)
        .build())
}

/// CPU seconds (user and system) and peak RSS in bytes of this process.
pub fn usage() -> (f64, u64) {
    match nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_SELF) {
        Ok(u) => {
            let secs = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 + t.tv_usec() as f64 / 1e6;
            (
                secs(u.user_time()) + secs(u.system_time()),
                // kilobytes on Linux
                u.max_rss() as u64 * 1024,
            )
        }
        Err(_) => (0.0, 0),
    }
}

pub fn log(counters: &Counters, nodes: usize, why: &str) {
    let (cpu, rss) = usage();
    tracing::info!(
        why,
        nodes,
        cpu_seconds = format!("{cpu:.2}"),
        peak_rss_mib = format!("{:.1}", rss as f64 / (1 << 20) as f64),
        api_requests = counters.requests.load(Ordering::Relaxed),
        pods_started = counters.pods_started.load(Ordering::Relaxed),
        pods_now = counters.pods_now.load(Ordering::Relaxed),
        "hollow cost"
    );
}

/// Logs the cost every `every` (never when zero).
pub async fn every(counters: Arc<Counters>, nodes: usize, every: Duration) {
    if every.is_zero() {
        return std::future::pending().await;
    }
    let mut tick = tokio::time::interval(every);
    tick.tick().await;
    loop {
        tick.tick().await;
        log(&counters, nodes, "periodic");
    }
}
