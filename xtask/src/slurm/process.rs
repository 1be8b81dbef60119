//! Processes of a cluster: started inside its namespaces and root, found again by PID or by root, stopped.

use std::ffi::OsString;
use std::fs::OpenOptions;
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// Mounts what a daemon needs inside its own mount namespace, then becomes the daemon (exec keeps the PID).
const ENTER: &str = r#"set -e
hostname "$HOST"
mount -t proc proc "$ROOT/proc"
mount -t sysfs sysfs "$ROOT/sys"
mount --rbind /dev "$ROOT/dev"
if [ "$PRIVATE_RUN" = 1 ]; then
  mount -t tmpfs -o mode=755 tmpfs "$ROOT/run"
  mkdir -p "$ROOT/run/slurm"
fi
exec chroot ${USERSPEC:+--userspec=$USERSPEC} "$ROOT" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root "$@"
"#;

/// One program to run inside a cluster's network namespace and root.
pub struct Inside<'a> {
    pub netns: &'a str,
    pub root: &'a Path,
    pub hostname: &'a str,
    /// A tmpfs over /run, for slurmd: several of them would collide on /run/slurm/sack.socket.
    pub private_run: bool,
    pub user: Option<&'a str>,
    /// `NAME=value` pairs and the program with its arguments, as for env(1).
    pub argv: Vec<String>,
}

impl Inside<'_> {
    pub fn command(&self) -> Command {
        let mut cmd = Command::new("ip");
        cmd.args([
            "netns", "exec", self.netns, "unshare", "--mount", "--uts", "sh", "-c", ENTER, "sh",
        ])
        .args(&self.argv)
        // Inherited SLURM_* variables (SLURM_JWT above all) make slurmctld die; daemons get a clean env.
        .env_clear()
        .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
        .env("HOST", self.hostname)
        .env("ROOT", self.root)
        .env("PRIVATE_RUN", if self.private_run { "1" } else { "0" });
        if let Some(user) = self.user {
            cmd.env("USERSPEC", format!("{user}:{user}"));
        }
        cmd
    }

    /// Starts it detached from this process, output appended to `log`; returns its PID.
    pub fn spawn(&self, log: &Path) -> Result<u32> {
        let out = OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .with_context(|| format!("opening {}", log.display()))?;
        let child = self
            .command()
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .process_group(0)
            .spawn()
            .with_context(|| format!("starting {}", self.argv.join(" ")))?;
        Ok(child.id())
    }
}

/// The root directory a process sees, if it still exists.
pub fn root_of(pid: u32) -> Option<PathBuf> {
    std::fs::read_link(format!("/proc/{pid}/root")).ok()
}

pub fn cmdline(pid: u32) -> Vec<OsString> {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|raw| {
            raw.split(|b| *b == 0)
                .filter(|arg| !arg.is_empty())
                .map(|arg| OsString::from(String::from_utf8_lossy(arg).into_owned()))
                .collect()
        })
        .unwrap_or_default()
}

/// Running, not yet a zombie: a daemon re-parented to PID 1 may linger as a zombie for a while.
pub fn is_running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            let after_name = stat.rsplit_once(')')?.1;
            after_name
                .split_whitespace()
                .next()
                .map(|state| state != "Z" && state != "X")
        })
        .unwrap_or(false)
}

/// Every live process whose root is `root` or that lives in the network namespace at `netns`: the
/// daemons, the job steps they started, and any process still on its way into the root.
pub fn in_cluster(root: &Path, netns: &Path) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let ns = std::fs::metadata(netns).ok().map(|m| (m.dev(), m.ino()));
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let in_ns = || {
                std::fs::metadata(format!("/proc/{pid}/ns/net"))
                    .ok()
                    .map(|m| (m.dev(), m.ino()))
                    == ns
            };
            (root_of(*pid).as_deref() == Some(root) || (ns.is_some() && in_ns()))
                && is_running(*pid)
        })
        .collect()
}

/// SIGTERM, a grace period, then SIGKILL for what is left. Returns the PIDs that had to be killed.
pub fn stop(pids: &[u32], grace: Duration) -> Vec<u32> {
    let signal = |pids: &[u32], sig| {
        for pid in pids {
            let _ = kill(Pid::from_raw(*pid as i32), sig);
        }
    };
    signal(pids, Signal::SIGTERM);
    let deadline = Instant::now() + grace;
    loop {
        let left: Vec<u32> = pids.iter().copied().filter(|p| is_running(*p)).collect();
        if left.is_empty() {
            return left;
        }
        if Instant::now() >= deadline {
            signal(&left, Signal::SIGKILL);
            return left;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}
