//! A LoginSet's children: the login Deployment and Service `N` and the `N-ssh-config`
//! ConfigMap. The `N-ssh-host-keys` Secret (generated once, immutable) is not rendered here:
//! it holds freshly generated keys, so the reconciler creates it only when missing.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{
    ConfigMap, Container, ExecAction, PodDNSConfig, PodSpec, Probe, Secret, SecretProjection,
    Service, VolumeProjection,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::ResourceExt;
use serde_json::Value;

use super::common::{
    self, ServiceParts, VOLUME_SLURM_ETC, config_map_items, env, memory_empty_dir, mount,
    pod_template, projected, secret_data_hash, secret_item, service_port, str_vec, sub_path_mount,
    tcp_port,
};
use super::controller::controller_host;
use super::hash::checksum;
use super::labels::{self, Component};
use super::merge::merge_container;
use super::slurm_conf::{
    AUTHORIZED_KEYS, SLURM_ETC_DIR, SSH_PORT, SSHD_CONFIG, authorized_keys, login_sshd_config,
};
use super::workers::search_domain;
use super::{
    LOGIN_IMAGE, RenderError, SIDECAR_IMAGE, child_meta, controller_ref, cr_annotations, cr_labels,
    merge_maps,
};
use crate::crd::{Controller, LoginSet};

const VOLUME_SLURM_CONFIG: &str = "slurm-config";
const VOLUME_SACKD: &str = "sackd-dir";
const VOLUME_HOST_KEYS: &str = "ssh-host-keys";
const VOLUME_SSH_CONFIG: &str = "ssh-config";
const VOLUME_SSSD_CONF: &str = "sssd-conf";
const SLURM_CONFIG_DIR: &str = "/mnt/slurm";
const SLURM_ETC_MOUNT: &str = "/mnt/etc/slurm";
const SACKD_DIR: &str = "/run/slurm";

/// The six host key files in `N-ssh-host-keys`.
pub const HOST_KEY_FILES: [&str; 6] = [
    "ssh_host_rsa_key",
    "ssh_host_rsa_key.pub",
    "ssh_host_ed25519_key",
    "ssh_host_ed25519_key.pub",
    "ssh_host_ecdsa_key",
    "ssh_host_ecdsa_key.pub",
];

/// Copies the Slurm key and config files into the pod's own /etc/slurm owned by `slurm`
/// (projected volumes cannot set file owners).
const INITCONF_SCRIPT: &str = r#"set -eu
src=/mnt/slurm
dst=/mnt/etc/slurm
mkdir -p "$dst"
find "$src" -type f \( -name '*.conf' -o -name '*.key' \) -exec cp -v {} "$dst"/ \;
find "$dst" -type f -exec chown -v "${SLURM_USER_ID:-401}:${SLURM_USER_ID:-401}" {} \;
find "$dst" -type f -name '*.conf' -exec chmod -v 644 {} \;
find "$dst" -type f \( -name '*.key' -o -name 'slurmdbd.conf' \) -exec chmod -v 600 {} \;
ls -lA "$dst"
"#;

/// A LoginSet's desired children.
#[derive(Debug, Clone)]
pub struct LoginSetChildren {
    pub config_map: ConfigMap,
    pub service: Service,
    pub deployment: Deployment,
}

/// `N-ssh-config`.
pub fn ssh_config_name(loginset: &str) -> String {
    format!("{loginset}-ssh-config")
}

/// `N-ssh-host-keys`.
pub fn host_keys_name(loginset: &str) -> String {
    format!("{loginset}-ssh-host-keys")
}

/// All of a LoginSet's rendered children. `secrets` may hold the `N-ssh-host-keys` and
/// `sssdConfRef` Secrets (for the pod-template hashes that roll the pods when they change).
pub fn render(
    loginset: &LoginSet,
    controller: &Controller,
    secrets: &[Secret],
    cluster_domain: &str,
) -> Result<LoginSetChildren, RenderError> {
    let config_map = ssh_config_map(loginset)?;
    Ok(LoginSetChildren {
        deployment: deployment(loginset, controller, secrets, &config_map, cluster_domain)?,
        service: service(loginset)?,
        config_map,
    })
}

