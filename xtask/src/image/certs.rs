//! The CA bundle of the project images: Debian trixie's `ca-certificates` (Mozilla's roots), joined into
//! one PEM file as `update-ca-certificates` joins them by default.
//!
//! Not the host's /etc/ssl/certs/ca-certificates.crt: that one depends on the host's release and on the
//! local CAs its admin added, so two machines would build different images from the same commit. The
//! package comes from the same mirror as every other image root, is extracted without running any
//! maintainer script (a root of its own, cached like the others, about 4 s to make), and gives the same
//! bundle wherever the mirror serves the same version.

use std::path::Path;

use anyhow::{Context, Result, bail};

use super::recipes::{Base, Recipe};
use super::roots;

/// Where the bundle goes in an image, and where rustls-native-certs (through rustls-platform-verifier)
/// and OpenSSL-style tools look for it on Debian-like systems.
pub const BUNDLE_PATH: &str = "etc/ssl/certs/ca-certificates.crt";

pub struct Bundle {
    pub pem: Vec<u8>,
    /// The Debian version of `ca-certificates` it comes from.
    pub version: String,
    pub count: usize,
}

/// A root that is no image: only the files of Debian's `ca-certificates`.
fn recipe() -> Recipe {
    Recipe {
        id: "ca-certificates".into(),
        root_id: "ca-certificates".into(),
        component: "ca-certificates",
        release: None,
        suite: "trixie",
        base: Base::Files,
        packages: vec!["ca-certificates"],
        version_of: "ca-certificates",
        files: vec![],
        clear: vec![],
        entrypoint: vec![],
        cmd: vec![],
        user: None,
        ports: vec![],
        env: vec![],
        working_dir: None,
        description: "Mozilla's CA certificates as Debian packages them",
        licenses: "MPL-2.0",
        names: vec![],
    }
}

pub fn bundle() -> Result<Bundle> {
    let root = roots::ensure(&recipe())?;
    let (pem, count) = join(&root.path.join("usr/share/ca-certificates"))?;
    Ok(Bundle {
        pem,
        version: root.info.version,
        count,
    })
}

/// Every `*.crt` under `dir`, each ending in a newline, in byte order of their paths: a fixed order
/// (TLS libraries do not care about it; the layer's digest does).
fn join(dir: &Path) -> Result<(Vec<u8>, usize)> {
    let mut files = Vec::new();
    collect(dir, &mut files)?;
    files.sort();
    if files.is_empty() {
        bail!("no certificates in {}", dir.display());
    }
    let mut pem = Vec::new();
    for file in &files {
        let cert = std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
        pem.extend_from_slice(&cert);
        if !cert.ends_with(b"\n") {
            pem.push(b'\n');
        }
    }
    Ok((pem, files.len()))
}

fn collect(dir: &Path, out: &mut Vec<std::path::PathBuf>) -> Result<()> {
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let entry = entry?;
        let path = entry.path();
        if entry.file_type()?.is_dir() {
            collect(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "crt") {
            out.push(path);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn joins_certificates_in_path_order_with_newlines() {
        let dir = std::env::temp_dir().join(format!("xtask-certs-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("mozilla")).unwrap();
        std::fs::write(dir.join("mozilla/B.crt"), "b").unwrap();
        std::fs::write(dir.join("mozilla/A.crt"), "a\n").unwrap();
        std::fs::write(dir.join("mozilla/README"), "not a certificate").unwrap();
        let (pem, count) = join(&dir).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!((pem.as_slice(), count), (&b"a\nb\n"[..], 2));
    }
}
