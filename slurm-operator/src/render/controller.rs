//! A Controller's children: the `N-config` ConfigMap (slurm.conf, cgroup.conf), the
//! `N-controller` Service and the `N-controller` slurmctld StatefulSet.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::apps::v1::{StatefulSet, StatefulSetSpec};
use k8s_openapi::api::core::v1::{
    ConfigMap, Container, PersistentVolumeClaim, PersistentVolumeClaimVolumeSource, PodSpec,
    Secret, Service, Volume,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use kube::ResourceExt;

use super::common::{
    self, ServiceParts, VOLUME_LOGFILE, VOLUME_RUN, VOLUME_SLURM_ETC, config_map_all,
    config_map_items, empty_dir, http_probe, logfile_container, memory_empty_dir, mount,
    non_root_pod_security, pod_template, projected, secret_data_hash, secret_item, service_port,
    slurm_user_container_security, str_vec, tcp_port,
};
use super::hash::{checksum_map, checksum_values};
use super::labels::{self, Component};
use super::merge::merge_container;
use super::slurm_conf::{
    self, CGROUP_CONF, ControllerHost, NodeSetEntry, SLURM_CONF, SLURM_ETC_DIR, SLURM_LOG_DIR,
    SLURMCTLD_LOG_FILE, SLURMCTLD_PORT, SLURMCTLD_SPOOL_DIR, SlurmConfInput,
};
use super::{
    RenderError, SLURMCTLD_IMAGE, child_meta, controller_ref, cr_annotations, cr_labels, merge_maps,
};
use crate::crd::{Accounting, Controller, NodeSet};

const VOLUME_STATESAVE: &str = "statesave";
const VOLUME_AUTHSOCKET: &str = "slurm-authsocket";
const AUTHSOCKET_DIR: &str = "/run/slurmctld";

/// Polls /etc/slurm every 5 s and runs `scontrol reconfigure` (retrying every 2 s) when any
/// file changed. kubelet's `..data`/`..<timestamp>` directories are skipped so that an atomic
/// projected-volume swap counts once.
const RECONFIGURE_SCRIPT: &str = r#"set -euo pipefail
dir=/etc/slurm
digest() {
	find "$dir" -path '*/..*' -prune -o \( -type f -o -type l \) -print0 \
		| sort -z | xargs -0r sha256sum | sha256sum
}
echo "[$(date)] watching $dir"
last="$(digest)"
while true; do
	sleep 5
	now="$(digest)"
	if [ "$now" != "$last" ]; then
		echo "[$(date)] configuration changed, reconfiguring"
		until scontrol reconfigure; do
			echo "[$(date)] scontrol reconfigure failed, retrying"
			sleep 2
		done
		echo "[$(date)] reconfigured"
		last="$now"
	fi
done
"#;

/// What the reconciler fetched for one Controller.
#[derive(Clone, Copy)]
pub struct ControllerInputs<'a> {
    /// NodeSets naming this Controller (others are ignored; order does not matter).
    pub nodesets: &'a [NodeSet],
    /// The Accounting of `spec.accountingRef`, when it exists.
    pub accounting: Option<&'a Accounting>,
    /// Every ConfigMap of `configFileRefs` and the four script ref lists.
    pub config_maps: &'a [ConfigMap],
    /// The `slurmKeyRef` and `jwtKeyRef` Secrets (only their data hashes are used).
    pub secrets: &'a [Secret],
}

/// A Controller's desired children. External Controllers only get the ConfigMap.
#[derive(Debug, Clone, Default)]
pub struct ControllerChildren {
    pub config_maps: Vec<ConfigMap>,
    pub services: Vec<Service>,
    pub stateful_sets: Vec<StatefulSet>,
}

/// `N-config`, the name of a Controller's ConfigMap (also mounted by slurmrestd).
pub fn config_name(controller: &str) -> String {
    format!("{controller}-config")
}

/// `N-controller`: the StatefulSet and Service name.
pub fn controller_name(controller: &str) -> String {
    format!("{controller}-controller")
}

/// Where slurmctld is, for `--conf-server` and slurm.conf.
pub fn controller_host(controller: &Controller) -> ControllerHost {
    match (&controller.spec.external, &controller.spec.external_config) {
        (true, Some(ext)) => ControllerHost::External {
            host: ext.host.clone(),
            port: ext.port,
        },
        _ => ControllerHost::Internal {
            name: controller.name_any(),
            namespace: controller.namespace().unwrap_or_default(),
        },
    }
}

