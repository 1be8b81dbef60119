//! A container's environment as a kubelet builds it: `env` (values with `$(VAR)` expansion,
//! fieldRef, resourceFieldRef, secretKeyRef, configMapKeyRef), `envFrom`, and the
//! `KUBERNETES_SERVICE_*` variables in-cluster clients read.

use std::collections::BTreeMap;

use anyhow::{Result, bail};
use k8s_openapi::api::core::v1::{Container, EnvVarSource, Pod};

use super::refs::Refs;
use super::resources;

/// Where in-cluster clients find the API server (the `kubernetes` Service's ClusterIP).
pub const API_SERVICE_HOST: &str = "10.96.0.1";
pub const API_SERVICE_PORT: &str = "443";

/// The environment of `container`, in order; a missing non-optional reference is an error that
/// names it, as the kubelet's CreateContainerConfigError does.
pub fn build(pod: &Pod, container: &Container, refs: &Refs) -> Result<Vec<(String, String)>> {
    let mut env: Vec<(String, String)> = vec![
        ("KUBERNETES_SERVICE_HOST".into(), API_SERVICE_HOST.into()),
        ("KUBERNETES_SERVICE_PORT".into(), API_SERVICE_PORT.into()),
        (
            "KUBERNETES_SERVICE_PORT_HTTPS".into(),
            API_SERVICE_PORT.into(),
        ),
        (
            "KUBERNETES_PORT".into(),
            format!("tcp://{API_SERVICE_HOST}:{API_SERVICE_PORT}"),
        ),
    ];
    let hostname = super::hosts::hostname(pod);
    env.push(("HOSTNAME".into(), hostname));
    for from in container.env_from.iter().flatten() {
        let prefix = from.prefix.as_deref().unwrap_or("");
        if let Some(cm) = &from.config_map_ref {
            match refs.config_map(&cm.name) {
                Some(data) => {
                    for (k, v) in data {
                        set(&mut env, format!("{prefix}{k}"), v);
                    }
                }
                None if cm.optional == Some(true) => {}
                None => bail!("configmap {:?} not found (envFrom)", cm.name),
            }
        }
        if let Some(s) = &from.secret_ref {
            match refs.secret(&s.name) {
                Some(data) => {
                    for (k, v) in data {
                        set(&mut env, format!("{prefix}{k}"), v);
                    }
                }
                None if s.optional == Some(true) => {}
                None => bail!("secret {:?} not found (envFrom)", s.name),
            }
        }
    }
    for var in container.env.iter().flatten() {
        let value = match &var.value_from {
            None => Some(expand(var.value.as_deref().unwrap_or(""), &env)),
            Some(source) => from_source(pod, container, source, refs)
                .map_err(|e| e.context(format!("env {}", var.name)))?,
        };
        if let Some(value) = value {
            set(&mut env, var.name.clone(), value);
        }
    }
    Ok(env)
}

/// `$(VAR)` references in a command or argument, resolved as the kubelet does.
pub fn expand_all(args: &[String], env: &[(String, String)]) -> Vec<String> {
    args.iter().map(|a| expand(a, env)).collect()
}

fn set(env: &mut Vec<(String, String)>, key: String, value: String) {
    match env.iter_mut().find(|(k, _)| *k == key) {
        Some(slot) => slot.1 = value,
        None => env.push((key, value)),
    }
}

/// `$(NAME)` becomes NAME's value when defined and stays as written otherwise; `$$` is a `$`.
pub fn expand(input: &str, env: &[(String, String)]) -> String {
    let mut out = String::with_capacity(input.len());
    let mut rest = input;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let tail = &rest[at + 1..];
        if let Some(after) = tail.strip_prefix('$') {
            out.push('$');
            rest = after;
        } else if let Some(inner) = tail.strip_prefix('(')
            && let Some(end) = inner.find(')')
        {
            let name = &inner[..end];
            match env.iter().rev().find(|(k, _)| k == name) {
                Some((_, v)) => out.push_str(v),
                None => {
                    out.push_str("$(");
                    out.push_str(name);
                    out.push(')');
                }
            }
            rest = &inner[end + 1..];
        } else {
            out.push('$');
            rest = tail;
        }
    }
    out.push_str(rest);
    out
}

