//! `NodeSet` (`slurmd`): a set of Slurm worker pods, managed directly by the operator.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{LocalObjectReference, PersistentVolumeClaim, SecretKeySelector};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{
    ContainerWrapper, OpenObject, PodTemplate, is_default, is_false, parse_go_duration, require,
};

super::null::null_means_absent!(NodeSetSpec, NodeSetStatus);

// The printer columns repeat `type_`/`priority`, which the lint takes for duplicates.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "slinky.slurm.net",
    version = "v1beta1",
    kind = "NodeSet",
    plural = "nodesets",
    namespaced,
    derive = "PartialEq",
    status = "NodeSetStatus",
    shortname = "nodesets",
    shortname = "nss",
    shortname = "slurmd",
    scale(
        spec_replicas_path = ".spec.replicas",
        status_replicas_path = ".status.replicas",
        label_selector_path = ".status.selector"
    ),
    printcolumn(
        name = "DESIRED",
        type_ = "integer",
        json_path = ".status.desired",
        description = "Nodes matching the node selector and tolerations (DaemonSet mode) or replicas (StatefulSet mode)."
    ),
    printcolumn(
        name = "REPLICAS",
        type_ = "integer",
        json_path = ".status.replicas",
        description = "Current number of pods."
    ),
    printcolumn(
        name = "UPDATED",
        type_ = "integer",
        json_path = ".status.updatedReplicas",
        description = "Pods at the current revision."
    ),
    printcolumn(
        name = "READY",
        type_ = "integer",
        json_path = ".status.readyReplicas",
        description = "Ready pods."
    ),
    printcolumn(
        name = "IDLE",
        type_ = "integer",
        json_path = ".status.slurmIdle",
        priority = 1,
        description = "IDLE Slurm nodes."
    ),
    printcolumn(
        name = "ALLOCATED",
        type_ = "integer",
        json_path = ".status.slurmAllocated",
        priority = 1,
        description = "ALLOCATED or MIXED Slurm nodes."
    ),
    printcolumn(
        name = "DOWN",
        type_ = "integer",
        json_path = ".status.slurmDown",
        priority = 1,
        description = "DOWN Slurm nodes."
    ),
    printcolumn(
        name = "DRAIN",
        type_ = "integer",
        json_path = ".status.slurmDrain",
        priority = 1,
        description = "DRAIN Slurm nodes."
    ),
    printcolumn(
        name = "AGE",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    doc = "A set of Slurm worker (slurmd) pods joined to a Controller's cluster."
)]
#[serde(rename_all = "camelCase", remote = "Self")]
#[schemars(transform = |s: &mut schemars::Schema| require(s, &["controllerRef"]))]
pub struct NodeSetSpec {
    /// The Controller (same namespace) whose cluster the nodes join.
    #[serde(default, skip_serializing_if = "is_default")]
    pub controller_ref: LocalObjectReference,
    /// Desired pods in StatefulSet mode (default 1; 0 scales to zero).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = 1))]
    pub replicas: Option<i32>,
    #[serde(default)]
    pub scaling_mode: ScalingMode,
    #[serde(default, skip_serializing_if = "OpenObject::is_empty")]
    pub slurmd: ContainerWrapper,
    #[serde(default, skip_serializing_if = "NodeSetSsh::is_empty")]
    pub ssh: NodeSetSsh,
    #[serde(default, skip_serializing_if = "OpenObject::is_empty")]
    pub logfile: ContainerWrapper,
    /// `spec.hostname` is the Slurm node name prefix (`<prefix><ordinal>`).
    #[serde(default, skip_serializing_if = "PodTemplate::is_empty")]
    pub template: PodTemplate,
    /// Space-separated `Key=Value` node parameters passed to `slurmd --conf`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub extra_conf: String,
    #[serde(default, skip_serializing_if = "NodeSetPartition::is_empty")]
    pub partition: NodeSetPartition,
    /// Claims templated per pod (`<claim>-<pod>`); schemaless, like Slinky's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "schemaless_list")]
    pub volume_claim_templates: Vec<PersistentVolumeClaim>,
    #[serde(default, skip_serializing_if = "is_default")]
    pub update_strategy: NodeSetUpdateStrategy,
    #[serde(default)]
    #[schemars(extend("default" = 0))]
    pub revision_history_limit: i32,
    #[serde(default, skip_serializing_if = "is_default")]
    pub persistent_volume_claim_retention_policy: PersistentVolumeClaimRetentionPolicy,
    #[serde(default, skip_serializing_if = "is_default")]
    pub min_ready_seconds: i32,
    /// Zero-pad pod ordinals to this many digits (StatefulSet mode).
    #[serde(default, skip_serializing_if = "is_default")]
    #[schemars(with = "i32", extend("default" = 0))]
    pub ordinal_padding: u32,
    /// Pin each ordinal to the node it last ran on (StatefulSet mode).
    #[serde(default)]
    #[schemars(extend("default" = false))]
    pub pin_to_node: bool,
    /// Protect pods running Slurm jobs with the cluster PDB (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = true))]
    pub workload_disruption_protection: Option<bool>,
    #[serde(default)]
    pub prune_slurm_node_records: PruneSlurmNodeRecords,
    /// Allow several worker pods per Kubernetes node (no anti-affinity).
    #[serde(default, skip_serializing_if = "is_false")]
    #[schemars(extend("default" = false))]
    pub oversubscribe_node: bool,
}

