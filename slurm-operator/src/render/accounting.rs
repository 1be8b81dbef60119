//! An Accounting's children: the `N-accounting` Secret (slurmdbd.conf with the database
//! password), Service and slurmdbd StatefulSet. External Accountings have none.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::apps::v1::{StatefulSet, StatefulSetSpec};
use k8s_openapi::api::core::v1::{Container, PodSpec, Secret, SecretKeySelector, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::ResourceExt;
use secrecy::{ExposeSecret, SecretSlice, SecretString};

use super::common::{
    self, ServiceParts, VOLUME_RUN, VOLUME_SLURM_ETC, config_map_items, memory_empty_dir, mount,
    non_root_pod_security, pod_template, projected, secret_data_hash, secret_item, service_port,
    slurm_user_container_security, tcp_port, tcp_probe,
};
use super::hash::checksum;
use super::labels::{self, Component};
use super::merge::merge_container;
use super::slurm_conf::{
    SLURM_ETC_DIR, SLURMDBD_CONF, SLURMDBD_PORT, SlurmdbdConfInput, slurmdbd_conf,
};
use super::{
    RenderError, SLURMDBD_IMAGE, child_meta, controller_ref, cr_annotations, cr_labels, merge_maps,
};
use crate::crd::Accounting;

/// An Accounting's desired children. `Debug` shows no Secret data.
#[derive(Clone)]
pub struct AccountingChildren {
    pub secret: Secret,
    pub service: Service,
    pub stateful_set: StatefulSet,
}

impl std::fmt::Debug for AccountingChildren {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AccountingChildren")
            .field("secret", &self.secret.metadata.name)
            .field("service", &self.service.metadata.name)
            .field("stateful_set", &self.stateful_set.metadata.name)
            .finish()
    }
}

/// `N-accounting`: the Secret, Service and StatefulSet name (and slurm.conf's
/// `AccountingStorageHost`).
pub fn accounting_name(accounting: &str) -> String {
    format!("{accounting}-accounting")
}

/// All of a (non-external) Accounting's children. `password` is the value behind
/// `storageConfig.passwordKeyRef`; `key_secrets` the `slurmKeyRef`/`jwtKeyRef` Secrets (for
/// their data hashes).
pub fn render(
    accounting: &Accounting,
    password: &SecretSlice<u8>,
    key_secrets: &[Secret],
) -> Result<AccountingChildren, RenderError> {
    if accounting.spec.external {
        return Err(RenderError::Invalid(
            "an external Accounting has no objects to render".into(),
        ));
    }
    let secret = config_secret(accounting, password)?;
    let stateful_set = stateful_set(accounting, key_secrets, &secret)?;
    Ok(AccountingChildren {
        service: service(accounting)?,
        secret,
        stateful_set,
    })
}

fn component_labels(accounting: &Accounting) -> BTreeMap<String, String> {
    labels::component_labels(Component::Accounting, &accounting.name_any())
}

/// The Secret `N-accounting` with `slurmdbd.conf`.
pub fn config_secret(
    accounting: &Accounting,
    password: &SecretSlice<u8>,
) -> Result<Secret, RenderError> {
    let spec = &accounting.spec;
    let storage = &spec.storage_config;
    let password = String::from_utf8(password.expose_secret().to_vec()).map_err(|_| {
        RenderError::Invalid(
            "the database password (storageConfig.passwordKeyRef) is not UTF-8".into(),
        )
    })?;
    let conf = slurmdbd_conf(&SlurmdbdConfInput {
        name: accounting.name_any(),
        jwks: spec.jwks_key_ref.is_some(),
        storage_host: storage.host.clone(),
        storage_port: storage.port(),
        storage_user: storage.username.clone(),
        storage_database: storage.database().to_owned(),
        storage_password: SecretString::from(password),
        extra_conf: spec.extra_conf.clone(),
    });
    Ok(Secret {
        metadata: child_meta(
            accounting_name(&accounting.name_any()),
            &accounting.namespace().unwrap_or_default(),
            merge_maps([
                &cr_labels(&accounting.metadata),
                &component_labels(accounting),
            ]),
            cr_annotations(&accounting.metadata),
            vec![controller_ref(accounting)?],
        ),
        data: Some(BTreeMap::from([(
            SLURMDBD_CONF.to_owned(),
            ByteString(conf.expose_secret().as_bytes().to_vec()),
        )])),
        ..Default::default()
    })
}