fn component_labels(loginset: &LoginSet) -> BTreeMap<String, String> {
    labels::component_labels(Component::Login, &loginset.name_any())
}

/// The ConfigMap `N-ssh-config`: `sshd_config` and root's `authorized_keys`.
pub fn ssh_config_map(loginset: &LoginSet) -> Result<ConfigMap, RenderError> {
    let spec = &loginset.spec;
    Ok(ConfigMap {
        metadata: child_meta(
            ssh_config_name(&loginset.name_any()),
            &loginset.namespace().unwrap_or_default(),
            merge_maps([&cr_labels(&loginset.metadata), &component_labels(loginset)]),
            cr_annotations(&loginset.metadata),
            vec![controller_ref(loginset)?],
        ),
        data: Some(BTreeMap::from([
            (
                AUTHORIZED_KEYS.to_owned(),
                authorized_keys(&spec.root_ssh_authorized_keys),
            ),
            (
                SSHD_CONFIG.to_owned(),
                login_sshd_config(&spec.extra_sshd_config),
            ),
        ])),
        ..Default::default()
    })
}

/// The Service `N` (port `service.port` or 22, named `login`).
pub fn service(loginset: &LoginSet) -> Result<Service, RenderError> {
    let name = loginset.name_any();
    let svc = &loginset.spec.service;
    common::service(ServiceParts {
        name: name.clone(),
        namespace: &loginset.namespace().unwrap_or_default(),
        labels: merge_maps([
            &cr_labels(&loginset.metadata),
            &svc.metadata.labels,
            &component_labels(loginset),
        ]),
        annotations: merge_maps([
            &cr_annotations(&loginset.metadata),
            &svc.metadata.annotations,
        ]),
        user_spec: &svc.spec.0,
        selector: labels::selector_labels(Component::Login, &name),
        port: service_port(Component::Login.app(), svc.port_or(SSH_PORT), svc.node_port),
        headless: false,
        owners: vec![controller_ref(loginset)?],
    })
}

/// The ssh port: a user container port named `login` overrides 22 (e.g. with hostNetwork).
fn ssh_port(loginset: &LoginSet) -> i32 {
    loginset
        .spec
        .login
        .get("ports")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|p| p.get("name").and_then(Value::as_str) == Some(Component::Login.app()))
        .filter_map(|p| p.get("containerPort").and_then(Value::as_i64))
        .rfind(|p| *p != 0)
        .and_then(|p| i32::try_from(p).ok())
        .unwrap_or(SSH_PORT)
}

fn login_container(loginset: &LoginSet, controller: &Controller) -> Result<Container, RenderError> {
    let app = Component::Login.app();
    let host_key_mounts = HOST_KEY_FILES
        .iter()
        .map(|f| sub_path_mount(VOLUME_HOST_KEYS, &format!("/etc/ssh/{f}"), f));
    let mut mounts = vec![
        mount(VOLUME_SLURM_ETC, SLURM_ETC_DIR, true),
        mount(VOLUME_SACKD, SACKD_DIR, false),
    ];
    mounts.extend(host_key_mounts);
    mounts.extend([
        sub_path_mount(VOLUME_SSH_CONFIG, "/etc/ssh/sshd_config", SSHD_CONFIG),
        sub_path_mount(
            VOLUME_SSH_CONFIG,
            "/root/.ssh/authorized_keys",
            AUTHORIZED_KEYS,
        ),
        sub_path_mount(VOLUME_SSSD_CONF, "/etc/sssd/sssd.conf", "sssd.conf"),
    ]);
    let base = Container {
        name: app.to_owned(),
        image: Some(LOGIN_IMAGE.to_owned()),
        env: Some(vec![env(
            "SACKD_OPTIONS",
            format!(
                "--conf-server {}",
                controller_host(controller).conf_server()
            ),
        )]),
        ports: Some(vec![tcp_port(app, ssh_port(loginset))]),
        readiness_probe: Some(Probe {
            exec: Some(ExecAction {
                command: Some(str_vec(["test", "-S", "/run/slurm/sack.socket"])),
            }),
            ..Default::default()
        }),
        volume_mounts: Some(mounts),
        ..Default::default()
    };
    merge_container(base, &loginset.spec.login.0)
}

