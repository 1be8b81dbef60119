//! One root filesystem per recipe, made by mmdebstrap and cached by a hash of everything that shapes it.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

use super::recipes::{Base, Recipe};
use crate::slurm::rootfs::{ensure_mmdebstrap, fnv1a};
use crate::slurm::sh::run;

/// Bump when the commands below change what a root contains.
const RECIPE_VERSION: &str = "1";

/// Fixed ids, as in Slinky's images (slurm) and the official MariaDB image (mysql), so that volumes and
/// securityContexts written for those carry over.
const SLURM_UID: u32 = 401;
const MYSQL_UID: u32 = 999;

/// Written next to a finished root (never inside: it would end up in the image).
#[derive(Debug, Serialize, Deserialize)]
pub struct RootInfo {
    /// Every mtime in the image's layer and its `created` time, unless SOURCE_DATE_EPOCH overrides it.
    pub epoch: i64,
    /// Debian version of the recipe's main package.
    pub version: String,
    pub build_seconds: f64,
}

pub struct Root {
    pub path: PathBuf,
    pub key: String,
    pub info: RootInfo,
}

fn recipe_key(recipe: &Recipe) -> String {
    let mut text = format!(
        "{RECIPE_VERSION}|{}|{:?}|{}|{}",
        recipe.suite,
        recipe.base,
        recipe.packages.join(","),
        std::env::var("SLURM_DEV_MIRROR").unwrap_or_default()
    );
    for (path, mode, content) in &recipe.files {
        text.push_str(&format!("|{path}|{mode:o}|{content}"));
    }
    text.push_str(&format!("|{:?}", recipe.clear));
    format!("{}-{:016x}", recipe.root_id, fnv1a(text.as_bytes()))
}

/// The recipe's root, built first when it is not cached.
pub fn ensure(recipe: &Recipe) -> Result<Root> {
    let key = recipe_key(recipe);
    let dir = super::work_dir().join("roots");
    let path = dir.join(&key);
    let info_path = dir.join(format!("{key}.json"));
    if let Ok(bytes) = std::fs::read(&info_path)
        && let Ok(info) = serde_json::from_slice(&bytes)
        && path.is_dir()
    {
        return Ok(Root { path, key, info });
    }
    ensure_mmdebstrap()?;
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let tmp = dir.join(format!("{key}.building"));
    let log = dir.join(format!("{key}.log"));
    for stale in [&tmp, &path] {
        if stale.exists() {
            std::fs::remove_dir_all(stale)
                .with_context(|| format!("removing unfinished {}", stale.display()))?;
        }
    }
    let epoch = match std::env::var("SOURCE_DATE_EPOCH") {
        Ok(v) => v.parse().context("SOURCE_DATE_EPOCH is not a number")?,
        Err(_) => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)?
            .as_secs() as i64,
    };
    eprintln!(
        "root {}: building it ({} {} from Debian {}) in {} (log: {})",
        recipe.root_id,
        match recipe.base {
            Base::Minbase => "minbase +",
            Base::Extract | Base::Files => "extracted",
        },
        recipe.packages.join(" "),
        recipe.suite,
        tmp.display(),
        log.display()
    );
    let started = Instant::now();
    mmdebstrap(recipe, &tmp, &log, epoch)?;
    finish(recipe, &tmp).with_context(|| format!("preparing the root in {}", tmp.display()))?;
    let version = package_version(recipe, &tmp)?;
    std::fs::rename(&tmp, &path)?;
    let info = RootInfo {
        epoch,
        version,
        build_seconds: started.elapsed().as_secs_f64(),
    };
    std::fs::write(&info_path, serde_json::to_vec_pretty(&info)?)?;
    remove_stale(&dir, recipe, &key)?;
    eprintln!(
        "root {}: built in {:.1} s",
        recipe.root_id, info.build_seconds
    );
    Ok(Root { path, key, info })
}

/// Roots of earlier versions of this recipe: nothing uses them once a new one is built.
fn remove_stale(dir: &Path, recipe: &Recipe, key: &str) -> Result<()> {
    let prefix = format!("{}-", recipe.root_id);
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(rest) = name.strip_prefix(&prefix) else {
            continue;
        };
        let hash = rest.split('.').next().unwrap_or_default();
        let old = hash.len() == 16 && hash.bytes().all(|b| b.is_ascii_hexdigit());
        if old && !name.starts_with(key) {
            let path = entry.path();
            if entry.file_type()?.is_dir() {
                std::fs::remove_dir_all(&path)
            } else {
                std::fs::remove_file(&path)
            }
            .with_context(|| format!("removing the stale {}", path.display()))?;
        }
    }
    Ok(())
}

