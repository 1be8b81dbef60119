//! NodeSet worker pods (created directly, no StatefulSet), their PVCs, the `N-ssh-config`
//! ConfigMap, and the revision hash that drives rolling updates.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Affinity, Capabilities, ConfigMap, Container, EnvVar, EnvVarSource, ExecAction, Lifecycle,
    LifecycleHandler, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm,
    ObjectFieldSelector, PersistentVolumeClaim, PersistentVolumeClaimVolumeSource, Pod,
    PodAffinityTerm, PodAntiAffinity, PodDNSConfig, PodSpec, SecurityContext, Toleration, Volume,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, LabelSelectorRequirement, ObjectMeta,
};
use kube::ResourceExt;
use serde_json::{Map, Value, json};

use super::common::{
    VOLUME_LOGFILE, VOLUME_SLURM_ETC, config_map_items, env, http_probe, logfile_container,
    memory_empty_dir, mount, pod_template, projected, secret_item, sub_path_mount, tcp_port,
};
use super::controller::controller_host;
use super::hash::checksum;
use super::labels::{self, Component};
use super::merge::merge_container;
use super::slurm_conf::{
    SLURM_ETC_DIR, SLURM_LOG_DIR, SLURMD_LOG_FILE, SLURMD_PORT, SSH_PORT, SSHD_CONFIG,
    slurmd_conf_arg, worker_sshd_config,
};
use super::workers::{search_domain, service_name};
use super::{
    RenderError, SLURMD_IMAGE, child_meta, controller_ref, cr_annotations, cr_labels, merge_maps,
};
use crate::crd::{Controller, NodeSet, NodeSetSpec, PvcRetention, ScalingMode};

const VOLUME_SSH_CONFIG: &str = "ssh-config";
const VOLUME_SSSD_CONF: &str = "sssd-conf";
const SSSD_CONF: &str = "sssd.conf";
const PRE_STOP: &str =
    "scontrol update nodename=$(hostname) state=down reason='slurm-operator: Pod is terminating';";

/// The ordinal zero-padded to `spec.ordinalPadding` digits.
pub fn padded_ordinal(spec: &NodeSetSpec, ordinal: u32) -> String {
    format!("{ordinal:0width$}", width = spec.ordinal_padding as usize)
}

/// `N-<padded ordinal>`.
pub fn pod_name(nodeset: &NodeSet, ordinal: u32) -> String {
    format!(
        "{}-{}",
        nodeset.name_any(),
        padded_ordinal(&nodeset.spec, ordinal)
    )
}

/// `N-ssh-config`.
pub fn ssh_config_name(nodeset: &str) -> String {
    format!("{nodeset}-ssh-config")
}

/// The NodeSet's `N-ssh-config` ConfigMap (only wanted with `spec.ssh.enabled`).
pub fn ssh_config_map(nodeset: &NodeSet) -> Result<ConfigMap, RenderError> {
    let name = nodeset.name_any();
    Ok(ConfigMap {
        metadata: child_meta(
            ssh_config_name(&name),
            &nodeset.namespace().unwrap_or_default(),
            merge_maps([
                &cr_labels(&nodeset.metadata),
                &labels::worker_labels(&name, &nodeset.spec.controller_ref.name),
            ]),
            cr_annotations(&nodeset.metadata),
            vec![controller_ref(nodeset)?],
        ),
        data: Some(BTreeMap::from([(
            SSHD_CONFIG.to_owned(),
            worker_sshd_config(&nodeset.spec.ssh.extra_sshd_config),
        )])),
        ..Default::default()
    })
}

/// The parts of a NodeSet spec that shape its pods, as stored in a ControllerRevision
/// (`{"spec": {...}}`, `template` marked `$patch: replace`).
pub fn revision_data(spec: &NodeSetSpec) -> Value {
    let mut template = serde_json::to_value(&spec.template).unwrap_or(Value::Null);
    if let Value::Object(t) = &mut template {
        t.insert("$patch".into(), "replace".into());
    }
    json!({
        "spec": {
            "template": template,
            "ordinalPadding": spec.ordinal_padding,
            "oversubscribeNode": spec.oversubscribe_node,
            "slurmd": spec.slurmd,
            "extraConf": spec.extra_conf,
            "logfile": spec.logfile,
            "ssh": spec.ssh,
        }
    })
}

