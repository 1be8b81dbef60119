//! Startup, readiness and liveness probes (exec, tcpSocket, httpGet) with the kubelet's timing
//! fields. tcpSocket and httpGet run inside the pod's network namespace, where the pod's address
//! is reachable, from a thread that joins that namespace.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Probe};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube_ground::runtime::{ContainerRef, Runtime};
use tokio::time::Instant;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Startup,
    Readiness,
    Liveness,
}

/// One probe of one running container.
#[derive(Debug)]
pub struct Prober {
    pub kind: Kind,
    probe: Probe,
    next: Instant,
    successes: i32,
    failures: i32,
    /// The probe's verdict so far: `None` before it has decided anything.
    pub verdict: Option<bool>,
}

impl Prober {
    pub fn for_container(c: &Container, started: Instant) -> Vec<Prober> {
        [
            (Kind::Startup, &c.startup_probe),
            (Kind::Readiness, &c.readiness_probe),
            (Kind::Liveness, &c.liveness_probe),
        ]
        .into_iter()
        .filter_map(|(kind, p)| {
            p.clone().map(|probe| Prober {
                kind,
                next: started + secs(probe.initial_delay_seconds, 0),
                probe,
                successes: 0,
                failures: 0,
                verdict: None,
            })
        })
        .collect()
    }

    pub fn due(&self, now: Instant) -> bool {
        now >= self.next
    }

    /// Records one result; returns the new verdict when it changed.
    pub fn record(&mut self, ok: bool, now: Instant) -> Option<bool> {
        self.next = now + secs(self.probe.period_seconds, 10);
        if ok {
            self.failures = 0;
            self.successes += 1;
        } else {
            self.successes = 0;
            self.failures += 1;
        }
        let threshold_ok = self.probe.success_threshold.unwrap_or(1).max(1);
        let threshold_fail = self.probe.failure_threshold.unwrap_or(3).max(1);
        let verdict = if ok && self.successes >= threshold_ok {
            Some(true)
        } else if !ok && self.failures >= threshold_fail {
            Some(false)
        } else {
            self.verdict
        };
        let changed = verdict != self.verdict;
        self.verdict = verdict;
        changed.then_some(verdict).flatten()
    }

    /// Runs the probe once; an error or a time-out is a failure.
    pub async fn run(
        &self,
        runtime: &Runtime,
        id: &ContainerRef,
        c: &Container,
        pod_ip: &str,
        netns: &str,
    ) -> bool {
        let timeout = secs(self.probe.timeout_seconds, 1);
        let check = async {
            if let Some(exec) = &self.probe.exec {
                let cmd = exec.command.clone().unwrap_or_default();
                return runtime
                    .exec(id, &cmd)
                    .await
                    .is_ok_and(|out| out.exit_code == 0);
            }
            if let Some(tcp) = &self.probe.tcp_socket {
                let Some(port) = port(c, &tcp.port) else {
                    return false;
                };
                let host = tcp.host.clone().unwrap_or_else(|| pod_ip.to_string());
                return in_netns(netns, &["tcp", &format!("{host}:{port}")], timeout).await;
            }
            if let Some(http) = &self.probe.http_get {
                let Some(port) = port(c, &http.port) else {
                    return false;
                };
                let host = http.host.clone().unwrap_or_else(|| pod_ip.to_string());
                let path = http.path.clone().unwrap_or_else(|| "/".into());
                let kind = if http.scheme.as_deref() == Some("HTTPS") {
                    "https"
                } else {
                    "http"
                };
                return in_netns(netns, &[kind, &format!("{host}:{port}"), &path], timeout).await;
            }
            false
        };
        tokio::time::timeout(timeout + Duration::from_secs(2), check)
            .await
            .unwrap_or(false)
    }
}

fn secs(v: Option<i32>, default: i32) -> Duration {
    Duration::from_secs(v.unwrap_or(default).max(0) as u64)
}

