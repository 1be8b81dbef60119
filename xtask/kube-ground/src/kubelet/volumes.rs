//! A pod's volumes made into host directories the runtime bind-mounts: configMap, secret,
//! projected, downwardAPI and emptyDir under the pod's own directory, hostPath as it is, and a
//! persistentVolumeClaim as one directory per claim that outlives its pods (the test ground's
//! only storage). Files are written when the pod starts; while it runs, [`refresh`] writes the
//! files of its ConfigMaps and Secrets again when those change (the kubelet's watches of them,
//! [`super::sources`], wake the pod's worker), as a kubelet does.

use std::collections::BTreeMap;
use std::os::unix::fs::{PermissionsExt, chown};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use k8s_openapi::api::core::v1::{KeyToPath, Pod, Volume};

use super::env;
use super::refs::{Data, Refs};

/// Where the in-cluster client libraries look for the service account's credentials.
pub const SERVICE_ACCOUNT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// A volume ready to be mounted.
#[derive(Clone, Debug)]
pub struct HostVolume {
    pub path: PathBuf,
    /// configMap, secret, projected and downwardAPI volumes are read-only, as in Kubernetes.
    pub read_only: bool,
}

/// What a pod's volumes need from outside the pod spec.
pub struct Inputs<'a> {
    pub refs: &'a Refs,
    /// The pod's own directory (volumes go under `volumes/`).
    pub pod_dir: &'a Path,
    /// Persistent volume claims live in `<claims_dir>/<namespace>/<claim>-<uid>`.
    pub claims_dir: &'a Path,
    /// The service account token and the cluster CA, for serviceAccountToken projections.
    pub token: &'a str,
    pub ca_crt: &'a [u8],
}

pub fn prepare(pod: &Pod, inputs: &Inputs) -> Result<BTreeMap<String, HostVolume>> {
    let mut out = BTreeMap::new();
    let spec = pod.spec.as_ref().context("pod has no spec")?;
    let fs_group = spec
        .security_context
        .as_ref()
        .and_then(|s| s.fs_group)
        .map(|g| g as u32);
    for v in spec.volumes.iter().flatten() {
        let hv = one(pod, v, inputs).with_context(|| format!("volume {:?}", v.name))?;
        if let Some(gid) = fs_group
            && !is_host_path(v)
        {
            set_group(&hv.path, gid, hv.read_only)
                .with_context(|| format!("volume {:?}: fsGroup {gid}", v.name))?;
        }
        out.insert(v.name.clone(), hv);
    }
    Ok(out)
}

/// The service account volume the ServiceAccount admission plugin would add (the test ground's
/// API server has none): token, ca.crt and namespace.
pub fn service_account(pod: &Pod, inputs: &Inputs) -> Result<HostVolume> {
    let dir = inputs.pod_dir.join("volumes").join("kube-api-access");
    let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
    let mut files: Data = BTreeMap::new();
    files.insert("token".into(), inputs.token.as_bytes().to_vec());
    files.insert("ca.crt".into(), inputs.ca_crt.to_vec());
    files.insert("namespace".into(), ns.as_bytes().to_vec());
    write_files(&dir, &files, None, 0o644)?;
    Ok(HostVolume {
        path: dir,
        read_only: true,
    })
}

fn is_host_path(v: &Volume) -> bool {
    v.host_path.is_some() || v.persistent_volume_claim.is_some()
}

