//! Images by reference, as a kubelet sees them: nothing is ever pulled from a registry; an image
//! missing from podman's store is copied in from the ground's OCI image layout (`cargo xtask
//! image` writes it), else the container waits with `ErrImageNeverPull`.

use std::path::Path;

use anyhow::{Result, bail};
use kube_ground::runtime::Runtime;

/// `busybox` → `docker.io/library/busybox:latest`, `ghcr.io/x/y:1` unchanged, as container
/// runtimes complete short names.
pub fn normalize(image: &str) -> String {
    let (name, digest) = match image.split_once('@') {
        Some((n, d)) => (n, Some(d)),
        None => (image, None),
    };
    let first = name.split('/').next().unwrap_or_default();
    let has_domain =
        name.contains('/') && (first.contains('.') || first.contains(':') || first == "localhost");
    let mut full = match (has_domain, name.contains('/')) {
        (true, _) => name.to_string(),
        (false, true) => format!("docker.io/{name}"),
        (false, false) => format!("docker.io/library/{name}"),
    };
    let last = full.rsplit('/').next().unwrap_or_default();
    if digest.is_none() && !last.contains(':') {
        full.push_str(":latest");
    }
    match digest {
        Some(d) => format!("{full}@{d}"),
        None => full,
    }
}

/// Makes `image` (normalized) available in the store, as the layout has it: a name the layout
/// now gives another image (`cargo xtask image` ran again) is copied in again, or the ground
/// would keep running the old build.
pub async fn ensure(runtime: &Runtime, layout: &Path, image: &str) -> Result<()> {
    let index = std::fs::read_to_string(layout.join("index.json")).unwrap_or_default();
    let wanted = layout_digest(&index, image);
    if runtime.image_exists(image).await? {
        match &wanted {
            Some(digest) if runtime.image_digest(image).await? != *digest => {
                runtime.untag_image(image).await?;
            }
            _ => return Ok(()),
        }
    }
    if wanted.is_none() {
        bail!(
            "ErrImageNeverPull: image {image:?} is neither in the test ground's store nor in {} (nothing is pulled; build it with `cargo xtask image`)",
            layout.display()
        );
    }
    runtime.pull_from_layout(layout, image).await
}

/// The manifest digest an OCI layout's `index.json` gives the reference `image`.
fn layout_digest(index: &str, image: &str) -> Option<String> {
    let index: serde_json::Value = serde_json::from_str(index).ok()?;
    index["manifests"]
        .as_array()?
        .iter()
        .find(|m| m["annotations"]["org.opencontainers.image.ref.name"] == image)
        .and_then(|m| m["digest"].as_str())
        .map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::{layout_digest, normalize};

    #[test]
    fn the_layout_names_the_digest_of_a_reference() {
        let index = r#"{"manifests":[
            {"digest":"sha256:aa","annotations":{"org.opencontainers.image.ref.name":"ghcr.io/x/y:1"}},
            {"digest":"sha256:bb","annotations":{"org.opencontainers.image.ref.name":"ghcr.io/x/z:1"}}]}"#;
        assert_eq!(
            layout_digest(index, "ghcr.io/x/z:1").as_deref(),
            Some("sha256:bb")
        );
        assert_eq!(layout_digest(index, "ghcr.io/x/q:1"), None);
        assert_eq!(layout_digest("", "ghcr.io/x/y:1"), None);
    }

    #[test]
    fn short_names_are_completed() {
        assert_eq!(normalize("busybox"), "docker.io/library/busybox:latest");
        assert_eq!(normalize("busybox:1.36"), "docker.io/library/busybox:1.36");
        assert_eq!(
            normalize("bitnami/mariadb"),
            "docker.io/bitnami/mariadb:latest"
        );
        assert_eq!(
            normalize("ghcr.io/slinkyproject/slurmd:26.05-ubuntu26.04"),
            "ghcr.io/slinkyproject/slurmd:26.05-ubuntu26.04"
        );
        assert_eq!(
            normalize("localhost/slurm-dev/toolbox"),
            "localhost/slurm-dev/toolbox:latest"
        );
        assert_eq!(normalize("localhost:5000/x"), "localhost:5000/x:latest");
    }
}
