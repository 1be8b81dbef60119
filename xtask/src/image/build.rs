//! From a tree (a recipe's root, a project image's scratch tree) to a stored, named image and its
//! archive, reusing the layer when the tree and the epoch are unchanged.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result};
use oci_image::{Descriptor, Empty, RuntimeConfig, Store};

use super::recipes::Recipe;
use super::roots::Root;

/// Bump when oci-image would write a different layer for the same tree.
const LAYER_FORMAT: &str = "1";

pub struct Built {
    pub id: String,
    pub digest: String,
    pub size: u64,
    pub archive: PathBuf,
    pub names: Vec<String>,
    pub layer_reused: bool,
    pub archive_reused: bool,
}

pub fn build(
    recipe: &Recipe,
    root: &Root,
    store: &Store,
    archives: &Path,
    revision: &str,
) -> Result<Built> {
    let epoch = match std::env::var("SOURCE_DATE_EPOCH") {
        Ok(v) => v.parse().context("SOURCE_DATE_EPOCH is not a number")?,
        Err(_) => root.info.epoch,
    };
    store_image(
        &Spec {
            id: &recipe.id,
            tree: &root.path,
            layer_key: &root.key,
            stale_layers: None,
            epoch,
            config: runtime_config(recipe, root, epoch, revision),
            names: &recipe.names,
        },
        store,
        archives,
    )
}

/// One image of one layer.
pub struct Spec<'a> {
    /// What `cargo xtask image ID` and the archive `ID.oci.tar` are called.
    pub id: &'a str,
    pub tree: &'a Path,
    /// Names the tree's content: the layer is written again only for another key or epoch.
    pub layer_key: &'a str,
    /// Layer records starting with this are of earlier versions of the tree, removed once a new
    /// layer is written (for trees that change with every build).
    pub stale_layers: Option<&'a str>,
    pub epoch: i64,
    pub config: RuntimeConfig,
    /// Every name the image is stored under; the first one names it in its archive.
    pub names: &'a [String],
}

pub fn store_image(spec: &Spec, store: &Store, archives: &Path) -> Result<Built> {
    let (layer, layer_reused) = layer(spec, store)?;
    let manifest = store.add_image(
        std::slice::from_ref(&layer),
        spec.config.clone(),
        spec.epoch,
        &format!("cargo xtask image {}", spec.id),
    )?;
    store.tag(&manifest, spec.names)?;
    let image = store.resolve(&spec.names[0])?;

    std::fs::create_dir_all(archives)
        .with_context(|| format!("creating {}", archives.display()))?;
    let archive = archives.join(format!("{}.oci.tar", spec.id));
    // The archive is rewritten only when the image or its names changed: layers are large.
    let stamp = archives.join(format!(".{}.stamp", spec.id));
    let stamp_text = format!("{}\n{}\n", manifest.digest, spec.names.join("\n"));
    let archive_reused =
        archive.is_file() && std::fs::read_to_string(&stamp).is_ok_and(|s| s == stamp_text);
    if !archive_reused {
        oci_image::write_archive(store, &image, spec.names, spec.epoch, &archive)?;
        std::fs::write(&stamp, stamp_text)?;
    }
    Ok(Built {
        id: spec.id.to_owned(),
        digest: manifest.digest,
        size: image.size(),
        archive,
        names: spec.names.to_vec(),
        layer_reused,
        archive_reused,
    })
}

/// The tree's layer: from the cache when a tree with this key was already written with this epoch.
fn layer(spec: &Spec, store: &Store) -> Result<(Descriptor, bool)> {
    let dir = super::work_dir().join("layers");
    std::fs::create_dir_all(&dir)?;
    let name = format!("{}-{}-{LAYER_FORMAT}.json", spec.layer_key, spec.epoch);
    let record = dir.join(&name);
    if let Ok(bytes) = std::fs::read(&record)
        && let Ok(layer) = serde_json::from_slice::<Descriptor>(&bytes)
        && store.has_blob(&layer.digest)
    {
        return Ok((layer, true));
    }
    let started = Instant::now();
    let layer = store
        .add_layer(spec.tree, spec.epoch)
        .with_context(|| format!("writing the layer of {}", spec.tree.display()))?;
    eprintln!(
        "  layer {} ({:.1} MB) written in {:.1} s",
        layer.digest,
        layer.size as f64 / 1e6,
        started.elapsed().as_secs_f64()
    );
    std::fs::write(&record, serde_json::to_vec(&layer)?)?;
    if let Some(prefix) = spec.stale_layers {
        for entry in std::fs::read_dir(&dir)?.flatten() {
            let other = entry.file_name().to_string_lossy().into_owned();
            if other.starts_with(prefix) && other != name {
                std::fs::remove_file(entry.path())?;
            }
        }
    }
    Ok((layer, false))
}

fn runtime_config(recipe: &Recipe, root: &Root, epoch: i64, revision: &str) -> RuntimeConfig {
    let strings = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let mut labels = BTreeMap::new();
    let mut label = |k: &str, v: String| {
        labels.insert(format!("org.opencontainers.image.{k}"), v);
    };
    label("title", recipe.component.to_owned());
    label("description", recipe.description.to_owned());
    label("source", env!("CARGO_PKG_REPOSITORY").to_owned());
    label("version", root.info.version.clone());
    label("revision", revision.to_owned());
    label("licenses", recipe.licenses.to_owned());
    label("created", oci_image::spec::rfc3339(epoch));
    label("vendor", "slurm-rs".to_owned());
    label("base.name", format!("debian:{}", recipe.suite));
    let mut env =
        vec!["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".to_owned()];
    env.extend(strings(&recipe.env));
    if let Some(release) = recipe.release {
        env.push(format!("SLURM_VERSION={}", root.info.version));
        env.push(format!("SLURM_RELEASE={release}"));
    }
    RuntimeConfig {
        user: recipe.user.map(str::to_owned),
        exposed_ports: recipe
            .ports
            .iter()
            .map(|p| (p.to_string(), Empty {}))
            .collect(),
        env,
        entrypoint: strings(&recipe.entrypoint),
        cmd: strings(&recipe.cmd),
        working_dir: recipe.working_dir.map(str::to_owned),
        labels,
        ..Default::default()
    }
}