fn one(pod: &Pod, v: &Volume, inputs: &Inputs) -> Result<HostVolume> {
    let dir = inputs.pod_dir.join("volumes").join(&v.name);
    let ro = |path| HostVolume {
        path,
        read_only: true,
    };
    let rw = |path| HostVolume {
        path,
        read_only: false,
    };
    if v.empty_dir.is_some() {
        std::fs::create_dir_all(&dir)?;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777))?;
        return Ok(rw(dir));
    }
    if let Some(cm) = &v.config_map {
        let files = select(
            inputs.refs.config_map_data(&cm.name),
            cm.items.as_deref(),
            cm.optional,
        )
        .with_context(|| format!("configmap {:?}", cm.name))?;
        write_files(
            &dir,
            &files,
            cm.items.as_deref(),
            mode(cm.default_mode, 0o644),
        )?;
        return Ok(ro(dir));
    }
    if let Some(s) = &v.secret {
        let name = s.secret_name.as_deref().unwrap_or_default();
        let files = select(
            inputs.refs.secret_data(name),
            s.items.as_deref(),
            s.optional,
        )
        .with_context(|| format!("secret {name:?}"))?;
        write_files(
            &dir,
            &files,
            s.items.as_deref(),
            mode(s.default_mode, 0o644),
        )?;
        return Ok(ro(dir));
    }
    if let Some(d) = &v.downward_api {
        let files = downward(pod, d.items.as_deref().unwrap_or_default())?;
        write_files(&dir, &files, None, mode(d.default_mode, 0o644))?;
        return Ok(ro(dir));
    }
    if let Some(p) = &v.projected {
        let default = mode(p.default_mode, 0o644);
        std::fs::create_dir_all(&dir)?;
        for source in p.sources.iter().flatten() {
            if let Some(cm) = &source.config_map {
                let files = select(
                    inputs.refs.config_map_data(&cm.name),
                    cm.items.as_deref(),
                    cm.optional,
                )
                .with_context(|| format!("configmap {:?}", cm.name))?;
                write_files(&dir, &files, cm.items.as_deref(), default)?;
            }
            if let Some(s) = &source.secret {
                let files = select(
                    inputs.refs.secret_data(&s.name),
                    s.items.as_deref(),
                    s.optional,
                )
                .with_context(|| format!("secret {:?}", s.name))?;
                write_files(&dir, &files, s.items.as_deref(), default)?;
            }
            if let Some(d) = &source.downward_api {
                let files = downward(pod, d.items.as_deref().unwrap_or_default())?;
                write_files(&dir, &files, None, default)?;
            }
            if let Some(t) = &source.service_account_token {
                let mut files: Data = BTreeMap::new();
                files.insert(t.path.clone(), inputs.token.as_bytes().to_vec());
                write_files(&dir, &files, None, default)?;
            }
        }
        return Ok(ro(dir));
    }
    if let Some(h) = &v.host_path {
        let path = PathBuf::from(&h.path);
        match h.type_.as_deref().unwrap_or("") {
            "DirectoryOrCreate" => std::fs::create_dir_all(&path)?,
            "FileOrCreate" if !path.exists() => {
                if let Some(parent) = path.parent() {
                    std::fs::create_dir_all(parent)?;
                }
                std::fs::write(&path, b"")?;
            }
            "Directory" if !path.is_dir() => bail!("hostPath {} is not a directory", h.path),
            "File" if !path.is_file() => bail!("hostPath {} is not a file", h.path),
            _ => {}
        }
        return Ok(rw(path));
    }
    if let Some(claim) = &v.persistent_volume_claim {
        let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
        let name = &claim.claim_name;
        // By uid: a claim made again under an old name (a reinstall) starts empty, as a newly
        // provisioned volume does.
        let uid = inputs
            .refs
            .claim_uid(name)
            .with_context(|| format!("claim {name} was not read"))?;
        let path = inputs.claims_dir.join(ns).join(format!("{name}-{uid}"));
        if !path.exists() {
            // A new claim's directory is world-writable, as the local-path provisioner makes
            // it: fsGroup does not apply to such host-directory volumes, and a pod running as
            // a non-root user (slurmctld as 401) must be able to write its state there.
            std::fs::create_dir_all(&path)?;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o777))?;
        }
        return Ok(HostVolume {
            path,
            read_only: claim.read_only == Some(true),
        });
    }
    bail!(
        "unsupported volume type (the test ground has configMap, secret, projected, downwardAPI, emptyDir, hostPath and persistentVolumeClaim)"
    )
}