/// The statesave claim: the manifest's, with what a bare manifest leaves out filled in as
/// Slinky's chart fills it (ReadWriteOnce, 4Gi), so that the API server accepts the template.
fn statesave_claim_spec(
    user: Option<&k8s_openapi::api::core::v1::PersistentVolumeClaimSpec>,
) -> k8s_openapi::api::core::v1::PersistentVolumeClaimSpec {
    let mut spec = user.cloned().unwrap_or_default();
    if spec.access_modes.as_ref().is_none_or(|m| m.is_empty()) {
        spec.access_modes = Some(vec!["ReadWriteOnce".into()]);
    }
    let resources = spec.resources.get_or_insert_with(Default::default);
    let requests = resources.requests.get_or_insert_with(Default::default);
    requests
        .entry("storage".into())
        .or_insert_with(|| k8s_openapi::apimachinery::pkg::api::resource::Quantity("4Gi".into()));
    spec
}

/// All of a Controller's children.
pub fn render(
    controller: &Controller,
    inputs: &ControllerInputs<'_>,
) -> Result<ControllerChildren, RenderError> {
    let config = config_map(controller, inputs)?;
    if controller.spec.external {
        return Ok(ControllerChildren {
            config_maps: vec![config],
            ..Default::default()
        });
    }
    let sts = stateful_set(controller, inputs, &config)?;
    Ok(ControllerChildren {
        config_maps: vec![config],
        services: vec![service(controller)?],
        stateful_sets: vec![sts],
    })
}

fn find_config_map<'a>(
    inputs: &ControllerInputs<'a>,
    name: &str,
    field: &str,
) -> Result<&'a ConfigMap, RenderError> {
    inputs
        .config_maps
        .iter()
        .find(|cm| cm.metadata.name.as_deref() == Some(name))
        .ok_or_else(|| {
            RenderError::Invalid(format!("ConfigMap {name:?} of {field} was not fetched"))
        })
}

/// The keys (file names) of the ConfigMaps in `refs`.
fn script_names(
    inputs: &ControllerInputs<'_>,
    refs: &[k8s_openapi::api::core::v1::LocalObjectReference],
    field: &str,
) -> Result<Vec<String>, RenderError> {
    let mut out = Vec::new();
    for r in refs {
        let cm = find_config_map(inputs, &r.name, field)?;
        out.extend(cm.data.iter().flat_map(|d| d.keys().cloned()));
    }
    Ok(out)
}

/// The slurm.conf inputs of `controller`.
pub fn slurm_conf_input(
    controller: &Controller,
    inputs: &ControllerInputs<'_>,
) -> Result<SlurmConfInput, RenderError> {
    let spec = &controller.spec;
    let name = controller.name_any();
    let namespace = controller.namespace().unwrap_or_default();
    let nodesets = inputs
        .nodesets
        .iter()
        .filter(|ns| ns.spec.controller_ref.name == name)
        .map(|ns| {
            let cr_name = ns.name_any();
            NodeSetEntry {
                slurm_name: ns.spec.slurm_nodeset_name(&cr_name),
                cr_name,
                partition: ns
                    .spec
                    .partition
                    .enabled
                    .then(|| ns.spec.partition.config.clone()),
            }
        })
        .collect();
    let accounting = match (&spec.accounting_ref, inputs.accounting) {
        (Some(r), Some(acct)) if acct.name_any() == r.name => Some(r.name.clone()),
        _ => None,
    };
    Ok(SlurmConfInput {
        cluster_name: spec.cluster_name_or(&namespace, &name),
        controller: controller_host(controller),
        jwks: spec.jwks_key_ref.is_some(),
        metrics: spec.metrics.enabled,
        accounting,
        prolog: script_names(inputs, &spec.prolog_script_refs, "spec.prologScriptRefs")?,
        epilog: script_names(inputs, &spec.epilog_script_refs, "spec.epilogScriptRefs")?,
        prolog_slurmctld: script_names(
            inputs,
            &spec.prolog_slurmctld_script_refs,
            "spec.prologSlurmctldScriptRefs",
        )?,
        epilog_slurmctld: script_names(
            inputs,
            &spec.epilog_slurmctld_script_refs,
            "spec.epilogSlurmctldScriptRefs",
        )?,
        nodesets,
        extra_conf: spec.extra_conf.clone(),
    })
}