/// A stable short hash of [`revision_data`], for the `controller-revision-hash` label: pods
/// whose label differs are out of date.
pub fn revision_hash(spec: &NodeSetSpec) -> String {
    data_hash(&revision_data(spec))
}

/// The hash this operator gives a ControllerRevision holding `data`: a revision whose
/// `controller-revision-hash` is not this was made by another operator (Slinky's hashes the
/// same data another way).
pub fn data_hash(data: &Value) -> String {
    let mut hash = checksum(canonical_json(data));
    hash.truncate(10);
    hash
}

/// JSON with object keys sorted at every level, whatever serde_json's map order is.
fn canonical_json(v: &Value) -> String {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let body: Vec<String> = keys
                .into_iter()
                .map(|k| format!("{}:{}", Value::String(k.clone()), canonical_json(&m[k])))
                .collect();
            format!("{{{}}}", body.join(","))
        }
        Value::Array(a) => format!(
            "[{}]",
            a.iter().map(canonical_json).collect::<Vec<_>>().join(",")
        ),
        other => other.to_string(),
    }
}

/// The PVCs of the pod with `ordinal` (StatefulSet mode): one per `volumeClaimTemplates`
/// entry, named `<claim>-N-<padded ordinal>`. Create them before the pod.
pub fn pvcs(nodeset: &NodeSet, ordinal: u32) -> Vec<PersistentVolumeClaim> {
    claims(nodeset, &padded_ordinal(&nodeset.spec, ordinal))
}

/// The PVCs of the DaemonSet-mode pod on the node whose Slurm hostname is `hostname`.
pub fn daemon_pvcs(nodeset: &NodeSet, hostname: &str) -> Vec<PersistentVolumeClaim> {
    claims(nodeset, hostname)
}

fn claims(nodeset: &NodeSet, suffix: &str) -> Vec<PersistentVolumeClaim> {
    let name = nodeset.name_any();
    let selector = labels::selector_labels(Component::Worker, &name);
    nodeset
        .spec
        .volume_claim_templates
        .iter()
        .map(|t| {
            let mut claim = t.clone();
            let template_name = t.metadata.name.clone().unwrap_or_default();
            claim.metadata.name = Some(format!("{template_name}-{name}-{suffix}"));
            claim.metadata.namespace = nodeset.namespace();
            claim
                .metadata
                .labels
                .get_or_insert_with(BTreeMap::new)
                .extend(selector.clone());
            claim.status = None;
            // `whenDeleted: Delete` from the start: the claim goes with the NodeSet even if no
            // pass sets its owners before that (see `planner::claims`).
            if nodeset
                .spec
                .persistent_volume_claim_retention_policy
                .when_deleted
                == PvcRetention::Delete
            {
                claim.metadata.owner_references = super::owner_ref(nodeset).ok().map(|r| vec![r]);
            }
            claim
        })
        .collect()
}

/// The StatefulSet-mode pod `N-<padded ordinal>` of `nodeset`, labelled with `revision`.
/// `cluster_domain` completes the DNS search path (e.g. `cluster.local`).
pub fn pod(
    nodeset: &NodeSet,
    controller: &Controller,
    ordinal: u32,
    revision: &str,
    cluster_domain: &str,
) -> Result<Pod, RenderError> {
    let padded = padded_ordinal(&nodeset.spec, ordinal);
    let name = pod_name(nodeset, ordinal);
    let mut pod = base_pod(nodeset, controller, revision, cluster_domain)?;
    let spec = pod.spec.get_or_insert_with(Default::default);
    spec.hostname = Some(match spec.hostname.as_deref().filter(|h| !h.is_empty()) {
        Some(prefix) => format!("{prefix}{padded}"),
        None => name.clone(),
    });
    // The Slurm node name; with hostNetwork it is the Kubernetes node's, unknown until scheduled.
    let slurm_node = if spec.host_network == Some(true) {
        String::new()
    } else {
        spec.hostname.clone().unwrap_or_default()
    };
    add_claim_volumes(spec, nodeset, &padded);
    let labels = pod.metadata.labels.get_or_insert_with(BTreeMap::new);
    labels.insert(crate::keys::LABEL_POD_INDEX.into(), padded);
    labels.insert(crate::keys::LABEL_POD_NAME.into(), name.clone());
    labels.insert(crate::keys::LABEL_POD_HOSTNAME.into(), slurm_node);
    labels.insert(
        crate::keys::LABEL_SCALING_MODE.into(),
        ScalingMode::StatefulSet.as_str().into(),
    );
    pod.metadata.name = Some(name);
    Ok(pod)
}

