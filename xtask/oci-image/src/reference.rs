//! Image references as a kubelet writes them, normalised the way container runtimes do
//! (`busybox` → `docker.io/library/busybox:latest`).

use crate::error::{Error, Result};

/// The candidates a reference may be stored under, most literal first: the reference itself, then its
/// normalised form. A `name@sha256:…` reference yields the digest alone, as `Digest`.
#[derive(Debug, PartialEq, Eq)]
pub enum Lookup {
    Names(Vec<String>),
    Digest { name: String, digest: String },
}

pub fn lookup(reference: &str) -> Result<Lookup> {
    if reference.is_empty()
        || reference
            .chars()
            .any(|c| c.is_whitespace() || c.is_control())
    {
        return Err(Error::InvalidReference(reference.to_owned()));
    }
    if let Some((name, digest)) = reference.split_once('@') {
        if crate::digest::hex_part(digest).is_none() {
            return Err(Error::InvalidReference(reference.to_owned()));
        }
        return Ok(Lookup::Digest {
            name: normalise_name(name),
            digest: digest.to_owned(),
        });
    }
    let mut names = vec![reference.to_owned()];
    let normalised = normalise(reference);
    if normalised != reference {
        names.push(normalised);
    }
    Ok(Lookup::Names(names))
}

/// `name[:tag]` with the default registry, `library/` namespace and `latest` tag filled in.
pub fn normalise(reference: &str) -> String {
    let (name, tag) = split_tag(reference);
    format!("{}:{}", normalise_name(name), tag.unwrap_or("latest"))
}

fn normalise_name(name: &str) -> String {
    match name.split_once('/') {
        Some((first, _)) if first.contains(['.', ':']) || first == "localhost" => name.to_owned(),
        Some(_) => format!("docker.io/{name}"),
        None => format!("docker.io/library/{name}"),
    }
}

/// Splits off the tag: the part after the last `:` unless that colon belongs to a registry port.
fn split_tag(reference: &str) -> (&str, Option<&str>) {
    match reference.rsplit_once(':') {
        Some((name, tag)) if !tag.contains('/') => (name, Some(tag)),
        _ => (reference, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_names_normalise_like_docker() {
        assert_eq!(normalise("busybox"), "docker.io/library/busybox:latest");
        assert_eq!(normalise("alpine:3"), "docker.io/library/alpine:3");
        assert_eq!(
            normalise("bitnami/mariadb:11"),
            "docker.io/bitnami/mariadb:11"
        );
        assert_eq!(
            normalise("ghcr.io/slinkyproject/slurmd:26.05-ubuntu26.04"),
            "ghcr.io/slinkyproject/slurmd:26.05-ubuntu26.04"
        );
        assert_eq!(normalise("localhost:5000/x"), "localhost:5000/x:latest");
        assert_eq!(
            normalise("localhost/slurm-dev/toolbox"),
            "localhost/slurm-dev/toolbox:latest"
        );
    }

    #[test]
    fn digest_references_and_garbage() {
        let d = format!("sha256:{}", "a".repeat(64));
        assert_eq!(
            lookup(&format!("busybox@{d}")).unwrap(),
            Lookup::Digest {
                name: "docker.io/library/busybox".into(),
                digest: d
            }
        );
        assert!(lookup("busybox@sha256:zz").is_err());
        assert!(lookup("two words").is_err());
        assert!(lookup("").is_err());
    }
}
