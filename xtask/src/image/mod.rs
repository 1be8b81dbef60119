//! `cargo xtask image`: OCI images of Slurm's daemons (Slinky's image contract), MariaDB and a toolbox,
//! built offline from Debian packages, and of the project's own binaries (static, FROM scratch), into OCI
//! archives and a local OCI image-layout store.

mod build;
mod certs;
mod compile;
mod podman;
mod project;
mod recipes;
mod roots;
mod scratch;
mod verify;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Result, bail};

use crate::slurm::rootfs::cache_dir;

#[derive(Debug, clap::Args)]
pub struct ImageCmd {
    /// Build every image.
    #[arg(long, conflicts_with = "names")]
    all: bool,
    /// Images to build: an id (`slurmd-26.05`), a component (`slurmd`: both releases), a release
    /// (`24.11`), `mariadb`, `toolbox`, a project binary (`slurm-operator`, `slurm-bridge`,
    /// `slurm-exporter`, `slurm`) or `project` (those four).
    names: Vec<String>,
    /// Also name each selected project image `ghcr.io/slurm-rs/NAME:TAG` (repeatable).
    #[arg(long = "tag", value_name = "TAG", value_parser = project::parse_tag)]
    tags: Vec<String>,
    /// Project images of the binaries the tests run (a build as `cargo test` does, nothing more to
    /// compile after the tests), unoptimised, no symbols, linked dynamically with their glibc libraries
    /// from the host in the image. For the test ground (CI's Helm end-to-end), not for shipping.
    #[arg(long)]
    dev: bool,
    /// The OCI image-layout store the images are added to (default: $SLURM_DEV_CACHE/images,
    /// i.e. /var/cache/slurm-dev/images).
    #[arg(long)]
    store: Option<PathBuf>,
    /// List the images and their names instead of building.
    #[arg(long)]
    list: bool,
    /// Unpack a stored image's layers into a directory instead of building (as a kubelet without podman
    /// would), e.g. `--unpack ghcr.io/slinkyproject/slurmd:26.05-ubuntu26.04 /tmp/slurmd`.
    #[arg(long, num_args = 2, value_names = ["REFERENCE", "DIR"], conflicts_with_all = ["all", "names", "list"])]
    unpack: Option<Vec<String>>,
    /// Then load the archives into podman and run them: the toolbox, MariaDB, and per Slurm release a
    /// cluster in one pod that runs a job (needs podman and runc).
    #[arg(long)]
    verify: bool,
}

/// Where built images are stored for the test kubelet, by reference name.
pub fn store_path() -> PathBuf {
    cache_dir().join("images")
}

/// The builder's own cache (roots, layer records, podman storage for --verify), outside the store.
fn work_dir() -> PathBuf {
    cache_dir().join("image-build")
}

