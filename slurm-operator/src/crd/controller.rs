//! `Controller` (`slurmctld`): the Slurm control plane of one cluster.

use k8s_openapi::api::core::v1::{
    ConfigMapKeySelector, LocalObjectReference, PersistentVolumeClaimSpec, SecretKeySelector,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{
    ContainerWrapper, ExternalConfig, Metrics, OpenObject, PodTemplate, ServiceSpec, is_false,
    pick_jwt_key_ref,
};

super::null::null_means_absent!(ControllerSpec, ControllerStatus);

#[derive(CustomResource, JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "slinky.slurm.net",
    version = "v1beta1",
    kind = "Controller",
    plural = "controllers",
    namespaced,
    derive = "PartialEq",
    status = "ControllerStatus",
    shortname = "slurmctld",
    printcolumn(
        name = "AGE",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    doc = "A Slurm controller (slurmctld) and the slurm.conf of its cluster."
)]
#[schemars(extend("x-kubernetes-validations" = [
        {"rule": "!self.external ? has(self.slurmKeyRef) : true", "message": "slurmKeyRef is required unless external is true"},
        {"rule": "!self.external ? has(self.jwtKeyRef) || has(self.jwtHs256KeyRef) : true", "message": "jwtKeyRef (or the deprecated jwtHs256KeyRef) is required unless external is true"},
        {"rule": "self.external ? has(self.externalConfig) : true", "message": "externalConfig is required when external is true"},
        {"rule": "has(self.ha) && self.ha.enabled ? has(self.persistence) && self.persistence.enabled && has(self.persistence.existingClaim) && self.persistence.existingClaim.size() > 0 : true", "message": "ha.enabled requires persistence.enabled with an existingClaim (a ReadWriteMany PVC)"},
    ]))]
#[serde(rename_all = "camelCase", remote = "Self")]
pub struct ControllerSpec {
    /// Slurm `ClusterName`; empty means `<namespace>_<name>`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cluster_name: String,
    /// `auth/slurm` key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slurm_key_ref: Option<SecretKeySelector>,
    /// Deprecated alias of `jwtKeyRef`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jwt_hs256_key_ref: Option<SecretKeySelector>,
    /// `auth/jwt` HS256 key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jwt_key_ref: Option<SecretKeySelector>,
    /// `auth/jwt` JWKS (`jwks.json`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jwks_key_ref: Option<ConfigMapKeySelector>,
    /// The Accounting CR (same namespace) this cluster reports to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accounting_ref: Option<LocalObjectReference>,
    /// slurmctld runs outside Kubernetes; only `externalConfig` is used.
    #[serde(default, skip_serializing_if = "is_false")]
    #[schemars(extend("default" = false))]
    pub external: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_config: Option<ExternalConfig>,
    /// Backup slurmctld instances sharing the state-save volume.
    #[serde(default, skip_serializing_if = "HighAvailability::is_empty")]
    pub ha: HighAvailability,
    #[serde(default, skip_serializing_if = "OpenObject::is_empty")]
    pub slurmctld: ContainerWrapper,
    /// Reconfigure in place (sidecar runs `scontrol reconfigure`) instead of restarting the pod.
    #[serde(default)]
    #[schemars(extend("default" = false))]
    pub inplace_reconfigure: bool,
    #[serde(default, skip_serializing_if = "OpenObject::is_empty")]
    pub reconfigure: ContainerWrapper,
    #[serde(default, skip_serializing_if = "OpenObject::is_empty")]
    pub logfile: ContainerWrapper,
    #[serde(default, skip_serializing_if = "PodTemplate::is_empty")]
    pub template: PodTemplate,
    /// Appended to `slurm.conf`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub extra_conf: String,
    /// ConfigMaps whose keys are mounted into `/etc/slurm`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub config_file_refs: Vec<LocalObjectReference>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub prolog_script_refs: Vec<LocalObjectReference>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub epilog_script_refs: Vec<LocalObjectReference>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub prolog_slurmctld_script_refs: Vec<LocalObjectReference>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub epilog_slurmctld_script_refs: Vec<LocalObjectReference>,
    /// The state-save volume.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persistence: Option<ControllerPersistence>,
    #[serde(default, skip_serializing_if = "ServiceSpec::is_empty")]
    pub service: ServiceSpec,
    #[serde(default, skip_serializing_if = "Metrics::is_empty")]
    pub metrics: Metrics,
}