/// The DaemonSet-mode pod for Kubernetes node `node_name` (generateName `N-`), pinned to it by
/// node affinity; its hostname is `hostname_override` or the node name up to the first dot.
pub fn daemon_pod(
    nodeset: &NodeSet,
    controller: &Controller,
    node_name: &str,
    hostname_override: Option<&str>,
    revision: &str,
    cluster_domain: &str,
) -> Result<Pod, RenderError> {
    let hostname = hostname_override
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| node_name.split('.').next().unwrap_or(node_name))
        .to_owned();
    let mut pod = base_pod(nodeset, controller, revision, cluster_domain)?;
    let spec = pod.spec.get_or_insert_with(Default::default);
    spec.hostname = Some(hostname.clone());
    add_claim_volumes(spec, nodeset, &hostname);
    require_node(spec, node_name, None);
    // Kubernetes' daemon tolerations: a cordoned or pressured node keeps its worker (Slinky #259).
    let host_network = spec.host_network == Some(true);
    let tolerations = spec.tolerations.get_or_insert_with(Vec::new);
    for t in crate::planner::daemon::daemon_tolerations(host_network) {
        if !tolerations.contains(&t) {
            tolerations.push(t);
        }
    }
    let labels = pod.metadata.labels.get_or_insert_with(BTreeMap::new);
    labels.insert(crate::keys::LABEL_POD_HOSTNAME.into(), hostname);
    labels.insert(
        crate::keys::LABEL_SCALING_MODE.into(),
        ScalingMode::DaemonSet.as_str().into(),
    );
    pod.metadata.generate_name = Some(format!("{}-", nodeset.name_any()));
    Ok(pod)
}

/// Replaces the pod's required node affinity by one term that selects node `name` only, as
/// Kubernetes' DaemonSet controller does (the template's own terms were checked against the
/// node before). `hostname_label` (the node's `kubernetes.io/hostname`) is required as well:
/// the same node on a real cluster, and schedulers that ignore `matchFields` (the test
/// ground's) still place the pod there.
pub fn require_node(spec: &mut PodSpec, name: &str, hostname_label: Option<&str>) {
    let in_ = |key: &str, value: &str| NodeSelectorRequirement {
        key: key.into(),
        operator: "In".into(),
        values: Some(vec![value.to_owned()]),
    };
    let affinity = spec.affinity.get_or_insert_with(Default::default);
    affinity
        .node_affinity
        .get_or_insert_with(NodeAffinity::default)
        .required_during_scheduling_ignored_during_execution = Some(NodeSelector {
        node_selector_terms: vec![NodeSelectorTerm {
            match_fields: Some(vec![in_("metadata.name", name)]),
            match_expressions: hostname_label
                .map(|l| vec![in_(crate::planner::daemon::HOSTNAME_LABEL, l)]),
        }],
    });
}

/// PVC-backed volumes for the claim templates replace same-named template volumes.
fn add_claim_volumes(spec: &mut PodSpec, nodeset: &NodeSet, suffix: &str) {
    let name = nodeset.name_any();
    let templates = &nodeset.spec.volume_claim_templates;
    if templates.is_empty() {
        return;
    }
    let mut volumes: Vec<Volume> = templates
        .iter()
        .map(|t| {
            let claim = t.metadata.name.clone().unwrap_or_default();
            Volume {
                name: claim.clone(),
                persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                    claim_name: format!("{claim}-{name}-{suffix}"),
                    ..Default::default()
                }),
                ..Default::default()
            }
        })
        .collect();
    let existing = spec.volumes.take().unwrap_or_default();
    volumes.extend(existing.into_iter().filter(|v| {
        !templates
            .iter()
            .any(|t| t.metadata.name.as_deref() == Some(&v.name))
    }));
    spec.volumes = Some(volumes);
}

