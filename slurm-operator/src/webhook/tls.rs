//! The webhook's TLS: a serving certificate that can be swapped while running (cert-manager
//! renews the Secret mounted at the cert dir; the files are read again when they change), a
//! self-signed CA and serving certificate made at start, and a TLS listener for axum.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use anyhow::{Context as _, bail};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

/// File names cert-manager (and Kubernetes TLS Secrets) use.
pub const CERT_FILE: &str = "tls.crt";
pub const KEY_FILE: &str = "tls.key";

/// How often the cert dir is read again.
pub const RELOAD_EVERY: Duration = Duration::from_secs(10);
/// A client that has not finished its handshake by then is dropped.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A certificate chain and key from PEM (`tls.crt` may hold the chain; the key may be PKCS#8,
/// PKCS#1 or SEC1). The key must match the first certificate.
pub fn certified_key(cert_pem: &[u8], key_pem: &[u8]) -> anyhow::Result<CertifiedKey> {
    let certs = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .context("reading the certificates")?;
    if certs.is_empty() {
        bail!("no certificate found");
    }
    // The key's parse error is not shown: it could quote key material.
    let key = PrivateKeyDer::from_pem_slice(key_pem)
        .map_err(|_| anyhow::anyhow!("no usable private key found"))?;
    CertifiedKey::from_der(certs, key, &provider()).context("the key does not fit the certificate")
}

/// The serving certificate, replaceable while connections come in.
#[derive(Debug)]
pub struct ServingCert(RwLock<Arc<CertifiedKey>>);

impl ServingCert {
    pub fn new(key: CertifiedKey) -> Arc<ServingCert> {
        Arc::new(ServingCert(RwLock::new(Arc::new(key))))
    }

    pub fn replace(&self, key: CertifiedKey) {
        *self.0.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(key);
    }

    /// The current leaf certificate (DER).
    pub fn leaf(&self) -> CertificateDer<'static> {
        self.0.read().unwrap_or_else(|e| e.into_inner()).cert[0].clone()
    }
}

impl ResolvesServerCert for ServingCert {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.read().unwrap_or_else(|e| e.into_inner()).clone())
    }
}

/// The raw bytes of the two files (not `Debug`: the key is secret).
#[derive(PartialEq)]
pub struct DirFiles {
    cert: Vec<u8>,
    key: Vec<u8>,
}

impl DirFiles {
    fn load(&self) -> anyhow::Result<CertifiedKey> {
        certified_key(&self.cert, &self.key)
    }
}

