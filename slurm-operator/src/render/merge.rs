//! User-supplied pod specs, containers and service specs merged over the ones the operator builds,
//! with Kubernetes strategic-merge semantics, the way Slinky does it.
//!
//! Rules: objects merge key by key (user wins on scalars); `null` in the user JSON is ignored
//! (Slinky drops empty fields before patching); lists of named things merge element-wise by
//! their key (`containers`/`initContainers`/`volumes`/`env`/… by `name`, `volumeMounts` by
//! `mountPath`, `ports` by `containerPort` or, for Services, `port`), unmatched user elements
//! are appended; `args` is concatenated, base first; a user probe or lifecycle handler
//! (`exec`/`httpGet`/`tcpSocket`/`grpc`/`sleep`) replaces the base handler but keeps the base
//! thresholds; every other list is replaced by the user's.

use k8s_openapi::api::core::v1::{Container, PodSpec, ServiceSpec};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::RenderError;

/// `base` with `user` merged over it.
pub fn merge_container(
    base: Container,
    user: &Map<String, Value>,
) -> Result<Container, RenderError> {
    merge_typed(base, user, "container")
}

/// `base` with `user` (a `template.spec`) merged over it.
pub fn merge_pod_spec(base: PodSpec, user: &Map<String, Value>) -> Result<PodSpec, RenderError> {
    merge_typed(base, user, "pod template spec")
}

/// `base` with `user` (a `service.spec`) merged over it.
pub fn merge_service_spec(
    base: ServiceSpec,
    user: &Map<String, Value>,
) -> Result<ServiceSpec, RenderError> {
    merge_typed(base, user, "service spec")
}

/// Serializes `base`, merges `user` over it and reads the result back as `T`.
pub fn merge_typed<T: Serialize + DeserializeOwned>(
    base: T,
    user: &Map<String, Value>,
    what: &'static str,
) -> Result<T, RenderError> {
    if user.is_empty() {
        return Ok(base);
    }
    let mut value =
        serde_json::to_value(&base).map_err(|source| RenderError::Merge { what, source })?;
    merge_value(&mut value, &Value::Object(user.clone()));
    serde_json::from_value(value).map_err(|source| RenderError::Merge { what, source })
}

/// Strategic merge of `patch` into `base` (see the module docs for the rules).
pub fn merge_value(base: &mut Value, patch: &Value) {
    match (base, patch) {
        (Value::Object(b), Value::Object(p)) => merge_object(b, p),
        (_, Value::Null) => {}
        (b, p) => *b = p.clone(),
    }
}

fn merge_object(base: &mut Map<String, Value>, patch: &Map<String, Value>) {
    for (key, pv) in patch {
        if pv.is_null() {
            continue;
        }
        let Some(bv) = base.get_mut(key) else {
            base.insert(key.clone(), strip_nulls(pv));
            continue;
        };
        match (bv, pv) {
            (Value::Object(b), Value::Object(p)) => {
                if HANDLER_FIELDS.contains(&key.as_str()) && has_handler(p) {
                    b.retain(|k, _| !HANDLER_KEYS.contains(&k.as_str()));
                }
                merge_object(b, p);
            }
            (Value::Array(b), Value::Array(p)) => merge_list(key, b, p),
            (b, p) => *b = strip_nulls(p),
        }
    }
}

/// Fields holding a probe or lifecycle handler: exactly one handler may be set.
const HANDLER_FIELDS: &[&str] = &[
    "livenessProbe",
    "readinessProbe",
    "startupProbe",
    "postStart",
    "preStop",
];
const HANDLER_KEYS: &[&str] = &["exec", "httpGet", "tcpSocket", "grpc", "sleep"];

fn has_handler(obj: &Map<String, Value>) -> bool {
    HANDLER_KEYS
        .iter()
        .any(|k| obj.get(*k).is_some_and(|v| !v.is_null()))
}

fn merge_list(field: &str, base: &mut Vec<Value>, patch: &[Value]) {
    if field == "args" {
        base.extend(patch.iter().map(strip_nulls));
        return;
    }
    let Some(key) = list_merge_key(field, base, patch) else {
        *base = patch.iter().map(strip_nulls).collect();
        return;
    };
    for pe in patch {
        let found = pe
            .get(key)
            .filter(|k| !k.is_null())
            .and_then(|k| base.iter_mut().find(|be| be.get(key) == Some(k)));
        match found {
            Some(be) => merge_value(be, pe),
            None => base.push(strip_nulls(pe)),
        }
    }
}

fn list_merge_key(field: &str, base: &[Value], patch: &[Value]) -> Option<&'static str> {
    match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "volumes"
        | "env"
        | "imagePullSecrets"
        | "resourceClaims" => Some("name"),
        "volumeMounts" => Some("mountPath"),
        "volumeDevices" => Some("devicePath"),
        "hostAliases" => Some("ip"),
        "ports" => {
            let container_ports = base
                .iter()
                .chain(patch)
                .any(|p| p.get("containerPort").is_some());
            Some(if container_ports {
                "containerPort"
            } else {
                "port"
            })
        }
        _ => None,
    }
}