/// A running pod's configMap and secret volumes, and the ConfigMap and Secret sources of its
/// projected volumes, brought up to date with `inputs.refs`, as a kubelet does after a change:
/// each changed file is replaced by a rename (a reader sees the old file or the new one, never a
/// part), so a container that watches its files sees the change; a subPath mount keeps the file
/// it was given, as in Kubernetes. A ConfigMap or Secret that cannot be read leaves its files as
/// they are, and files of keys that went stay. Returns the volumes that changed.
pub fn refresh(pod: &Pod, inputs: &Inputs) -> Result<Vec<String>> {
    let mut changed = Vec::new();
    let spec = pod.spec.as_ref().context("pod has no spec")?;
    let fs_group = spec
        .security_context
        .as_ref()
        .and_then(|s| s.fs_group)
        .map(|g| g as u32);
    for v in spec.volumes.iter().flatten() {
        let dir = inputs.pod_dir.join("volumes").join(&v.name);
        // Each source's files (None: its object could not be read), items and default mode.
        let mut sources: Vec<Source<'_>> = Vec::new();
        if let Some(cm) = &v.config_map {
            let data = select(
                inputs.refs.config_map_data(&cm.name),
                cm.items.as_deref(),
                cm.optional,
            );
            sources.push((data.ok(), cm.items.as_deref(), mode(cm.default_mode, 0o644)));
        } else if let Some(s) = &v.secret {
            let data = select(
                inputs
                    .refs
                    .secret_data(s.secret_name.as_deref().unwrap_or_default()),
                s.items.as_deref(),
                s.optional,
            );
            sources.push((data.ok(), s.items.as_deref(), mode(s.default_mode, 0o644)));
        } else if let Some(p) = &v.projected {
            let default = mode(p.default_mode, 0o644);
            for source in p.sources.iter().flatten() {
                if let Some(cm) = &source.config_map {
                    let data = select(
                        inputs.refs.config_map_data(&cm.name),
                        cm.items.as_deref(),
                        cm.optional,
                    );
                    sources.push((data.ok(), cm.items.as_deref(), default));
                }
                if let Some(s) = &source.secret {
                    let data = select(
                        inputs.refs.secret_data(&s.name),
                        s.items.as_deref(),
                        s.optional,
                    );
                    sources.push((data.ok(), s.items.as_deref(), default));
                }
            }
        }
        let mut any = false;
        for (data, items, default) in sources {
            if let Some(files) = data {
                any |= replace_changed(&dir, &files, items, default)
                    .with_context(|| format!("volume {:?}", v.name))?;
            }
        }
        if any {
            if let Some(gid) = fs_group {
                set_group(&dir, gid, true)
                    .with_context(|| format!("volume {:?}: fsGroup {gid}", v.name))?;
            }
            changed.push(v.name.clone());
        }
    }
    Ok(changed)
}

/// One source of a volume as [`refresh`] sees it.
type Source<'a> = (Option<Data>, Option<&'a [KeyToPath]>, u32);

/// Whether `pod` has volumes [`refresh`] keeps up to date.
pub fn has_refreshed(pod: &Pod) -> bool {
    pod.spec
        .iter()
        .flat_map(|s| s.volumes.iter().flatten())
        .any(|v| {
            v.config_map.is_some()
                || v.secret.is_some()
                || v.projected.as_ref().is_some_and(|p| {
                    p.sources
                        .iter()
                        .flatten()
                        .any(|s| s.config_map.is_some() || s.secret.is_some())
                })
        })
}

/// [`write_files`] for a volume in use: only the files whose content differs, each written
/// beside its place as `..kg-new-<name>` (a name that tools skipping the kubelet's `..data`
/// entries skip too) and renamed over it. Whether any changed.
fn replace_changed(
    dir: &Path,
    files: &Data,
    items: Option<&[KeyToPath]>,
    default: u32,
) -> Result<bool> {
    let mut changed = false;
    for (rel, content) in files {
        if rel.starts_with('/') || rel.split('/').any(|p| p == "..") {
            bail!("file path {rel:?} must be relative and stay inside the volume");
        }
        let path = dir.join(rel);
        if std::fs::read(&path).is_ok_and(|old| old == *content) {
            continue;
        }
        let parent = path.parent().unwrap_or(dir);
        std::fs::create_dir_all(parent)?;
        let file_name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        let tmp = parent.join(format!("..kg-new-{file_name}"));
        std::fs::write(&tmp, content).with_context(|| format!("writing {}", tmp.display()))?;
        let m = items
            .and_then(|items| items.iter().find(|i| i.path == *rel))
            .and_then(|i| i.mode)
            .map(|m| m as u32 & 0o7777)
            .unwrap_or(default);
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(m))?;
        std::fs::rename(&tmp, &path).with_context(|| format!("replacing {}", path.display()))?;
        changed = true;
    }
    Ok(changed)
}

fn mode(m: Option<i32>, default: u32) -> u32 {
    m.map(|m| m as u32 & 0o7777).unwrap_or(default)
}

/// The files of a ConfigMap or Secret volume: every key, or the listed `items`.
fn select(
    data: Option<&Data>,
    items: Option<&[KeyToPath]>,
    optional: Option<bool>,
) -> Result<Data> {
    let Some(data) = data else {
        if optional == Some(true) {
            return Ok(Data::new());
        }
        bail!("not found");
    };
    let Some(items) = items else {
        return Ok(data.clone());
    };
    let mut out = Data::new();
    for item in items {
        match data.get(&item.key) {
            Some(v) => {
                out.insert(item.path.clone(), v.clone());
            }
            None if optional == Some(true) => {}
            None => bail!("has no key {:?}", item.key),
        }
    }
    Ok(out)
}