/// `spec.ha`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = |s: &mut schemars::Schema| super::common::require(s, &["enabled"]))]
pub struct HighAvailability {
    #[serde(default)]
    #[schemars(extend("default" = false))]
    pub enabled: bool,
    /// Number of backup controllers (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = 1, "minimum" = 1))]
    pub backups: Option<i32>,
}

impl HighAvailability {
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

/// `spec.persistence`: a PVC spec inline, or an existing claim.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ControllerPersistence {
    /// Default true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = true))]
    pub enabled: Option<bool>,
    /// Use this PVC instead of a `statesave` claim template.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub existing_claim: String,
    #[serde(flatten)]
    pub spec: PersistentVolumeClaimSpec,
}

impl ControllerPersistence {
    pub fn enabled(&self) -> bool {
        self.enabled.unwrap_or(true)
    }
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", remote = "Self")]
pub struct ControllerStatus {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
}

impl ControllerSpec {
    /// `spec.clusterName`, or Slinky's default `<namespace>_<name>`.
    pub fn cluster_name_or(&self, namespace: &str, name: &str) -> String {
        if self.cluster_name.is_empty() {
            format!("{namespace}_{name}")
        } else {
            self.cluster_name.clone()
        }
    }

    /// The JWT signing key: `jwtKeyRef`, else the deprecated `jwtHs256KeyRef`.
    pub fn jwt_key_ref(&self) -> Option<&SecretKeySelector> {
        pick_jwt_key_ref(&self.jwt_key_ref, &self.jwt_hs256_key_ref)
    }

    /// Whether the state-save volume is persistent (default true).
    pub fn persistence_enabled(&self) -> bool {
        self.persistence
            .as_ref()
            .is_none_or(ControllerPersistence::enabled)
    }

    /// The existing PVC to use for state save, if set.
    pub fn existing_claim(&self) -> Option<&str> {
        self.persistence
            .as_ref()
            .map(|p| p.existing_claim.as_str())
            .filter(|c| !c.is_empty())
    }

    /// Backup controllers (0 unless `ha.enabled`; default 1 when enabled).
    pub fn ha_backups(&self) -> i32 {
        if self.ha.enabled {
            self.ha.backups.unwrap_or(1).max(1)
        } else {
            0
        }
    }

