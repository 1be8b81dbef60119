//! `RestApi` (`slurmrestd`): the Slurm REST API in front of a Controller.

use k8s_openapi::api::core::v1::LocalObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{ContainerWrapper, OpenObject, PodTemplate, ServiceSpec, is_default, require};

super::null::null_means_absent!(RestApiSpec, RestApiStatus);

#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "slinky.slurm.net",
    version = "v1beta1",
    kind = "RestApi",
    plural = "restapis",
    namespaced,
    derive = "PartialEq",
    status = "RestApiStatus",
    shortname = "slurmrestd",
    printcolumn(
        name = "AGE",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    doc = "A Slurm REST API (slurmrestd) Deployment for a Controller."
)]
#[serde(rename_all = "camelCase", remote = "Self")]
#[schemars(transform = |s: &mut schemars::Schema| require(s, &["controllerRef"]))]
pub struct RestApiSpec {
    /// The Controller (same namespace) to serve.
    #[serde(default, skip_serializing_if = "is_default")]
    pub controller_ref: LocalObjectReference,
    /// Default 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = 1))]
    pub replicas: Option<i32>,
    #[serde(default, skip_serializing_if = "OpenObject::is_empty")]
    pub slurmrestd: ContainerWrapper,
    #[serde(default, skip_serializing_if = "PodTemplate::is_empty")]
    pub template: PodTemplate,
    #[serde(default, skip_serializing_if = "ServiceSpec::is_empty")]
    pub service: ServiceSpec,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", remote = "Self")]
pub struct RestApiStatus {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
}

impl RestApiSpec {
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
        let r: RestApi = serde_yaml::from_str(
            r#"
apiVersion: slinky.slurm.net/v1beta1
kind: RestApi
metadata: {name: slurm, namespace: slurm}
spec:
  controllerRef: {name: slurm}
  slurmrestd:
    image: ghcr.io/slinkyproject/slurmrestd:26.05-ubuntu26.04
    env: [{name: SLURMRESTD_DEBUG, value: "4"}]
  template:
    spec: {priorityClassName: high, futurePodField: x}
  service: {spec: {type: NodePort}, nodePort: 30820}
"#,
        )
        .unwrap();
        assert_eq!(r.spec.controller_ref.name, "slurm");
        assert_eq!(r.spec.replicas(), 1);
        assert_eq!(r.spec.service.node_port, Some(30820));
        assert_eq!(r.spec.service.port_or(6820), 6820);
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["spec"]["template"]["spec"]["futurePodField"], "x");
        assert_eq!(json["spec"]["service"]["nodePort"], 30820);
        assert_eq!(json["spec"]["slurmrestd"]["env"][0]["value"], "4");
        let r: RestApiSpec = serde_yaml::from_str("controllerRef: {name: c}\nreplicas: 0").unwrap();
        assert_eq!(r.replicas(), 0);
    }
}