fn component_labels(controller: &Controller) -> BTreeMap<String, String> {
    labels::component_labels(Component::Controller, &controller.name_any())
}

/// The ConfigMap `N-config`: `slurm.conf` and, unless a `configFileRefs` ConfigMap brings its
/// own, `cgroup.conf`. External Controllers get the minimal slurm.conf for slurmrestd.
pub fn config_map(
    controller: &Controller,
    inputs: &ControllerInputs<'_>,
) -> Result<ConfigMap, RenderError> {
    let conf = slurm_conf_input(controller, inputs)?;
    let mut data = BTreeMap::new();
    if controller.spec.external {
        data.insert(SLURM_CONF.to_owned(), slurm_conf::slurm_conf_minimal(&conf));
    } else {
        data.insert(SLURM_CONF.to_owned(), slurm_conf::slurm_conf(&conf));
        let mut own_cgroup = false;
        for r in &controller.spec.config_file_refs {
            let cm = find_config_map(inputs, &r.name, "spec.configFileRefs")?;
            own_cgroup |= cm
                .data
                .as_ref()
                .is_some_and(|d| d.contains_key(CGROUP_CONF));
        }
        if !own_cgroup {
            data.insert(CGROUP_CONF.to_owned(), slurm_conf::cgroup_conf());
        }
    }
    let name = controller.name_any();
    Ok(ConfigMap {
        metadata: child_meta(
            config_name(&name),
            &controller.namespace().unwrap_or_default(),
            merge_maps([
                &cr_labels(&controller.metadata),
                &component_labels(controller),
            ]),
            cr_annotations(&controller.metadata),
            vec![controller_ref(controller)?],
        ),
        data: Some(data),
        ..Default::default()
    })
}

/// The Service `N-controller` (port `service.port` or 6817, named `slurmctld`).
pub fn service(controller: &Controller) -> Result<Service, RenderError> {
    let name = controller.name_any();
    let svc = &controller.spec.service;
    common::service(ServiceParts {
        name: controller_name(&name),
        namespace: &controller.namespace().unwrap_or_default(),
        labels: merge_maps([
            &cr_labels(&controller.metadata),
            &svc.metadata.labels,
            &component_labels(controller),
        ]),
        annotations: merge_maps([
            &cr_annotations(&controller.metadata),
            &svc.metadata.annotations,
        ]),
        user_spec: &svc.spec.0,
        selector: labels::selector_labels(Component::Controller, &name),
        port: service_port(
            Component::Controller.app(),
            svc.port_or(SLURMCTLD_PORT),
            svc.node_port,
        ),
        headless: false,
        owners: vec![controller_ref(controller)?],
    })
}

/// The names of every ConfigMap mounted into /etc/slurm besides `N-config`, sorted, unique.
fn extra_config_maps(controller: &Controller) -> BTreeSet<&str> {
    let spec = &controller.spec;
    [
        &spec.config_file_refs,
        &spec.prolog_script_refs,
        &spec.epilog_script_refs,
        &spec.prolog_slurmctld_script_refs,
        &spec.epilog_slurmctld_script_refs,
    ]
    .into_iter()
    .flatten()
    .map(|r| r.name.as_str())
    .collect()
}

fn pod_annotations(
    controller: &Controller,
    inputs: &ControllerInputs<'_>,
    config: &ConfigMap,
) -> BTreeMap<String, String> {
    let spec = &controller.spec;
    let mut a = merge_maps([
        &cr_annotations(&controller.metadata),
        &spec.template.metadata.annotations,
    ]);
    a.insert(
        crate::keys::ANNOTATION_SLURM_KEY_HASH.into(),
        secret_data_hash(
            inputs.secrets,
            spec.slurm_key_ref.as_ref().map(|r| r.name.as_str()),
        ),
    );
    a.insert(
        crate::keys::ANNOTATION_JWT_KEY_HASH.into(),
        secret_data_hash(inputs.secrets, spec.jwt_key_ref().map(|r| r.name.as_str())),
    );
    if !spec.inplace_reconfigure {
        a.insert(
            crate::keys::ANNOTATION_SLURM_CONFIG_HASH.into(),
            checksum_map(config.data.as_ref().unwrap_or(&BTreeMap::new())),
        );
        let names = extra_config_maps(controller);
        let values = inputs
            .config_maps
            .iter()
            .filter_map(|cm| {
                let n = cm.metadata.name.as_deref()?;
                names.contains(n).then_some((n, cm))
            })
            .collect::<BTreeMap<_, _>>()
            .into_values()
            .flat_map(|cm| {
                cm.data
                    .iter()
                    .flat_map(|d| d.values().map(String::as_bytes))
            });
        a.insert(
            crate::keys::ANNOTATION_CONFIG_FILES_HASH.into(),
            checksum_values(values),
        );
    }
    a.insert(
        crate::keys::ANNOTATION_DEFAULT_CONTAINER.into(),
        Component::Controller.app().into(),
    );
    a
}