/// What every NodeSet pod shares: the merged template, identity-free.
fn base_pod(
    nodeset: &NodeSet,
    controller: &Controller,
    revision: &str,
    cluster_domain: &str,
) -> Result<Pod, RenderError> {
    let spec = &nodeset.spec;
    let name = nodeset.name_any();
    let namespace = nodeset.namespace().unwrap_or_default();
    let ctrl = &spec.controller_ref.name;

    let mut pod_labels = merge_maps([
        &cr_labels(&nodeset.metadata),
        &spec.template.metadata.labels,
        &labels::worker_labels(&name, ctrl),
    ]);
    pod_labels.insert(
        crate::keys::LABEL_CONTROLLER_REVISION_HASH.into(),
        revision.to_owned(),
    );
    let mut annotations = merge_maps([
        &cr_annotations(&nodeset.metadata),
        &spec.template.metadata.annotations,
    ]);
    let sshd = if spec.ssh.enabled {
        worker_sshd_config(&spec.ssh.extra_sshd_config)
    } else {
        String::new()
    };
    annotations.insert(
        crate::keys::ANNOTATION_SSHD_CONF_HASH.into(),
        checksum(sshd),
    );
    annotations.insert(
        crate::keys::ANNOTATION_DEFAULT_CONTAINER.into(),
        Component::Worker.app().into(),
    );

    let slurm_key = controller.spec.slurm_key_ref.as_ref().ok_or_else(|| {
        RenderError::Invalid(format!(
            "Controller {ctrl:?} has no spec.slurmKeyRef for slurmd"
        ))
    })?;
    let mut volumes = vec![
        projected(
            VOLUME_SLURM_ETC,
            0o600,
            vec![secret_item(
                &slurm_key.name,
                &slurm_key.key,
                "slurm.key",
                None,
            )],
        ),
        memory_empty_dir(VOLUME_LOGFILE),
    ];
    if spec.ssh.enabled {
        let sssd = &spec.ssh.sssd_conf_ref;
        volumes.push(projected(
            VOLUME_SSH_CONFIG,
            0o600,
            vec![config_map_items(
                &ssh_config_name(&name),
                &[(SSHD_CONFIG, SSHD_CONFIG, Some(0o600))],
            )],
        ));
        volumes.push(projected(
            VOLUME_SSSD_CONF,
            0o600,
            vec![secret_item(&sssd.name, &sssd.key, SSSD_CONF, Some(0o600))],
        ));
    }
    let base = PodSpec {
        automount_service_account_token: Some(false),
        enable_service_links: Some(false),
        containers: vec![slurmd_container(nodeset, controller)?],
        init_containers: Some(vec![logfile_container(&spec.logfile.0, SLURMD_LOG_FILE)?]),
        subdomain: Some(service_name(ctrl)),
        dns_config: Some(PodDNSConfig {
            searches: Some(vec![search_domain(ctrl, &namespace, cluster_domain)]),
            ..Default::default()
        }),
        tolerations: Some(vec![Toleration {
            key: Some(crate::keys::TAINT_KEY_WORKER.into()),
            operator: Some("Equal".into()),
            effect: Some("NoExecute".into()),
            ..Default::default()
        }]),
        volumes: Some(volumes),
        ..Default::default()
    };
    let template = pod_template(pod_labels, annotations, base, &spec.template.spec.0)?;
    let mut pod_spec = template.spec.unwrap_or_default();
    if !spec.oversubscribe_node {
        add_one_per_node_anti_affinity(&mut pod_spec);
    }
    // A preset nodeName would bypass the scheduler (and priority classes).
    pod_spec.node_name = None;
    let meta = template.metadata.unwrap_or_default();
    Ok(Pod {
        metadata: ObjectMeta {
            namespace: Some(namespace),
            owner_references: Some(vec![controller_ref(nodeset)?]),
            ..meta
        },
        spec: Some(pod_spec),
        status: None,
    })
}

/// No two slurmd pods (of any NodeSet) on one Kubernetes node.
fn add_one_per_node_anti_affinity(spec: &mut PodSpec) {
    let term = PodAffinityTerm {
        topology_key: "kubernetes.io/hostname".into(),
        label_selector: Some(LabelSelector {
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: crate::keys::LABEL_APP.into(),
                operator: "In".into(),
                values: Some(vec![Component::Worker.app().into()]),
            }]),
            ..Default::default()
        }),
        ..Default::default()
    };
    spec.affinity
        .get_or_insert_with(Affinity::default)
        .pod_anti_affinity
        .get_or_insert_with(PodAntiAffinity::default)
        .required_during_scheduling_ignored_during_execution
        .get_or_insert_with(Vec::new)
        .push(term);
}

