//! The serving certificate from a directory holding `tls.crt` and `tls.key` (a mounted
//! Kubernetes TLS Secret, which cert-manager renews), read again when the files change.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use rustls::sign::CertifiedKey;

use super::{ServingCert, certified_key};

/// Where controller-runtime looks for the serving certificate by default, and where Slinky's
/// charts mount it.
pub const DEFAULT_CERT_DIR: &str = "/tmp/k8s-webhook-server/serving-certs";
/// The certificate chain's file name (as in cert-manager's and Kubernetes' TLS Secrets).
pub const CERT_FILE: &str = "tls.crt";
/// The private key's file name.
pub const KEY_FILE: &str = "tls.key";

/// How often [`watch_dir`] reads the cert dir again.
pub const RELOAD_EVERY: Duration = Duration::from_secs(10);

/// The raw bytes of the two files, as last loaded (not `Debug`: the key is secret).
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

/// Reads the cert dir `every` so often and swaps a changed certificate into `cert`; a pair that
/// does not load (e.g. caught between the two files' updates) is retried at the next round.
/// `last` is what [`load_dir`] returned. Runs forever.
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

/// [`load_dir`] (waiting for the files), then a task that runs [`reload_dir`] every
/// [`RELOAD_EVERY`]: the serving certificate of the cert-dir mode. Needs a Tokio runtime.
pub async fn watch_dir(dir: PathBuf) -> anyhow::Result<Arc<ServingCert>> {
    let (key, files) = load_dir(&dir).await?;
    let cert = ServingCert::new(key);
    tokio::spawn(reload_dir(dir, cert.clone(), files, RELOAD_EVERY));
    Ok(cert)
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
