//! What the kubelet asks for, and how it becomes a `podman run` command line.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use anyhow::{Result, bail};

/// Label on every container the ground creates; its value is the ground's owner name, so that two
/// grounds (the real one and the tests') never list or clean up each other's containers.
pub const LABEL_OWNER: &str = "io.slurm-dev.kube-ground";
pub const LABEL_POD_UID: &str = "io.kubernetes.pod.uid";
pub const LABEL_POD_NAME: &str = "io.kubernetes.pod.name";
pub const LABEL_POD_NAMESPACE: &str = "io.kubernetes.pod.namespace";
pub const LABEL_CONTAINER_NAME: &str = "io.kubernetes.container.name";
pub const LABEL_ATTEMPT: &str = "io.kubernetes.container.attempt";

/// The pod a container belongs to.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PodRef {
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

impl std::fmt::Display for PodRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "pod {}/{} ({})", self.namespace, self.name, self.uid)
    }
}

/// One run of one container of a pod: `attempt` counts restarts, as the kubelet's restartCount.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ContainerRef {
    pub pod: PodRef,
    pub container: String,
    pub attempt: u32,
}

impl ContainerRef {
    /// The podman container name, as dockershim named them: unique per pod, container and attempt.
    pub fn podman_name(&self) -> String {
        format!(
            "k8s_{}_{}_{}_{}_{}",
            self.container, self.pod.name, self.pod.namespace, self.pod.uid, self.attempt
        )
    }

    /// `<log_root>/<namespace>_<pod>_<uid>/<container>/<attempt>.log`, the kubelet's layout under
    /// `/var/log/pods`.
    pub fn log_path(&self, log_root: &Path) -> PathBuf {
        pod_log_dir(log_root, &self.pod)
            .join(&self.container)
            .join(format!("{}.log", self.attempt))
    }
}

impl std::fmt::Display for ContainerRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "container {:?} (attempt {}) of {}",
            self.container, self.attempt, self.pod
        )
    }
}

pub fn pod_log_dir(log_root: &Path, pod: &PodRef) -> PathBuf {
    log_root.join(format!("{}_{}_{}", pod.namespace, pod.name, pod.uid))
}

/// A host path bind-mounted into the container.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mount {
    pub host_path: PathBuf,
    pub container_path: String,
    pub read_only: bool,
}

/// Everything the runtime needs to start one container. `command` and `args` follow Kubernetes:
/// `command` replaces the image's ENTRYPOINT (and then the image's CMD is not used), `args`
/// replaces CMD; an absent or empty list keeps the image's.
#[derive(Clone, Debug, Default)]
pub struct ContainerSpec {
    pub image: String,
    pub command: Vec<String>,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    pub working_dir: Option<String>,
    /// runAsUser; without it the image's user.
    pub user: Option<u32>,
    /// runAsGroup; without it the user's primary group from the image.
    pub group: Option<u32>,
    /// fsGroup and supplementalGroups.
    pub supplemental_groups: Vec<u32>,
    pub hostname: Option<String>,
    pub mounts: Vec<Mount>,
    /// The pod sandbox's network namespace (`/run/netns/…`); without it the container has only `lo`.
    pub netns: Option<PathBuf>,
    /// Mounted read-only at `/etc/hosts`; without it the image's own file.
    pub hosts_file: Option<PathBuf>,
    /// Mounted read-only at `/etc/resolv.conf`; without it the image's own file.
    pub resolv_conf: Option<PathBuf>,
    pub privileged: bool,
    /// Capabilities on top of (`cap_add`) or taken from (`cap_drop`) the default set, named as in
    /// Kubernetes (`NET_ADMIN`, or `ALL` to drop all).
    pub cap_add: Vec<String>,
    pub cap_drop: Vec<String>,
    pub read_only_root_fs: bool,
    /// More labels on top of the ground's own.
    pub labels: BTreeMap<String, String>,
}