/// Reads `tls.crt`/`tls.key` from `dir`; waits (logging once) until both exist, so the process
/// can start before cert-manager has issued the certificate.
pub async fn load_dir(dir: &Path) -> anyhow::Result<(CertifiedKey, DirFiles)> {
    let mut told = false;
    loop {
        if let Some(files) = read_dir_files(dir).await? {
            let key = files
                .load()
                .with_context(|| format!("{}/{{{CERT_FILE},{KEY_FILE}}}", dir.display()))?;
            return Ok((key, files));
        }
        if !told {
            tracing::warn!(dir = %dir.display(), "webhook: waiting for {CERT_FILE} and {KEY_FILE}");
            told = true;
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}

/// Both files, `None` while one is missing.
async fn read_dir_files(dir: &Path) -> anyhow::Result<Option<DirFiles>> {
    async fn read(path: PathBuf) -> anyhow::Result<Option<Vec<u8>>> {
        match tokio::fs::read(&path).await {
            Ok(b) => Ok(Some(b)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(anyhow::Error::new(e).context(path.display().to_string())),
        }
    }
    let cert = read(dir.join(CERT_FILE)).await?;
    let key = read(dir.join(KEY_FILE)).await?;
    Ok(cert.zip(key).map(|(cert, key)| DirFiles { cert, key }))
}

/// Reads the cert dir `every` so often and swaps in a changed certificate; a pair that does not
/// load (e.g. caught between the two files' updates) is retried at the next round.
pub async fn reload_dir(dir: PathBuf, cert: Arc<ServingCert>, mut last: DirFiles, every: Duration) {
    loop {
        tokio::time::sleep(every).await;
        let files = match read_dir_files(&dir).await {
            Ok(Some(files)) if files != last => files,
            Ok(_) => continue,
            Err(e) => {
                tracing::warn!(error = %e, "webhook: cannot read the serving certificate");
                continue;
            }
        };
        match files.load() {
            Ok(key) => {
                cert.replace(key);
                last = files;
                tracing::info!(dir = %dir.display(), "webhook: serving certificate reloaded");
            }
            Err(e) => tracing::warn!(error = %e, "webhook: new serving certificate not loaded yet"),
        }
    }
}

/// A CA made for this process, and a serving certificate it signed for `names` (DNS names or
/// IP addresses).
pub struct SelfSigned {
    /// The CA certificate, PEM: the `caBundle` of the webhook configuration.
    pub ca_pem: String,
    pub key: CertifiedKey,
}

pub fn self_signed(names: &[String]) -> anyhow::Result<SelfSigned> {
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose,
    };
    let mut ca = CertificateParams::new(Vec::<String>::new())?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    ca.distinguished_name
        .push(DnType::CommonName, "slurm-operator-webhook-ca");
    let ca_key = KeyPair::generate()?;
    let ca_cert = ca.self_signed(&ca_key)?;
    let issuer = Issuer::new(ca, ca_key);

    let mut leaf = CertificateParams::new(names.to_vec())?;
    leaf.distinguished_name.push(
        DnType::CommonName,
        names
            .first()
            .map_or("slurm-operator-webhook", String::as_str),
    );
    let leaf_key = KeyPair::generate()?;
    let leaf_cert = leaf.signed_by(&leaf_key, &issuer)?;
    let key = certified_key(
        format!("{}{}", leaf_cert.pem(), ca_cert.pem()).as_bytes(),
        leaf_key.serialize_pem().as_bytes(),
    )?;
    Ok(SelfSigned {
        ca_pem: ca_cert.pem(),
        key,
    })
}

/// Accepts TCP connections and hands axum those whose TLS handshake completed; handshakes run
/// in their own tasks so that a slow client does not hold up the others.
pub struct TlsListener {
    rx: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    local: SocketAddr,
}

impl TlsListener {
    pub fn new(tcp: TcpListener, cert: Arc<ServingCert>) -> anyhow::Result<TlsListener> {
        let mut config = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_cert_resolver(cert);
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let acceptor = TlsAcceptor::from(Arc::new(config));
        let local = tcp.local_addr()?;
        let (tx, rx) = mpsc::channel(64);
        tokio::spawn(async move {
            loop {
                let (stream, peer) = match tcp.accept().await {
                    Ok(c) => c,
                    Err(e) => {
                        tracing::warn!(error = %e, "webhook: accept failed");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                };
                if tx.is_closed() {
                    return;
                }
                let (acceptor, tx) = (acceptor.clone(), tx.clone());
                tokio::spawn(async move {
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                        Ok(Ok(tls)) => {
                            let _ = tx.send((tls, peer)).await;
                        }
                        Ok(Err(e)) => {
                            tracing::debug!(%peer, error = %e, "webhook: TLS handshake failed")
                        }
                        Err(_) => tracing::debug!(%peer, "webhook: TLS handshake timed out"),
                    }
                });
            }
        });
        Ok(TlsListener { rx, local })
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.rx.recv().await {
            Some(conn) => conn,
            // The accept loop only ends once this receiver is gone.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        Ok(self.local)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A TLS client that trusts `ca_pem`, connecting to 127.0.0.1:`port`; returns the response
    /// to a raw HTTP/1.1 request and the server's leaf certificate.
    pub(crate) async fn https(
        port: u16,
        ca_pem: &str,
        request: &str,
    ) -> (String, CertificateDer<'static>) {
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(CertificateDer::from_pem_slice(ca_pem.as_bytes()).unwrap())
            .unwrap();
        let config = rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
        let tcp = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
        let mut tls = connector.connect(name, tcp).await.unwrap();
        let leaf = tls.get_ref().1.peer_certificates().unwrap()[0].clone();
        tls.write_all(request.as_bytes()).await.unwrap();
        let mut out = String::new();
        tls.read_to_string(&mut out).await.unwrap();
        (out, leaf)
    }

    #[tokio::test]
    async fn serves_https_with_a_self_signed_certificate() {
        let made = self_signed(&["127.0.0.1".into(), "localhost".into()]).unwrap();
        let cert = ServingCert::new(made.key);
        let tcp = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = tcp.local_addr().unwrap().port();
        let app = axum::Router::new().route("/healthz", axum::routing::get(|| async { "ok" }));
        tokio::spawn(axum::serve(TlsListener::new(tcp, cert.clone()).unwrap(), app).into_future());
        let (resp, leaf) = https(
            port,
            &made.ca_pem,
            "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
        )
        .await;
        assert!(resp.starts_with("HTTP/1.1 200"), "{resp}");
        assert!(resp.ends_with("ok"), "{resp}");
        assert_eq!(leaf, cert.leaf());
    }

    #[tokio::test]
    async fn reloads_the_cert_dir() {
        let dir = std::env::temp_dir().join(format!("webhook-certs-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let write = |names: &[String]| {
            let key = rcgen::KeyPair::generate().unwrap();
            let cert = rcgen::CertificateParams::new(names.to_vec())
                .unwrap()
                .self_signed(&key)
                .unwrap();
            std::fs::write(dir.join(CERT_FILE), cert.pem()).unwrap();
            std::fs::write(dir.join(KEY_FILE), key.serialize_pem()).unwrap();
            cert.der().clone()
        };

        // Waits for the files to appear.
        let loading = tokio::spawn({
            let dir = dir.clone();
            async move { load_dir(&dir).await }
        });
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(!loading.is_finished());
        let first = write(&["a.example".into()]);
        let (key, files) = loading.await.unwrap().unwrap();
        let cert = ServingCert::new(key);
        assert_eq!(cert.leaf(), first);

        tokio::spawn(reload_dir(
            dir.clone(),
            cert.clone(),
            files,
            Duration::from_millis(20),
        ));
        // A key that does not fit the certificate is not taken.
        std::fs::write(
            dir.join(KEY_FILE),
            rcgen::KeyPair::generate().unwrap().serialize_pem(),
        )
        .unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(cert.leaf(), first);
        let second = write(&["b.example".into()]);
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while cert.leaf() != second {
            assert!(std::time::Instant::now() < deadline, "not reloaded");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn rejects_mismatched_or_missing_material() {
        let a = rcgen::generate_simple_self_signed(vec!["a".to_string()]).unwrap();
        let b = rcgen::generate_simple_self_signed(vec!["b".to_string()]).unwrap();
        let err = certified_key(
            a.cert.pem().as_bytes(),
            b.signing_key.serialize_pem().as_bytes(),
        )
        .err()
        .unwrap();
        assert!(err.to_string().contains("does not fit"), "{err}");
        assert!(certified_key(b"", a.signing_key.serialize_pem().as_bytes()).is_err());
        let err = certified_key(a.cert.pem().as_bytes(), b"junk")
            .err()
            .unwrap();
        assert_eq!(err.to_string(), "no usable private key found");
    }
}