fn strip_nulls(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.clone(), strip_nulls(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(strip_nulls).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{ContainerPort, EnvVar, HTTPGetAction, Probe, VolumeMount};
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
    use serde_json::json;

    fn obj(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => unreachable!(),
        }
    }

    fn base_container() -> Container {
        Container {
            name: "slurmd".into(),
            image: Some("default:1".into()),
            args: Some(vec!["-Z".into()]),
            env: Some(vec![
                EnvVar {
                    name: "A".into(),
                    value: Some("1".into()),
                    ..Default::default()
                },
                EnvVar {
                    name: "B".into(),
                    value: Some("2".into()),
                    ..Default::default()
                },
            ]),
            ports: Some(vec![ContainerPort {
                name: Some("slurmd".into()),
                container_port: 6818,
                protocol: Some("TCP".into()),
                ..Default::default()
            }]),
            volume_mounts: Some(vec![VolumeMount {
                name: "etc".into(),
                mount_path: "/etc/slurm".into(),
                read_only: Some(true),
                ..Default::default()
            }]),
            liveness_probe: Some(Probe {
                http_get: Some(HTTPGetAction {
                    path: Some("/livez".into()),
                    port: IntOrString::String("slurmd".into()),
                    ..Default::default()
                }),
                failure_threshold: Some(6),
                period_seconds: Some(10),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn container_merge_follows_strategic_rules() {
        let user = obj(json!({
            "image": "mine:2",
            "args": ["--extra"],
            "command": ["x"],
            "env": [{"name": "B", "value": "two"}, {"name": "C", "value": "3"}],
            "ports": [{"containerPort": 6818, "hostPort": 6818}, {"containerPort": 22, "name": "ssh"}],
            "volumeMounts": [{"name": "home", "mountPath": "/home"}, {"name": "etc2", "mountPath": "/etc/slurm"}],
            "livenessProbe": {"tcpSocket": {"port": 6818}},
            "resources": {"limits": {"cpu": "2"}},
            "securityContext": null,
        }));
        let c = merge_container(base_container(), &user).unwrap();
        assert_eq!(c.name, "slurmd");
        assert_eq!(c.image.as_deref(), Some("mine:2"));
        assert_eq!(c.args.unwrap(), ["-Z", "--extra"]);
        assert_eq!(c.command.unwrap(), ["x"]);
        let env: Vec<_> = c
            .env
            .unwrap()
            .into_iter()
            .map(|e| (e.name, e.value.unwrap()))
            .collect();
        assert_eq!(
            env,
            [
                ("A".into(), "1".into()),
                ("B".into(), "two".into()),
                ("C".into(), "3".into())
            ] as [(String, String); 3]
        );
        let ports = c.ports.unwrap();
        assert_eq!(ports.len(), 2);
        assert_eq!(ports[0].name.as_deref(), Some("slurmd"));
        assert_eq!(ports[0].host_port, Some(6818));
        assert_eq!(ports[1].container_port, 22);
        let mounts = c.volume_mounts.unwrap();
        assert_eq!(mounts.len(), 2);
        assert_eq!(mounts[0].name, "etc2");
        assert_eq!(mounts[0].read_only, Some(true));
        let probe = c.liveness_probe.unwrap();
        assert!(probe.http_get.is_none());
        assert_eq!(probe.tcp_socket.unwrap().port, IntOrString::Int(6818));
        assert_eq!(probe.failure_threshold, Some(6));
        assert_eq!(probe.period_seconds, Some(10));
        assert!(c.resources.unwrap().limits.unwrap().contains_key("cpu"));
    }

    #[test]
    fn probe_thresholds_only_keep_base_handler() {
        let user = obj(json!({"livenessProbe": {"periodSeconds": 30}}));
        let p = merge_container(base_container(), &user)
            .unwrap()
            .liveness_probe
            .unwrap();
        assert!(p.http_get.is_some());
        assert_eq!(p.period_seconds, Some(30));
        assert_eq!(p.failure_threshold, Some(6));
    }

    #[test]
    fn pod_spec_merges_containers_by_name_and_replaces_other_lists() {
        let base = PodSpec {
            containers: vec![base_container()],
            tolerations: Some(vec![Default::default()]),
            node_selector: Some([("a".to_owned(), "1".to_owned())].into()),
            ..Default::default()
        };
        let user = obj(json!({
            "containers": [{"name": "slurmd", "image": "u:1"}, {"name": "side", "image": "s:1"}],
            "tolerations": [{"key": "k", "operator": "Exists"}],
            "nodeSelector": {"b": "2"},
            "serviceAccountName": "sa",
        }));
        let spec = merge_pod_spec(base, &user).unwrap();
        assert_eq!(spec.containers.len(), 2);
        assert_eq!(spec.containers[0].image.as_deref(), Some("u:1"));
        assert_eq!(spec.containers[0].args.as_ref().unwrap(), &["-Z"]);
        assert_eq!(spec.containers[1].name, "side");
        let tol = spec.tolerations.unwrap();
        assert_eq!(tol.len(), 1);
        assert_eq!(tol[0].key.as_deref(), Some("k"));
        assert_eq!(spec.node_selector.unwrap().len(), 2);
        assert_eq!(spec.service_account_name.as_deref(), Some("sa"));
    }

    #[test]
    fn service_ports_merge_by_port() {
        let base = ServiceSpec {
            ports: Some(vec![k8s_openapi::api::core::v1::ServicePort {
                name: Some("slurmctld".into()),
                port: 6817,
                ..Default::default()
            }]),
            ..Default::default()
        };
        let user = obj(json!({"type": "NodePort", "ports": [{"port": 6817, "nodePort": 30017}]}));
        let s = merge_service_spec(base, &user).unwrap();
        assert_eq!(s.type_.as_deref(), Some("NodePort"));
        let ports = s.ports.unwrap();
        assert_eq!(ports.len(), 1);
        assert_eq!(ports[0].name.as_deref(), Some("slurmctld"));
        assert_eq!(ports[0].node_port, Some(30017));
    }

    #[test]
    fn bad_user_types_are_errors() {
        let user = obj(json!({"args": "not-a-list"}));
        assert!(merge_container(base_container(), &user).is_err());
    }
}
