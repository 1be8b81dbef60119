//! The dial endpoint: how the API server, on the host's loopback, reaches Services inside the
//! ground (admission and CRD conversion webhooks given as a `service` reference), as a real
//! kube-apiserver reaches them through the cluster network. A unix socket on the host (mode 0600:
//! root only); per connection the API server writes one line, the target:
//!
//! - `<name>.<namespace>.svc:<port>` (also `….svc.cluster.local`), resolved to the Service's
//!   ClusterIP from netd's own index, or
//! - `<ClusterIP>:<port>` of a Service,
//!
//! and netd answers `OK` and connects from inside the ground namespace to the ClusterIP:port,
//! whose DNAT ([`super::nft`]) leads to a ready endpoint, then copies bytes both ways; or it
//! answers `ERROR <why>` and closes: no such Service, no ClusterIP, no such port, no ready
//! endpoints, the connection refused or unanswered. Nothing but the ground's own Service
//! addresses is ever dialed: the endpoint is no general proxy. TLS stays end to end between the
//! API server and the webhook; netd sees only bytes.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::watch;

use super::names::{Index, ZONE};
use super::netns_socket::NetnsSockets;
use super::routes::{DNS_SERVICE, Protocol, Routes, Target};

/// How long a connection to a ClusterIP may take before the dial fails.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long the client may take to send its target line, and how long that line may be.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
const MAX_REQUEST: usize = 512;

/// Where a dial leads.
#[derive(Debug, PartialEq, Eq)]
pub struct Dial {
    /// The Service's ClusterIP and port.
    pub at: SocketAddrV4,
    /// `namespace/name:port-name`, for logs and errors.
    pub service: String,
}

/// Resolves `target` against the Services netd serves; `Err` says why it is refused.
pub fn resolve(target: &str, index: &Index, routes: &Routes) -> Result<Dial, String> {
    let malformed =
        || format!("{target:?} is neither <name>.<namespace>.svc:<port> nor <ClusterIP>:<port>");
    let (host, port) = target.rsplit_once(':').ok_or_else(malformed)?;
    let port = port
        .parse::<u16>()
        .ok()
        .filter(|p| *p != 0)
        .ok_or_else(malformed)?;
    if let Ok(ip) = host.parse::<Ipv4Addr>() {
        let at = SocketAddrV4::new(ip, port);
        return match lookup(at, routes) {
            Some(dial) => dial,
            None => Err(format!(
                "{at} is not the ClusterIP and port of a Service of the ground; refused"
            )),
        };
    }
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    let short = host
        .strip_suffix(&format!(".{ZONE}"))
        .unwrap_or(host.as_str());
    let (name, namespace) = match short.split('.').collect::<Vec<_>>().as_slice() {
        [name, namespace, "svc"] if !name.is_empty() && !namespace.is_empty() => {
            (*name, *namespace)
        }
        _ => {
            return Err(format!(
                "{host:?} is not a Service name (<name>.<namespace>.svc); refused"
            ));
        }
    };
    let ip = match index.cluster_ip(namespace, name) {
        None => return Err(format!("no such Service {namespace}/{name}")),
        Some(None) => {
            return Err(format!(
                "Service {namespace}/{name} has no ClusterIP (headless or ExternalName), \
                 which a webhook's Service needs"
            ));
        }
        Some(Some(ip)) => ip,
    };
    let at = SocketAddrV4::new(ip, port);
    lookup(at, routes).unwrap_or_else(|| {
        Err(format!(
            "Service {namespace}/{name} ({ip}) has no TCP port {port}"
        ))
    })
}

/// The route of ClusterIP:port `at`, if it is one: a dial, or why not.
fn lookup(at: SocketAddrV4, routes: &Routes) -> Option<Result<Dial, String>> {
    if at == DNS_SERVICE {
        // Answered by netd's DNS server itself; not in the routes.
        return Some(Ok(Dial {
            at,
            service: "kube-system/kube-dns:dns-tcp".into(),
        }));
    }
    let route = routes.0.get(&(Protocol::Tcp, at))?;
    Some(match &route.target {
        Target::Endpoints(eps) if eps.is_empty() => Err(format!(
            "Service {} ({at}) has no ready endpoints",
            route.service
        )),
        Target::Endpoints(_) | Target::Host(_) => Ok(Dial {
            at,
            service: route.service.clone(),
        }),
    })
}