fn key_ref_name<'a>(
    r: Option<&'a k8s_openapi::api::core::v1::SecretKeySelector>,
    field: &str,
) -> Result<&'a k8s_openapi::api::core::v1::SecretKeySelector, RenderError> {
    r.ok_or_else(|| RenderError::Invalid(format!("{field} is required unless spec.external")))
}

fn volumes(controller: &Controller) -> Result<Vec<Volume>, RenderError> {
    let spec = &controller.spec;
    let slurm_key = key_ref_name(spec.slurm_key_ref.as_ref(), "spec.slurmKeyRef")?;
    let jwt_key = key_ref_name(spec.jwt_key_ref(), "spec.jwtKeyRef")?;
    let mut sources = vec![
        config_map_all(&config_name(&controller.name_any())),
        secret_item(&slurm_key.name, &slurm_key.key, "slurm.key", None),
        secret_item(&jwt_key.name, &jwt_key.key, "jwt.key", None),
    ];
    sources.extend(
        extra_config_maps(controller)
            .into_iter()
            .map(config_map_all),
    );
    if let Some(jwks) = &spec.jwks_key_ref {
        sources.push(config_map_items(
            &jwks.name,
            &[(&jwks.key, "jwks.json", None)],
        ));
    }
    Ok(vec![
        projected(VOLUME_SLURM_ETC, 0o610, sources),
        common::memory_empty_dir(VOLUME_LOGFILE),
        memory_empty_dir(VOLUME_RUN),
        empty_dir(VOLUME_AUTHSOCKET),
    ])
}

fn slurmctld_container(
    controller: &Controller,
    cluster_name: &str,
) -> Result<Container, RenderError> {
    let app = Component::Controller.app();
    let base = Container {
        name: app.to_owned(),
        image: Some(SLURMCTLD_IMAGE.to_owned()),
        ports: Some(vec![tcp_port(app, SLURMCTLD_PORT)]),
        startup_probe: Some(http_probe("/livez", app, true)),
        readiness_probe: Some(http_probe("/readyz", app, false)),
        liveness_probe: Some(http_probe("/livez", app, true)),
        security_context: Some(slurm_user_container_security()),
        volume_mounts: Some(vec![
            mount(VOLUME_SLURM_ETC, SLURM_ETC_DIR, true),
            mount(VOLUME_RUN, "/run", false),
            mount(
                VOLUME_STATESAVE,
                &format!("{SLURMCTLD_SPOOL_DIR}/{cluster_name}"),
                false,
            ),
            mount(VOLUME_AUTHSOCKET, AUTHSOCKET_DIR, false),
            mount(VOLUME_LOGFILE, SLURM_LOG_DIR, false),
        ]),
        ..Default::default()
    };
    merge_container(base, &controller.spec.slurmctld.0)
}

fn reconfigure_container(controller: &Controller) -> Result<Container, RenderError> {
    let base = Container {
        name: "reconfigure".to_owned(),
        image: Some(SLURMCTLD_IMAGE.to_owned()),
        command: Some(str_vec([
            "tini",
            "-g",
            "--",
            "bash",
            "-c",
            RECONFIGURE_SCRIPT,
        ])),
        restart_policy: Some("Always".to_owned()),
        volume_mounts: Some(vec![
            mount(VOLUME_SLURM_ETC, SLURM_ETC_DIR, true),
            mount(VOLUME_AUTHSOCKET, AUTHSOCKET_DIR, true),
        ]),
        ..Default::default()
    };
    merge_container(base, &controller.spec.reconfigure.0)
}

