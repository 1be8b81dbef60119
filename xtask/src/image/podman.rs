//! Podman as this machine runs it: runc and cgroupfs (crun fails on its hybrid cgroup layout), no default
//! ulimits (setting them fails with EPERM here), and a private storage so nothing else's images are touched.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

pub struct Podman {
    dir: PathBuf,
}

impl Podman {
    pub fn new(dir: &Path) -> Result<Podman> {
        std::fs::create_dir_all(dir)?;
        std::fs::write(
            dir.join("containers.conf"),
            "[containers]\ndefault_ulimits = []\n\n[engine]\nruntime = \"runc\"\ncgroup_manager = \"cgroupfs\"\nevents_logger = \"file\"\n",
        )?;
        Ok(Podman {
            dir: dir.to_owned(),
        })
    }

    pub fn command(&self) -> Command {
        let mut cmd = Command::new("podman");
        cmd.env("CONTAINERS_CONF", self.dir.join("containers.conf"))
            .arg("--root")
            .arg(self.dir.join("storage"))
            .arg("--runroot")
            .arg(self.dir.join("run"))
            .args(["--runtime", "runc", "--cgroup-manager", "cgroupfs"]);
        cmd
    }

    /// Runs podman with `args`; fails with its output when it fails.
    pub fn run(&self, args: &[&str]) -> Result<String> {
        let out = self
            .command()
            .args(args)
            .output()
            .context("starting podman (apt-get install podman runc)")?;
        if !out.status.success() {
            bail!(
                "podman {} failed ({}): {}{}",
                args.join(" "),
                out.status,
                String::from_utf8_lossy(&out.stderr).trim(),
                String::from_utf8_lossy(&out.stdout).trim()
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Like `run`, but a failure is a value (for polling).
    pub fn try_run(&self, args: &[&str]) -> Option<String> {
        let out = self.command().args(args).output().ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Polls `args` every half second until it succeeds and `ok` accepts its output.
    pub fn wait_for(
        &self,
        what: &str,
        secs: u64,
        args: &[&str],
        ok: impl Fn(&str) -> bool,
    ) -> Result<String> {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
        let mut last = String::new();
        while std::time::Instant::now() < deadline {
            let out = self.command().args(args).output()?;
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            if out.status.success() && ok(&text) {
                return Ok(text);
            }
            last = format!("{text}{}", String::from_utf8_lossy(&out.stderr));
            std::thread::sleep(std::time::Duration::from_millis(500));
        }
        bail!(
            "timed out after {secs} s waiting for {what} (podman {}): {}",
            args.join(" "),
            last.trim()
        )
    }

    pub fn logs(&self, container: &str) -> String {
        self.command()
            .args(["logs", "--tail", "30", container])
            .output()
            .map(|o| {
                format!(
                    "{}{}",
                    String::from_utf8_lossy(&o.stdout),
                    String::from_utf8_lossy(&o.stderr)
                )
            })
            .unwrap_or_default()
    }
}
