//! The container runtime under the test kubelet: podman with runc, over a private store, running
//! OCI images that are loaded from archives (never pulled: no registry is reachable).
//!
//! Every container carries the label [`LABEL_OWNER`] with the runtime's owner name and the pod's
//! identity in the `io.kubernetes.*` labels, so a restarted kubelet can [`Runtime::list`] what a
//! crashed one left and remove it.

pub mod log;
mod podman;
pub mod spec;

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde::Deserialize;

pub use podman::PodmanDirs;
use podman::{Podman, failure};
pub use spec::{ContainerRef, ContainerSpec, LABEL_OWNER, Mount, PodRef, pod_log_dir};

#[derive(Clone, Debug)]
pub struct RuntimeConfig {
    pub podman: PodmanDirs,
    /// Root of the container logs, laid out as the kubelet's `/var/log/pods`.
    pub log_root: PathBuf,
    /// The value of [`LABEL_OWNER`] on this runtime's containers.
    pub owner: String,
}

impl RuntimeConfig {
    /// The test ground's runtime: state under `/var/lib/slurm-dev/kube`, volatile state under
    /// `/run/slurm-dev/kube`.
    pub fn ground() -> Self {
        Self::under(
            Path::new("/var/lib/slurm-dev/kube"),
            Path::new("/run/slurm-dev/kube"),
            "slurm-dev-kube",
        )
    }

    /// A runtime with podman's store in `<state_dir>/podman`, logs in `<state_dir>/logs/pods` and
    /// podman's volatile state in `<run_dir>/podman`.
    pub fn under(state_dir: &Path, run_dir: &Path, owner: &str) -> Self {
        Self {
            podman: PodmanDirs {
                state_dir: state_dir.join("podman"),
                run_dir: run_dir.join("podman"),
            },
            log_root: state_dir.join("logs/pods"),
            owner: owner.to_owned(),
        }
    }
}

#[derive(Clone, Debug)]
pub struct Runtime {
    podman: Podman,
    log_root: PathBuf,
    owner: String,
}

/// A started container.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Started {
    pub podman_id: String,
    pub log_path: PathBuf,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// Created but its process not started (or failed to start).
    Created,
    Running,
    Exited,
    /// Paused, being removed and other states the ground does not use.
    Other,
}