fn downward(
    pod: &Pod,
    items: &[k8s_openapi::api::core::v1::DownwardAPIVolumeFile],
) -> Result<Data> {
    let mut out = Data::new();
    for item in items {
        let value = if let Some(f) = &item.field_ref {
            env::field_path(pod, &f.field_path)?
        } else if let Some(r) = &item.resource_field_ref {
            let spec = pod.spec.as_ref().context("pod has no spec")?;
            let name = r.container_name.as_deref().unwrap_or_default();
            let c = spec
                .containers
                .iter()
                .find(|c| c.name == name)
                .with_context(|| format!("resourceFieldRef: no container {name:?}"))?;
            super::resources::field(c, &r.resource, r.divisor.as_ref())?
        } else {
            continue;
        };
        out.insert(item.path.clone(), value.into_bytes());
    }
    Ok(out)
}

/// Writes `files` (paths relative to `dir`, which may name subdirectories) with their modes.
fn write_files(dir: &Path, files: &Data, items: Option<&[KeyToPath]>, default: u32) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    for (rel, content) in files {
        if rel.starts_with('/') || rel.split('/').any(|p| p == "..") {
            bail!("file path {rel:?} must be relative and stay inside the volume");
        }
        let path = dir.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&path, content).with_context(|| format!("writing {}", path.display()))?;
        let m = items
            .and_then(|items| items.iter().find(|i| i.path == *rel))
            .and_then(|i| i.mode)
            .map(|m| m as u32 & 0o7777)
            .unwrap_or(default);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(m))?;
    }
    Ok(())
}