pub fn run(workspace: &Path, cmd: ImageCmd) -> Result<()> {
    if cmd.list {
        for recipe in recipes::all() {
            println!("{:<18} {}", recipe.id, recipe.names.join("  "));
        }
        let packages = project::packages(workspace)?;
        for image in &project::ALL {
            let version = packages.get(image.package).map_or("?", |p| &p.version);
            let names = project::names(image, version, &cmd.tags);
            println!("{:<18} {}", image.name, names.join("  "));
        }
        return Ok(());
    }
    if let Some([reference, dir]) = cmd.unpack.as_deref() {
        let store = oci_image::Store::open(cmd.store.unwrap_or_else(store_path))?;
        let image = store.resolve(reference)?;
        let started = Instant::now();
        store.unpack(&image, Path::new(dir))?;
        println!(
            "unpacked {} ({}) into {dir} in {:.1} s",
            image.name,
            image.digest(),
            started.elapsed().as_secs_f64()
        );
        return Ok(());
    }
    let selection = if cmd.all {
        Selection {
            recipes: recipes::all(),
            project: project::ALL.iter().collect(),
        }
    } else if cmd.names.is_empty() {
        bail!("name the images to build (see `cargo xtask image --list`), or pass --all");
    } else {
        select(&cmd.names)?
    };
    if !cmd.tags.is_empty() && selection.project.is_empty() {
        bail!("--tag names project images, and none is selected (`project`, `slurm-operator`, …)");
    }
    if !nix::unistd::Uid::effective().is_root() {
        bail!("building images needs root (mmdebstrap, and files owned by the images' users)");
    }
    let store_dir = cmd.store.unwrap_or_else(store_path);
    let archives = crate::target_dir(workspace).join("images");
    let started = Instant::now();
    let (built, freed) = build_all(workspace, &selection, &cmd.tags, cmd.dev, &store_dir)?;

    println!("{:<18} {:>9}  {:<71}  names", "image", "size", "digest");
    for b in &built {
        println!(
            "{:<18} {:>6.1} MB  {}  {}",
            b.id,
            b.size as f64 / 1e6,
            b.digest,
            b.names.join(" ")
        );
    }
    for b in &built {
        println!("podman load -i {}", b.archive.display());
    }
    let reused = built
        .iter()
        .filter(|b| b.layer_reused && b.archive_reused)
        .count();
    println!(
        "{} image(s) in {:.1} s ({reused} unchanged); store {} (freed {:.1} MB); archives in {}",
        built.len(),
        started.elapsed().as_secs_f64(),
        store_dir.display(),
        freed as f64 / 1e6,
        archives.display()
    );
    if cmd.verify {
        let work = work_dir().join("verify");
        verify::verify(&selection.recipes, &archives, &work)?;
        let project: Vec<_> = built
            .iter()
            .filter(|b| selection.project.iter().any(|p| p.name == b.id))
            .collect();
        verify::project(&project, &work)?;
    }
    Ok(())
}

/// What `cargo xtask image NAME…` builds.
struct Selection {
    recipes: Vec<recipes::Recipe>,
    project: Vec<&'static project::Project>,
}

fn select(selectors: &[String]) -> Result<Selection> {
    let (project, rest) = project::split(selectors);
    let recipes = if rest.is_empty() {
        Vec::new()
    } else {
        recipes::select(&rest)?
    };
    Ok(Selection { recipes, project })
}

/// Builds `selectors`' images (as `cargo xtask image NAME…`) into the default store, quietly
/// reusing what is current: what `cargo xtask kube up` needs before pods can start.
pub fn ensure(workspace: &Path, selectors: &[&str]) -> Result<()> {
    let names: Vec<String> = selectors.iter().map(|s| s.to_string()).collect();
    let selection = select(&names)?;
    let started = Instant::now();
    let (built, _) = build_all(workspace, &selection, &[], false, &store_path())?;
    let fresh = built.iter().filter(|b| !b.layer_reused).count();
    eprintln!(
        "images {} ready in {:.1} s ({fresh} built anew) in {}",
        selectors.join(", "),
        started.elapsed().as_secs_f64(),
        store_path().display()
    );
    Ok(())
}

fn build_all(
    workspace: &Path,
    selection: &Selection,
    tags: &[String],
    dev: bool,
    store_dir: &Path,
) -> Result<(Vec<build::Built>, u64)> {
    let store = oci_image::Store::open(store_dir)?;
    let archives = crate::target_dir(workspace).join("images");
    let revision = git_revision(workspace);
    let mut built = Vec::new();
    for recipe in &selection.recipes {
        let root = roots::ensure(recipe)?;
        built.push(build::build(recipe, &root, &store, &archives, &revision)?);
    }
    built.extend(project::build(
        workspace,
        &selection.project,
        tags,
        dev,
        &store,
        &archives,
        &revision,
    )?);
    let freed = store.remove_unreferenced_blobs()?;
    Ok((built, freed))
}

/// The commit the images are built from, for their revision label ("unknown" outside git).
fn git_revision(workspace: &Path) -> String {
    Command::new("git")
        .arg("-C")
        .arg(workspace)
        .args(["rev-parse", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_else(|| "unknown".to_owned())
}