impl State {
    fn from_podman(s: &str) -> Self {
        match s {
            "created" | "configured" | "initialized" => State::Created,
            "running" => State::Running,
            // "stopped" is exited before podman's cleanup has run.
            "exited" | "stopped" => State::Exited,
            _ => State::Other,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContainerStatus {
    pub podman_id: String,
    pub state: State,
    /// Meaningful when exited: the process's status, or 128 + signal.
    pub exit_code: i32,
    pub oom_killed: bool,
    /// RFC 3339 with nanoseconds, as podman reports them; `None` before the event.
    pub started_at: Option<String>,
    pub finished_at: Option<String>,
    /// Why the runtime could not start the process, if it could not.
    pub error: String,
}

/// A container of this runtime's owner, from [`Runtime::list`].
#[derive(Clone, Debug)]
pub struct Listed {
    pub podman_id: String,
    pub name: String,
    /// `None` for a container with the owner label but not the pod labels.
    pub id: Option<ContainerRef>,
    pub state: State,
    pub exit_code: i32,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExecOutput {
    pub exit_code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Runtime {
    /// Writes the private podman configuration and checks that podman, runc and conmon exist.
    pub async fn new(config: RuntimeConfig) -> Result<Self> {
        let podman = Podman::setup(&config.podman).await?;
        tokio::fs::create_dir_all(&config.log_root)
            .await
            .with_context(|| format!("creating {}", config.log_root.display()))?;
        Ok(Self {
            podman,
            log_root: config.log_root,
            owner: config.owner,
        })
    }

    pub fn log_root(&self) -> &Path {
        &self.log_root
    }

    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// Loads an image archive (OCI or docker archive) into the store; returns the references the
    /// archive named.
    pub async fn load_image(&self, archive: &Path) -> Result<Vec<String>> {
        let out = self
            .podman
            .run(
                &format!("loading image archive {}", archive.display()),
                ["load".as_ref(), "--input".as_ref(), archive.as_os_str()],
            )
            .await?;
        Ok(out
            .lines()
            .filter_map(|l| l.strip_prefix("Loaded image:"))
            .flat_map(|l| l.split(','))
            .map(|r| r.trim().to_owned())
            .filter(|r| !r.is_empty())
            .collect())
    }

    /// Makes an image from a root filesystem tarball, with Dockerfile-style `changes` such as
    /// `ENTRYPOINT ["/bin/sh"]`.
    pub async fn import_rootfs(&self, tar: &Path, reference: &str, changes: &[&str]) -> Result<()> {
        let mut args: Vec<std::ffi::OsString> = vec!["import".into()];
        for c in changes {
            args.push(format!("--change={c}").into());
        }
        args.push(tar.into());
        args.push(reference.into());
        self.podman
            .run(
                &format!("importing {} as image {reference}", tar.display()),
                args,
            )
            .await?;
        Ok(())
    }

    /// Copies image `reference` from an OCI image layout (a directory with `index.json` whose
    /// manifests carry `org.opencontainers.image.ref.name`) into the store under that name.
    pub async fn pull_from_layout(&self, layout: &Path, reference: &str) -> Result<()> {
        // Every copy from a layout is first named after the layout's path: two at once would
        // tag each other's image.
        static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
        let _turn = ONE_AT_A_TIME.lock().await;
        if self.image_exists(reference).await? {
            return Ok(());
        }
        let source = format!("oci:{}:{reference}", layout.display());
        let id = self
            .podman
            .run(
                &format!("copying image {reference} from {}", layout.display()),
                ["pull", "--quiet", source.as_str()],
            )
            .await?;
        let id = id.trim();
        self.tag_image(id, reference).await?;
        // podman names an image pulled from a layout after the layout's path; only `reference` stays.
        let path_name = format!("localhost{}:latest", layout.display());
        let _ = self.podman.output(["untag", id, path_name.as_str()]).await;
        Ok(())
    }

    pub async fn tag_image(&self, image: &str, reference: &str) -> Result<()> {
        self.podman
            .run(
                &format!("tagging image {image} as {reference}"),
                ["tag", image, reference],
            )
            .await?;
        Ok(())
    }

    /// The manifest digest the store recorded for `reference` (`sha256:…`).
    pub async fn image_digest(&self, reference: &str) -> Result<String> {
        let out = self
            .podman
            .run(
                &format!("reading the digest of image {reference}"),
                ["image", "inspect", "--format={{.Digest}}", reference],
            )
            .await?;
        Ok(out.trim().to_owned())
    }

    /// Removes the name `reference` from the store (the image stays while other names hold it).
    pub async fn untag_image(&self, reference: &str) -> Result<()> {
        self.podman
            .run(
                &format!("untagging image {reference}"),
                ["untag", reference, reference],
            )
            .await
            .map(drop)
    }

    pub async fn image_exists(&self, reference: &str) -> Result<bool> {
        let (line, out) = self.podman.output(["image", "exists", reference]).await?;
        match out.status.code() {
            Some(0) => Ok(true),
            Some(1) => Ok(false),
            _ => bail!("checking for image {reference}: {}", failure(&line, &out)),
        }
    }

    async fn image_user(&self, image: &str) -> Result<String> {
        let out = self
            .podman
            .run(
                &format!("reading the user of image {image}"),
                ["image", "inspect", "--format={{.Config.User}}", image],
            )
            .await?;
        Ok(out.trim().to_owned())
    }

    /// Creates and starts a container; its stdout and stderr go to [`ContainerRef::log_path`]. A
    /// container that could not start is removed again, so the same attempt can be retried; starting
    /// an attempt that exists is an error.
    pub async fn start(&self, id: &ContainerRef, spec: &ContainerSpec) -> Result<Started> {
        let log_path = id.log_path(&self.log_root);
        if let Some(dir) = log_path.parent() {
            tokio::fs::create_dir_all(dir)
                .await
                .with_context(|| format!("{id}: creating log directory {}", dir.display()))?;
        }
        let image_user = if spec.user.is_none() && spec.group.is_some() {
            self.image_user(&spec.image)
                .await
                .with_context(|| id.to_string())?
        } else {
            String::new()
        };
        let user = spec::user_arg(spec, || image_user);
        let args = spec::run_args(&self.owner, id, spec, &log_path, user)?;
        let (line, out) = self.podman.output(args).await?;
        if !out.status.success() {
            let err = format!("starting {id}: {}", failure(&line, &out));
            // Not when the name is taken: that container is another start's, maybe running.
            if !String::from_utf8_lossy(&out.stderr).contains("already in use") {
                let _ = self.remove(id).await;
            }
            bail!(err);
        }
        Ok(Started {
            podman_id: String::from_utf8_lossy(&out.stdout).trim().to_owned(),
            log_path,
        })
    }

    /// The container's log so far, whole lines (empty before it started).
    pub async fn logs(&self, id: &ContainerRef) -> Result<Vec<log::LogLine>> {
        log::read(&id.log_path(&self.log_root))
            .await
            .with_context(|| format!("reading the log of {id}"))
    }

    /// Waits until the container's process has exited and returns its exit code (128 + signal
    /// when a signal ended it). Dropping the future stops waiting.
    pub async fn wait(&self, id: &ContainerRef) -> Result<i32> {
        let out = self
            .podman
            .run(&format!("waiting for {id}"), ["wait", &id.podman_name()])
            .await?;
        out.trim()
            .parse()
            .with_context(|| format!("waiting for {id}: podman printed {out:?}"))
    }

    /// The container's state, or `None` when it does not exist.
    pub async fn status(&self, id: &ContainerRef) -> Result<Option<ContainerStatus>> {
        let name = id.podman_name();
        let (line, out) = self
            .podman
            .output(["container", "inspect", "--format=json", &name])
            .await?;
        if !out.status.success() {
            if String::from_utf8_lossy(&out.stderr).contains("no such container") {
                return Ok(None);
            }
            bail!("inspecting {id}: {}", failure(&line, &out));
        }
        let inspected: Vec<Inspect> = serde_json::from_slice(&out.stdout)
            .with_context(|| format!("inspecting {id}: parsing `{line}`"))?;
        let Some(c) = inspected.into_iter().next() else {
            return Ok(None);
        };
        let time = |t: String| (!t.starts_with("0001-")).then_some(t);
        Ok(Some(ContainerStatus {
            podman_id: c.id,
            state: State::from_podman(&c.state.status),
            exit_code: c.state.exit_code,
            oom_killed: c.state.oom_killed,
            started_at: time(c.state.started_at),
            finished_at: time(c.state.finished_at),
            error: c.state.error,
        }))
    }

    /// Sends `signal` (`TERM`, `KILL`, `HUP`, a number…) to the container's first process.
    pub async fn signal(&self, id: &ContainerRef, signal: &str) -> Result<()> {
        self.podman
            .run(
                &format!("sending SIG{signal} to {id}"),
                [
                    "kill".to_owned(),
                    format!("--signal={signal}"),
                    id.podman_name(),
                ],
            )
            .await?;
        Ok(())
    }

    /// SIGTERM, then SIGKILL when the process has not exited after `grace` (whole seconds, rounded
    /// up, as podman counts). Returns when the container has exited; fine if it already had, or
    /// does not exist.
    pub async fn stop(&self, id: &ContainerRef, grace: Duration) -> Result<()> {
        let secs = grace.as_secs() + u64::from(grace.subsec_nanos() > 0);
        self.podman
            .run(
                &format!("stopping {id}"),
                [
                    "stop".to_owned(),
                    "--ignore".to_owned(),
                    format!("--time={secs}"),
                    id.podman_name(),
                ],
            )
            .await?;
        Ok(())
    }

    /// Runs `command` inside the running container, as its user and with its environment. An exit
    /// code of the command, even 126 (not executable) or 127 (not found), is `Ok`; podman's own
    /// failures (125: no such container, not running) are errors.
    pub async fn exec(&self, id: &ContainerRef, command: &[String]) -> Result<ExecOutput> {
        let name = id.podman_name();
        let args = ["exec", name.as_str()]
            .into_iter()
            .chain(command.iter().map(String::as_str));
        let (line, out) = self.podman.output(args).await?;
        match out.status.code() {
            Some(code) if code != 125 => Ok(ExecOutput {
                exit_code: code,
                stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
                stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            }),
            _ => bail!("exec {command:?} in {id}: {}", failure(&line, &out)),
        }
    }

    /// Removes the container, killing it first if it runs; fine if it does not exist. Its log stays.
    pub async fn remove(&self, id: &ContainerRef) -> Result<()> {
        self.remove_names(&id.to_string(), &[id.podman_name()])
            .await
    }

    async fn remove_names(&self, what: &str, names: &[String]) -> Result<()> {
        if names.is_empty() {
            return Ok(());
        }
        let args = ["rm", "--force", "--ignore", "--time=0"]
            .into_iter()
            .chain(names.iter().map(String::as_str));
        self.podman.run(&format!("removing {what}"), args).await?;
        Ok(())
    }

    /// Every container of this runtime's owner, running or not.
    pub async fn list(&self) -> Result<Vec<Listed>> {
        let filter = format!("--filter=label={LABEL_OWNER}={}", self.owner);
        let out = self
            .podman
            .run(
                &format!("listing the containers of {}", self.owner),
                ["ps", "--all", "--format=json", filter.as_str()],
            )
            .await?;
        let listed: Vec<PsEntry> = serde_json::from_str(&out)
            .with_context(|| format!("parsing `podman ps` output {out:?}"))?;
        Ok(listed
            .into_iter()
            .map(|c| Listed {
                id: container_ref(&c.labels),
                name: c.names.into_iter().next().unwrap_or_default(),
                podman_id: c.id,
                state: State::from_podman(&c.state),
                exit_code: c.exit_code,
            })
            .collect())
    }

    /// Removes every container of `pod`; returns how many there were.
    pub async fn remove_pod(&self, pod: &PodRef) -> Result<usize> {
        let names: Vec<String> = self
            .list()
            .await?
            .into_iter()
            .filter(|c| c.id.as_ref().is_some_and(|id| &id.pod == pod))
            .map(|c| c.podman_id)
            .collect();
        self.remove_names(&format!("the containers of {pod}"), &names)
            .await?;
        Ok(names.len())
    }

    /// Removes every container of this runtime's owner (after a crash, or at `down`); returns how
    /// many there were.
    pub async fn remove_all(&self) -> Result<usize> {
        let names: Vec<String> = self
            .list()
            .await?
            .into_iter()
            .map(|c| c.podman_id)
            .collect();
        self.remove_names(&format!("the containers of {}", self.owner), &names)
            .await?;
        Ok(names.len())
    }
}

fn container_ref(labels: &std::collections::BTreeMap<String, String>) -> Option<ContainerRef> {
    let get = |k: &str| labels.get(k).cloned();
    Some(ContainerRef {
        pod: PodRef {
            namespace: get(spec::LABEL_POD_NAMESPACE)?,
            name: get(spec::LABEL_POD_NAME)?,
            uid: get(spec::LABEL_POD_UID)?,
        },
        container: get(spec::LABEL_CONTAINER_NAME)?,
        attempt: get(spec::LABEL_ATTEMPT)?.parse().ok()?,
    })
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Inspect {
    id: String,
    state: InspectState,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct InspectState {
    status: String,
    exit_code: i32,
    #[serde(rename = "OOMKilled", default)]
    oom_killed: bool,
    #[serde(default)]
    started_at: String,
    #[serde(default)]
    finished_at: String,
    #[serde(default)]
    error: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct PsEntry {
    id: String,
    #[serde(default)]
    names: Vec<String>,
    #[serde(default, deserialize_with = "null_as_default")]
    labels: std::collections::BTreeMap<String, String>,
    state: String,
    #[serde(default)]
    exit_code: i32,
}

fn null_as_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}
