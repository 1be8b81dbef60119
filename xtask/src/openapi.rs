//! `cargo xtask openapi fetch`: slurmrestd's own OpenAPI specs, dumped by the real binaries into `openapi/`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};
use serde::Serialize;

use crate::slurm::{Release, rootfs};

/// Enough configuration for slurmrestd to load its plugins; nothing is contacted.
const SPEC_CONF: &str =
    "ClusterName=spec\nSlurmctldHost=localhost\nAuthType=auth/slurm\nCredType=cred/slurm\n";

#[derive(Serialize)]
struct Source {
    release: String,
    package: String,
    suite: &'static str,
}

pub fn fetch(workspace: &Path) -> Result<()> {
    let out_dir = workspace.join("openapi");
    let mut sources = BTreeMap::new();
    for release in Release::ALL {
        let root = rootfs::ensure(release)?;
        let package = in_root(
            &root,
            None,
            &["dpkg-query", "-W", "-f", "${Version}", "slurmrestd"],
        )?;
        let conf_dir = root.join("tmp/slurm-dev-spec");
        std::fs::create_dir_all(&conf_dir)?;
        std::fs::write(conf_dir.join("slurm.conf"), SPEC_CONF)?;
        for version in release.spec_versions() {
            let parser = format!("data_parser/{version}");
            let spec = in_root(
                &root,
                Some("slurm"),
                &[
                    "SLURM_CONF=/tmp/slurm-dev-spec/slurm.conf",
                    "SLURMRESTD_SECURITY=disable_unshare_files,disable_unshare_sysv",
                    "slurmrestd",
                    "--generate-openapi-spec",
                    "-s",
                    "openapi/slurmctld,openapi/slurmdbd",
                    "-d",
                    &parser,
                ],
            )
            .with_context(|| format!("dumping the {version} spec from Slurm {release}"))?;
            serde_json::from_str::<serde_json::Value>(&spec).with_context(|| {
                format!("slurmrestd {release} printed an invalid {version} spec")
            })?;
            let path: PathBuf = out_dir.join(format!("{version}.json"));
            std::fs::write(&path, spec).with_context(|| format!("writing {}", path.display()))?;
            eprintln!(
                "{}: from Slurm {package} ({})",
                path.display(),
                release.suite()
            );
            sources.insert(
                version.to_string(),
                Source {
                    release: release.name().into(),
                    package: package.clone(),
                    suite: release.suite(),
                },
            );
        }
    }
    let path = out_dir.join("sources.json");
    std::fs::write(&path, serde_json::to_string_pretty(&sources)? + "\n")?;
    Ok(())
}

/// Runs a program in a root with a clean environment (no network namespace needed: nothing listens).
fn in_root(root: &Path, user: Option<&str>, argv: &[&str]) -> Result<String> {
    let mut cmd = Command::new("chroot");
    if let Some(user) = user {
        cmd.arg(format!("--userspec={user}:{user}"));
    }
    let out = cmd
        .arg(root)
        .args(["/usr/bin/env", "-i", "PATH=/usr/sbin:/usr/bin:/sbin:/bin"])
        .args(argv)
        .env_clear()
        .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
        .output()
        .with_context(|| format!("running {} in {}", argv.join(" "), root.display()))?;
    if !out.status.success() {
        bail!(
            "`{}` failed ({}): {}",
            argv.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    String::from_utf8(out.stdout).context("output is not UTF-8")
}
