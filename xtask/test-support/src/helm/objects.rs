//! Lookups in a rendered chart (the JSON array [`template`](super::template) prints) for the chart
//! tests of a one-Deployment component: objects by kind and name, and the Deployment's pod, its
//! one container, args, flags, volumes and mounts. Each panics, naming what is missing.

use serde_json::Value;

/// The objects of kind `kind`.
pub fn all<'a>(objects: &'a [Value], kind: &str) -> Vec<&'a Value> {
    objects.iter().filter(|o| o["kind"] == kind).collect()
}

/// The one object of kind `kind`.
pub fn one<'a>(objects: &'a [Value], kind: &str) -> &'a Value {
    let found = all(objects, kind);
    assert_eq!(found.len(), 1, "one {kind} expected, found {}", found.len());
    found[0]
}

/// The object of kind `kind` named `name`.
pub fn named<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name}"))
}

/// The pod spec of the one Deployment.
pub fn pod(objects: &[Value]) -> &Value {
    &one(objects, "Deployment")["spec"]["template"]["spec"]
}

/// The pod's one container.
pub fn container(objects: &[Value]) -> &Value {
    let containers = pod(objects)["containers"].as_array().expect("containers");
    assert_eq!(containers.len(), 1, "one container expected");
    &containers[0]
}

/// The container's args.
pub fn args(objects: &[Value]) -> Vec<String> {
    container(objects)["args"]
        .as_array()
        .expect("args")
        .iter()
        .map(|a| a.as_str().expect("a string arg").to_owned())
        .collect()
}

/// The value of `--name=value` among the args.
pub fn flag(objects: &[Value], name: &str) -> Option<String> {
    let prefix = format!("--{name}=");
    args(objects)
        .iter()
        .find_map(|a| a.strip_prefix(&prefix).map(str::to_owned))
}

/// The pod's volume `name`.
pub fn volume<'a>(objects: &'a [Value], name: &str) -> &'a Value {
    pod(objects)["volumes"]
        .as_array()
        .expect("volumes")
        .iter()
        .find(|v| v["name"] == name)
        .unwrap_or_else(|| panic!("no volume {name}"))
}

/// Where the container mounts volume `name`, which must be read-only.
pub fn mount(objects: &[Value], name: &str) -> String {
    let m = container(objects)["volumeMounts"]
        .as_array()
        .expect("volumeMounts")
        .iter()
        .find(|m| m["name"] == name)
        .unwrap_or_else(|| panic!("volume {name} is not mounted"));
    assert_eq!(m["readOnly"], true, "{m}");
    m["mountPath"].as_str().expect("a mountPath").to_owned()
}