fn initconf_container(loginset: &LoginSet) -> Result<Container, RenderError> {
    let base = Container {
        name: "initconf".to_owned(),
        image: Some(SIDECAR_IMAGE.to_owned()),
        env: Some(vec![env("SLURM_USER", "slurm")]),
        command: Some(vec!["sh".into(), "-c".into(), INITCONF_SCRIPT.into()]),
        volume_mounts: Some(vec![
            mount(VOLUME_SLURM_ETC, SLURM_ETC_MOUNT, false),
            mount(VOLUME_SLURM_CONFIG, SLURM_CONFIG_DIR, true),
        ]),
        ..Default::default()
    };
    merge_container(base, &loginset.spec.initconf.0)
}

/// The login Deployment `N`. `config_map` is the rendered `N-ssh-config`.
pub fn deployment(
    loginset: &LoginSet,
    controller: &Controller,
    secrets: &[Secret],
    config_map: &ConfigMap,
    cluster_domain: &str,
) -> Result<Deployment, RenderError> {
    let spec = &loginset.spec;
    let name = loginset.name_any();
    let namespace = loginset.namespace().unwrap_or_default();
    let slurm_key = controller.spec.slurm_key_ref.as_ref().ok_or_else(|| {
        RenderError::Invalid(format!(
            "Controller {:?} has no spec.slurmKeyRef for the login pods",
            controller.name_any()
        ))
    })?;
    let sssd = &spec.sssd_conf_ref;
    let labels = merge_maps([
        &cr_labels(&loginset.metadata),
        &spec.template.metadata.labels,
        &component_labels(loginset),
    ]);
    let annotations = merge_maps([
        &cr_annotations(&loginset.metadata),
        &spec.template.metadata.annotations,
    ]);

    let mut pod_annotations = annotations.clone();
    let host_keys = host_keys_name(&name);
    pod_annotations.insert(
        crate::keys::ANNOTATION_SSH_HOST_KEYS_HASH.into(),
        secret_data_hash(secrets, Some(&host_keys)),
    );
    let sshd = config_map
        .data
        .as_ref()
        .and_then(|d| d.get(SSHD_CONFIG))
        .cloned()
        .unwrap_or_default();
    pod_annotations.insert(
        crate::keys::ANNOTATION_SSHD_CONF_HASH.into(),
        checksum(sshd),
    );
    let sssd_value = secrets
        .iter()
        .find(|s| s.metadata.name.as_deref() == Some(&sssd.name))
        .and_then(|s| s.data.as_ref())
        .and_then(|d| d.get(&sssd.key))
        .map(|v| v.0.as_slice())
        .unwrap_or_default();
    pod_annotations.insert(
        crate::keys::ANNOTATION_SSSD_CONF_HASH.into(),
        checksum(sssd_value),
    );
    pod_annotations.insert(
        crate::keys::ANNOTATION_DEFAULT_CONTAINER.into(),
        Component::Login.app().into(),
    );

    let host_key_projection = VolumeProjection {
        secret: Some(SecretProjection {
            name: host_keys,
            items: Some(
                HOST_KEY_FILES
                    .iter()
                    .map(|f| k8s_openapi::api::core::v1::KeyToPath {
                        key: (*f).to_owned(),
                        path: (*f).to_owned(),
                        mode: Some(if f.ends_with(".pub") { 0o644 } else { 0o600 }),
                    })
                    .collect(),
            ),
            ..Default::default()
        }),
        ..Default::default()
    };
    let base = PodSpec {
        automount_service_account_token: Some(false),
        enable_service_links: Some(false),
        containers: vec![login_container(loginset, controller)?],
        init_containers: Some(vec![initconf_container(loginset)?]),
        dns_config: Some(PodDNSConfig {
            searches: Some(vec![search_domain(
                &spec.controller_ref.name,
                &namespace,
                cluster_domain,
            )]),
            ..Default::default()
        }),
        volumes: Some(vec![
            memory_empty_dir(VOLUME_SLURM_ETC),
            memory_empty_dir(VOLUME_SACKD),
            projected(
                VOLUME_SLURM_CONFIG,
                0o600,
                vec![secret_item(
                    &slurm_key.name,
                    &slurm_key.key,
                    "slurm.key",
                    None,
                )],
            ),
            projected(VOLUME_HOST_KEYS, 0o600, vec![host_key_projection]),
            projected(
                VOLUME_SSH_CONFIG,
                0o600,
                vec![config_map_items(
                    &ssh_config_name(&name),
                    &[
                        (SSHD_CONFIG, SSHD_CONFIG, Some(0o600)),
                        (AUTHORIZED_KEYS, AUTHORIZED_KEYS, Some(0o600)),
                    ],
                )],
            ),
            projected(
                VOLUME_SSSD_CONF,
                0o600,
                vec![secret_item(&sssd.name, &sssd.key, "sssd.conf", Some(0o600))],
            ),
        ]),
        ..Default::default()
    };
    let template = pod_template(labels.clone(), pod_annotations, base, &spec.template.spec.0)?;
    Ok(Deployment {
        metadata: child_meta(
            name.clone(),
            &namespace,
            labels,
            annotations,
            vec![controller_ref(loginset)?],
        ),
        spec: Some(DeploymentSpec {
            replicas: Some(spec.replicas()),
            revision_history_limit: Some(0),
            strategy: spec.strategy.clone(),
            selector: LabelSelector {
                match_labels: Some(labels::selector_labels(Component::Login, &name)),
                ..Default::default()
            },
            template,
            ..Default::default()
        }),
        status: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::test_support::with_meta;
    use serde_json::json;

    #[test]
    fn login_children() {
        let ctrl: Controller = with_meta(
            "slurm",
            json!({"slurmKeyRef": {"name": "auth-slurm", "key": "slurm.key"}, "jwtKeyRef": {"name": "j", "key": "k"}}),
        );
        let ls: LoginSet = with_meta(
            "slurm-login-main",
            json!({
                "controllerRef": {"name": "slurm"},
                "sssdConfRef": {"name": "sssd", "key": "sssd.conf"},
                "rootSshAuthorizedKeys": "ssh-ed25519 AAAA me",
                "login": {"image": "login:1", "ports": [{"name": "login", "containerPort": 2222}]},
                "service": {"spec": {"type": "LoadBalancer"}},
            }),
        );
        let c = render(&ls, &ctrl, &[], "cluster.local").unwrap();
        let data = c.config_map.data.as_ref().unwrap();
        assert_eq!(
            data["authorized_keys"],
            "#\n### SLINKY ###\nssh-ed25519 AAAA me\n"
        );
        assert!(data["sshd_config"].contains("X11Forwarding yes"));

        assert_eq!(c.service.metadata.name.as_deref(), Some("slurm-login-main"));
        let svc = c.service.spec.unwrap();
        assert_eq!(svc.type_.as_deref(), Some("LoadBalancer"));
        assert_eq!(svc.ports.unwrap()[0].port, 22);

        let dep = c.deployment.spec.unwrap();
        let pod = dep.template.spec.unwrap();
        let login = &pod.containers[0];
        assert_eq!(login.image.as_deref(), Some("login:1"));
        let ports = login.ports.as_ref().unwrap();
        assert_eq!((ports.len(), ports[0].container_port), (1, 2222));
        assert_eq!(
            login.env.as_ref().unwrap()[0].value.as_deref(),
            Some("--conf-server slurm-controller.slurm:6817")
        );
        assert_eq!(pod.init_containers.unwrap()[0].name, "initconf");
        assert_eq!(
            pod.dns_config.unwrap().searches.unwrap(),
            ["slurm-workers-slurm.slurm.svc.cluster.local"]
        );
        let ann = dep.template.metadata.unwrap().annotations.unwrap();
        assert!(ann.contains_key("slinky.slurm.net/ssh-host-keys-hash"));
        assert_eq!(ann["kubectl.kubernetes.io/default-container"], "login");
    }
}