/// A probe's port: a number, or the name of one of the container's ports.
fn port(c: &Container, p: &IntOrString) -> Option<i32> {
    match p {
        IntOrString::Int(n) => Some(*n),
        IntOrString::String(name) => c
            .ports
            .iter()
            .flatten()
            .find(|cp| cp.name.as_deref() == Some(name))
            .map(|cp| cp.container_port),
    }
}

/// Runs a tcp or http check from a fresh thread that has joined the pod's network namespace
/// (a thread of its own: joining changes only the calling thread, which then ends).
async fn in_netns(netns: &str, args: &[&str], timeout: Duration) -> bool {
    let path = format!("/run/netns/{netns}");
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        let ok = std::fs::File::open(&path)
            .map_err(anyhow::Error::from)
            .and_then(|ns| Ok(nix::sched::setns(ns, nix::sched::CloneFlags::CLONE_NEWNET)?))
            .and_then(|()| check(&args[0], &args[1], args.get(2).map(String::as_str), timeout));
        let _ = tx.send(ok.is_ok());
    });
    rx.await.unwrap_or(false)
}

/// A TCP connection, or an HTTP(S) GET answered with a status from 200 to 399.
fn check(kind: &str, target: &str, path: Option<&str>, timeout: Duration) -> anyhow::Result<()> {
    use std::net::{TcpStream, ToSocketAddrs};
    let addr = target
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| anyhow::anyhow!("{target}: no address"))?;
    let stream = TcpStream::connect_timeout(&addr, timeout)?;
    if kind == "tcp" {
        return Ok(());
    }
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    if kind == "https" {
        let tls = rustls::ClientConnection::new(insecure::config(), "probe".try_into()?)?;
        return http_get(rustls::StreamOwned::new(tls, stream), target, path);
    }
    http_get(stream, target, path)
}

fn http_get(
    mut stream: impl std::io::Read + std::io::Write,
    target: &str,
    path: Option<&str>,
) -> anyhow::Result<()> {
    // One write: a server that parses what each read brings (slurmd does) must not see the
    // request line cut after "GET ".
    let request = format!(
        "GET {} HTTP/1.1\r\nHost: {target}\r\nUser-Agent: kube-probe/1.36\r\nConnection: close\r\n\r\n",
        path.unwrap_or("/")
    );
    stream.write_all(request.as_bytes())?;
    stream.flush()?;
    // The status line may come in more than one read.
    let mut head = Vec::new();
    let mut buf = [0u8; 256];
    while !head.windows(2).any(|w| w == b"\r\n") && head.len() < 1024 {
        let n = stream.read(&mut buf)?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&buf[..n]);
    }
    let line = String::from_utf8_lossy(&head);
    let line = line.lines().next().unwrap_or_default();
    let code: u16 = line
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| anyhow::anyhow!("not an HTTP answer: {line:?}"))?;
    if (200..400).contains(&code) {
        Ok(())
    } else {
        anyhow::bail!("HTTP {code}")
    }
}

/// As the kubelet does for HTTPS probes: TLS without checking the server's certificate (a probe
/// asks whether the server answers, not who it is).
mod insecure {
    use std::sync::{Arc, LazyLock};

    use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
    use rustls::crypto::{CryptoProvider, ring};
    use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
    use rustls::{ClientConfig, DigitallySignedStruct, Error, SignatureScheme};

    pub fn config() -> Arc<ClientConfig> {
        static CONFIG: LazyLock<Arc<ClientConfig>> = LazyLock::new(|| {
            let provider = Arc::new(ring::default_provider());
            let config = ClientConfig::builder_with_provider(provider.clone())
                .with_safe_default_protocol_versions()
                .expect("ring supports the default TLS versions")
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
                .with_no_client_auth();
            Arc::new(config)
        });
        CONFIG.clone()
    }

    #[derive(Debug)]
    struct AnyCertificate(Arc<CryptoProvider>);