/// Listens on `path`, made with mode 0600 before anyone can connect: bound in a fresh private
/// directory beside it, then renamed into place (replacing a previous run's socket).
pub fn listen(path: &Path) -> Result<UnixListener> {
    let dir = path
        .parent()
        .with_context(|| format!("{} has no directory", path.display()))?;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let private = dir.join(format!(".netd-dial-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&private);
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&private)
        .with_context(|| format!("creating {}", private.display()))?;
    let made = private.join("socket");
    let bound = UnixListener::bind(&made)
        .with_context(|| format!("listening on {}", made.display()))
        .and_then(|listener| {
            std::fs::set_permissions(&made, std::fs::Permissions::from_mode(0o600))?;
            std::fs::rename(&made, path)
                .with_context(|| format!("moving the socket to {}", path.display()))?;
            Ok(listener)
        });
    let _ = std::fs::remove_file(&made);
    let _ = std::fs::remove_dir(&private);
    bound
}

/// Answers dial requests on `listener` until the task is dropped, from the index and routes
/// netd serves at the moment of each request.
pub async fn serve(
    listener: UnixListener,
    sockets: NetnsSockets,
    names: watch::Receiver<Arc<Index>>,
    routes: watch::Receiver<Arc<Routes>>,
) {
    loop {
        match listener.accept().await {
            Ok((conn, _)) => {
                tokio::spawn(handle(conn, sockets.clone(), names.clone(), routes.clone()));
            }
            Err(e) => {
                tracing::warn!("dial: accept: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

async fn handle(
    mut conn: UnixStream,
    sockets: NetnsSockets,
    names: watch::Receiver<Arc<Index>>,
    routes: watch::Receiver<Arc<Routes>>,
) {
    let target = match tokio::time::timeout(REQUEST_TIMEOUT, read_line(&mut conn)).await {
        Ok(Ok(t)) => t,
        Ok(Err(why)) => return refuse(conn, "?", &why).await,
        Err(_) => return refuse(conn, "?", "no target sent in time").await,
    };
    let resolved = {
        let (index, routes) = (names.borrow().clone(), routes.borrow().clone());
        resolve(&target, &index, &routes)
    };
    let dial = match resolved {
        Ok(d) => d,
        Err(why) => return refuse(conn, &target, &why).await,
    };
    let connected = tokio::time::timeout(
        CONNECT_TIMEOUT,
        sockets.tcp_connect(SocketAddr::V4(dial.at)),
    )
    .await;
    let mut upstream = match connected {
        Ok(Ok(u)) => u,
        Ok(Err(e)) => {
            let why = format!(
                "connecting to Service {} at {} from the ground: {e}",
                dial.service, dial.at
            );
            return refuse(conn, &target, &why).await;
        }
        Err(_) => {
            let why = format!(
                "connecting to Service {} at {} from the ground: no answer within {CONNECT_TIMEOUT:?}",
                dial.service, dial.at
            );
            return refuse(conn, &target, &why).await;
        }
    };
    if conn.write_all(b"OK\n").await.is_err() {
        return;
    }
    tracing::debug!(%target, at = %dial.at, service = %dial.service, "dial: connected");
    if let Err(e) = tokio::io::copy_bidirectional(&mut conn, &mut upstream).await {
        tracing::debug!(%target, "dial: connection ended: {e}");
    }
}

/// The target line, read a byte at a time so that nothing after it is taken.
async fn read_line(conn: &mut UnixStream) -> Result<String, String> {
    let mut line = Vec::new();
    loop {
        let byte = conn
            .read_u8()
            .await
            .map_err(|e| format!("reading the target: {e}"))?;
        if byte == b'\n' {
            break;
        }
        if line.len() >= MAX_REQUEST {
            return Err(format!("target longer than {MAX_REQUEST} bytes"));
        }
        line.push(byte);
    }
    let text = String::from_utf8(line).map_err(|_| "the target is not UTF-8".to_string())?;
    Ok(text.trim_end_matches('\r').trim().to_string())
}

async fn refuse(mut conn: UnixStream, target: &str, why: &str) {
    tracing::info!(%target, "dial: refused: {why}");
    let line = format!("ERROR {}\n", why.replace('\n', " "));
    let _ = conn.write_all(line.as_bytes()).await;
    let _ = conn.shutdown().await;
}

#[cfg(test)]
mod tests {
    use super::super::names::fixtures::{service, slice};
    use super::*;
    use serde_json::json;

    fn ground() -> (Index, Routes) {
        let services = [
            service(
                "hooks",
                "webhook",
                json!({"clusterIP": "10.96.3.4", "ports": [{"name": "https", "port": 443, "targetPort": 9443}]}),
            ),
            service(
                "hooks",
                "idle",
                json!({"clusterIP": "10.96.3.5", "ports": [{"port": 443}]}),
            ),
            service("hooks", "headless", json!({"clusterIP": "None"})),
            service(
                "default",
                "kubernetes",
                json!({"clusterIP": "10.96.0.1", "ports": [{"name": "https", "port": 443}]}),
            ),
        ];
        let slices = [slice(
            "hooks",
            "webhook",
            json!([{"name": "https", "port": 9443}]),
            &[("10.244.0.5", Some(true), None)],
        )];
        (
            Index::build(&services, &slices, &[]),
            Routes::build(&services, &slices, "127.0.0.1:6443".parse().unwrap()),
        )
    }

    #[test]
    fn resolves_services_and_refuses_everything_else() {
        let (index, routes) = ground();
        let ok = |target: &str| resolve(target, &index, &routes).map(|d| d.at.to_string());
        let err = |target: &str| resolve(target, &index, &routes).unwrap_err();
        for target in [
            "webhook.hooks.svc:443",
            "Webhook.Hooks.SVC:443",
            "webhook.hooks.svc.cluster.local:443",
            "webhook.hooks.svc.cluster.local.:443",
            "10.96.3.4:443",
        ] {
            assert_eq!(ok(target), Ok("10.96.3.4:443".into()), "{target}");
        }
        assert_eq!(ok("kubernetes.default.svc:443"), Ok("10.96.0.1:443".into()));
        assert_eq!(ok("10.96.0.10:53"), Ok("10.96.0.10:53".into()));
        let table = [
            ("nothing.hooks.svc:443", "no such Service hooks/nothing"),
            (
                "idle.hooks.svc:443",
                "Service hooks/idle:443 (10.96.3.5:443) has no ready endpoints",
            ),
            (
                "10.96.3.5:443",
                "Service hooks/idle:443 (10.96.3.5:443) has no ready endpoints",
            ),
            (
                "webhook.hooks.svc:80",
                "Service hooks/webhook (10.96.3.4) has no TCP port 80",
            ),
            (
                "headless.hooks.svc:443",
                "Service hooks/headless has no ClusterIP",
            ),
            (
                "10.244.0.5:9443",
                "10.244.0.5:9443 is not the ClusterIP and port of a Service of the ground; refused",
            ),
            ("127.0.0.1:22", "is not the ClusterIP and port"),
            ("10.96.3.4:80", "is not the ClusterIP and port"),
            ("example.com:443", "is not a Service name"),
            ("x.webhook.hooks.svc:443", "is not a Service name"),
            ("webhook.hooks:443", "is not a Service name"),
            (".hooks.svc:443", "is not a Service name"),
            ("webhook.hooks.svc", "is neither"),
            ("webhook.hooks.svc:0", "is neither"),
            ("webhook.hooks.svc:https", "is neither"),
            ("", "is neither"),
        ];
        for (target, want) in table {
            let got = err(target);
            assert!(got.contains(want), "{target}: {got}");
        }
    }

    /// The socket is made with mode 0600 in place of a stale one.
    #[tokio::test]
    async fn listens_privately() {
        let dir = std::env::temp_dir().join(format!("netd-dial-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let path = dir.join("dial.sock");
        let first = listen(&path).unwrap();
        drop(first);
        let _listener = listen(&path).unwrap();
        let meta = std::fs::metadata(&path).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        assert_eq!(
            std::fs::read_dir(&dir).unwrap().count(),
            1,
            "only the socket is left"
        );
        UnixStream::connect(&path).await.unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
