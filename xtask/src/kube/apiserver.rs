//! Building the test ground's API server (xtask/kube/apiserver, Go) offline from Debian sid's Go
//! packages: openapi-gen over the served types, then `go build` in GOPATH mode. The binary is
//! cached by a hash of the Go sources, the package directory and the recipe, so a warm run only
//! hashes.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context, Result, bail};

use super::packages::{self, Packages};
use crate::slurm::rootfs::{cache_dir, fnv1a};

/// Bump when the build steps below change.
const RECIPE: &str = "1";

/// The packages openapi-gen reads: every served built-in group, the CRD types, and the
/// apimachinery types they refer to. Server-side apply and `kubectl explain` need these definitions.
const OPENAPI_INPUTS: &[&str] = &[
    "k8s.io/api/core/v1",
    "k8s.io/api/apps/v1",
    "k8s.io/api/batch/v1",
    "k8s.io/api/policy/v1",
    "k8s.io/api/coordination/v1",
    "k8s.io/api/discovery/v1",
    "k8s.io/api/scheduling/v1",
    "k8s.io/api/rbac/v1",
    "k8s.io/api/admissionregistration/v1",
    "k8s.io/api/events/v1",
    "k8s.io/api/autoscaling/v1",
    "k8s.io/api/autoscaling/v2",
    "k8s.io/api/storage/v1",
    "k8s.io/api/resource/v1",
    "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1",
    "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1beta1",
    "k8s.io/apimachinery/pkg/apis/meta/v1",
    "k8s.io/apimachinery/pkg/runtime",
    "k8s.io/apimachinery/pkg/util/intstr",
    "k8s.io/apimachinery/pkg/api/resource",
    "k8s.io/apimachinery/pkg/version",
];

/// The Go import paths of the project's packages inside the build's GOPATH.
const SERVER_PKG: &str = "slurmdev/apiserver";
const OPENAPI_PKG: &str = "slurmdev/openapi";

pub struct Built {
    pub apiserver: PathBuf,
    pub etcd: PathBuf,
    pub kubectl: PathBuf,
    /// Seconds the API server build took in this run; None when it was cached.
    pub build_secs: Option<f64>,
}

fn sources(workspace: &Path) -> PathBuf {
    workspace.join("xtask/kube/apiserver")
}

/// The Go sources, sorted by name, with their contents: what the cache key covers.
fn read_sources(workspace: &Path) -> Result<Vec<(String, Vec<u8>)>> {
    let dir = sources(workspace);
    let mut files = Vec::new();
    for entry in std::fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "go") {
            let name = path
                .file_name()
                .and_then(|n| n.to_str())
                .context("Go file name is not UTF-8")?
                .to_owned();
            files.push((name, std::fs::read(&path)?));
        }
    }
    files.sort();
    if files.is_empty() {
        bail!("no Go sources in {}", dir.display());
    }
    Ok(files)
}

/// The programs the ground runs, kept beside the built server: the 2.7 GiB of Debian packages
/// they came from are needed only to build it again.
const PROGRAMS: &[&str] = &["kube-apiserver", "etcd", "kubectl"];

/// Returns the API server, etcd and kubectl, building what is not cached yet.
pub fn ensure(workspace: &Path) -> Result<Built> {
    let files = read_sources(workspace)?;
    let mut key = Vec::new();
    for (name, content) in &files {
        key.extend_from_slice(name.as_bytes());
        key.push(0);
        key.extend_from_slice(content);
    }
    key.extend_from_slice(packages::dir().to_string_lossy().as_bytes());
    key.extend_from_slice(OPENAPI_INPUTS.join(",").as_bytes());
    key.extend_from_slice(RECIPE.as_bytes());
    // Earlier recipes kept the Go build cache here (2.8 GiB): a built server needs none of it.
    let _ = std::fs::remove_dir_all(cache_dir().join("kube/gocache"));
    let dir = cache_dir()
        .join("kube")
        .join(format!("apiserver-{:016x}", fnv1a(&key)));
    let mut build_secs = None;
    if !PROGRAMS.iter().all(|p| dir.join(p).exists()) {
        let pkgs = packages::ensure()?;
        if !dir.join(PROGRAMS[0]).exists() {
            let started = Instant::now();
            build(&pkgs, &files, &dir)?;
            let secs = started.elapsed().as_secs_f64();
            eprintln!("built the API server in {secs:.0} s ({})", dir.display());
            build_secs = Some(secs);
        }
        for program in &PROGRAMS[1..] {
            // through a temporary name: a copy cut short must not pass for the program
            let partial = dir.join(format!("{program}.partial"));
            std::fs::copy(pkgs.bin(program), &partial)
                .and_then(|_| std::fs::rename(&partial, dir.join(program)))
                .with_context(|| format!("copying {program} beside the API server"))?;
        }
    }
    packages::remove();
    Ok(Built {
        apiserver: dir.join(PROGRAMS[0]),
        etcd: dir.join(PROGRAMS[1]),
        kubectl: dir.join(PROGRAMS[2]),
        build_secs,
    })
}