    impl ServerCertVerifier for AnyCertificate {
        fn verify_server_cert(
            &self,
            _: &CertificateDer<'_>,
            _: &[CertificateDer<'_>],
            _: &ServerName<'_>,
            _: &[u8],
            _: UnixTime,
        ) -> Result<ServerCertVerified, Error> {
            Ok(ServerCertVerified::assertion())
        }

        fn verify_tls12_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, Error> {
            rustls::crypto::verify_tls12_signature(
                message,
                cert,
                dss,
                &self.0.signature_verification_algorithms,
            )
        }

        fn verify_tls13_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, Error> {
            rustls::crypto::verify_tls13_signature(
                message,
                cert,
                dss,
                &self.0.signature_verification_algorithms,
            )
        }

        fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
            self.0.signature_verification_algorithms.supported_schemes()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds_decide() {
        let c: Container = serde_json::from_value(serde_json::json!({
            "name": "c",
            "readinessProbe": {"exec": {"command": ["true"]}, "failureThreshold": 2, "successThreshold": 2, "periodSeconds": 1}
        }))
        .unwrap();
        let now = Instant::now();
        let mut p = Prober::for_container(&c, now).remove(0);
        assert!(p.due(now));
        assert_eq!(p.record(true, now), None);
        assert_eq!(p.record(true, now), Some(true));
        assert!(!p.due(now));
        assert_eq!(p.record(false, now), None);
        assert_eq!(p.record(false, now), Some(false));
        assert_eq!(p.verdict, Some(false));
    }

    /// The request goes out in one write, and a status line that comes in pieces is read whole.
    #[test]
    fn http_request_is_one_write_and_the_answer_may_be_split() {
        struct Peer {
            writes: Vec<Vec<u8>>,
            answer: Vec<&'static [u8]>,
        }
        impl std::io::Write for Peer {
            fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
                self.writes.push(b.to_vec());
                Ok(b.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        impl std::io::Read for Peer {
            fn read(&mut self, b: &mut [u8]) -> std::io::Result<usize> {
                if self.answer.is_empty() {
                    return Ok(0);
                }
                let part = self.answer.remove(0);
                b[..part.len()].copy_from_slice(part);
                Ok(part.len())
            }
        }
        let mut peer = Peer {
            writes: Vec::new(),
            answer: vec![b"HTTP/1.1", b" 200 OK\r\n", b"\r\n"],
        };
        http_get(&mut peer, "10.0.0.1:6818", Some("/readyz")).unwrap();
        assert_eq!(peer.writes.len(), 1);
        assert!(peer.writes[0].starts_with(b"GET /readyz HTTP/1.1\r\n"));
        let mut refused = Peer {
            writes: Vec::new(),
            answer: vec![b"HTTP/1.1 503 Service Unavailable\r\n"],
        };
        assert!(http_get(&mut refused, "10.0.0.1:6818", None).is_err());
    }

    /// An HTTPS probe of a server with a self-signed certificate succeeds (the kubelet does not
    /// verify it), and a plain HTTP probe of the same port fails. Needs `openssl`.
    #[test]
    fn https_probe_skips_verification() {
        use std::process::{Command, Stdio};
        let dir = std::env::temp_dir().join(format!("probe-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (key, cert) = (dir.join("key.pem"), dir.join("cert.pem"));
        let made = Command::new("openssl")
            .args([
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:P-256",
            ])
            .args(["-nodes", "-days", "1", "-subj", "/CN=probe", "-keyout"])
            .arg(&key)
            .arg("-out")
            .arg(&cert)
            .stderr(Stdio::null())
            .status()
            .expect("openssl is installed");
        assert!(made.success());
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut server = Command::new("openssl")
            .args(["s_server", "-www", "-quiet", "-accept"])
            .arg(format!("127.0.0.1:{port}"))
            .arg("-key")
            .arg(&key)
            .arg("-cert")
            .arg(&cert)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let target = format!("127.0.0.1:{port}");
        let timeout = Duration::from_secs(2);
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut ok = check("https", &target, Some("/"), timeout);
        while ok.is_err() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(100));
            ok = check("https", &target, Some("/"), timeout);
        }
        let plain = check("http", &target, Some("/"), timeout);
        server.kill().unwrap();
        server.wait().unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        ok.unwrap();
        assert!(plain.is_err());
    }
}