fn schemaless_list(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "array",
        "items": { "type": "object", "x-kubernetes-preserve-unknown-fields": true },
        "x-kubernetes-preserve-unknown-fields": true
    })
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[schemars(extend("default" = "StatefulSet"))]
pub enum ScalingMode {
    /// A fixed number of replicas with stable ordinals.
    #[default]
    StatefulSet,
    /// One pod per eligible Kubernetes node.
    DaemonSet,
}

impl ScalingMode {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::StatefulSet => "StatefulSet",
            Self::DaemonSet => "DaemonSet",
        }
    }
}

/// `spec.ssh`: sshd in the worker pods.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = |s: &mut schemars::Schema| require(s, &["enabled", "sssdConfRef"]))]
pub struct NodeSetSsh {
    #[serde(default)]
    #[schemars(extend("default" = false))]
    pub enabled: bool,
    /// Appended to `sshd_config`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub extra_sshd_config: String,
    /// Secret key holding `sssd.conf`.
    #[serde(default, skip_serializing_if = "is_default")]
    pub sssd_conf_ref: SecretKeySelector,
}

impl NodeSetSsh {
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

/// `spec.partition`: a Slurm partition made of just this NodeSet.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = |s: &mut schemars::Schema| require(s, &["enabled"]))]
pub struct NodeSetPartition {
    #[serde(default)]
    #[schemars(extend("default" = false))]
    pub enabled: bool,
    /// Appended to the `PartitionName=` line; one line only.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(regex(pattern = r"^[^\n]+$"))]
    pub config: String,
}

impl NodeSetPartition {
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

/// `spec.updateStrategy`.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new(
    "self.type != 'ScheduledUpdate' || (has(self.scheduledUpdate.startTime) && has(self.scheduledUpdate.duration))"
).message("type ScheduledUpdate requires scheduledUpdate.startTime and scheduledUpdate.duration"))]
pub struct NodeSetUpdateStrategy {
    #[serde(default, rename = "type")]
    pub type_: UpdateStrategyType,
    #[serde(default, skip_serializing_if = "is_default")]
    pub rolling_update: RollingUpdateStrategy,
    #[serde(default, skip_serializing_if = "is_default")]
    pub scheduled_update: ScheduledUpdateStrategy,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[schemars(extend("default" = "RollingUpdate"))]
pub enum UpdateStrategyType {
    /// Replace old-revision pods, at most `maxUnavailable` at a time (drained first).
    #[default]
    RollingUpdate,
    /// Replace pods only when they are deleted.
    OnDelete,
    /// Replace pods inside a Slurm maintenance reservation.
    ScheduledUpdate,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RollingUpdateStrategy {
    /// Absolute number or percentage of replicas (rounded up); default `25%`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "25%"))]
    pub max_unavailable: Option<IntOrString>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ScheduledUpdateStrategy {
    /// Reservation start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,
    /// Go duration of the reservation (default `30m`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "30m"))]
    pub duration: Option<String>,
    /// Extra Slurm reservation flags.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flags: Vec<String>,
}

/// What happens to volume-claim-template PVCs.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PersistentVolumeClaimRetentionPolicy {
    #[serde(default)]
    pub when_deleted: PvcRetention,
    #[serde(default)]
    pub when_scaled: PvcRetention,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[schemars(extend("default" = "Retain"))]
pub enum PvcRetention {
    #[default]
    Retain,
    Delete,
}

/// Whether Slurm node records of vanished DaemonSet-mode nodes are deleted.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[schemars(extend("default" = "Never"))]
pub enum PruneSlurmNodeRecords {
    #[default]
    Never,
    NodeNotFound,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", remote = "Self")]
#[schemars(transform = |s: &mut schemars::Schema| require(s, &["nodeSetHash", "selector"]))]
pub struct NodeSetStatus {
    #[serde(default, skip_serializing_if = "is_default")]
    pub replicas: i32,
    #[serde(default, skip_serializing_if = "is_default")]
    pub updated_replicas: i32,
    #[serde(default, skip_serializing_if = "is_default")]
    pub ready_replicas: i32,
    #[serde(default, skip_serializing_if = "is_default")]
    pub available_replicas: i32,
    #[serde(default, skip_serializing_if = "is_default")]
    pub unavailable_replicas: i32,
    /// Replicas (StatefulSet mode) or eligible nodes (DaemonSet mode).
    #[serde(default, skip_serializing_if = "is_default")]
    pub desired: i32,
    #[serde(default, skip_serializing_if = "is_default")]
    pub slurm_idle: i32,
    /// ALLOCATED plus MIXED.
    #[serde(default, skip_serializing_if = "is_default")]
    pub slurm_allocated: i32,
    #[serde(default, skip_serializing_if = "is_default")]
    pub slurm_down: i32,
    #[serde(default, skip_serializing_if = "is_default")]
    pub slurm_drain: i32,
    #[serde(default, skip_serializing_if = "is_default")]
    pub observed_generation: i64,
    /// `controller-revision-hash` of the update revision.
    #[serde(default)]
    pub node_set_hash: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collision_count: Option<i32>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// Ordinal (not padded) -> the Kubernetes node its pod is pinned to (only with `pinToNode`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub ordinal_to_node: BTreeMap<String, String>,
    /// Label selector string of the pods (scale subresource).
    #[serde(default)]
    pub selector: String,
}

impl NodeSetSpec {
    /// Desired replicas (default 1); meaningless in DaemonSet mode.
    pub fn replicas(&self) -> i32 {
        self.replicas.unwrap_or(1).max(0)
    }

    /// `template.spec.hostname` as written (e.g. `gpu-`), if set and non-empty.
    pub fn hostname_prefix(&self) -> Option<&str> {
        self.template.hostname().filter(|h| !h.is_empty())
    }

    /// The Slurm NodeSet (and Feature, and partition) name: the first whitespace-separated
    /// field of `template.spec.hostname` with `-` trimmed, else the CR name.
    pub fn slurm_nodeset_name(&self, cr_name: &str) -> String {
        self.hostname_prefix()
            .and_then(|h| h.split_whitespace().next())
            .map(|h| h.trim_matches('-'))
            .filter(|h| !h.is_empty())
            .unwrap_or(cr_name)
            .to_string()
    }

    pub fn update_strategy_type(&self) -> UpdateStrategyType {
        self.update_strategy.type_
    }

    /// `rollingUpdate.maxUnavailable`, default `25%`.
    pub fn max_unavailable(&self) -> IntOrString {
        self.update_strategy
            .rolling_update
            .max_unavailable
            .clone()
            .unwrap_or_else(|| IntOrString::String("25%".into()))
    }

    /// `scheduledUpdate.duration`, default 30 minutes; `None` if malformed.
    pub fn scheduled_update_duration(&self) -> Option<std::time::Duration> {
        match &self.update_strategy.scheduled_update.duration {
            Some(d) => parse_go_duration(d),
            None => Some(std::time::Duration::from_secs(30 * 60)),
        }
    }

    /// Default true.
    pub fn workload_disruption_protection(&self) -> bool {
        self.workload_disruption_protection.unwrap_or(true)
    }

    pub fn is_daemonset(&self) -> bool {
        self.scaling_mode == ScalingMode::DaemonSet
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(yaml: &str) -> NodeSetSpec {
        serde_yaml::from_str(yaml).unwrap()
    }

    #[test]
    fn nodeset_name_from_hostname() {
        let s = spec("controllerRef: {name: slurm}\ntemplate: {spec: {hostname: gpu-}}");
        assert_eq!(s.hostname_prefix(), Some("gpu-"));
        assert_eq!(s.slurm_nodeset_name("slurm-worker-gpu"), "gpu");
        let s = spec("controllerRef: {name: slurm}\ntemplate: {spec: {hostname: ' a-b- x'}}");
        assert_eq!(s.slurm_nodeset_name("cr"), "a-b");
        let s = spec("controllerRef: {name: slurm}\ntemplate: {spec: {hostname: '-'}}");
        assert_eq!(s.slurm_nodeset_name("cr"), "cr");
        let s = spec("controllerRef: {name: slurm}");
        assert_eq!(s.hostname_prefix(), None);
        assert_eq!(s.slurm_nodeset_name("cr"), "cr");
    }

    #[test]
    fn defaults() {
        let s = spec("controllerRef: {name: slurm}");
        assert_eq!(s.replicas(), 1);
        assert_eq!(s.scaling_mode, ScalingMode::StatefulSet);
        assert_eq!(s.update_strategy_type(), UpdateStrategyType::RollingUpdate);
        assert_eq!(s.max_unavailable(), IntOrString::String("25%".into()));
        assert_eq!(
            s.scheduled_update_duration(),
            Some(std::time::Duration::from_secs(1800))
        );
        assert!(s.workload_disruption_protection());
        assert_eq!(s.prune_slurm_node_records, PruneSlurmNodeRecords::Never);
        assert_eq!(
            s.persistent_volume_claim_retention_policy.when_scaled,
            PvcRetention::Retain
        );
        let s = spec(
            "controllerRef: {name: slurm}\nreplicas: 0\nscalingMode: DaemonSet\nupdateStrategy: {type: OnDelete, rollingUpdate: {maxUnavailable: 2}}",
        );
        assert_eq!(s.replicas(), 0);
        assert!(s.is_daemonset());
        assert_eq!(s.update_strategy_type(), UpdateStrategyType::OnDelete);
        assert_eq!(s.max_unavailable(), IntOrString::Int(2));
    }
}

#[cfg(test)]
mod manifest_tests {
    use super::*;

    const HELM_STYLE: &str = r#"
apiVersion: slinky.slurm.net/v1beta1
kind: NodeSet
metadata:
  name: slurm-worker-gpu
  namespace: slurm
spec:
  controllerRef: {name: slurm}
  replicas: 3
  slurmd:
    image: ghcr.io/slinkyproject/slurmd:26.05-ubuntu26.04
    resources: {limits: {nvidia.com/gpu: 8}}
    futureContainerField: true
  logfile: {image: docker.io/library/alpine:latest}
  extraConf: Features=a100 Gres=gpu:8
  partition: {enabled: true, config: State=UP MaxTime=INFINITE}
  ssh:
    enabled: true
    sssdConfRef: {name: slurm-sssd-conf, key: sssd.conf}
  template:
    metadata:
      annotations: {a: b}
    spec:
      hostname: gpu-
      nodeSelector: {kubernetes.io/os: linux}
      futurePodField: [1, 2]
  volumeClaimTemplates:
    - metadata: {name: scratch}
      spec:
        accessModes: [ReadWriteOnce]
        resources: {requests: {storage: 10Gi}}
  updateStrategy:
    type: ScheduledUpdate
    scheduledUpdate:
      startTime: "2026-09-01T02:00:00Z"
      duration: 2h
      flags: [FLEX]
  persistentVolumeClaimRetentionPolicy: {whenDeleted: Delete}
  ordinalPadding: 2
  pinToNode: true
  workloadDisruptionProtection: false
  pruneSlurmNodeRecords: NodeNotFound
status:
  replicas: 3
  readyReplicas: 2
  slurmIdle: 1
  nodeSetHash: 6d5f
  selector: app.kubernetes.io/instance=slurm-worker-gpu,app.kubernetes.io/name=slurmd
  ordinalToNode: {"00": node-a}
  conditions:
    - type: ReservationCreated
      status: "True"
      reason: Created
      message: ""
      lastTransitionTime: "2026-08-01T00:00:00Z"
"#;

    #[test]
    fn helm_style_manifest() {
        let n: NodeSet = serde_yaml::from_str(HELM_STYLE).unwrap();
        let s = &n.spec;
        assert_eq!(s.controller_ref.name, "slurm");
        assert_eq!(s.replicas(), 3);
        assert_eq!(s.slurm_nodeset_name("slurm-worker-gpu"), "gpu");
        assert!(s.partition.enabled && s.ssh.enabled);
        assert_eq!(s.ssh.sssd_conf_ref.key, "sssd.conf");
        assert_eq!(
            s.update_strategy_type(),
            UpdateStrategyType::ScheduledUpdate
        );
        let sched = &s.update_strategy.scheduled_update;
        assert_eq!(
            sched.start_time.as_ref().unwrap().0.as_second(),
            1_788_228_000
        );
        assert_eq!(
            s.scheduled_update_duration(),
            Some(std::time::Duration::from_secs(7200))
        );
        assert_eq!(sched.flags, ["FLEX"]);
        let pvc = &s.persistent_volume_claim_retention_policy;
        assert_eq!(
            (pvc.when_deleted, pvc.when_scaled),
            (PvcRetention::Delete, PvcRetention::Retain)
        );
        assert_eq!(
            s.volume_claim_templates[0].metadata.name.as_deref(),
            Some("scratch")
        );
        assert_eq!(s.ordinal_padding, 2);
        assert!(s.pin_to_node && !s.workload_disruption_protection());
        assert_eq!(
            s.prune_slurm_node_records,
            PruneSlurmNodeRecords::NodeNotFound
        );
        let st = n.status.as_ref().unwrap();
        assert_eq!((st.replicas, st.ready_replicas, st.slurm_idle), (3, 2, 1));
        assert_eq!(st.ordinal_to_node["00"], "node-a");
        assert_eq!(st.conditions[0].type_, "ReservationCreated");

        let json = serde_json::to_value(&n).unwrap();
        assert_eq!(json["spec"]["slurmd"]["futureContainerField"], true);
        assert_eq!(json["spec"]["template"]["spec"]["futurePodField"][1], 2);
        assert_eq!(json["spec"]["template"]["spec"]["hostname"], "gpu-");
        assert_eq!(json["spec"]["updateStrategy"]["type"], "ScheduledUpdate");
        assert_eq!(
            json["spec"]["persistentVolumeClaimRetentionPolicy"]["whenDeleted"],
            "Delete"
        );
        assert_eq!(json["spec"]["workloadDisruptionProtection"], false);
        assert_eq!(json["status"]["nodeSetHash"], "6d5f");
        assert_eq!(json["status"]["ordinalToNode"]["00"], "node-a");
        let back: NodeSet = serde_json::from_value(json).unwrap();
        assert_eq!(back, n);
    }

    #[test]
    fn status_may_be_partial() {
        let st: NodeSetStatus = serde_yaml::from_str("{}").unwrap();
        assert_eq!(st, NodeSetStatus::default());
    }
}