/// The value of a `valueFrom`; `None` for an optional reference that is absent.
fn from_source(
    pod: &Pod,
    container: &Container,
    source: &EnvVarSource,
    refs: &Refs,
) -> Result<Option<String>> {
    if let Some(field) = &source.field_ref {
        return field_path(pod, &field.field_path).map(Some);
    }
    if let Some(res) = &source.resource_field_ref {
        let name = res.container_name.as_deref().unwrap_or(&container.name);
        let target = pod
            .spec
            .iter()
            .flat_map(|s| {
                s.containers
                    .iter()
                    .chain(s.init_containers.iter().flatten())
            })
            .find(|c| c.name == name)
            .unwrap_or(container);
        return resources::field(target, &res.resource, res.divisor.as_ref()).map(Some);
    }
    if let Some(key) = &source.config_map_key_ref {
        let value = refs
            .config_map(&key.name)
            .and_then(|d| d.get(&key.key).cloned());
        return match value {
            Some(v) => Ok(Some(v)),
            None if key.optional == Some(true) => Ok(None),
            None => bail!("configmap {:?} has no key {:?}", key.name, key.key),
        };
    }
    if let Some(key) = &source.secret_key_ref {
        let value = refs
            .secret(&key.name)
            .and_then(|d| d.get(&key.key).cloned());
        return match value {
            Some(v) => Ok(Some(v)),
            None if key.optional == Some(true) => Ok(None),
            None => bail!("secret {:?} has no key {:?}", key.name, key.key),
        };
    }
    bail!("unsupported valueFrom (only fieldRef, resourceFieldRef, configMapKeyRef, secretKeyRef)")
}

/// A downward-API field path of the pod, as env vars and downwardAPI volumes read it.
pub fn field_path(pod: &Pod, path: &str) -> Result<String> {
    let meta = &pod.metadata;
    let spec = pod.spec.as_ref();
    let status = pod.status.as_ref();
    let map_entry = |map: &Option<BTreeMap<String, String>>, key: &str| {
        map.as_ref()
            .and_then(|m| m.get(key).cloned())
            .unwrap_or_default()
    };
    let all = |map: &Option<BTreeMap<String, String>>| {
        map.iter()
            .flatten()
            .map(|(k, v)| format!("{k}={v:?}"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    Ok(match path {
        "metadata.name" => meta.name.clone().unwrap_or_default(),
        "metadata.namespace" => meta.namespace.clone().unwrap_or_default(),
        "metadata.uid" => meta.uid.clone().unwrap_or_default(),
        "metadata.labels" => all(&meta.labels),
        "metadata.annotations" => all(&meta.annotations),
        "spec.nodeName" => spec.and_then(|s| s.node_name.clone()).unwrap_or_default(),
        "spec.serviceAccountName" => spec
            .and_then(|s| s.service_account_name.clone())
            .unwrap_or_else(|| "default".into()),
        "status.podIP" | "status.podIPs" => {
            status.and_then(|s| s.pod_ip.clone()).unwrap_or_default()
        }
        "status.hostIP" | "status.hostIPs" => {
            status.and_then(|s| s.host_ip.clone()).unwrap_or_default()
        }
        _ => {
            if let Some(key) = subscript(path, "metadata.labels") {
                map_entry(&meta.labels, key)
            } else if let Some(key) = subscript(path, "metadata.annotations") {
                map_entry(&meta.annotations, key)
            } else {
                bail!("unsupported fieldRef {path:?}")
            }
        }
    })
}

/// `metadata.labels['key']` → `key`.
fn subscript<'a>(path: &'a str, field: &str) -> Option<&'a str> {
    let inner = path
        .strip_prefix(field)?
        .strip_prefix('[')?
        .strip_suffix(']')?;
    inner
        .strip_prefix('\'')
        .and_then(|s| s.strip_suffix('\''))
        .or_else(|| inner.strip_prefix('"').and_then(|s| s.strip_suffix('"')))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn expansion_follows_the_kubelet() {
        let e = env(&[("A", "1"), ("B", "two")]);
        assert_eq!(expand("x$(A)y$(B)", &e), "x1ytwo");
        assert_eq!(expand("$(MISSING)", &e), "$(MISSING)");
        assert_eq!(expand("$$(A)", &e), "$(A)");
        assert_eq!(expand("cost $5 $(A", &e), "cost $5 $(A");
    }

    #[test]
    fn subscripts_take_either_quote() {
        assert_eq!(
            subscript("metadata.labels['app']", "metadata.labels"),
            Some("app")
        );
        assert_eq!(
            subscript("metadata.annotations[\"a/b\"]", "metadata.annotations"),
            Some("a/b")
        );
        assert_eq!(subscript("metadata.labels", "metadata.labels"), None);
    }
}