/// The Go build cache of one build, removed with it: the binary is what is cached. It lives in
/// memory (/dev/shm) when there is room, since the Kubernetes libraries' cache is 2.8 GiB and CI
/// machines' disks are not always large; else beside the build.
struct GoCache(PathBuf);

impl GoCache {
    fn new(work: &Path) -> GoCache {
        let shm = Path::new("/dev/shm");
        let room = nix::sys::statvfs::statvfs(shm)
            .map(|s| s.blocks_available() * s.fragment_size())
            .unwrap_or(0);
        if room >= 6 << 30 {
            GoCache(shm.join(format!("slurm-dev-gocache-{}", std::process::id())))
        } else {
            GoCache(work.join("gocache"))
        }
    }
}

impl Drop for GoCache {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn build(pkgs: &Packages, files: &[(String, Vec<u8>)], dir: &Path) -> Result<()> {
    let work = dir.with_extension("building");
    let log = dir.with_extension("log");
    if work.exists() {
        std::fs::remove_dir_all(&work)
            .with_context(|| format!("removing stale {}", work.display()))?;
    }
    let gopath = work.join("gopath");
    let server_dir = gopath.join("src").join(SERVER_PKG);
    std::fs::create_dir_all(&server_dir)?;
    for (name, content) in files {
        std::fs::write(server_dir.join(name), content)?;
    }
    let version = pkgs.kube_version()?;
    eprintln!(
        "building the test ground's API server (Kubernetes {version} libraries from Debian sid; \
         about 6 minutes on 2 cores the first time, seconds after; log: {})",
        log.display()
    );
    let log_file =
        std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
    let gocache = GoCache::new(&work);
    let go_env = |cmd: &mut Command| {
        let path = format!(
            "{}:{}",
            pkgs.goroot().join("bin").display(),
            std::env::var("PATH").unwrap_or_default()
        );
        cmd.env("GOROOT", pkgs.goroot())
            .env(
                "GOPATH",
                format!("{}:{}", gopath.display(), pkgs.gocode().display()),
            )
            .env("GO111MODULE", "off")
            .env("GOPROXY", "off")
            .env("GOTOOLCHAIN", "local")
            .env("GOTELEMETRY", "off")
            .env("GOFLAGS", "")
            .env("CGO_ENABLED", "0")
            .env("GOCACHE", &gocache.0)
            .env("PATH", path);
    };
    let step = |what: &str, cmd: &mut Command| -> Result<()> {
        go_env(cmd);
        let status = cmd
            .stdin(Stdio::null())
            .stdout(log_file.try_clone()?)
            .stderr(log_file.try_clone()?)
            .status()
            .with_context(|| format!("starting {what}"))?;
        if !status.success() {
            bail!("{what} failed ({status}); see {}", log.display());
        }
        Ok(())
    };
    let header = work.join("header.txt");
    std::fs::write(
        &header,
        "// Code generated by openapi-gen for the slurm-dev test ground. DO NOT EDIT.\n",
    )?;
    step(
        "openapi-gen",
        Command::new(pkgs.bin("openapi-gen"))
            .arg("--output-dir")
            .arg(gopath.join("src").join(OPENAPI_PKG))
            .args(["--output-pkg", OPENAPI_PKG])
            .args(["--output-file", "zz_generated.openapi.go"])
            .arg("--go-header-file")
            .arg(&header)
            .arg("--report-filename")
            .arg(work.join("api-violations.txt"))
            .args(OPENAPI_INPUTS),
    )?;
    let minor = version
        .trim_start_matches("v1.")
        .split('.')
        .next()
        .unwrap_or("0")
        .to_owned();
    let ldflags = [
        format!("-X k8s.io/component-base/version.gitVersion={version}"),
        "-X k8s.io/component-base/version.gitMajor=1".to_owned(),
        format!("-X k8s.io/component-base/version.gitMinor={minor}"),
        "-X k8s.io/component-base/version.gitTreeState=clean".to_owned(),
    ]
    .join(" ");
    let output = work.join("kube-apiserver");
    step(
        "go build of the API server",
        Command::new(pkgs.goroot().join("bin/go"))
            .current_dir(&work)
            .args(["build", "-trimpath", "-ldflags", &ldflags, "-o"])
            .arg(&output)
            .arg(SERVER_PKG),
    )?;
    std::fs::create_dir_all(dir)?;
    std::fs::rename(&output, dir.join(PROGRAMS[0]))?;
    let _ = std::fs::remove_dir_all(&work);
    remove_older_builds(dir);
    Ok(())
}

/// Builds of earlier sources (about 110 MB each) are never used again.
fn remove_older_builds(current: &Path) {
    let Some(parent) = current.parent() else {
        return;
    };
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    let current_log = current.with_extension("log");
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        if path == current
            || path == current_log
            || !name.to_string_lossy().starts_with("apiserver-")
        {
            continue;
        }
        let _ = if path.is_dir() {
            std::fs::remove_dir_all(&path)
        } else {
            std::fs::remove_file(&path)
        };
    }
}