/// The `podman run` arguments for `spec` (after `podman`). `user` is the `--user` value, resolved by
/// the caller when only a group is given.
pub fn run_args(
    owner: &str,
    id: &ContainerRef,
    spec: &ContainerSpec,
    log_path: &Path,
    user: Option<String>,
) -> Result<Vec<OsString>> {
    let mut a: Vec<OsString> = Vec::new();
    let mut push = |s: String| a.push(s.into());
    for arg in [
        "run",
        "--detach",
        "--pull=never",
        "--systemd=false",
        "--log-driver=k8s-file",
    ] {
        push(arg.to_owned());
    }
    push(format!("--name={}", id.podman_name()));
    push(format!("--log-opt=path={}", path_str(log_path)?));
    let labels = [
        (LABEL_OWNER, owner.to_owned()),
        (LABEL_POD_UID, id.pod.uid.clone()),
        (LABEL_POD_NAME, id.pod.name.clone()),
        (LABEL_POD_NAMESPACE, id.pod.namespace.clone()),
        (LABEL_CONTAINER_NAME, id.container.clone()),
        (LABEL_ATTEMPT, id.attempt.to_string()),
    ];
    for (k, v) in labels
        .iter()
        .map(|(k, v)| (*k, v.as_str()))
        .chain(spec.labels.iter().map(|(k, v)| (k.as_str(), v.as_str())))
    {
        push(format!("--label={k}={v}"));
    }
    match &spec.netns {
        Some(ns) => push(format!("--network=ns:{}", path_str(ns)?)),
        None => push("--network=none".to_owned()),
    }
    if let Some(h) = &spec.hostname {
        push(format!("--hostname={h}"));
    }
    if let Some(hosts) = &spec.hosts_file {
        push("--no-hosts".to_owned());
        push(bind(hosts, "/etc/hosts", true)?);
    }
    if let Some(resolv) = &spec.resolv_conf {
        push(bind(resolv, "/etc/resolv.conf", true)?);
    }
    for m in &spec.mounts {
        push(bind(&m.host_path, &m.container_path, m.read_only)?);
    }
    for (k, v) in &spec.env {
        if k.is_empty() || k.contains('=') {
            bail!("{id}: invalid environment variable name {k:?}");
        }
        push(format!("--env={k}={v}"));
    }
    if let Some(dir) = &spec.working_dir {
        push(format!("--workdir={dir}"));
    }
    if let Some(user) = user {
        push(format!("--user={user}"));
    }
    for g in &spec.supplemental_groups {
        push(format!("--group-add={g}"));
    }
    if spec.privileged {
        push("--privileged".to_owned());
    }
    for cap in &spec.cap_drop {
        push(format!("--cap-drop={cap}"));
    }
    for cap in &spec.cap_add {
        push(format!("--cap-add={cap}"));
    }
    if spec.read_only_root_fs {
        push("--read-only".to_owned());
    }
    if !spec.command.is_empty() {
        // The JSON form is podman's way to give an entrypoint of several words; it also drops the
        // image's CMD, as Kubernetes does when `command` is set.
        push(format!(
            "--entrypoint={}",
            serde_json::to_string(&spec.command)?
        ));
    }
    // Everything after the image is the CMD, even words that look like flags.
    push(spec.image.clone());
    a.extend(spec.args.iter().map(OsString::from));
    Ok(a)
}

/// The `--user` value: runAsUser and runAsGroup, or the image's user with runAsGroup.
pub fn user_arg(spec: &ContainerSpec, image_user: impl FnOnce() -> String) -> Option<String> {
    match (spec.user, spec.group) {
        (Some(u), Some(g)) => Some(format!("{u}:{g}")),
        (Some(u), None) => Some(u.to_string()),
        (None, Some(g)) => {
            let image_user = image_user();
            let user = image_user.split(':').next().unwrap_or("");
            Some(format!("{}:{g}", if user.is_empty() { "0" } else { user }))
        }
        (None, None) => None,
    }
}

