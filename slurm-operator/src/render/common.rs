//! Building blocks shared by the component builders: sidecars, volumes, pod templates,
//! Services.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    ConfigMapProjection, Container, ContainerPort, EmptyDirVolumeSource, EnvVar, HTTPGetAction,
    KeyToPath, PodSecurityContext, PodSpec, PodTemplateSpec, Probe, ProjectedVolumeSource, Secret,
    SecretProjection, SecurityContext, Service, ServicePort, ServiceSpec as CoreServiceSpec,
    TCPSocketAction, Volume, VolumeMount, VolumeProjection,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::{Map, Value};

use super::hash::checksum_values;
use super::merge::{merge_container, merge_pod_spec, merge_service_spec};
use super::slurm_conf::SLURM_LOG_DIR;
use super::{RenderError, SIDECAR_IMAGE, merge_maps, non_empty};

pub(crate) const VOLUME_SLURM_ETC: &str = "slurm-etc";
pub(crate) const VOLUME_LOGFILE: &str = "slurm-logfile";
pub(crate) const VOLUME_RUN: &str = "run";
pub(crate) const SLURM_UID: i64 = 401;

/// Turns daemon log files into container output: the daemon writes into a FIFO at `$SOCKET`
/// and this loop copies it to stdout (re-opening it when the writer restarts).
const LOGFILE_SCRIPT: &str = r#"set -eu
SOCKET="${SOCKET:-/tmp/logfile.log}"
trap 'exit 0' TERM
trap 'exit 1' INT HUP
mkdir -p "$(dirname "$SOCKET")"
if [ ! -p "$SOCKET" ]; then
	rm -f "$SOCKET"
	mkfifo -m 777 "$SOCKET"
fi
while :; do
	cat "$SOCKET" || true
	sleep 1
done
"#;