/// The Service `N-accounting` (port `service.port` or 6819, named `slurmdbd`).
pub fn service(accounting: &Accounting) -> Result<Service, RenderError> {
    let name = accounting.name_any();
    let svc = &accounting.spec.service;
    common::service(ServiceParts {
        name: accounting_name(&name),
        namespace: &accounting.namespace().unwrap_or_default(),
        labels: merge_maps([
            &cr_labels(&accounting.metadata),
            &svc.metadata.labels,
            &component_labels(accounting),
        ]),
        annotations: merge_maps([
            &cr_annotations(&accounting.metadata),
            &svc.metadata.annotations,
        ]),
        user_spec: &svc.spec.0,
        selector: labels::selector_labels(Component::Accounting, &name),
        port: service_port(
            Component::Accounting.app(),
            svc.port_or(SLURMDBD_PORT),
            svc.node_port,
        ),
        headless: false,
        owners: vec![controller_ref(accounting)?],
    })
}

fn required<'a>(
    r: Option<&'a SecretKeySelector>,
    field: &str,
) -> Result<&'a SecretKeySelector, RenderError> {
    r.ok_or_else(|| RenderError::Invalid(format!("{field} is required unless spec.external")))
}

/// The slurmdbd StatefulSet `N-accounting`; `config` is the rendered Secret, whose data hash
/// rolls the pod.
pub fn stateful_set(
    accounting: &Accounting,
    key_secrets: &[Secret],
    config: &Secret,
) -> Result<StatefulSet, RenderError> {
    let spec = &accounting.spec;
    let name = accounting.name_any();
    let namespace = accounting.namespace().unwrap_or_default();
    let slurm_key = required(spec.slurm_key_ref.as_ref(), "spec.slurmKeyRef")?;
    let jwt_key = required(spec.jwt_key_ref(), "spec.jwtKeyRef")?;
    let labels = merge_maps([
        &cr_labels(&accounting.metadata),
        &spec.template.metadata.labels,
        &component_labels(accounting),
    ]);
    let annotations = merge_maps([
        &cr_annotations(&accounting.metadata),
        &spec.template.metadata.annotations,
    ]);
    let mut pod_annotations = annotations.clone();
    pod_annotations.insert(
        crate::keys::ANNOTATION_SLURM_KEY_HASH.into(),
        secret_data_hash(key_secrets, Some(&slurm_key.name)),
    );
    pod_annotations.insert(
        crate::keys::ANNOTATION_JWT_KEY_HASH.into(),
        secret_data_hash(key_secrets, Some(&jwt_key.name)),
    );
    let conf_bytes = config
        .data
        .as_ref()
        .and_then(|d| d.get(SLURMDBD_CONF))
        .map(|b| b.0.as_slice())
        .unwrap_or_default();
    pod_annotations.insert(
        crate::keys::ANNOTATION_SLURMDBD_CONF_HASH.into(),
        checksum(conf_bytes),
    );
    pod_annotations.insert(
        crate::keys::ANNOTATION_DEFAULT_CONTAINER.into(),
        Component::Accounting.app().into(),
    );

    let mut sources = vec![
        secret_item(&accounting_name(&name), SLURMDBD_CONF, SLURMDBD_CONF, None),
        secret_item(&slurm_key.name, &slurm_key.key, "slurm.key", None),
        secret_item(&jwt_key.name, &jwt_key.key, "jwt.key", None),
    ];
    if let Some(jwks) = &spec.jwks_key_ref {
        sources.push(config_map_items(
            &jwks.name,
            &[(&jwks.key, "jwks.json", None)],
        ));
    }
    let app = Component::Accounting.app();
    let container = merge_container(
        Container {
            name: app.to_owned(),
            image: Some(SLURMDBD_IMAGE.to_owned()),
            ports: Some(vec![tcp_port(app, SLURMDBD_PORT)]),
            readiness_probe: Some(tcp_probe(SLURMDBD_PORT, false)),
            security_context: Some(slurm_user_container_security()),
            volume_mounts: Some(vec![
                mount(VOLUME_SLURM_ETC, SLURM_ETC_DIR, true),
                mount(VOLUME_RUN, "/run", false),
            ]),
            ..Default::default()
        },
        &spec.slurmdbd.0,
    )?;
    let base = PodSpec {
        automount_service_account_token: Some(false),
        containers: vec![container],
        security_context: Some(non_root_pod_security(common::SLURM_UID)),
        volumes: Some(vec![
            projected(VOLUME_SLURM_ETC, 0o600, sources),
            memory_empty_dir(VOLUME_RUN),
        ]),
        ..Default::default()
    };
    let template = pod_template(labels.clone(), pod_annotations, base, &spec.template.spec.0)?;
    let sts_name = accounting_name(&name);
    Ok(StatefulSet {
        metadata: child_meta(
            sts_name.clone(),
            &namespace,
            labels,
            annotations,
            vec![controller_ref(accounting)?],
        ),
        spec: Some(StatefulSetSpec {
            pod_management_policy: Some("Parallel".to_owned()),
            replicas: Some(1),
            revision_history_limit: Some(0),
            selector: LabelSelector {
                match_labels: Some(labels::selector_labels(Component::Accounting, &name)),
                ..Default::default()
            },
            service_name: Some(sts_name),
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

    fn accounting() -> Accounting {
        with_meta(
            "slurm",
            json!({
                "slurmKeyRef": {"name": "auth-slurm", "key": "slurm.key"},
                "jwtHs256KeyRef": {"name": "auth-jwt", "key": "jwt.key"},
                "storageConfig": {"host": "mariadb", "username": "slurm", "passwordKeyRef": {"name": "db", "key": "password"}},
                "slurmdbd": {"image": "dbd:1"},
            }),
        )
    }

    #[test]
    fn children() {
        let pw: SecretSlice<u8> = b"hunter2".to_vec().into();
        let c = render(&accounting(), &pw, &[]).unwrap();
        assert!(!format!("{c:?}").contains("hunter2"));

        assert_eq!(c.secret.metadata.name.as_deref(), Some("slurm-accounting"));
        let conf =
            String::from_utf8(c.secret.data.as_ref().unwrap()["slurmdbd.conf"].0.clone()).unwrap();
        assert!(conf.contains("DbdHost=slurm-accounting-0\n"));
        assert!(conf.contains("StorageHost=mariadb\nStoragePort=3306\nStorageUser=slurm\nStorageLoc=slurm_acct_db\nStoragePass=hunter2\n"));

        let port = &c.service.spec.as_ref().unwrap().ports.as_ref().unwrap()[0];
        assert_eq!((port.name.as_deref(), port.port), (Some("slurmdbd"), 6819));

        let spec = c.stateful_set.spec.as_ref().unwrap();
        assert_eq!(spec.service_name.as_deref(), Some("slurm-accounting"));
        let ann = spec
            .template
            .metadata
            .as_ref()
            .unwrap()
            .annotations
            .as_ref()
            .unwrap();
        assert_eq!(
            ann["slinky.slurm.net/slurmdbd-conf-hash"],
            checksum(conf.as_bytes())
        );
        assert_eq!(ann["slinky.slurm.net/slurm-key-hash"], "");
        let pod = spec.template.spec.as_ref().unwrap();
        assert_eq!(pod.containers[0].image.as_deref(), Some("dbd:1"));
        let sources = pod.volumes.as_ref().unwrap()[0]
            .projected
            .clone()
            .unwrap()
            .sources
            .unwrap();
        let names: Vec<_> = sources
            .iter()
            .map(|s| s.secret.as_ref().unwrap().name.as_str())
            .collect();
        assert_eq!(names, ["slurm-accounting", "auth-slurm", "auth-jwt"]);
    }

    #[test]
    fn external_renders_nothing() {
        let a: Accounting = with_meta(
            "x",
            json!({"external": true, "externalConfig": {"host": "h", "port": 1}}),
        );
        assert!(render(&a, &b"p".to_vec().into(), &[]).is_err());
    }
}
