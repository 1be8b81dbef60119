//! Every field of every kind, read from the generated CRD schema, is set to null in turn (its
//! parents made as needed, their required fields filled): each object must deserialise, and to
//! the same value as without the null. A field added to a type is covered without a new test.

use serde_json::{Map, Value, json};

use super::drop_nulls;
use crate::crd::{Accounting, Controller, LoginSet, NodeSet, RestApi, Token};

/// How to go from a schema to one of its subschemas.
#[derive(Clone, Debug)]
enum Step {
    Field(String),
    Item,
    Entry,
}

/// The paths (from the object's root) of every optional field under `schema` (a required
/// one cannot be null: the API server prunes the null, then finds it missing).
fn field_paths(schema: &Value, prefix: &mut Vec<Step>, out: &mut Vec<Vec<Step>>) {
    let required = schema["required"].as_array().cloned().unwrap_or_default();
    if let Some(props) = schema["properties"].as_object() {
        for (name, sub) in props {
            prefix.push(Step::Field(name.clone()));
            if !required.contains(&Value::from(name.as_str())) {
                out.push(prefix.clone());
            }
            field_paths(sub, prefix, out);
            prefix.pop();
        }
    }
    for (key, step) in [("items", Step::Item), ("additionalProperties", Step::Entry)] {
        if schema[key].is_object() {
            prefix.push(step);
            field_paths(&schema[key], prefix, out);
            prefix.pop();
        }
    }
}

/// A value of `schema` whose required fields are all set, to hold a null field deeper down.
fn filled(schema: &Value) -> Value {
    if schema.get("x-kubernetes-int-or-string").is_some() {
        return json!(1);
    }
    match schema["type"].as_str() {
        Some("object") | None if schema["properties"].is_object() => {
            let mut m = Map::new();
            for name in schema["required"].as_array().into_iter().flatten() {
                let name = name.as_str().unwrap();
                m.insert(name.into(), filled(&schema["properties"][name]));
            }
            Value::Object(m)
        }
        Some("string") if schema["format"] == "date-time" => json!("2026-01-01T00:00:00Z"),
        Some("string") => json!(schema["enum"][0].as_str().unwrap_or("1m")),
        Some("integer") | Some("number") => json!(1),
        Some("boolean") => json!(false),
        Some("array") => json!([]),
        _ => json!({}),
    }
}

/// `schema`'s value with `path` leading to a null.
fn with_null(schema: &Value, path: &[Step]) -> Value {
    let Some((step, rest)) = path.split_first() else {
        return Value::Null;
    };
    match step {
        Step::Field(name) => {
            let mut v = filled(schema);
            v[name.as_str()] = with_null(&schema["properties"][name], rest);
            v
        }
        Step::Item => json!([with_null(&schema["items"], rest)]),
        Step::Entry => json!({ "k": with_null(&schema["additionalProperties"], rest) }),
    }
}

fn describe(path: &[Step]) -> String {
    path.iter()
        .map(|s| match s {
            Step::Field(n) => format!(".{n}"),
            Step::Item => "[0]".into(),
            Step::Entry => "{k}".into(),
        })
        .collect()
}

/// Deserialises `object` as its kind and serialises it back.
fn round_trip(kind: &str, object: Value) -> Result<Value, serde_json::Error> {
    fn go<K: serde::de::DeserializeOwned + serde::Serialize>(
        v: Value,
    ) -> Result<Value, serde_json::Error> {
        serde_json::to_value(serde_json::from_value::<K>(v)?)
    }
    match kind {
        "Accounting" => go::<Accounting>(object),
        "Controller" => go::<Controller>(object),
        "LoginSet" => go::<LoginSet>(object),
        "NodeSet" => go::<NodeSet>(object),
        "RestApi" => go::<RestApi>(object),
        "Token" => go::<Token>(object),
        other => panic!("unknown kind {other}"),
    }
}

fn objects_with_a_null(crd: &Value) -> Vec<(String, Value)> {
    let kind = crd["spec"]["names"]["kind"].as_str().unwrap();
    let root = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
    let mut paths = Vec::new();
    field_paths(root, &mut Vec::new(), &mut paths);
    paths
        .into_iter()
        .map(|path| {
            let mut object = with_null(root, &path);
            object["apiVersion"] = json!("slinky.slurm.net/v1beta1");
            object["kind"] = json!(kind);
            object["metadata"] = json!({"name": "n", "namespace": "ns"});
            if object.get("spec").is_none() {
                object["spec"] = filled(&root["properties"]["spec"]);
            }
            (describe(&path), object)
        })
        .collect()
}

