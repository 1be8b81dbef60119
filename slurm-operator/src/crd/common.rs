//! Sub-structures shared by several kinds: open wrappers around core types, pod template,
//! service template, metrics, external endpoints, and small serde/schema helpers.

use std::borrow::Cow;
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::SecretKeySelector;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};

/// A JSON object with an open schema (`x-kubernetes-preserve-unknown-fields`): Slinky embeds
/// full core types (PodSpec, Container, ServiceSpec) this way, so every field a user writes
/// survives even when this operator does not know it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(transparent)]
pub struct OpenObject(pub serde_json::Map<String, serde_json::Value>);

impl OpenObject {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn get(&self, key: &str) -> Option<&serde_json::Value> {
        self.0.get(key)
    }

    /// The string at `key`, if it is one.
    pub fn get_str(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(serde_json::Value::as_str)
    }

    /// Decodes the object into a typed value (e.g. `k8s_openapi` `PodSpec`); unknown fields
    /// are dropped by the target type.
    pub fn to_typed<T: serde::de::DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        serde_json::from_value(serde_json::Value::Object(self.0.clone()))
    }
}

impl JsonSchema for OpenObject {
    fn schema_name() -> Cow<'static, str> {
        "OpenObject".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "object",
            "x-kubernetes-preserve-unknown-fields": true
        })
    }
}

/// A `corev1.Container`, merged over the container the operator builds.
pub type ContainerWrapper = OpenObject;

/// Labels and annotations added to generated objects.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Metadata {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

impl Metadata {
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty() && self.annotations.is_empty()
    }
}

/// Pod metadata plus a `corev1.PodSpec` merged over the operator's base pod.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodTemplate {
    #[serde(default, skip_serializing_if = "Metadata::is_empty")]
    pub metadata: Metadata,
    #[serde(default, skip_serializing_if = "OpenObject::is_empty")]
    pub spec: OpenObject,
}

impl PodTemplate {
    pub fn is_empty(&self) -> bool {
        self.metadata.is_empty() && self.spec.is_empty()
    }

    /// `spec.hostname` as written (Slinky's Helm chart sets it to `<nodeset>-`).
    pub fn hostname(&self) -> Option<&str> {
        self.spec.get_str("hostname")
    }
}

/// Template for a generated Service: metadata, a `corev1.ServiceSpec` merged over the
/// operator's, and the service port (0 or unset: the component's default port).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServiceSpec {
    #[serde(default, skip_serializing_if = "Metadata::is_empty")]
    pub metadata: Metadata,
    #[serde(default, skip_serializing_if = "OpenObject::is_empty")]
    pub spec: OpenObject,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_port: Option<i32>,
}

impl ServiceSpec {
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    /// The service port, or `default` when unset or 0.
    pub fn port_or(&self, default: i32) -> i32 {
        match self.port {
            Some(p) if p != 0 => p,
            _ => default,
        }
    }
}

/// Metrics collection (slurmctld's OpenMetrics endpoint and an optional ServiceMonitor).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Metrics {
    #[serde(default)]
    #[schemars(extend("default" = false))]
    pub enabled: bool,
    #[serde(default, skip_serializing_if = "ServiceMonitor::is_empty")]
    pub service_monitor: ServiceMonitor,
}

impl Metrics {
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

/// A Prometheus-operator ServiceMonitor for the metrics endpoints.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServiceMonitor {
    #[serde(default)]
    #[schemars(extend("default" = false))]
    pub enabled: bool,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    /// Prometheus duration, e.g. `30s`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scrape_timeout: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub endpoints: Vec<MetricEndpoint>,
}

impl ServiceMonitor {
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MetricEndpoint {
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scrape_timeout: Option<String>,
}

/// Where an external (not operator-run) component listens.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExternalConfig {
    pub host: String,
    pub port: i32,
}

/// `jwtKeyRef` wins over the deprecated `jwtHs256KeyRef`.
pub(crate) fn pick_jwt_key_ref<'a>(
    jwt_key_ref: &'a Option<SecretKeySelector>,
    jwt_hs256_key_ref: &'a Option<SecretKeySelector>,
) -> Option<&'a SecretKeySelector> {
    jwt_key_ref.as_ref().or(jwt_hs256_key_ref.as_ref())
}

/// Schema transform: lists `fields` as required even though serde defaults them (the API
/// server enforces presence; our deserializer stays lenient for partial manifests).
pub(crate) fn require(schema: &mut Schema, fields: &[&str]) {
    let Some(obj) = schema.as_object_mut() else {
        return;
    };
    let required = obj
        .entry("required")
        .or_insert_with(|| serde_json::Value::Array(Vec::new()));
    if let Some(list) = required.as_array_mut() {
        for f in fields {
            if !list.iter().any(|v| v == f) {
                list.push((*f).into());
            }
        }
    }
}

pub(crate) fn is_false(b: &bool) -> bool {
    !*b
}

pub(crate) fn is_default<T: Default + PartialEq>(v: &T) -> bool {
    *v == T::default()
}

/// Parses a Go `time.Duration` string (`15m`, `1h30m`, `1.5s`, `300ms`, `0`), the format of
/// Kubernetes `metav1.Duration` fields. Negative or malformed durations give `None`.
pub fn parse_go_duration(s: &str) -> Option<std::time::Duration> {
    let s = s.trim();
    if s.is_empty() {
        return None;
    }
    let d: kube::core::Duration = s.parse().ok()?;
    if d.is_negative() {
        return None;
    }
    Some(d.into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn go_durations() {
        assert_eq!(parse_go_duration("15m"), Some(Duration::from_secs(900)));
        assert_eq!(parse_go_duration("1h30m"), Some(Duration::from_secs(5400)));
        assert_eq!(parse_go_duration("1.5s"), Some(Duration::from_millis(1500)));
        assert_eq!(parse_go_duration("300ms"), Some(Duration::from_millis(300)));
        assert_eq!(parse_go_duration("0"), Some(Duration::ZERO));
        assert_eq!(parse_go_duration("-1m"), None);
        assert_eq!(parse_go_duration("10"), None);
        assert_eq!(parse_go_duration("1d"), None);
        assert_eq!(parse_go_duration(""), None);
    }

    #[test]
    fn open_object_keeps_unknown_fields() {
        let yaml = "metadata:\n  labels: {a: b}\nspec:\n  hostname: gpu-\n  futureField: {x: 1}\n";
        let t: PodTemplate = serde_saphyr_from_str(yaml);
        assert_eq!(t.hostname(), Some("gpu-"));
        let back = serde_json::to_value(&t).unwrap();
        assert_eq!(back["spec"]["futureField"]["x"], 1);
        assert_eq!(back["metadata"]["labels"]["a"], "b");
    }

    #[test]
    fn service_port_default() {
        let s = ServiceSpec::default();
        assert_eq!(s.port_or(6817), 6817);
        let s = ServiceSpec {
            port: Some(0),
            ..Default::default()
        };
        assert_eq!(s.port_or(6817), 6817);
        let s = ServiceSpec {
            port: Some(30000),
            ..Default::default()
        };
        assert_eq!(s.port_or(6817), 30000);
    }

    fn serde_saphyr_from_str<T: serde::de::DeserializeOwned>(s: &str) -> T {
        serde_yaml::from_str(s).unwrap()
    }
}