pub(crate) fn str_vec<const N: usize>(items: [&str; N]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

pub(crate) fn env(name: &str, value: impl Into<String>) -> EnvVar {
    EnvVar {
        name: name.to_owned(),
        value: Some(value.into()),
        ..Default::default()
    }
}

pub(crate) fn mount(name: &str, path: &str, read_only: bool) -> VolumeMount {
    VolumeMount {
        name: name.to_owned(),
        mount_path: path.to_owned(),
        read_only: read_only.then_some(true),
        ..Default::default()
    }
}

pub(crate) fn sub_path_mount(name: &str, path: &str, sub_path: &str) -> VolumeMount {
    VolumeMount {
        sub_path: Some(sub_path.to_owned()),
        ..mount(name, path, true)
    }
}

pub(crate) fn tcp_port(name: &str, port: i32) -> ContainerPort {
    ContainerPort {
        name: Some(name.to_owned()),
        container_port: port,
        protocol: Some("TCP".to_owned()),
        ..Default::default()
    }
}

/// An HTTP GET probe on the named port; `slow` gives the startup/liveness thresholds
/// (6 failures, every 10 s).
pub(crate) fn http_probe(path: &str, port: &str, slow: bool) -> Probe {
    Probe {
        http_get: Some(HTTPGetAction {
            path: Some(path.to_owned()),
            port: IntOrString::String(port.to_owned()),
            ..Default::default()
        }),
        ..thresholds(slow)
    }
}

pub(crate) fn tcp_probe(port: i32, slow: bool) -> Probe {
    Probe {
        tcp_socket: Some(TCPSocketAction {
            port: IntOrString::Int(port),
            ..Default::default()
        }),
        ..thresholds(slow)
    }
}

fn thresholds(slow: bool) -> Probe {
    if slow {
        Probe {
            failure_threshold: Some(6),
            period_seconds: Some(10),
            ..Default::default()
        }
    } else {
        Probe::default()
    }
}

/// Runs as the `slurm` user (401).
pub(crate) fn slurm_user_container_security() -> SecurityContext {
    SecurityContext {
        run_as_non_root: Some(true),
        run_as_user: Some(SLURM_UID),
        run_as_group: Some(SLURM_UID),
        ..Default::default()
    }
}

pub(crate) fn non_root_pod_security(uid: i64) -> PodSecurityContext {
    PodSecurityContext {
        run_as_non_root: Some(true),
        run_as_user: Some(uid),
        run_as_group: Some(uid),
        fs_group: Some(uid),
        ..Default::default()
    }
}

/// The `logfile` native sidecar (an init container that keeps running) for `log_path`.
pub(crate) fn logfile_container(
    user: &Map<String, Value>,
    log_path: &str,
) -> Result<Container, RenderError> {
    let base = Container {
        name: "logfile".to_owned(),
        image: Some(SIDECAR_IMAGE.to_owned()),
        env: Some(vec![env("SOCKET", log_path)]),
        command: Some(vec!["sh".into(), "-c".into(), LOGFILE_SCRIPT.into()]),
        restart_policy: Some("Always".to_owned()),
        volume_mounts: Some(vec![mount(VOLUME_LOGFILE, SLURM_LOG_DIR, false)]),
        ..Default::default()
    };
    merge_container(base, user)
}

pub(crate) fn memory_empty_dir(name: &str) -> Volume {
    Volume {
        name: name.to_owned(),
        empty_dir: Some(EmptyDirVolumeSource {
            medium: Some("Memory".to_owned()),
            ..Default::default()
        }),
        ..Default::default()
    }
}

pub(crate) fn empty_dir(name: &str) -> Volume {
    Volume {
        name: name.to_owned(),
        empty_dir: Some(EmptyDirVolumeSource::default()),
        ..Default::default()
    }
}

pub(crate) fn projected(name: &str, mode: i32, sources: Vec<VolumeProjection>) -> Volume {
    Volume {
        name: name.to_owned(),
        projected: Some(ProjectedVolumeSource {
            default_mode: Some(mode),
            sources: Some(sources),
        }),
        ..Default::default()
    }
}

fn key_to_path(key: &str, path: &str, mode: Option<i32>) -> KeyToPath {
    KeyToPath {
        key: key.to_owned(),
        path: path.to_owned(),
        mode,
    }
}

/// One key of a Secret, projected as `path`.
pub(crate) fn secret_item(
    secret: &str,
    key: &str,
    path: &str,
    mode: Option<i32>,
) -> VolumeProjection {
    VolumeProjection {
        secret: Some(SecretProjection {
            name: secret.to_owned(),
            items: Some(vec![key_to_path(key, path, mode)]),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Every key of a ConfigMap.
pub(crate) fn config_map_all(name: &str) -> VolumeProjection {
    VolumeProjection {
        config_map: Some(ConfigMapProjection {
            name: name.to_owned(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Selected keys of a ConfigMap, each as `(key, path, mode)`.
pub(crate) fn config_map_items(
    name: &str,
    items: &[(&str, &str, Option<i32>)],
) -> VolumeProjection {
    VolumeProjection {
        config_map: Some(ConfigMapProjection {
            name: name.to_owned(),
            items: Some(
                items
                    .iter()
                    .map(|(k, p, m)| key_to_path(k, p, *m))
                    .collect(),
            ),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// A pod template: `base` with the user's `template.spec` merged over it.
pub(crate) fn pod_template(
    labels: BTreeMap<String, String>,
    annotations: BTreeMap<String, String>,
    base: PodSpec,
    user: &Map<String, Value>,
) -> Result<PodTemplateSpec, RenderError> {
    Ok(PodTemplateSpec {
        metadata: Some(ObjectMeta {
            labels: non_empty(labels),
            annotations: non_empty(annotations),
            ..Default::default()
        }),
        spec: Some(merge_pod_spec(base, user)?),
    })
}

/// What a component Service is made of.
pub(crate) struct ServiceParts<'a> {
    pub name: String,
    pub namespace: &'a str,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    /// The user's `service.spec`, merged over ours.
    pub user_spec: &'a Map<String, Value>,
    pub selector: BTreeMap<String, String>,
    pub port: ServicePort,
    pub headless: bool,
    pub owners: Vec<OwnerReference>,
}

/// A Service with one named TCP port targeting the container port of the same name. Our
/// selector wins over the user's, and `externalIPs` is always cleared (CVE-2020-8554).
pub(crate) fn service(parts: ServiceParts<'_>) -> Result<Service, RenderError> {
    let base = CoreServiceSpec {
        ports: Some(vec![parts.port]),
        ..Default::default()
    };
    let mut spec = merge_service_spec(base, parts.user_spec)?;
    let user_selector = spec.selector.take().unwrap_or_default();
    spec.selector = Some(merge_maps([&user_selector, &parts.selector]));
    spec.external_ips = None;
    if parts.headless {
        spec.cluster_ip = Some("None".to_owned());
        spec.publish_not_ready_addresses = Some(true);
    }
    Ok(Service {
        metadata: super::child_meta(
            parts.name,
            parts.namespace,
            parts.labels,
            parts.annotations,
            parts.owners,
        ),
        spec: Some(spec),
        status: None,
    })
}

/// A TCP service port named after, and targeting, the container port `name`.
pub(crate) fn service_port(name: &str, port: i32, node_port: Option<i32>) -> ServicePort {
    ServicePort {
        name: Some(name.to_owned()),
        protocol: Some("TCP".to_owned()),
        port,
        target_port: Some(IntOrString::String(name.to_owned())),
        node_port: node_port.filter(|p| *p != 0),
        ..Default::default()
    }
}

/// Slinky's key hash: all data values of the Secret called `name` (in key order), hashed;
/// `""` when the Secret was not fetched.
pub(crate) fn secret_data_hash(secrets: &[Secret], name: Option<&str>) -> String {
    let data = name.and_then(|n| {
        secrets
            .iter()
            .find(|s| s.metadata.name.as_deref() == Some(n))
            .and_then(|s| s.data.as_ref())
    });
    checksum_values(data.into_iter().flat_map(|d| d.values().map(|v| &v.0)))
}