fn slurmd_container(nodeset: &NodeSet, controller: &Controller) -> Result<Container, RenderError> {
    let spec = &nodeset.spec;
    let app = Component::Worker.app();
    let mut ports = vec![tcp_port(app, SLURMD_PORT)];
    let mut mounts = vec![
        mount(VOLUME_SLURM_ETC, SLURM_ETC_DIR, true),
        mount(VOLUME_LOGFILE, SLURM_LOG_DIR, false),
    ];
    if spec.ssh.enabled {
        ports.push(tcp_port("ssh", SSH_PORT));
        mounts.push(sub_path_mount(
            VOLUME_SSH_CONFIG,
            "/etc/ssh/sshd_config",
            SSHD_CONFIG,
        ));
        mounts.push(sub_path_mount(
            VOLUME_SSSD_CONF,
            "/etc/sssd/sssd.conf",
            SSSD_CONF,
        ));
    }
    let (cpus, memory_mib) = resource_limits(&spec.template.spec.0, &spec.slurmd.0);
    let base = Container {
        name: app.to_owned(),
        image: Some(SLURMD_IMAGE.to_owned()),
        args: Some(vec![
            "-Z".into(),
            "--conf-server".into(),
            controller_host(controller).conf_server(),
            "--conf".into(),
            slurmd_conf_arg(
                &spec.slurm_nodeset_name(&nodeset.name_any()),
                &spec.extra_conf,
            ),
        ]),
        env: Some(vec![
            EnvVar {
                name: "SLINKY_TOPOLOGY".into(),
                value_from: Some(EnvVarSource {
                    field_ref: Some(ObjectFieldSelector {
                        field_path: format!(
                            "metadata.annotations['{}']",
                            crate::keys::ANNOTATION_TOPOLOGY_SPEC
                        ),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            },
            env("POD_CPUS", cpus.to_string()),
            env("POD_MEMORY", memory_mib.to_string()),
        ]),
        ports: Some(ports),
        startup_probe: Some(http_probe("/livez", app, true)),
        liveness_probe: Some(http_probe("/livez", app, true)),
        readiness_probe: Some(http_probe("/readyz", app, false)),
        security_context: Some(SecurityContext {
            privileged: Some(true),
            capabilities: Some(Capabilities {
                add: Some(
                    ["BPF", "NET_ADMIN", "SYS_ADMIN", "SYS_NICE"]
                        .map(String::from)
                        .to_vec(),
                ),
                ..Default::default()
            }),
            ..Default::default()
        }),
        lifecycle: Some(Lifecycle {
            pre_stop: Some(LifecycleHandler {
                exec: Some(ExecAction {
                    command: Some(vec!["/usr/bin/sh".into(), "-c".into(), PRE_STOP.into()]),
                }),
                ..Default::default()
            }),
            ..Default::default()
        }),
        volume_mounts: Some(mounts),
        ..Default::default()
    };
    merge_container(base, &spec.slurmd.0)
}

/// CPU (whole cores, rounded up) and memory (MiB) limits for slurmd: the slurmd container's
/// limits where set, else the pod-level ones, else 0.
fn resource_limits(pod_spec: &Map<String, Value>, slurmd: &Map<String, Value>) -> (i64, i64) {
    let limit = |obj: &Map<String, Value>, res: &str| {
        obj.get("resources")
            .and_then(|r| r.get("limits"))
            .and_then(|l| l.get(res))
            .and_then(quantity_value)
            .unwrap_or(0)
    };
    let pick = |res: &str| match limit(slurmd, res) {
        0 => limit(pod_spec, res),
        v => v,
    };
    (pick("cpu"), pick("memory") / (1024 * 1024))
}

/// A Kubernetes quantity (`2`, `500m`, `1.5Gi`, `1e3`, `128M`) as an integer, rounded up.
fn quantity_value(v: &Value) -> Option<i64> {
    if let Some(n) = v.as_f64() {
        return Some(n.ceil() as i64);
    }
    let q = kube_support::quantity::parse(v.as_str()?).ok()?;
    Some(q.ceil() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::test_support::with_meta;

    fn controller() -> Controller {
        with_meta(
            "slurm",
            json!({"slurmKeyRef": {"name": "auth-slurm", "key": "slurm.key"}, "jwtKeyRef": {"name": "j", "key": "k"}}),
        )
    }

    fn nodeset(spec: Value) -> NodeSet {
        let mut base = json!({
            "controllerRef": {"name": "slurm"},
            "ordinalPadding": 2,
            "extraConf": "Features=fast Weight=10",
            "slurmd": {"image": "slurmd:1", "args": ["-v"], "resources": {"limits": {"memory": "2Gi"}}},
            "template": {
                "metadata": {"labels": {"pool": "a"}},
                "spec": {"hostname": "gpu-", "resources": {"limits": {"cpu": "1500m", "memory": "8Gi"}}},
            },
        });
        base.as_object_mut()
            .unwrap()
            .extend(spec.as_object().unwrap().clone());
        with_meta("slurm-worker-gpu", base)
    }

    #[test]
    fn statefulset_pod_identity_and_shape() {
        let ns = nodeset(json!({}));
        let pod = pod(&ns, &controller(), 3, "abc123", "cluster.local").unwrap();
        assert_eq!(pod.metadata.name.as_deref(), Some("slurm-worker-gpu-03"));
        assert_eq!(pod.metadata.namespace.as_deref(), Some("slurm"));
        let l = pod.metadata.labels.as_ref().unwrap();
        assert_eq!(
            l["nodeset.slinky.slurm.net/pod-name"],
            "slurm-worker-gpu-03"
        );
        assert_eq!(l["nodeset.slinky.slurm.net/pod-index"], "03");
        assert_eq!(l["nodeset.slinky.slurm.net/pod-hostname"], "gpu-03");
        assert_eq!(l["nodeset.slinky.slurm.net/scaling-mode"], "StatefulSet");
        assert_eq!(l["controller-revision-hash"], "abc123");
        assert_eq!(l["slinky.slurm.net/cluster"], "slurm");
        assert_eq!(l["app.kubernetes.io/name"], "slurmd");
        assert_eq!(l["app.kubernetes.io/instance"], "slurm-worker-gpu");
        assert_eq!(l["app.kubernetes.io/component"], "worker");
        assert_eq!(l["pool"], "a");
        let owner = &pod.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.controller),
            ("NodeSet", Some(true))
        );

        let spec = pod.spec.unwrap();
        assert_eq!(spec.hostname.as_deref(), Some("gpu-03"));
        assert_eq!(spec.subdomain.as_deref(), Some("slurm-workers-slurm"));
        assert_eq!(
            spec.dns_config.unwrap().searches.unwrap(),
            ["slurm-workers-slurm.slurm.svc.cluster.local"]
        );
        let anti = spec.affinity.unwrap().pod_anti_affinity.unwrap();
        assert_eq!(
            anti.required_during_scheduling_ignored_during_execution
                .unwrap()[0]
                .topology_key,
            "kubernetes.io/hostname"
        );
        let tol = &spec.tolerations.unwrap()[0];
        assert_eq!(tol.key.as_deref(), Some("nodeset.slinky.slurm.net/worker"));
        assert_eq!(spec.init_containers.unwrap()[0].name, "logfile");

        let c = &spec.containers[0];
        assert_eq!(c.image.as_deref(), Some("slurmd:1"));
        assert_eq!(
            c.args.as_ref().unwrap(),
            &[
                "-Z",
                "--conf-server",
                "slurm-controller.slurm:6817",
                "--conf",
                r#"'Features=fast,gpu Topology='"$SLINKY_TOPOLOGY"' Weight=10'"#,
                "-v",
            ]
        );
        let env: BTreeMap<_, _> = c
            .env
            .as_ref()
            .unwrap()
            .iter()
            .map(|e| (e.name.as_str(), e.value.clone()))
            .collect();
        assert_eq!(env["POD_CPUS"].as_deref(), Some("2"));
        assert_eq!(env["POD_MEMORY"].as_deref(), Some("2048"));
        assert_eq!(env["SLINKY_TOPOLOGY"], None);
        assert_eq!(c.security_context.as_ref().unwrap().privileged, Some(true));
        assert!(c.lifecycle.as_ref().unwrap().pre_stop.is_some());
        assert_eq!(c.ports.as_ref().unwrap().len(), 1);
    }

    #[test]
    fn oversubscribe_ssh_and_claims() {
        let ns = nodeset(json!({
            "oversubscribeNode": true,
            "ssh": {"enabled": true, "sssdConfRef": {"name": "sssd", "key": "sssd.conf"}},
            "volumeClaimTemplates": [{"metadata": {"name": "scratch"}, "spec": {"accessModes": ["ReadWriteOnce"]}}],
            "template": {"spec": {}},
        }));
        let pod = pod(&ns, &controller(), 0, "r", "example.org").unwrap();
        assert_eq!(pod.metadata.name.as_deref(), Some("slurm-worker-gpu-00"));
        let spec = pod.spec.unwrap();
        assert_eq!(spec.hostname.as_deref(), Some("slurm-worker-gpu-00"));
        assert!(spec.affinity.is_none());
        let volumes: Vec<_> = spec
            .volumes
            .as_ref()
            .unwrap()
            .iter()
            .map(|v| v.name.as_str())
            .collect();
        assert_eq!(
            volumes,
            [
                "scratch",
                "slurm-etc",
                "slurm-logfile",
                "ssh-config",
                "sssd-conf"
            ]
        );
        assert_eq!(
            spec.volumes.as_ref().unwrap()[0]
                .persistent_volume_claim
                .as_ref()
                .unwrap()
                .claim_name,
            "scratch-slurm-worker-gpu-00"
        );
        assert_eq!(
            spec.containers[0].ports.as_ref().unwrap()[1].container_port,
            22
        );
        let claims = pvcs(&ns, 0);
        assert_eq!(
            claims[0].metadata.name.as_deref(),
            Some("scratch-slurm-worker-gpu-00")
        );
        assert_eq!(
            claims[0].metadata.labels.as_ref().unwrap()["app.kubernetes.io/instance"],
            "slurm-worker-gpu"
        );
        let cm = ssh_config_map(&ns).unwrap();
        assert_eq!(
            cm.metadata.name.as_deref(),
            Some("slurm-worker-gpu-ssh-config")
        );
        assert!(
            cm.data.unwrap()["sshd_config"].contains("AuthenticationMethods publickey password")
        );
    }

    #[test]
    fn daemonset_pod() {
        let ns = nodeset(json!({"scalingMode": "DaemonSet"}));
        let pod = daemon_pod(
            &ns,
            &controller(),
            "node-1.example.org",
            None,
            "r",
            "cluster.local",
        )
        .unwrap();
        assert_eq!(
            pod.metadata.generate_name.as_deref(),
            Some("slurm-worker-gpu-")
        );
        assert!(pod.metadata.name.is_none());
        let l = pod.metadata.labels.as_ref().unwrap();
        assert_eq!(l["nodeset.slinky.slurm.net/pod-hostname"], "node-1");
        assert_eq!(l["nodeset.slinky.slurm.net/scaling-mode"], "DaemonSet");
        let spec = pod.spec.unwrap();
        assert_eq!(spec.hostname.as_deref(), Some("node-1"));
        let na = spec.affinity.unwrap().node_affinity.unwrap();
        let term = &na
            .required_during_scheduling_ignored_during_execution
            .unwrap()
            .node_selector_terms[0];
        assert_eq!(
            term.match_fields.as_ref().unwrap()[0]
                .values
                .as_ref()
                .unwrap(),
            &["node-1.example.org"]
        );
        let keys: Vec<&str> = spec
            .tolerations
            .as_ref()
            .unwrap()
            .iter()
            .filter_map(|t| t.key.as_deref())
            .collect();
        assert!(
            keys.contains(&"node.kubernetes.io/unschedulable"),
            "{keys:?}"
        );
        assert!(keys.contains(&"node.kubernetes.io/not-ready"), "{keys:?}");
    }

    #[test]
    fn revision_hash_tracks_pod_shaping_fields_only() {
        let a = nodeset(json!({}));
        let mut b = a.clone();
        b.spec.replicas = Some(7);
        assert_eq!(revision_hash(&a.spec), revision_hash(&b.spec));
        b.spec.extra_conf = "Weight=1".into();
        assert_ne!(revision_hash(&a.spec), revision_hash(&b.spec));
        assert_eq!(revision_hash(&a.spec).len(), 10);
        assert_eq!(
            revision_data(&a.spec)["spec"]["template"]["$patch"],
            "replace"
        );
    }

    #[test]
    fn quantities() {
        let q = |s: &str| quantity_value(&json!(s));
        assert_eq!(q("2"), Some(2));
        assert_eq!(q("1500m"), Some(2));
        assert_eq!(q("1Gi"), Some(1 << 30));
        assert_eq!(q("1G"), Some(1_000_000_000));
        assert_eq!(q("1e3"), Some(1000));
        assert_eq!(quantity_value(&json!(4)), Some(4));
        assert_eq!(q("x"), None);
    }
}