#[test]
fn every_field_of_every_kind_reads_null_as_absent() {
    let mut checked = 0;
    for crd in crate::crd::all() {
        let crd = serde_json::to_value(crd).unwrap();
        let kind = crd["spec"]["names"]["kind"].as_str().unwrap().to_string();
        for (path, object) in objects_with_a_null(&crd) {
            let mut without = object.clone();
            drop_nulls(&mut without);
            // The CRD requires `spec`; a null one reads as `{}`.
            without["spec"] = without.get("spec").cloned().unwrap_or(json!({}));
            let read = round_trip(&kind, object.clone())
                .unwrap_or_else(|e| panic!("{kind} with {path}: null: {e}\n{object:#}"));
            let expected = round_trip(&kind, without)
                .unwrap_or_else(|e| panic!("{kind} with {path} absent: {e}\n{object:#}"));
            assert_eq!(read, expected, "{kind} {path}");
            checked += 1;
        }
    }
    // All six kinds, each with its nested fields; a far smaller count means the walk broke.
    assert!(checked > 200, "only {checked} fields checked");
}

#[test]
fn every_top_level_field_null_at_once() {
    for crd in crate::crd::all() {
        let crd = serde_json::to_value(crd).unwrap();
        let kind = crd["spec"]["names"]["kind"].as_str().unwrap().to_string();
        let root = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
        let mut spec = filled(&root["properties"]["spec"]);
        for name in root["properties"]["spec"]["properties"]
            .as_object()
            .unwrap()
            .keys()
        {
            if spec.get(name).is_none() {
                spec[name.as_str()] = Value::Null;
            }
        }
        let object = json!({
            "apiVersion": "slinky.slurm.net/v1beta1", "kind": kind,
            "metadata": {"name": "n", "namespace": "ns", "labels": null},
            "spec": spec, "status": null,
        });
        round_trip(&kind, object).unwrap_or_else(|e| panic!("{kind}: {e}"));
    }
}

#[test]
fn a_null_spec_or_status_reads_as_empty() {
    let c: Controller = serde_json::from_value(json!({
        "apiVersion": "slinky.slurm.net/v1beta1", "kind": "Controller",
        "metadata": {"name": "slurm"}, "spec": null, "status": null,
    }))
    .unwrap();
    assert_eq!(c.spec, Default::default());
    assert_eq!(c.status, None);
}

#[test]
fn nulls_in_open_objects_and_nested_lists_are_dropped_but_list_items_stay() {
    let mut v = json!({
        "template": {"spec": {"nodeSelector": null, "containers": [{"name": "a", "env": null}]}},
        "flags": ["x", null],
    });
    drop_nulls(&mut v);
    assert_eq!(
        v,
        json!({"template": {"spec": {"containers": [{"name": "a"}]}}, "flags": ["x", null]})
    );
}

/// What Slinky's chart renders for a Controller with its lists left empty.
#[test]
fn slinky_chart_controller_with_empty_lists() {
    let yaml = r#"
apiVersion: slinky.slurm.net/v1beta1
kind: Controller
metadata: {name: slurm, namespace: slurm}
spec:
  clusterName:
  slurmKeyRef: {name: slurm-auth-slurm, key: slurm.key}
  jwtKeyRef: {name: slurm-auth-jwt, key: jwt.key}
  accountingRef:
  configFileRefs:
  prologScriptRefs:
  epilogScriptRefs:
  prologSlurmctldScriptRefs:
  epilogSlurmctldScriptRefs:
  extraConf:
  template:
    metadata:
      labels:
    spec:
      nodeSelector:
  persistence:
    enabled: true
    resources: {requests: {storage: 4Gi}}
  metrics:
    enabled: false
    serviceMonitor:
"#;
    let c: Controller = serde_yaml::from_str(yaml).unwrap();
    assert!(c.spec.config_file_refs.is_empty());
    assert!(c.spec.template.spec.is_empty());
    assert_eq!(c.spec.cluster_name, "");
    assert!(c.spec.accounting_ref.is_none());
}