fn bind(host: &Path, container: &str, read_only: bool) -> Result<String> {
    let host = path_str(host)?;
    // `--mount` splits on commas and has no escape for them.
    if host.contains(',') || container.contains(',') {
        bail!("cannot bind-mount {host:?} at {container:?}: podman's --mount takes no commas");
    }
    let ro = if read_only { ",readonly" } else { "" };
    Ok(format!(
        "--mount=type=bind,source={host},destination={container}{ro}"
    ))
}

fn path_str(p: &Path) -> Result<&str> {
    match p.to_str() {
        Some(s) => Ok(s),
        None => bail!("path {} is not UTF-8", p.display()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id() -> ContainerRef {
        ContainerRef {
            pod: PodRef {
                namespace: "default".into(),
                name: "web".into(),
                uid: "u1".into(),
            },
            container: "main".into(),
            attempt: 2,
        }
    }

    fn args(spec: &ContainerSpec) -> Vec<String> {
        run_args("o", &id(), spec, Path::new("/l/0.log"), None)
            .unwrap()
            .into_iter()
            .map(|s| s.into_string().unwrap())
            .collect()
    }

    #[test]
    fn names_and_log_paths_follow_the_kubelet() {
        assert_eq!(id().podman_name(), "k8s_main_web_default_u1_2");
        assert_eq!(
            id().log_path(Path::new("/var/log/pods")),
            Path::new("/var/log/pods/default_web_u1/main/2.log")
        );
    }

    #[test]
    fn command_becomes_the_entrypoint_and_args_the_cmd() {
        let spec = ContainerSpec {
            image: "img".into(),
            command: vec!["/bin/sh".into(), "-c".into()],
            args: vec!["echo \"hi\"".into(), "--flag".into()],
            ..Default::default()
        };
        let a = args(&spec);
        let image = a.iter().position(|s| s == "img").unwrap();
        assert_eq!(a[image - 1], r#"--entrypoint=["/bin/sh","-c"]"#);
        assert_eq!(a[image + 1..], ["echo \"hi\"", "--flag"]);
    }

    #[test]
    fn absent_command_keeps_the_entrypoint() {
        let spec = ContainerSpec {
            image: "img".into(),
            ..Default::default()
        };
        let a = args(&spec);
        assert!(!a.iter().any(|s| s.starts_with("--entrypoint")));
        assert_eq!(a.last().unwrap(), "img");
        assert!(a.contains(&"--network=none".to_owned()));
    }

    #[test]
    fn mounts_env_and_files() {
        let spec = ContainerSpec {
            image: "img".into(),
            env: vec![("A".into(), "x=y z".into())],
            mounts: vec![Mount {
                host_path: "/h/data".into(),
                container_path: "/data".into(),
                read_only: true,
            }],
            hosts_file: Some("/p/hosts".into()),
            netns: Some("/run/netns/kube-1".into()),
            ..Default::default()
        };
        let a = args(&spec);
        for want in [
            "--env=A=x=y z",
            "--mount=type=bind,source=/h/data,destination=/data,readonly",
            "--mount=type=bind,source=/p/hosts,destination=/etc/hosts,readonly",
            "--no-hosts",
            "--network=ns:/run/netns/kube-1",
            "--label=io.slurm-dev.kube-ground=o",
        ] {
            assert!(a.contains(&want.to_owned()), "{want} missing from {a:?}");
        }
    }

    #[test]
    fn users_and_groups() {
        let spec = |user, group| ContainerSpec {
            user,
            group,
            ..Default::default()
        };
        let image = || "401:401".to_owned();
        assert_eq!(user_arg(&spec(Some(1), Some(2)), image).unwrap(), "1:2");
        assert_eq!(user_arg(&spec(Some(1), None), image).unwrap(), "1");
        assert_eq!(user_arg(&spec(None, Some(5)), image).unwrap(), "401:5");
        assert_eq!(user_arg(&spec(None, Some(5)), String::new).unwrap(), "0:5");
        assert_eq!(user_arg(&spec(None, None), image), None);
    }
}
