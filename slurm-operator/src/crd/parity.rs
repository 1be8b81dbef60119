//! The finishing touches that make the generated schemas store objects as Slinky's CRDs do
//! (the differences that remain, and why, are in the README's schema table).
//!
//! - **nullable** exactly where Slinky's CRDs have it ([`NULLABLE`]). schemars marks every
//!   `Option` nullable; elsewhere Slinky's fields are not, and the API server prunes a null of
//!   a field that is not nullable before defaulting, so it never reaches admission or storage.
//!   Where Slinky keeps nulls we keep them too, and read them as absent (see [`super::null`]).
//! - **object references** (`LocalObjectReference`, `SecretKeySelector`,
//!   `ConfigMapKeySelector`) as in Kubernetes' own schema: `name` optional with default `""`,
//!   the reference atomic for server-side apply. k8s-openapi's schema requires `name`.

use serde_json::Value;

/// Per plural, the fields (dotted paths from the object's root) Slinky's CRDs mark nullable;
/// the same in v1.2.x and main.
const NULLABLE: &[(&str, &[&str])] = &[
    (
        "accountings",
        &[
            TEMPLATE_LABELS,
            TEMPLATE_ANNOTATIONS,
            SERVICE_LABELS,
            SERVICE_ANNOTATIONS,
        ],
    ),
    (
        "controllers",
        &[
            TEMPLATE_LABELS,
            TEMPLATE_ANNOTATIONS,
            SERVICE_LABELS,
            SERVICE_ANNOTATIONS,
            "spec.configFileRefs",
            "spec.prologScriptRefs",
            "spec.epilogScriptRefs",
            "spec.prologSlurmctldScriptRefs",
            "spec.epilogSlurmctldScriptRefs",
            "spec.metrics.serviceMonitor",
            "spec.metrics.serviceMonitor.labels",
            "spec.metrics.serviceMonitor.annotations",
            "spec.metrics.serviceMonitor.endpoints",
        ],
    ),
    (
        "loginsets",
        &[
            TEMPLATE_LABELS,
            TEMPLATE_ANNOTATIONS,
            SERVICE_LABELS,
            SERVICE_ANNOTATIONS,
        ],
    ),
    (
        "nodesets",
        &[
            TEMPLATE_LABELS,
            TEMPLATE_ANNOTATIONS,
            "spec.updateStrategy.scheduledUpdate.flags",
            "spec.volumeClaimTemplates",
            "status.ordinalToNode",
        ],
    ),
    (
        "restapis",
        &[
            TEMPLATE_LABELS,
            TEMPLATE_ANNOTATIONS,
            SERVICE_LABELS,
            SERVICE_ANNOTATIONS,
        ],
    ),
    ("tokens", &[]),
];

const TEMPLATE_LABELS: &str = "spec.template.metadata.labels";
const TEMPLATE_ANNOTATIONS: &str = "spec.template.metadata.annotations";
const SERVICE_LABELS: &str = "spec.service.metadata.labels";
const SERVICE_ANNOTATIONS: &str = "spec.service.metadata.annotations";

/// Applies the module's rules to the schema of `plural`'s CRD.
pub fn align(plural: &str, schema: &mut Value) {
    walk(schema, &mut |s| {
        if let Some(o) = s.as_object_mut() {
            o.remove("nullable");
        }
        loosen_reference(s);
    });
    let nullable = NULLABLE
        .iter()
        .find(|(p, _)| *p == plural)
        .map_or(&[][..], |(_, paths)| paths);
    for path in nullable {
        let field = path
            .split('.')
            .try_fold(&mut *schema, |s, name| {
                s.pointer_mut(&format!("/properties/{name}"))
            })
            .unwrap_or_else(|| panic!("{plural}: no field {path} to mark nullable"));
        field["nullable"] = Value::Bool(true);
    }
}

/// Calls `f` on `schema` and every subschema under it.
fn walk(schema: &mut Value, f: &mut impl FnMut(&mut Value)) {
    f(schema);
    if let Some(props) = schema.get_mut("properties").and_then(Value::as_object_mut) {
        props.values_mut().for_each(|s| walk(s, f));
    }
    for key in ["items", "additionalProperties"] {
        if let Some(sub) = schema.get_mut(key).filter(|s| s.is_object()) {
            walk(sub, f);
        }
    }
}

/// A reference by `name` (and `key`): `name` optional, default `""`, the object atomic.
fn loosen_reference(schema: &mut Value) {
    let Some(props) = schema.get("properties").and_then(Value::as_object) else {
        return;
    };
    let mut keys: Vec<&str> = props.keys().map(String::as_str).collect();
    keys.sort_unstable();
    if keys != ["name"] && keys != ["key", "name", "optional"] {
        return;
    }
    schema["properties"]["name"]["default"] = Value::from("");
    schema["x-kubernetes-map-type"] = Value::from("atomic");
    if let Some(required) = schema.get_mut("required").and_then(Value::as_array_mut) {
        required.retain(|r| r != "name");
        if required.is_empty() {
            schema.as_object_mut().unwrap().remove("required");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema(plural: &str) -> Value {
        let crd = crate::crd::all()
            .into_iter()
            .find(|c| c.spec.names.plural == plural)
            .unwrap();
        serde_json::to_value(crd).unwrap()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
            .take()
    }

    fn nullable_paths(schema: &Value, prefix: &str, out: &mut Vec<String>) {
        if schema["nullable"] == true {
            out.push(prefix.trim_start_matches('.').to_string());
        }
        if let Some(props) = schema["properties"].as_object() {
            for (name, s) in props {
                nullable_paths(s, &format!("{prefix}.{name}"), out);
            }
        }
        for key in ["items", "additionalProperties"] {
            if schema[key].is_object() {
                nullable_paths(&schema[key], &format!("{prefix}[]"), out);
            }
        }
    }

    #[test]
    fn nullable_exactly_where_slinky_has_it() {
        for (plural, expected) in NULLABLE {
            let mut found = Vec::new();
            nullable_paths(&schema(plural), "", &mut found);
            found.sort();
            let mut expected: Vec<String> = expected.iter().map(|s| s.to_string()).collect();
            expected.sort();
            assert_eq!(found, expected, "{plural}");
        }
    }

    #[test]
    fn references_take_an_empty_name_by_default_and_are_atomic() {
        let s = schema("nodesets");
        let r = &s["properties"]["spec"]["properties"]["controllerRef"];
        assert_eq!(r["x-kubernetes-map-type"], "atomic");
        assert_eq!(r["properties"]["name"]["default"], "");
        assert!(r.get("required").is_none());
        let s = schema("controllers");
        let r = &s["properties"]["spec"]["properties"]["slurmKeyRef"];
        assert_eq!(r["required"], serde_json::json!(["key"]));
        assert_eq!(r["x-kubernetes-map-type"], "atomic");
        let r = &s["properties"]["spec"]["properties"]["configFileRefs"]["items"];
        assert_eq!(r["properties"]["name"]["default"], "");
    }
}
