//! `LoginSet` (`sackd`): login pods (sackd + sshd) for a Controller's cluster.

use k8s_openapi::api::apps::v1::DeploymentStrategy;
use k8s_openapi::api::core::v1::{LocalObjectReference, SecretKeySelector};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{ContainerWrapper, OpenObject, PodTemplate, ServiceSpec, is_default, require};

super::null::null_means_absent!(LoginSetSpec, LoginSetStatus);

#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "slinky.slurm.net",
    version = "v1beta1",
    kind = "LoginSet",
    plural = "loginsets",
    namespaced,
    derive = "PartialEq",
    status = "LoginSetStatus",
    shortname = "loginsets",
    shortname = "lss",
    shortname = "sackd",
    scale(
        spec_replicas_path = ".spec.replicas",
        status_replicas_path = ".status.replicas",
        label_selector_path = ".status.selector"
    ),
    printcolumn(
        name = "REPLICAS",
        type_ = "integer",
        json_path = ".status.replicas",
        description = "Current number of pods."
    ),
    printcolumn(
        name = "AGE",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    doc = "Slurm login pods (sackd, sshd, SSSD) for a Controller's cluster."
)]
#[serde(rename_all = "camelCase", remote = "Self")]
#[schemars(transform = |s: &mut schemars::Schema| require(s, &["controllerRef", "sssdConfRef"]))]
pub struct LoginSetSpec {
    /// The Controller (same namespace) whose cluster users log in to.
    #[serde(default, skip_serializing_if = "is_default")]
    pub controller_ref: LocalObjectReference,
    /// Default 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = 1))]
    pub replicas: Option<i32>,
    #[serde(default, skip_serializing_if = "OpenObject::is_empty")]
    pub login: ContainerWrapper,
    /// The init container that copies Slurm config and keys into place.
    #[serde(default, skip_serializing_if = "OpenObject::is_empty")]
    pub initconf: ContainerWrapper,
    #[serde(default, skip_serializing_if = "PodTemplate::is_empty")]
    pub template: PodTemplate,
    /// Written to root's `authorized_keys`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub root_ssh_authorized_keys: String,
    /// Appended to `sshd_config`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub extra_sshd_config: String,
    /// Secret key holding `sssd.conf`.
    #[serde(default, skip_serializing_if = "is_default")]
    pub sssd_conf_ref: SecretKeySelector,
    /// Deployment strategy of the login pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy: Option<DeploymentStrategy>,
    #[serde(default, skip_serializing_if = "ServiceSpec::is_empty")]
    pub service: ServiceSpec,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", remote = "Self")]
#[schemars(transform = |s: &mut schemars::Schema| require(s, &["selector"]))]
pub struct LoginSetStatus {
    /// Replicas of the login Deployment.
    #[serde(default, skip_serializing_if = "is_default")]
    pub replicas: i32,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// Label selector string of the pods (scale subresource).
    #[serde(default)]
    pub selector: String,
}

impl LoginSetSpec {
    /// Deployment replicas (default 1).
    pub fn replicas(&self) -> i32 {
        self.replicas.unwrap_or(1).max(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn helm_style_manifest() {
        let l: LoginSet = serde_yaml::from_str(
            r#"
apiVersion: slinky.slurm.net/v1beta1
kind: LoginSet
metadata: {name: slurm-login-slinky, namespace: slurm}
spec:
  controllerRef: {name: slurm}
  replicas: 2
  login:
    image: ghcr.io/slinkyproject/login:26.05-ubuntu26.04
    securityContext: {privileged: false}
  initconf: {image: docker.io/library/alpine:latest}
  rootSshAuthorizedKeys: |
    ssh-ed25519 AAAA user@host
  extraSshdConfig: LogLevel DEBUG3
  sssdConfRef: {name: slurm-sssd-conf, key: sssd.conf}
  strategy: {type: RollingUpdate, rollingUpdate: {maxUnavailable: 1}}
  template:
    spec: {futurePodField: true}
  service:
    spec: {type: LoadBalancer}
    port: 2222
status:
  replicas: 2
  selector: app.kubernetes.io/instance=slurm-login-slinky,app.kubernetes.io/name=login
"#,
        )
        .unwrap();
        let s = &l.spec;
        assert_eq!(s.replicas(), 2);
        assert_eq!(s.sssd_conf_ref.name, "slurm-sssd-conf");
        assert_eq!(
            s.strategy.as_ref().unwrap().type_.as_deref(),
            Some("RollingUpdate")
        );
        assert_eq!(s.service.port_or(22), 2222);
        assert!(s.root_ssh_authorized_keys.starts_with("ssh-ed25519"));
        assert_eq!(l.status.as_ref().unwrap().replicas, 2);
        let json = serde_json::to_value(&l).unwrap();
        assert_eq!(
            json["spec"]["rootSshAuthorizedKeys"],
            "ssh-ed25519 AAAA user@host\n"
        );
        assert_eq!(json["spec"]["extraSshdConfig"], "LogLevel DEBUG3");
        assert_eq!(json["spec"]["template"]["spec"]["futurePodField"], true);
        assert_eq!(
            json["spec"]["login"]["securityContext"]["privileged"],
            false
        );
        let s: LoginSetSpec = serde_yaml::from_str("controllerRef: {name: c}").unwrap();
        assert_eq!(s.replicas(), 1);
    }
}
