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
        let mut cmd = self.command();
        keep_no_inherited_files(&mut cmd);
        let child = cmd
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .process_group(0)
            .spawn()
            .with_context(|| format!("starting {}", self.argv.join(" ")))?;
        Ok(child.id())
    }
}

/// A daemon outlives the command that starts it, so it must not keep the files that command was
/// given: under `flock /tmp/lock cargo xtask kube up`, daemons holding the lock's descriptor kept
/// the lock until the ground was stopped. Descriptors above stderr close at exec (marked
/// close-on-exec rather than closed, so that a failed exec is still reported).
#[allow(unsafe_code)]
pub fn keep_no_inherited_files(cmd: &mut Command) {
    // SAFETY: close_range is async-signal-safe and touches nothing of the parent's memory.
    unsafe {
        cmd.pre_exec(|| {
            let flags = libc::CLOSE_RANGE_CLOEXEC as libc::c_int;
            if libc::close_range(3, libc::c_uint::MAX, flags) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
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

#[cfg(test)]
mod tests {
    use std::os::fd::AsRawFd;

    use super::*;

    #[test]
    fn a_started_daemon_keeps_none_of_the_starters_files() {
        let file = std::fs::File::open("/dev/null").unwrap();
        // dup() leaves close-on-exec off, as flock(1) leaves the lock's descriptor.
        let inherited = nix::unistd::dup(&file).unwrap();
        let sees_it = |keep_none: bool| {
            let mut cmd = Command::new("sh");
            cmd.args([
                "-c",
                &format!("test -e /proc/self/fd/{}", inherited.as_raw_fd()),
            ]);
            if keep_none {
                keep_no_inherited_files(&mut cmd);
            }
            cmd.status().unwrap().success()
        };
        assert!(sees_it(false));
        assert!(!sees_it(true));
    }
}