    /// slurmctld StatefulSet replicas: the primary plus HA backups.
    pub fn replicas(&self) -> i32 {
        1 + self.ha_backups()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HELM_STYLE: &str = r#"
apiVersion: slinky.slurm.net/v1beta1
kind: Controller
metadata:
  name: slurm
  namespace: slurm
spec:
  slurmKeyRef: {name: slurm-auth-slurm, key: slurm.key}
  jwtHs256KeyRef: {name: slurm-auth-jwt, key: jwt.key}
  accountingRef: {name: slurm}
  slurmctld:
    image: ghcr.io/slinkyproject/slurmctld:26.05-ubuntu26.04
    imagePullPolicy: IfNotPresent
    args: [-vvv]
    futureContainerField: {x: 1}
  reconfigure: {image: ghcr.io/slinkyproject/slurmctld:26.05-ubuntu26.04}
  logfile: {image: docker.io/library/alpine:latest}
  template:
    metadata:
      labels: {team: hpc}
    spec:
      priorityClassName: slurm
      tolerations: []
      futurePodField: {y: 2}
  extraConf: |
    SchedulerType=sched/backfill
  configFileRefs: [{name: slurm-config-extra}]
  prologScriptRefs: null
  persistence:
    enabled: true
    accessModes: [ReadWriteOnce]
    resources: {requests: {storage: 4Gi}}
  service: {spec: {type: ClusterIP}}
  metrics:
    enabled: true
    serviceMonitor:
      enabled: true
      interval: 30s
      scrapeTimeout: 25s
      endpoints: [{path: /metrics/jobs}, {path: /metrics/nodes}]
"#;

    #[test]
    fn helm_style_manifest() {
        let c: Controller = serde_yaml::from_str(HELM_STYLE).unwrap();
        let s = &c.spec;
        assert_eq!(s.cluster_name_or("slurm", "slurm"), "slurm_slurm");
        assert_eq!(s.jwt_key_ref().unwrap().name, "slurm-auth-jwt");
        assert_eq!(s.slurm_key_ref.as_ref().unwrap().key, "slurm.key");
        assert_eq!(s.accounting_ref.as_ref().unwrap().name, "slurm");
        assert!(!s.external && !s.inplace_reconfigure);
        assert!(s.persistence_enabled());
        assert_eq!(s.existing_claim(), None);
        assert_eq!(
            s.persistence.as_ref().unwrap().spec.access_modes,
            Some(vec!["ReadWriteOnce".to_string()])
        );
        assert_eq!(s.replicas(), 1);
        assert_eq!(s.config_file_refs[0].name, "slurm-config-extra");
        assert!(s.prolog_script_refs.is_empty());
        assert_eq!(s.service.port_or(6817), 6817);
        assert!(s.metrics.enabled && s.metrics.service_monitor.enabled);
        assert_eq!(
            s.metrics.service_monitor.endpoints[1].path,
            "/metrics/nodes"
        );
        assert_eq!(s.template.metadata.labels["team"], "hpc");

        let json = serde_json::to_value(&c).unwrap();
        let spec = &json["spec"];
        assert_eq!(spec["slurmctld"]["futureContainerField"]["x"], 1);
        assert_eq!(spec["template"]["spec"]["futurePodField"]["y"], 2);
        assert_eq!(spec["jwtHs256KeyRef"]["key"], "jwt.key");
        assert_eq!(spec["configFileRefs"][0]["name"], "slurm-config-extra");
        assert_eq!(
            spec["persistence"]["resources"]["requests"]["storage"],
            "4Gi"
        );
        assert_eq!(spec["metrics"]["serviceMonitor"]["scrapeTimeout"], "25s");
        let back: Controller = serde_json::from_value(json).unwrap();
        assert_eq!(back, c);
    }

    #[test]
    fn empty_and_external() {
        let s: ControllerSpec = serde_yaml::from_str("{}").unwrap();
        assert_eq!(s.cluster_name_or("ns", "n"), "ns_n");
        assert!(s.jwt_key_ref().is_none());
        assert!(s.persistence_enabled());
        assert_eq!(
            serde_json::to_value(&s).unwrap(),
            serde_json::json!({"inplaceReconfigure": false})
        );

        let s: ControllerSpec = serde_yaml::from_str(
            "clusterName: prod\nexternal: true\nexternalConfig: {host: ctl.example.com, port: 6817}\njwtKeyRef: {name: a, key: k}\njwtHs256KeyRef: {name: b, key: k}",
        )
        .unwrap();
        assert_eq!(s.cluster_name_or("ns", "n"), "prod");
        assert_eq!(s.external_config.as_ref().unwrap().host, "ctl.example.com");
        assert_eq!(s.jwt_key_ref().unwrap().name, "a");
    }

    #[test]
    fn high_availability() {
        let s: ControllerSpec = serde_yaml::from_str(
            "ha: {enabled: true}\npersistence: {enabled: true, existingClaim: statesave-rwx}",
        )
        .unwrap();
        assert_eq!(s.ha_backups(), 1);
        assert_eq!(s.replicas(), 2);
        assert_eq!(s.existing_claim(), Some("statesave-rwx"));
        let s: ControllerSpec = serde_yaml::from_str("ha: {enabled: false, backups: 3}").unwrap();
        assert_eq!(s.replicas(), 1);
        let s: ControllerSpec =
            serde_yaml::from_str("ha: {enabled: true, backups: 2}\npersistence: {enabled: false}")
                .unwrap();
        assert_eq!(s.replicas(), 3);
        assert!(!s.persistence_enabled());
    }
}
