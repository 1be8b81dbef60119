//! Processes that run inside the ground's network namespace as if they were in a pod: they reach
//! the API server as the Service `default/kubernetes` (10.96.0.1:443, which netd forwards to the
//! host's 127.0.0.1:6443) and resolve Service and pod names through netd's DNS (10.96.0.10).

use std::ffi::{OsStr, OsString};
use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

use super::Ground;
use super::netns::{self, RESOLV_CONF, inside_server};

pub(super) use super::netns::NETNS_PATH;

/// How long [`InsideProcess::kill`] waits after SIGTERM before SIGKILL.
const GRACE: Duration = Duration::from_secs(10);

impl Ground {
    /// A kubeconfig equal to the ground's but for
    /// [`INSIDE_SERVER`](super::netns::INSIDE_SERVER), beside the ground's (mode 0600: it holds
    /// the admin client key). Written once per test process.
    pub fn inside_kubeconfig(&self) -> PathBuf {
        self.inside_kubeconfig
            .get_or_init(|| {
                let text = std::fs::read_to_string(&self.kubeconfig)
                    .unwrap_or_else(|e| panic!("{}: {e}", self.kubeconfig.display()));
                let text = inside_server(&text).expect("the ground's kubeconfig names no server");
                let path = self.beside_kubeconfig("kubeconfig-inside");
                write_private(&path, &text);
                path
            })
            .clone()
    }

    /// Starts `program` inside the ground's network namespace, with `KUBECONFIG` set to
    /// [`Ground::inside_kubeconfig`], netd's DNS as its resolver (a private bind mount over
    /// /etc/resolv.conf, as `ip netns exec` would do with /etc/netns/), `env` added to the test's
    /// environment, and stdout and stderr appended to a log file under the temp directory. The
    /// process (its whole process group) is killed when the handle drops.
    pub fn spawn_inside(
        &self,
        program: impl AsRef<OsStr>,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> InsideProcess {
        assert!(
            Path::new(NETNS_PATH).exists(),
            "{NETNS_PATH} is missing: start the test ground first: cargo xtask kube up"
        );
        let resolv = self.beside_kubeconfig("resolv.conf-inside");
        if !resolv.exists() {
            write_private(&resolv, RESOLV_CONF);
        }
        let mut process = InsideProcess {
            resolv,
            program: program.as_ref().to_owned(),
            args: args.iter().map(OsString::from).collect(),
            env: env
                .iter()
                .map(|(k, v)| (OsString::from(k), OsString::from(v)))
                .collect(),
            kubeconfig: self.inside_kubeconfig(),
            log: log_path(program.as_ref()),
            child: None,
        };
        process.start();
        process
    }

    fn beside_kubeconfig(&self, name: &str) -> PathBuf {
        self.kubeconfig
            .parent()
            .unwrap_or(Path::new("/tmp"))
            .join(name)
    }
}

fn write_private(path: &Path, text: &str) {
    netns::write_private(path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}

/// `<temp>/ground-inside-<test pid>/<program>-<n>.log`.
fn log_path(program: &OsStr) -> PathBuf {
    static SEQ: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!("ground-inside-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let name = Path::new(program)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "process".into());
    dir.join(format!(
        "{name}-{}.log",
        SEQ.fetch_add(1, Ordering::Relaxed)
    ))
}

/// A process inside the ground (see [`Ground::spawn_inside`]); killed on drop.
pub struct InsideProcess {
    /// The resolv.conf bind-mounted over /etc/resolv.conf inside.
    resolv: PathBuf,
    program: OsString,
    args: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
    kubeconfig: PathBuf,
    log: PathBuf,
    child: Option<Child>,
}

impl InsideProcess {
    fn start(&mut self) {
        assert!(self.child.is_none(), "already running");
        let mut log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap_or_else(|e| panic!("{}: {e}", self.log.display()));
        writeln!(log, "--- started: {:?} {:?}", self.program, self.args).unwrap();
        let child = netns::command(&self.resolv, &self.kubeconfig, &self.program, &self.args)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .process_group(0)
            .spawn()
            .expect("running ip netns exec (iproute2)");
        self.child = Some(child);
    }

    /// The log file (stdout and stderr of every start, appended).
    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// What the process wrote so far, over all its starts.
    pub fn log(&self) -> String {
        std::fs::read(&self.log)
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default()
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Its exit status once it has exited; `None` while it runs (or after [`kill`](Self::kill)).
    pub fn try_status(&mut self) -> Option<ExitStatus> {
        self.child
            .as_mut()?
            .try_wait()
            .expect("waiting for the process")
    }

    /// Waits until it exits; panics with its log after `limit`.
    pub fn wait(&mut self, limit: Duration) -> ExitStatus {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.try_status() {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "still running after {limit:?}; log {}:\n{}",
                self.log.display(),
                self.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits until the log contains `needle`; panics with the log after `limit` or when the
    /// process exits first.
    pub fn wait_for_log(&mut self, needle: &str, limit: Duration) {
        let deadline = Instant::now() + limit;
        loop {
            let log = self.log();
            if log.contains(needle) {
                return;
            }
            if let Some(status) = self.try_status() {
                panic!("exited ({status}) before logging {needle:?}; log:\n{log}");
            }
            assert!(
                Instant::now() < deadline,
                "no {needle:?} in the log after {limit:?}; log {}:\n{log}",
                self.log.display()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// SIGTERM to its process group, SIGKILL after a grace period; returns once it is gone.
    pub fn kill(&mut self) {
        self.stop(Some(Signal::SIGTERM));
    }

    /// SIGKILL to its process group at once, as a crash would end it.
    pub fn kill_now(&mut self) {
        self.stop(None);
    }

    /// [`kill`](Self::kill), then the same command again; the log continues.
    pub fn restart(&mut self) {
        self.kill();
        self.start();
    }

    /// [`kill_now`](Self::kill_now), then the same command again: a crash and a restart.
    pub fn crash_restart(&mut self) {
        self.kill_now();
        self.start();
    }

    fn stop(&mut self, first: Option<Signal>) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let group = Pid::from_raw(child.id() as i32);
        if let Some(signal) = first {
            let _ = killpg(group, signal);
            let deadline = Instant::now() + GRACE;
            // Not reaped until the end: an exited leader stays a zombie, which keeps the group id
            // ours for the SIGKILL below that catches what is left of the group.
            while !exited(child.id()) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        let _ = killpg(group, Signal::SIGKILL);
        let _ = child.wait();
    }
}

/// Whether the process is gone or a zombie.
fn exited(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the command name, which is in parentheses and may contain anything.
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_none_or(|state| state == "Z" || state == "X"),
        Err(_) => true,
    }
}

impl Drop for InsideProcess {
    fn drop(&mut self) {
        self.stop(Some(Signal::SIGTERM));
    }
}

#[cfg(test)]
mod tests {
    use std::process::Command;

    use super::*;

    #[test]
    fn a_missing_process_and_a_zombie_have_exited() {
        assert!(exited(u32::MAX - 1));
        assert!(!exited(std::process::id()));
        let mut child = Command::new("true").spawn().unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        while !exited(child.id()) {
            assert!(Instant::now() < deadline, "`true` never exited");
            std::thread::sleep(Duration::from_millis(10));
        }
        child.wait().unwrap();
    }
}