fn mmdebstrap(recipe: &Recipe, target: &Path, log: &Path, epoch: i64) -> Result<()> {
    let log_file =
        std::fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
    let mut cmd = Command::new("mmdebstrap");
    let variant = match recipe.base {
        Base::Minbase => "minbase",
        Base::Extract | Base::Files => "extract",
    };
    cmd.arg(format!("--variant={variant}"))
        .arg(format!("--include={}", recipe.packages.join(",")))
        .arg("--aptopt=Acquire::Check-Valid-Until \"false\"")
        .arg("--aptopt=APT::Install-Recommends \"false\"")
        .env("SOURCE_DATE_EPOCH", epoch.to_string());
    if recipe.base == Base::Minbase {
        for exclude in ["man", "doc", "info", "locale", "lintian", "bug", "doc-base"] {
            cmd.arg(format!("--dpkgopt=path-exclude=/usr/share/{exclude}/*"));
        }
        // Licences stay: the images are redistributed.
        cmd.arg("--dpkgopt=path-include=/usr/share/doc/*/copyright");
        // Before any package is configured, so maintainer scripts find the users and keep their ids.
        cmd.arg(format!(
            "--essential-hook=printf '%s\\n' 'slurm:x:{SLURM_UID}:{SLURM_UID}:Slurm:/nonexistent:/usr/sbin/nologin' \
             'mysql:x:{MYSQL_UID}:{MYSQL_UID}:MariaDB:/nonexistent:/bin/false' >> \"$1/etc/passwd\"; \
             printf '%s\\n' 'slurm:x:{SLURM_UID}:' 'mysql:x:{MYSQL_UID}:' >> \"$1/etc/group\"; \
             printf '%s\\n' 'slurm:*:20000:0:99999:7:::' 'mysql:*:20000:0:99999:7:::' >> \"$1/etc/shadow\"; \
             printf '%s\\n' 'slurm:*::' 'mysql:*::' >> \"$1/etc/gshadow\""
        ));
    }
    cmd.arg(recipe.suite).arg(target);
    if let Some(mirror) = std::env::var_os("SLURM_DEV_MIRROR") {
        cmd.arg(mirror);
    }
    let status = cmd
        .stdin(Stdio::null())
        .stdout(log_file.try_clone()?)
        .stderr(log_file)
        .status()
        .context("running mmdebstrap")?;
    if !status.success() {
        bail!(
            "mmdebstrap for root {} failed ({status}); see {}",
            recipe.root_id,
            log.display()
        );
    }
    Ok(())
}

/// Drops what a container never uses, and adds the recipe's files and directories.
fn finish(recipe: &Recipe, root: &Path) -> Result<()> {
    for dir in [
        "var/cache/apt",
        "var/lib/apt/lists",
        "var/cache/debconf",
        "var/log",
    ] {
        clear_files(&root.join(dir))?;
    }
    for dir in &recipe.clear {
        let dir = root.join(dir);
        for entry in
            std::fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))?
        {
            let path = entry?.path();
            if path.symlink_metadata()?.is_dir() {
                std::fs::remove_dir_all(&path)?;
            } else {
                std::fs::remove_file(&path)?;
            }
        }
    }
    for file in ["etc/machine-id", "var/lib/dbus/machine-id"] {
        let _ = std::fs::remove_file(root.join(file));
    }
    // Host keys are made per container by the entrypoint (or mounted by the operator), never shipped.
    if let Ok(entries) = std::fs::read_dir(root.join("etc/ssh")) {
        for entry in entries.flatten() {
            if entry.file_name().to_string_lossy().starts_with("ssh_host_") {
                std::fs::remove_file(entry.path())?;
            }
        }
    }
    // mmdebstrap copies the host's resolver and hostname settings in; the runtime provides its own.
    for file in ["etc/resolv.conf", "etc/hostname"] {
        let _ = std::fs::remove_file(root.join(file));
    }
    match recipe.base {
        Base::Minbase => slurm_dirs(root)?,
        Base::Extract => busybox_root(root)?,
        Base::Files => {}
    }
    for (path, mode, content) in &recipe.files {
        let file = root.join(path);
        std::fs::create_dir_all(file.parent().expect("file has a parent"))?;
        std::fs::write(&file, content)?;
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(*mode))?;
    }
    Ok(())
}

