//! The one place that runs `podman`: a private configuration and store for the ground, so nothing
//! reads or changes the host's own podman state, and errors that carry podman's stderr.
//!
//! One exception podman 4.3 has no setting for: `load` and `import` record digest hints in
//! `/var/lib/containers/cache/blob-info-cache-v1.boltdb`, a cache shared with the host's podman
//! (hints only; no image or container lands there).

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};

use anyhow::{Context, Result, bail};
use tokio::process::Command;

/// Where the ground's podman keeps its state.
#[derive(Clone, Debug)]
pub struct PodmanDirs {
    /// Persistent: images, container layers, podman's database (`<state_dir>/storage`).
    pub state_dir: PathBuf,
    /// Volatile: run root, locks and exit files. Podman requires this on a tmpfs (`/run`), because
    /// it tells a reboot from a restart by whether this directory was wiped.
    pub run_dir: PathBuf,
}

#[derive(Clone, Debug)]
pub struct Podman {
    containers_conf: PathBuf,
    storage_conf: PathBuf,
}

impl Podman {
    /// Writes the configuration files under `dirs.state_dir` and checks that podman and runc exist.
    pub async fn setup(dirs: &PodmanDirs) -> Result<Self> {
        for dir in [&dirs.state_dir, &dirs.run_dir] {
            tokio::fs::create_dir_all(dir)
                .await
                .with_context(|| format!("creating {}", dir.display()))?;
        }
        let containers_conf = dirs.state_dir.join("containers.conf");
        let storage_conf = dirs.state_dir.join("storage.conf");
        write_if_changed(&containers_conf, &containers_conf_text(dirs)).await?;
        write_if_changed(&storage_conf, &storage_conf_text(dirs)).await?;
        let podman = Self {
            containers_conf,
            storage_conf,
        };
        for tool in ["podman", "runc", "conmon"] {
            if which(tool).is_none() {
                bail!(
                    "`{tool}` is not installed; the test ground runs containers with podman and runc \
                     (apt-get install -y podman runc)"
                );
            }
        }
        Ok(podman)
    }

    /// A `podman` command with the ground's configuration.
    pub fn command(&self) -> Command {
        let mut cmd = Command::new("podman");
        cmd.env("CONTAINERS_CONF", &self.containers_conf)
            .env("CONTAINERS_STORAGE_CONF", &self.storage_conf)
            // Settings of a host-wide podman that must not leak into the ground's.
            .env_remove("CONTAINER_HOST")
            .env_remove("CONTAINER_CONNECTION")
            .env_remove("CONTAINERS_REGISTRIES_CONF")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        cmd
    }

    /// Runs podman with `args` and returns its output whatever its exit status.
    pub async fn output<I, S>(&self, args: I) -> Result<(String, Output)>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut cmd = self.command();
        cmd.args(args);
        let line = command_line(&cmd);
        let out = cmd
            .output()
            .await
            .with_context(|| format!("starting `{line}`"))?;
        Ok((line, out))
    }

    /// Runs podman with `args`; fails with `what`, the command line and podman's stderr unless it
    /// exits 0. Returns stdout.
    pub async fn run<I, S>(&self, what: &str, args: I) -> Result<String>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let (line, out) = self.output(args).await?;
        if !out.status.success() {
            bail!("{what}: {}", failure(&line, &out));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }
}

/// `` `podman …` exited with 125: <stderr> `` for error messages.
pub fn failure(line: &str, out: &Output) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr);
    let code = out
        .status
        .code()
        .map_or_else(|| "a signal".to_owned(), |c| c.to_string());
    format!("`{line}` exited with {code}: {}", stderr.trim())
}

/// The command line for error messages, without environment values: they may come from Secrets.
fn command_line(cmd: &Command) -> String {
    let std = cmd.as_std();
    std::iter::once(std.get_program())
        .chain(std.get_args())
        .map(|a| {
            let a = a.to_string_lossy();
            match a.strip_prefix("--env=").and_then(|kv| kv.split_once('=')) {
                Some((k, _)) => format!("--env={k}=…"),
                None => a.into_owned(),
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Replaces the file by a rename, so a podman started meanwhile never reads half of it.
async fn write_if_changed(path: &Path, text: &str) -> Result<()> {
    if tokio::fs::read_to_string(path).await.ok().as_deref() == Some(text) {
        return Ok(());
    }
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = path.with_extension(format!("tmp.{}.{n}", std::process::id()));
    tokio::fs::write(&tmp, text)
        .await
        .with_context(|| format!("writing {}", tmp.display()))?;
    tokio::fs::rename(&tmp, path)
        .await
        .with_context(|| format!("renaming {} to {}", tmp.display(), path.display()))
}

fn which(tool: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_else(|| vec!["/usr/bin".into(), "/usr/sbin".into()])
        .into_iter()
        .map(|d| d.join(tool))
        .find(|p| p.is_file())
        .or_else(|| {
            // conmon lives outside PATH on some systems.
            let lib = Path::new("/usr/libexec/podman").join(tool);
            lib.is_file().then_some(lib)
        })
}

// conmon runs `podman container cleanup` when a container exits, passing the store paths on the
// command line but not the environment: so everything that command needs (the database under the
// graph root, tmp_dir, events under tmp_dir) stays at what the flags and defaults derive, not at
// custom paths only this file knows. Otherwise containers stay "stopped" and `podman wait` hangs.
fn containers_conf_text(dirs: &PodmanDirs) -> String {
    let run = dirs.run_dir.display();
    let state = dirs.state_dir.display();
    format!(
        r#"# Written by kube-ground: the test ground's private podman configuration.
[containers]
# The default nofile/nproc ulimits fail with EPERM on this kind of machine.
default_ulimits = []
log_driver = "k8s-file"
# What containerd and Docker grant by default, so that images behave as on a real cluster (podman's
# own default lacks NET_RAW, MKNOD and AUDIT_WRITE).
default_capabilities = [
  "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "SETGID", "SETUID", "SETPCAP",
  "NET_BIND_SERVICE", "NET_RAW", "SYS_CHROOT", "MKNOD", "AUDIT_WRITE", "SETFCAP",
]

[engine]
# crun fails on the hybrid cgroup v1/v2 layout; runc works.
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
tmp_dir = "{run}/libpod"
volume_path = "{state}/volumes"

[network]
network_config_dir = "{state}/networks"
"#
    )
}

fn storage_conf_text(dirs: &PodmanDirs) -> String {
    let run = dirs.run_dir.display();
    let state = dirs.state_dir.display();
    format!(
        r#"# Written by kube-ground: the test ground's private container storage.
[storage]
driver = "overlay"
graphroot = "{state}/storage"
runroot = "{run}/storage"
"#
    )
}