/// fsGroup, as the kubelet applies it: the volume's files belong to the group, which may read
/// them (and write them in a writable volume).
fn set_group(dir: &Path, gid: u32, read_only: bool) -> Result<()> {
    let add = if read_only { 0o440 } else { 0o660 };
    let mut stack = vec![dir.to_path_buf()];
    while let Some(path) = stack.pop() {
        let meta = std::fs::symlink_metadata(&path)?;
        if meta.file_type().is_symlink() {
            continue;
        }
        chown(&path, None, Some(gid))?;
        let mut m = meta.permissions().mode() | add;
        if meta.is_dir() {
            m |= 0o2000 | 0o110;
            for entry in std::fs::read_dir(&path)? {
                stack.push(entry?.path());
            }
        }
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(m & 0o7777))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_map_items_and_modes() {
        let tmp = std::env::temp_dir().join(format!("kg-vol-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&tmp);
        let mut data = Data::new();
        data.insert("slurm.conf".into(), b"ClusterName=x\n".to_vec());
        data.insert("other".into(), b"y".to_vec());
        let refs = Refs::with(&[("cfg", data.clone())], &[("key", data)]);
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "ns"},
            "spec": {"containers": [], "volumes": [
                {"name": "conf", "configMap": {"name": "cfg", "items": [{"key": "slurm.conf", "path": "etc/slurm.conf", "mode": 0o600}]}},
                {"name": "key", "secret": {"secretName": "key", "defaultMode": 0o400}},
                {"name": "gone", "secret": {"secretName": "absent", "optional": true}},
                {"name": "scratch", "emptyDir": {}},
            ]}
        }))
        .unwrap();
        let inputs = Inputs {
            refs: &refs,
            pod_dir: &tmp,
            claims_dir: &tmp.join("claims"),
            token: "t",
            ca_crt: b"ca",
        };
        let vols = prepare(&pod, &inputs).unwrap();
        let conf = vols["conf"].path.join("etc/slurm.conf");
        assert_eq!(std::fs::read(&conf).unwrap(), b"ClusterName=x\n");
        assert_eq!(
            std::fs::metadata(&conf).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert!(!vols["conf"].path.join("other").exists());
        let key = vols["key"].path.join("other");
        assert_eq!(
            std::fs::metadata(&key).unwrap().permissions().mode() & 0o777,
            0o400
        );
        assert!(vols["key"].read_only && !vols["scratch"].read_only);

        let missing: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "ns"},
            "spec": {"containers": [], "volumes": [{"name": "v", "secret": {"secretName": "absent"}}]}
        }))
        .unwrap();
        let err = format!("{:#}", prepare(&missing, &inputs).unwrap_err());
        assert!(err.contains("\"v\"") && err.contains("absent"), "{err}");
        std::fs::remove_dir_all(&tmp).unwrap();
    }

    #[test]
    fn refresh_replaces_changed_files_only() {
        use std::os::unix::fs::MetadataExt;
        let tmp = std::env::temp_dir().join(format!("kg-refresh-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&tmp);
        let data = |conf: &str| {
            let mut d = Data::new();
            d.insert("slurm.conf".into(), conf.as_bytes().to_vec());
            d.insert("cgroup.conf".into(), b"CgroupPlugin=disabled\n".to_vec());
            d
        };
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "ns"},
            "spec": {"containers": [], "volumes": [
                {"name": "etc", "projected": {"defaultMode": 0o640, "sources": [
                    {"configMap": {"name": "cfg"}},
                    {"secret": {"name": "key", "items": [{"key": "slurm.key", "path": "slurm.key"}]}},
                ]}},
                {"name": "plain", "configMap": {"name": "cfg"}},
                {"name": "scratch", "emptyDir": {}},
            ]}
        }))
        .unwrap();
        assert!(has_refreshed(&pod));
        let key = |k: &str| Data::from([("slurm.key".to_string(), k.as_bytes().to_vec())]);
        let claims = tmp.join("claims");
        let inputs = |refs| Inputs {
            refs,
            pod_dir: &tmp,
            claims_dir: &claims,
            token: "t",
            ca_crt: b"ca",
        };
        let refs = Refs::with(&[("cfg", data("A=1\n"))], &[("key", key("k1"))]);
        let vols = prepare(&pod, &inputs(&refs)).unwrap();
        let etc = &vols["etc"].path;
        let ino = |f: &str| std::fs::metadata(etc.join(f)).unwrap().ino();
        let (conf_before, cgroup_before) = (ino("slurm.conf"), ino("cgroup.conf"));

        assert!(refresh(&pod, &inputs(&refs)).unwrap().is_empty());
        let refs = Refs::with(&[("cfg", data("A=2\n"))], &[("key", key("k1"))]);
        assert_eq!(refresh(&pod, &inputs(&refs)).unwrap(), ["etc", "plain"]);
        assert_eq!(std::fs::read(etc.join("slurm.conf")).unwrap(), b"A=2\n");
        assert_ne!(ino("slurm.conf"), conf_before, "replaced by a rename");
        assert_eq!(ino("cgroup.conf"), cgroup_before, "an unchanged file stays");
        assert_eq!(
            std::fs::metadata(etc.join("slurm.conf"))
                .unwrap()
                .permissions()
                .mode()
                & 0o777,
            0o640
        );
        assert!(
            !std::fs::read_dir(etc)
                .unwrap()
                .any(|e| { e.unwrap().file_name().to_string_lossy().starts_with("..") })
        );

        // A ConfigMap that cannot be read leaves its files; the Secret's change still lands.
        let refs = Refs::with(&[], &[("key", key("k2"))]);
        assert_eq!(refresh(&pod, &inputs(&refs)).unwrap(), ["etc"]);
        assert_eq!(std::fs::read(etc.join("slurm.conf")).unwrap(), b"A=2\n");
        assert_eq!(std::fs::read(etc.join("slurm.key")).unwrap(), b"k2");
        std::fs::remove_dir_all(&tmp).unwrap();
    }

    #[test]
    fn a_claim_made_again_under_its_old_name_starts_empty() {
        let tmp = std::env::temp_dir().join(format!("claims-{}", std::process::id()));
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "ns"},
            "spec": {"containers": [], "volumes": [
                {"name": "state", "persistentVolumeClaim": {"claimName": "statesave"}},
            ]}
        }))
        .unwrap();
        let path = |uid: &str| {
            let refs = Refs::default().with_claim("statesave", uid);
            let inputs = Inputs {
                refs: &refs,
                pod_dir: &tmp,
                claims_dir: &tmp.join("claims"),
                token: "t",
                ca_crt: b"ca",
            };
            prepare(&pod, &inputs).unwrap()["state"].path.clone()
        };
        let first = path("uid-1");
        std::fs::write(first.join("clustername"), "old").unwrap();
        assert_eq!(path("uid-1"), first, "the same claim keeps its data");
        let second = path("uid-2");
        assert_ne!(second, first);
        assert!(!second.join("clustername").exists());
        std::fs::remove_dir_all(&tmp).unwrap();
    }
}