/// Directories the daemons write to, owned by SlurmUser where Slinky's images have them so.
fn slurm_dirs(root: &Path) -> Result<()> {
    if !root
        .join("usr/sbin")
        .read_dir()?
        .flatten()
        .any(|e| e.file_name().to_string_lossy().starts_with("slurm") || e.file_name() == "sackd")
    {
        return Ok(());
    }
    for dir in [
        "etc/slurm",
        "run/slurmctld",
        "run/slurmdbd",
        "var/spool/slurmctld",
        "var/log/slurm",
    ] {
        std::fs::create_dir_all(root.join(dir))?;
        std::os::unix::fs::chown(root.join(dir), Some(SLURM_UID), Some(SLURM_UID))?;
    }
    for dir in ["var/spool/slurmd", "run/slurm", "run/slurmd"] {
        std::fs::create_dir_all(root.join(dir))?;
    }
    Ok(())
}

/// busybox's applets as links, and the few files every container expects.
fn busybox_root(root: &Path) -> Result<()> {
    let busybox = ["usr/bin/busybox", "bin/busybox"]
        .into_iter()
        .map(|p| root.join(p))
        .find(|p| p.is_file())
        .context("busybox is not in the extracted root")?;
    let rel_busybox = busybox.strip_prefix(root)?.to_owned();
    let list = run(Command::new(&busybox).arg("--list-full"))?;
    for applet in list.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let link = root.join(applet);
        if link.exists() || link.symlink_metadata().is_ok() {
            continue;
        }
        std::fs::create_dir_all(link.parent().expect("applet has a parent"))?;
        std::os::unix::fs::symlink(Path::new("/").join(&rel_busybox), &link)?;
    }
    for dir in [
        "etc", "tmp", "root", "var/tmp", "home", "proc", "sys", "dev", "run",
    ] {
        std::fs::create_dir_all(root.join(dir))?;
    }
    use std::os::unix::fs::PermissionsExt;
    for dir in ["tmp", "var/tmp"] {
        std::fs::set_permissions(root.join(dir), std::fs::Permissions::from_mode(0o1777))?;
    }
    std::fs::write(
        root.join("etc/passwd"),
        "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n",
    )?;
    std::fs::write(root.join("etc/group"), "root:x:0:\nnogroup:x:65534:\n")?;
    // The extract variant leaves dpkg's and apt's bookkeeping, which nothing here reads.
    for dir in [
        "var/lib/dpkg",
        "var/lib/apt",
        "var/cache",
        "var/log",
        "etc/apt",
    ] {
        let _ = std::fs::remove_dir_all(root.join(dir));
    }
    Ok(())
}

fn clear_files(dir: &Path) -> Result<()> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Ok(());
    };
    for entry in entries.flatten() {
        let kind = entry.file_type()?;
        if kind.is_dir() {
            clear_files(&entry.path())?;
        } else {
            std::fs::remove_file(entry.path())?;
        }
    }
    Ok(())
}

fn package_version(recipe: &Recipe, root: &Path) -> Result<String> {
    if recipe.base == Base::Files {
        // Extracted packages are not in dpkg's status; their changelog's first line names the version.
        let changelog = root.join(format!("usr/share/doc/{}/changelog.gz", recipe.version_of));
        let text = run(Command::new("gzip").arg("-dc").arg(&changelog))?;
        let first = text.lines().next().unwrap_or_default();
        return Ok(first
            .split_once('(')
            .and_then(|(_, rest)| rest.split_once(')'))
            .map_or("unknown", |(version, _)| version)
            .to_owned());
    }
    if recipe.base == Base::Extract {
        // No dpkg database is kept; busybox itself says its version.
        let busybox = ["usr/bin/busybox", "bin/busybox"]
            .into_iter()
            .map(|p| root.join(p))
            .find(|p| p.is_file())
            .context("busybox is missing")?;
        let out = Command::new(busybox).output()?;
        let text = String::from_utf8_lossy(&out.stdout);
        return Ok(text
            .split_whitespace()
            .nth(1)
            .unwrap_or("unknown")
            .trim_start_matches('v')
            .to_owned());
    }
    let out = run(Command::new("chroot").arg(root).args([
        "dpkg-query",
        "-W",
        "-f",
        "${Version}",
        recipe.version_of,
    ]))?;
    Ok(out.trim().to_owned())
}
