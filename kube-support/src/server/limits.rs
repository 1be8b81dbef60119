//! How much time and memory one listener grants its clients ([`Limits`]), with the two presets
//! the workspace uses: admission webhooks (large bodies) and probe/metrics endpoints (GETs).

use std::time::Duration;

/// The limits of one listener. Every field bounds what a client that is slow, greedy or hostile
/// can hold; none is reached by the Kubernetes API server, the kubelet or Prometheus.
#[derive(Clone, Debug)]
pub struct Limits {
    /// The whole request head (line and headers) must arrive within this, counted from when the
    /// server starts waiting for it; an idle keep-alive connection is also closed after it.
    pub header_read_timeout: Duration,
    /// A TLS client must finish its handshake within this.
    pub tls_handshake_timeout: Duration,
    /// The longest pause between two pieces of a request body.
    pub body_read_timeout: Duration,
    /// A request (body read and handler) must be answered within this, or gets 503.
    pub request_deadline: Duration,
    /// The largest request body; larger gets 413 (at once when `Content-Length` says so).
    pub max_body_bytes: usize,
    /// The request-body bytes all requests being served may hold together beyond the first
    /// 64 KiB of each; a request that would go beyond gets 503. Bounds memory when many large
    /// bodies arrive at once, without letting them lock out ordinary requests.
    pub max_body_bytes_in_flight: usize,
    /// Open connections (TLS handshakes included); beyond, new ones wait in the kernel's backlog.
    /// Lowered at start to fit the file-descriptor limit (see [`crate::server::fd_limit`]).
    pub max_connections: usize,
    /// Requests being handled at once; beyond, a request gets 503 at once rather than a queue.
    pub max_concurrent_requests: usize,
    /// A connection's read buffer, hence the largest request head (hyper's minimum is 8 KiB).
    pub max_header_bytes: usize,
    /// After shutdown is triggered, how long in-flight requests have to finish.
    pub drain_deadline: Duration,
}

const KIB: usize = 1024;
const MIB: usize = 1024 * KIB;

/// Shared by both presets.
const BASE: Limits = Limits {
    // The API server's webhook timeout is 10 s by default: a head still arriving after that
    // answers no one. It also closes idle keep-alive connections after 10 s (hyper starts this
    // timer while it waits for a head); the API server and Go's transport redial on their own.
    header_read_timeout: Duration::from_secs(10),
    // A handshake is one round trip and a signature: milliseconds on a cluster network.
    tls_handshake_timeout: Duration::from_secs(5),
    // The API server writes a review in one go; a 10 s stall is a stalled or hostile client.
    body_read_timeout: Duration::from_secs(10),
    // 30 s is the most a webhook may be configured to wait (`timeoutSeconds`), and above
    // Prometheus' default scrape timeout: a later answer is read by no one.
    request_deadline: Duration::from_secs(30),
    max_body_bytes: 64 * KIB,
    max_body_bytes_in_flight: MIB,
    // 2,000 slow clients must not lock out a real one (the test); each connection costs
    // ~20-40 KiB (hyper's read buffer, rustls' state), so 4,096 stay near 100-150 MiB at worst.
    max_connections: 4096,
    max_concurrent_requests: 32,
    // Request heads here are a few hundred bytes; a bearer token (Prometheus with a service
    // account) is ~1-2 KiB. hyper's default, ~400 KiB a connection, would let 4,096 connections
    // pin 1.6 GiB.
    max_header_bytes: 16 * KIB,
    // The pod's grace period is 30 s; 15 s leaves the rest to releasing the Lease and exiting.
    drain_deadline: Duration::from_secs(15),
};

impl Limits {
    /// For admission webhooks, which the API server calls with AdmissionReviews.
    pub const WEBHOOK: Limits = Limits {
        // The API server refuses request bodies over 3 MiB, and an UPDATE's review carries the
        // object and its old version: 2 × 3 MiB plus the envelope (controller-runtime's figure too).
        max_body_bytes: 7 * MIB,
        // Two reviews of the largest size at once, or hundreds of ordinary ones (~5-50 KiB).
        // Bodies are gathered in growing buffers, so the memory they take is up to about twice
        // this (50 bodies of 8 MiB pushed at once: 50 MiB of RSS at 32 MiB, see the webhook's
        // starvation test).
        max_body_bytes_in_flight: 16 * MIB,
        // A review is answered in milliseconds (the operator's lookups in seconds at worst); the
        // API server's bursts stay far below this, so 503 means a flood, not load.
        max_concurrent_requests: 256,
        ..BASE
    };

    /// For `/healthz`, `/readyz` and `/metrics`: GETs without bodies, from the kubelet and
    /// Prometheus.
    pub const PROBES: Limits = BASE;
}

impl Default for Limits {
    fn default() -> Self {
        Limits::PROBES
    }
}