/// The slurmctld StatefulSet `N-controller`. `config` is the rendered `N-config` (its data
/// hash rolls the pods unless `inplaceReconfigure`).
pub fn stateful_set(
    controller: &Controller,
    inputs: &ControllerInputs<'_>,
    config: &ConfigMap,
) -> Result<StatefulSet, RenderError> {
    let spec = &controller.spec;
    let name = controller.name_any();
    let namespace = controller.namespace().unwrap_or_default();
    let cluster_name = spec.cluster_name_or(&namespace, &name);
    let labels = merge_maps([
        &cr_labels(&controller.metadata),
        &spec.template.metadata.labels,
        &component_labels(controller),
    ]);
    let annotations = merge_maps([
        &cr_annotations(&controller.metadata),
        &spec.template.metadata.annotations,
    ]);

    let mut init_containers = Vec::new();
    if spec.inplace_reconfigure {
        init_containers.push(reconfigure_container(controller)?);
    }
    init_containers.push(logfile_container(&spec.logfile.0, SLURMCTLD_LOG_FILE)?);
    let mut pod_volumes = volumes(controller)?;
    let mut claim_templates = Vec::new();
    match (spec.persistence_enabled(), spec.existing_claim()) {
        (true, Some(claim)) => pod_volumes.push(Volume {
            name: VOLUME_STATESAVE.to_owned(),
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: claim.to_owned(),
                ..Default::default()
            }),
            ..Default::default()
        }),
        (true, None) => claim_templates.push(PersistentVolumeClaim {
            metadata: ObjectMeta {
                name: Some(VOLUME_STATESAVE.to_owned()),
                namespace: Some(namespace.clone()),
                ..Default::default()
            },
            spec: Some(statesave_claim_spec(
                spec.persistence.as_ref().map(|p| &p.spec),
            )),
            status: None,
        }),
        (false, _) => pod_volumes.push(empty_dir(VOLUME_STATESAVE)),
    }
    let base = PodSpec {
        automount_service_account_token: Some(false),
        containers: vec![slurmctld_container(controller, &cluster_name)?],
        init_containers: Some(init_containers),
        security_context: Some(non_root_pod_security(common::SLURM_UID)),
        volumes: Some(pod_volumes),
        ..Default::default()
    };
    let template = pod_template(
        labels.clone(),
        pod_annotations(controller, inputs, config),
        base,
        &spec.template.spec.0,
    )?;
    let cname = controller_name(&name);
    Ok(StatefulSet {
        metadata: child_meta(
            cname.clone(),
            &namespace,
            labels,
            annotations,
            vec![controller_ref(controller)?],
        ),
        spec: Some(StatefulSetSpec {
            pod_management_policy: Some("Parallel".to_owned()),
            replicas: Some(1),
            revision_history_limit: Some(0),
            selector: LabelSelector {
                match_labels: Some(labels::selector_labels(Component::Controller, &name)),
                ..Default::default()
            },
            service_name: Some(cname),
            template,
            volume_claim_templates: (!claim_templates.is_empty()).then_some(claim_templates),
            ..Default::default()
        }),
        status: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::test_support::with_meta;
    use k8s_openapi::ByteString;
    use serde_json::json;

    fn controller(extra: serde_json::Value) -> Controller {
        let mut spec = json!({
            "slurmKeyRef": {"name": "slurm-auth-slurm", "key": "slurm.key"},
            "jwtKeyRef": {"name": "slurm-auth-jwt", "key": "jwt.key"},
            "accountingRef": {"name": "slurm"},
            "extraConf": "SlurmctldParameters=enable_stepmgr\nSchedulerParameters=bf_continue",
            "configFileRefs": [{"name": "extra"}],
            "prologScriptRefs": [{"name": "prolog"}],
            "persistence": {"resources": {"requests": {"storage": "4Gi"}}, "accessModes": ["ReadWriteOnce"]},
            "slurmctld": {"image": "ctld:1", "args": ["-vvv"]},
            "template": {"metadata": {"labels": {"tier": "ctl"}}, "spec": {"priorityClassName": "high"}},
        });
        let (Some(s), serde_json::Value::Object(e)) = (spec.as_object_mut(), extra) else {
            unreachable!()
        };
        s.extend(e);
        with_meta("slurm", spec)
    }

    fn nodeset(name: &str, body: serde_json::Value) -> NodeSet {
        with_meta(name, body)
    }

    fn cm(name: &str, data: &[(&str, &str)]) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            data: Some(
                data.iter()
                    .map(|(k, v)| ((*k).into(), (*v).into()))
                    .collect(),
            ),
            ..Default::default()
        }
    }

    fn secret(name: &str, value: &str) -> Secret {
        Secret {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            data: Some([("k".to_owned(), ByteString(value.as_bytes().to_vec()))].into()),
            ..Default::default()
        }
    }

    struct Fixture {
        nodesets: Vec<NodeSet>,
        accounting: Accounting,
        config_maps: Vec<ConfigMap>,
        secrets: Vec<Secret>,
    }

    impl Fixture {
        fn new() -> Self {
            Fixture {
                nodesets: vec![
                    nodeset(
                        "slurm-worker-gpu",
                        json!({
                            "controllerRef": {"name": "slurm"},
                            "template": {"spec": {"hostname": "gpu-"}},
                            "partition": {"enabled": true, "config": "State=UP Default=YES"},
                        }),
                    ),
                    nodeset(
                        "slurm-worker-cpu",
                        json!({"controllerRef": {"name": "slurm"}}),
                    ),
                    nodeset("other", json!({"controllerRef": {"name": "elsewhere"}})),
                ],
                accounting: with_meta(
                    "slurm",
                    json!({"storageConfig": {"host": "db", "passwordKeyRef": {"name": "p", "key": "k"}}}),
                ),
                config_maps: vec![
                    cm("extra", &[("gres.conf", "AutoDetect=nvidia")]),
                    cm(
                        "prolog",
                        &[("90-b.sh", "#!/bin/sh"), ("10-a.sh", "#!/bin/sh")],
                    ),
                ],
                secrets: vec![
                    secret("slurm-auth-slurm", "sk"),
                    secret("slurm-auth-jwt", "jk"),
                ],
            }
        }

        fn inputs(&self) -> ControllerInputs<'_> {
            ControllerInputs {
                nodesets: &self.nodesets,
                accounting: Some(&self.accounting),
                config_maps: &self.config_maps,
                secrets: &self.secrets,
            }
        }
    }

    #[test]
    fn slurm_conf_lists_nodesets_partition_accounting_and_merges_extra_conf() {
        let f = Fixture::new();
        let children = render(&controller(json!({})), &f.inputs()).unwrap();
        let cm = &children.config_maps[0];
        assert_eq!(cm.metadata.name.as_deref(), Some("slurm-config"));
        let data = cm.data.as_ref().unwrap();
        assert!(data.contains_key("cgroup.conf"));
        let conf = &data["slurm.conf"];
        let want_tail = "\
#
### ACCOUNTING ###
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=slurm-accounting
AccountingStoragePort=6819
#
### PROLOG & EPILOG ###
Prolog=10-a.sh
Prolog=90-b.sh
#
### NODESET & PARTITION ###
NodeSet=slurm-worker-cpu Feature=slurm-worker-cpu
NodeSet=gpu Feature=gpu
PartitionName=gpu Nodes=gpu State=UP Default=YES
#
### EXTRA CONFIG ###
SlurmctldParameters=enable_stepmgr
SchedulerParameters=bf_continue
#
### MERGED CONFIG ###
SlurmctldParameters=enable_configless,enable_stepmgr,reconfig_on_restart
";
        assert!(conf.ends_with(want_tail), "{conf}");
        assert!(conf.contains("ClusterName=slurm_slurm\n"));
        assert!(conf.contains("SlurmctldHost=slurm-controller-0(slurm-controller.slurm)\n"));
        assert!(conf.contains("MaxNodeCount=1024\n"));
    }

    #[test]
    fn cgroup_conf_left_to_config_file_refs() {
        let mut f = Fixture::new();
        f.config_maps[0] = cm("extra", &[("cgroup.conf", "CgroupPlugin=disabled")]);
        let cm = config_map(&controller(json!({})), &f.inputs()).unwrap();
        assert!(!cm.data.unwrap().contains_key("cgroup.conf"));
    }

    #[test]
    fn service_and_labels() {
        let f = Fixture::new();
        let c = render(
            &controller(json!({"service": {"port": 16817, "spec": {"type": "NodePort"}}})),
            &f.inputs(),
        )
        .unwrap();
        let svc = &c.services[0];
        assert_eq!(svc.metadata.name.as_deref(), Some("slurm-controller"));
        let labels = svc.metadata.labels.as_ref().unwrap();
        assert_eq!(labels["app.kubernetes.io/name"], "slurmctld");
        assert_eq!(labels["app.kubernetes.io/component"], "controller");
        assert_eq!(labels["team"], "hpc");
        let spec = svc.spec.as_ref().unwrap();
        assert_eq!(spec.type_.as_deref(), Some("NodePort"));
        let port = &spec.ports.as_ref().unwrap()[0];
        assert_eq!(
            (port.name.as_deref(), port.port),
            (Some("slurmctld"), 16817)
        );
        assert_eq!(spec.selector.as_ref().unwrap().len(), 2);
        let owner = &svc.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.name.as_str(), owner.controller),
            ("Controller", "slurm", Some(true))
        );
        let annotations = svc.metadata.annotations.as_ref().unwrap();
        assert_eq!(annotations["note"], "x");
        assert!(!annotations.contains_key("kubectl.kubernetes.io/last-applied-configuration"));
    }

    #[test]
    fn stateful_set_shape() {
        let f = Fixture::new();
        let c = render(&controller(json!({})), &f.inputs()).unwrap();
        let sts = &c.stateful_sets[0];
        assert_eq!(sts.metadata.name.as_deref(), Some("slurm-controller"));
        let spec = sts.spec.as_ref().unwrap();
        assert_eq!(spec.service_name.as_deref(), Some("slurm-controller"));
        assert_eq!(spec.pod_management_policy.as_deref(), Some("Parallel"));
        assert_eq!(
            spec.volume_claim_templates.as_ref().unwrap()[0]
                .metadata
                .name
                .as_deref(),
            Some("statesave")
        );
        let meta = spec.template.metadata.as_ref().unwrap();
        let labels = meta.labels.as_ref().unwrap();
        assert_eq!(labels["tier"], "ctl");
        assert_eq!(labels["app.kubernetes.io/instance"], "slurm");
        let ann = meta.annotations.as_ref().unwrap();
        assert_eq!(
            ann["slinky.slurm.net/slurm-key-hash"],
            crate::render::hash::checksum("sk")
        );
        assert_eq!(
            ann["slinky.slurm.net/jwt-key-hash"],
            crate::render::hash::checksum("jk")
        );
        let conf_hash = checksum_map(c.config_maps[0].data.as_ref().unwrap());
        assert_eq!(ann["slinky.slurm.net/slurm-config-hash"], conf_hash);
        assert_eq!(
            ann["slurm-rs/config-files-hash"],
            crate::render::hash::checksum("AutoDetect=nvidia#!/bin/sh#!/bin/sh")
        );
        assert_eq!(ann["kubectl.kubernetes.io/default-container"], "slurmctld");

        let pod = spec.template.spec.as_ref().unwrap();
        assert_eq!(pod.priority_class_name.as_deref(), Some("high"));
        assert_eq!(pod.automount_service_account_token, Some(false));
        let sc = pod.security_context.as_ref().unwrap();
        assert_eq!(
            (sc.run_as_user, sc.fs_group, sc.run_as_non_root),
            (Some(401), Some(401), Some(true))
        );
        let init: Vec<_> = pod
            .init_containers
            .as_ref()
            .unwrap()
            .iter()
            .map(|c| c.name.as_str())
            .collect();
        assert_eq!(init, ["logfile"]);
        let main = &pod.containers[0];
        assert_eq!(main.name, "slurmctld");
        assert_eq!(main.image.as_deref(), Some("ctld:1"));
        assert_eq!(main.args.as_ref().unwrap(), &["-vvv"]);
        assert_eq!(main.ports.as_ref().unwrap()[0].container_port, 6817);
        let mounts: Vec<_> = main
            .volume_mounts
            .as_ref()
            .unwrap()
            .iter()
            .map(|m| m.mount_path.as_str())
            .collect();
        assert_eq!(
            mounts,
            [
                "/etc/slurm",
                "/run",
                "/var/spool/slurmctld/slurm_slurm",
                "/run/slurmctld",
                "/var/log/slurm"
            ]
        );
        let etc = &pod.volumes.as_ref().unwrap()[0];
        let proj = etc.projected.as_ref().unwrap();
        assert_eq!(proj.default_mode, Some(0o610));
        let names: Vec<_> = proj
            .sources
            .as_ref()
            .unwrap()
            .iter()
            .map(|s| {
                s.config_map
                    .as_ref()
                    .map(|c| c.name.clone())
                    .or_else(|| s.secret.as_ref().map(|s| s.name.clone()))
                    .unwrap()
            })
            .collect();
        assert_eq!(
            names,
            [
                "slurm-config",
                "slurm-auth-slurm",
                "slurm-auth-jwt",
                "extra",
                "prolog"
            ]
        );
        assert_eq!(
            main.liveness_probe
                .as_ref()
                .unwrap()
                .http_get
                .as_ref()
                .unwrap()
                .path
                .as_deref(),
            Some("/livez")
        );
    }

    #[test]
    fn inplace_reconfigure_drops_config_hashes_and_adds_sidecar() {
        let f = Fixture::new();
        let c = render(
            &controller(json!({"inplaceReconfigure": true})),
            &f.inputs(),
        )
        .unwrap();
        let tpl = &c.stateful_sets[0].spec.as_ref().unwrap().template;
        let ann = tpl.metadata.as_ref().unwrap().annotations.as_ref().unwrap();
        assert!(!ann.contains_key("slinky.slurm.net/slurm-config-hash"));
        assert!(!ann.contains_key("slurm-rs/config-files-hash"));
        assert!(ann.contains_key("slinky.slurm.net/slurm-key-hash"));
        let init = tpl.spec.as_ref().unwrap().init_containers.as_ref().unwrap();
        assert_eq!(init[0].name, "reconfigure");
        assert_eq!(init[0].restart_policy.as_deref(), Some("Always"));
        assert_eq!(init[0].image.as_deref(), Some(SLURMCTLD_IMAGE));
        assert_eq!(init[1].image.as_deref(), Some(crate::render::SIDECAR_IMAGE));
    }

    #[test]
    fn persistence_variants() {
        let f = Fixture::new();
        let sts = |p: serde_json::Value| {
            let c = render(&controller(json!({ "persistence": p })), &f.inputs()).unwrap();
            c.stateful_sets[0].spec.clone().unwrap()
        };
        let s = sts(json!({"existingClaim": "state"}));
        assert!(s.volume_claim_templates.is_none());
        let v = s.template.spec.unwrap().volumes.unwrap();
        assert_eq!(
            v.last()
                .unwrap()
                .persistent_volume_claim
                .as_ref()
                .unwrap()
                .claim_name,
            "state"
        );
        let s = sts(json!({"enabled": false}));
        assert!(
            s.template
                .spec
                .unwrap()
                .volumes
                .unwrap()
                .last()
                .unwrap()
                .empty_dir
                .is_some()
        );
        // No persistence block: a claim the API server accepts, sized as Slinky's chart sizes it.
        let c = render(&controller(json!({})), &f.inputs()).unwrap();
        let claim = c.stateful_sets[0]
            .spec
            .clone()
            .unwrap()
            .volume_claim_templates
            .unwrap();
        let spec = claim[0].spec.clone().unwrap();
        assert_eq!(spec.access_modes.unwrap(), ["ReadWriteOnce"]);
        assert_eq!(
            spec.resources.unwrap().requests.unwrap()["storage"].0,
            "4Gi"
        );
    }

    #[test]
    fn external_controller_only_has_minimal_config() {
        let f = Fixture::new();
        let c = with_meta::<Controller>(
            "ext",
            json!({"external": true, "externalConfig": {"host": "ctld", "port": 6817}}),
        );
        let children = render(&c, &f.inputs()).unwrap();
        assert!(children.services.is_empty() && children.stateful_sets.is_empty());
        let conf = &children.config_maps[0].data.as_ref().unwrap()["slurm.conf"];
        assert!(conf.contains("SlurmctldHost=ctld\n"));
        assert!(!conf.contains("NodeSet="));
        assert_eq!(controller_host(&c).conf_server(), "ctld:6817");
    }

    #[test]
    fn missing_config_map_is_an_error() {
        let mut f = Fixture::new();
        f.config_maps.clear();
        assert!(render(&controller(json!({})), &f.inputs()).is_err());
    }
}
