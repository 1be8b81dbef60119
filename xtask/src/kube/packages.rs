//! Debian sid's packages of the Kubernetes Go libraries, Go, etcd, openapi-gen and kubectl, fetched
//! with apt's own tools into a private directory: nothing is installed into the host.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::slurm::rootfs::{cache_dir, fnv1a};
use crate::slurm::sh::run;

/// What the build needs; apt resolves the Go libraries these depend on.
const SEEDS: &[&str] = &[
    "golang-k8s-apiserver-dev",
    "golang-k8s-apiextensions-apiserver-dev",
    "golang-k8s-api-dev",
    "golang-k8s-apimachinery-dev",
    "golang-k8s-client-go-dev",
    "golang-k8s-kube-openapi-dev",
    "golang-k8s-component-base-dev",
    "golang-k8s-sigs-structured-merge-diff-v6-dev",
    "golang-1.27-go",
    "etcd-server",
    "kube-openapi",
    "kubectl",
];

/// Bump when the steps below change what the directory contains.
const RECIPE: &str = "1";

const READY: &str = ".slurm-dev-ready";

/// The extracted packages: `root` holds usr/ as the packages lay it out.
pub struct Packages {
    pub dir: PathBuf,
}

impl Packages {
    pub fn root(&self) -> PathBuf {
        self.dir.join("root")
    }
    pub fn goroot(&self) -> PathBuf {
        self.root().join("usr/lib/go-1.27")
    }
    pub fn gocode(&self) -> PathBuf {
        self.root().join("usr/share/gocode")
    }
    pub fn bin(&self, name: &str) -> PathBuf {
        self.root().join("usr/bin").join(name)
    }
    /// The Kubernetes release of the packaged libraries, e.g. `v1.36.4` for golang-k8s-apiserver-dev 0.36.4.
    pub fn kube_version(&self) -> Result<String> {
        let list = std::fs::read_to_string(self.dir.join("versions.txt"))?;
        let version = list
            .lines()
            .find_map(|l| l.strip_prefix("golang-k8s-apiserver-dev "))
            .context("golang-k8s-apiserver-dev is not among the fetched packages")?;
        let upstream = version.split(['-', '+', '~']).next().unwrap_or(version);
        let minor_patch = upstream
            .strip_prefix("0.")
            .with_context(|| format!("unexpected golang-k8s-apiserver-dev version {version}"))?;
        Ok(format!("v1.{minor_patch}"))
    }
}

pub fn dir() -> PathBuf {
    let recipe = format!("sid|{}|{RECIPE}", SEEDS.join(","));
    cache_dir()
        .join("kube")
        .join(format!("sid-{:016x}", fnv1a(recipe.as_bytes())))
}

/// Returns the extracted packages, fetching them first when they are not cached yet.
pub fn ensure() -> Result<Packages> {
    let dir = dir();
    if dir.join(READY).exists() {
        return Ok(Packages { dir });
    }
    let log = dir.with_extension("log");
    std::fs::create_dir_all(dir.parent().expect("has a parent"))?;
    eprintln!(
        "fetching Debian sid's Kubernetes libraries, Go, etcd and kubectl into {} (once; log: {})",
        dir.display(),
        log.display()
    );
    let started = std::time::Instant::now();
    if dir.exists() {
        std::fs::remove_dir_all(&dir)
            .with_context(|| format!("removing stale {}", dir.display()))?;
    }
    fetch(&dir).with_context(|| {
        format!(
            "fetching the packages into {} failed (apt's output is in the error above)",
            dir.display()
        )
    })?;
    std::fs::write(dir.join(READY), RECIPE)?;
    let summary = format!("fetched and extracted in {:.0?}", started.elapsed());
    let _ = std::fs::write(&log, &summary);
    eprintln!("{summary}");
    Ok(Packages { dir })
}

/// Frees the disk the packages take once what was built from them is cached.
pub fn remove() {
    let dir = dir();
    if dir.exists() {
        let _ = std::fs::remove_dir_all(&dir);
        let _ = std::fs::remove_file(dir.with_extension("log"));
    }
}

fn fetch(dir: &Path) -> Result<()> {
    let apt = dir.join("apt");
    for sub in ["lists/partial", "cache/archives/partial", "debs"] {
        std::fs::create_dir_all(apt.join(sub))?;
    }
    let sources = apt.join("sources.list");
    let mirror = std::env::var("SLURM_DEV_MIRROR")
        .unwrap_or_else(|_| "http://deb.debian.org/debian".to_owned());
    std::fs::write(&sources, format!("deb {mirror} sid main\n"))?;
    let opts = |cmd: &mut Command| {
        cmd.arg(format!("-oDir::Etc::SourceList={}", sources.display()))
            .arg("-oDir::Etc::SourceParts=/dev/null")
            .arg(format!(
                "-oDir::State::Lists={}",
                apt.join("lists").display()
            ))
            .arg("-oDir::State::status=/dev/null")
            .arg(format!("-oDir::Cache={}", apt.join("cache").display()))
            .arg("-oAPT::Architecture=amd64")
            .arg("-oAcquire::Check-Valid-Until=false")
            .arg("-oDebug::NoLocking=1");
    };
    let mut update = Command::new("apt-get");
    opts(&mut update);
    run(update.args(["-qq", "update"])).context("apt-get update of the sid index")?;

    let mut depends = Command::new("apt-cache");
    opts(&mut depends);
    depends.args([
        "depends",
        "--recurse",
        "--no-recommends",
        "--no-suggests",
        "--no-conflicts",
        "--no-breaks",
        "--no-replaces",
        "--no-enhances",
    ]);
    let tree = run(depends.args(SEEDS)).context("resolving the packages' dependencies")?;
    let mut wanted: Vec<&str> = tree
        .lines()
        .filter(|l| !l.starts_with(' ') && !l.starts_with('<'))
        .filter(|p| p.starts_with("golang-") || SEEDS.contains(p))
        .collect();
    wanted.sort_unstable();
    wanted.dedup();
    std::fs::write(dir.join("packages.txt"), wanted.join("\n") + "\n")?;

    let mut download = Command::new("apt-get");
    opts(&mut download);
    run(download
        .current_dir(apt.join("debs"))
        .args(["-qq", "download"])
        .args(&wanted))
    .context("apt-get download")?;

    let root = dir.join("root");
    std::fs::create_dir_all(&root)?;
    let mut versions = String::new();
    let mut debs: Vec<PathBuf> = std::fs::read_dir(apt.join("debs"))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "deb"))
        .collect();
    debs.sort();
    if debs.len() != wanted.len() {
        bail!(
            "apt-get download gave {} packages for {} wanted",
            debs.len(),
            wanted.len()
        );
    }
    for deb in &debs {
        run(Command::new("dpkg-deb").arg("-x").arg(deb).arg(&root))
            .with_context(|| format!("extracting {}", deb.display()))?;
        let name = deb.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        // name_version_arch.deb, the version with ':' escaped as %3a
        let mut parts = name.split('_');
        if let (Some(pkg), Some(version)) = (parts.next(), parts.next()) {
            versions.push_str(&format!("{pkg} {}\n", version.replace("%3a", ":")));
        }
    }
    std::fs::write(dir.join("versions.txt"), versions)?;
    // The .debs are only the way in; the extracted tree is what is kept.
    std::fs::remove_dir_all(apt.join("debs"))?;
    std::fs::remove_dir_all(apt.join("cache"))?;
    Ok(())
}
