//! The `slurm` chart (`charts/slurm`: a Slurm cluster as custom resources), rendered offline by
//! real Helm 4 (`test_support::helm`, `cargo xtask helm setup`); no cluster is needed.
//!
//! Every render below goes through [`check_cluster`], which holds each rendered resource to what
//! the API server and the operator will hold it to: the CRD's OpenAPI schema as committed in
//! the CRD chart (types, enums, patterns, formats, required and unknown fields, where the schema
//! does not keep unknown fields), the CRD's CEL rules, the operator's Rust types and admission
//! webhook, and the operator's own rendering of the children (StatefulSets, Deployments, the
//! worker pods, slurm.conf). It also resolves every Secret, ConfigMap, Controller and Accounting
//! a resource references: rendered by the chart, or named as a documented user input.
//!
//! The keys kept across upgrades: Helm's `lookup` cannot answer offline, so two renders show two
//! random keys; the chart's `lookup` of the existing Secret (checked in the template source here)
//! is what keeps them on a real API server, which the Helm end-to-end test exercises.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use serde_json::{Value, json};
use slurm_operator::crd::{Accounting, Controller, LoginSet, NodeSet, RestApi, ScalingMode};
use slurm_operator::render;
use slurm_operator::webhook::{
    Lookup, Lookups, validate_accounting, validate_controller, validate_loginset, validate_nodeset,
    validate_restapi,
};

const CHART: &str = "slurm-operator/charts/slurm";
const SLINKY_VALUES: &str = "tests/fixtures/slurm-slinky-values.yaml";
const NS: &str = "slurm";
const IMAGE_TAG: &str = "26.05-ubuntu26.04";

/// The rendered objects of one `helm template`.
struct Rendered(Vec<Value>);

fn render(release: &str, args: &[&str]) -> Rendered {
    let out = test_support::helm::template(CHART, release, NS, args)
        .unwrap_or_else(|e| panic!("rendering {args:?}: {e}"));
    let objs: Vec<Value> = serde_json::from_str(&out).expect("helm template --json is JSON");
    Rendered(objs.into_iter().filter(|o| !o.is_null()).collect())
}

/// The error of a render that must fail (schema or template).
fn refused(args: &[&str]) -> String {
    match test_support::helm::template(CHART, "slurm", NS, args) {
        Ok(out) => panic!("{args:?} rendered, but must be refused:\n{out}"),
        Err(e) => e,
    }
}

impl Rendered {
    fn all(&self, kind: &str) -> std::vec::IntoIter<&Value> {
        let of_kind: Vec<&Value> = self.0.iter().filter(|o| o["kind"] == kind).collect();
        of_kind.into_iter()
    }

    fn find(&self, kind: &str, name: &str) -> Option<&Value> {
        self.all(kind).find(|o| o["metadata"]["name"] == name)
    }

    fn get(&self, kind: &str, name: &str) -> &Value {
        self.find(kind, name)
            .unwrap_or_else(|| panic!("no {kind} {name:?}; rendered: {:?}", self.kinds_and_names()))
    }

    fn kinds_and_names(&self) -> BTreeSet<(String, String)> {
        self.0
            .iter()
            .map(|o| {
                (
                    o["kind"].as_str().unwrap_or_default().to_owned(),
                    o["metadata"]["name"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned(),
                )
            })
            .collect()
    }

    /// The decoded value of `key` in Secret `name` (`data`, base64, or `stringData`).
    fn secret_value(&self, name: &str, key: &str) -> Option<Vec<u8>> {
        let s = self.find("Secret", name)?;
        if let Some(v) = s["data"][key].as_str() {
            return Some(
                base64::engine::general_purpose::STANDARD
                    .decode(v)
                    .expect("Secret data is base64"),
            );
        }
        s["stringData"][key].as_str().map(|v| v.as_bytes().to_vec())
    }

    fn config_map_keys(&self, name: &str) -> Option<BTreeSet<String>> {
        let cm = self.find("ConfigMap", name)?;
        Some(
            cm["data"]
                .as_object()
                .map(|d| d.keys().cloned().collect())
                .unwrap_or_default(),
        )
    }
}

fn kn(kind: &str, name: &str) -> (String, String) {
    (kind.to_owned(), name.to_owned())
}

fn image(name: &str) -> String {
    format!("ghcr.io/slinkyproject/{name}:{IMAGE_TAG}")
}

// ---------------------------------------------------------------------------------------------
// The checks every render goes through.

/// Objects a render may reference without rendering them: the documented user inputs.
#[derive(Default)]
struct Inputs {
    /// `(name, key)` of Secrets the user creates.
    secrets: Vec<(&'static str, &'static str)>,
    /// `(name, key)` of ConfigMaps the user creates.
    config_maps: Vec<(&'static str, &'static str)>,
}

const CR_KINDS: [(&str, &str); 6] = [
    ("Accounting", "accountings"),
    ("Controller", "controllers"),
    ("LoginSet", "loginsets"),
    ("NodeSet", "nodesets"),
    ("RestApi", "restapis"),
    ("Token", "tokens"),
];

/// The committed CRD of `plural`: the CRD chart's template (or the older `crds/` directory).
fn crd_schema(plural: &str) -> Value {
    let krate = Path::new(env!("CARGO_MANIFEST_DIR"));
    let file = format!("slinky.slurm.net_{plural}.yaml");
    let path: PathBuf = ["charts/slurm-operator-crds/templates", "crds"]
        .iter()
        .map(|d| krate.join(d).join(&file))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("no committed CRD {file}"));
    let text = std::fs::read_to_string(&path).expect("readable CRD");
    let crd: Value = serde_yaml::from_str(&text).expect("the CRD is YAML");
    let version = &crd["spec"]["versions"][0];
    assert_eq!(version["name"], "v1beta1", "{}", path.display());
    version["schema"]["openAPIV3Schema"].clone()
}

/// The CRD's CEL rules (`x-kubernetes-validations`) this test knows, evaluated on the object
/// as the API server sees it (after defaulting). A new rule in the CRDs fails the test until it
/// is taught here.
fn cel(rule: &str, v: &Value) -> bool {
    let has = |o: &Value, k: &str| o.get(k).is_some_and(|x| !x.is_null());
    let external = v["external"].as_bool().unwrap_or(false);
    match rule {
        "!self.external ? has(self.slurmKeyRef) : true" => external || has(v, "slurmKeyRef"),
        "!self.external ? has(self.jwtKeyRef) || has(self.jwtHs256KeyRef) : true" => {
            external || has(v, "jwtKeyRef") || has(v, "jwtHs256KeyRef")
        }
        "self.external ? has(self.externalConfig) : true" => !external || has(v, "externalConfig"),
        "has(self.ha) && self.ha.enabled ? has(self.persistence) && self.persistence.enabled && has(self.persistence.existingClaim) && self.persistence.existingClaim.size() > 0 : true" =>
        {
            let p = &v["persistence"];
            !v["ha"]["enabled"].as_bool().unwrap_or(false)
                || (p.is_object()
                    && p["enabled"].as_bool().unwrap_or(true)
                    && p["existingClaim"].as_str().is_some_and(|c| !c.is_empty()))
        }
        "self.type != 'ScheduledUpdate' || (has(self.scheduledUpdate.startTime) && has(self.scheduledUpdate.duration))" => {
            v["type"] != "ScheduledUpdate"
                || (has(&v["scheduledUpdate"], "startTime") && v["scheduledUpdate"].is_object())
        }
        "has(self.jwtKeyRef) || has(self.jwtHs256KeyRef)" => {
            has(v, "jwtKeyRef") || has(v, "jwtHs256KeyRef")
        }
        other => panic!("CRD rule {other:?} is unknown to this test: teach cel() to evaluate it"),
    }
}

/// `v` against an OpenAPI v3 schema of a CRD, as the API server checks it (structural schema:
/// unknown fields are errors unless the schema keeps them).
fn check_schema(schema: &Value, v: &Value, path: &str, errs: &mut Vec<String>) {
    if v.is_null() {
        if schema["nullable"] != true {
            errs.push(format!("{path}: null where the schema is not nullable"));
        }
        return;
    }
    if schema["x-kubernetes-int-or-string"] == true {
        if !(v.is_i64() || v.is_u64() || v.is_string()) {
            errs.push(format!("{path}: {v} is neither an integer nor a string"));
        }
        return;
    }
    let type_ok = match schema["type"].as_str() {
        None => true,
        Some("object") => v.is_object(),
        Some("array") => v.is_array(),
        Some("string") => v.is_string(),
        Some("integer") => v.is_i64() || v.is_u64(),
        Some("number") => v.is_number(),
        Some("boolean") => v.is_boolean(),
        Some(other) => panic!("{path}: schema type {other:?} unknown to this test"),
    };
    if !type_ok {
        errs.push(format!("{path}: {v} is not of type {}", schema["type"]));
        return;
    }
    if let Some(allowed) = schema["enum"].as_array()
        && !allowed.contains(v)
    {
        errs.push(format!("{path}: {v} is not one of {allowed:?}"));
    }
    if let Some(pattern) = schema["pattern"].as_str() {
        let s = v.as_str().unwrap_or_default();
        let ok = match pattern {
            "^[^\\n]+$" => !s.is_empty() && !s.contains('\n'),
            other => panic!("{path}: pattern {other:?} unknown to this test"),
        };
        if !ok {
            errs.push(format!("{path}: {v} does not match {pattern}"));
        }
    }
    if let Some(min) = schema["minimum"].as_f64()
        && v.as_f64().is_some_and(|x| x < min)
    {
        errs.push(format!("{path}: {v} is below the minimum {min}"));
    }
    if let Some(format) = schema["format"].as_str() {
        let ok = match format {
            "int32" => v.as_i64().is_some_and(|x| i32::try_from(x).is_ok()),
            "int64" | "uint" | "uint32" | "uint64" | "double" | "float" => true,
            "date-time" => v
                .as_str()
                .is_some_and(|s| s.parse::<jiff::Timestamp>().is_ok()),
            other => panic!("{path}: format {other:?} unknown to this test"),
        };
        if !ok {
            errs.push(format!("{path}: {v} is not a valid {format}"));
        }
    }
    for rule in schema["x-kubernetes-validations"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let text = rule["rule"].as_str().expect("a CEL rule");
        if !cel(text, v) {
            errs.push(format!("{path}: {}", rule["message"]));
        }
    }
    match v {
        Value::Object(map) => {
            for key in schema["required"].as_array().into_iter().flatten() {
                let key = key.as_str().expect("a required field name");
                if map.get(key).is_none_or(Value::is_null) {
                    errs.push(format!("{path}.{key}: required"));
                }
            }
            let props = schema["properties"].as_object();
            let keeps_unknown = schema["x-kubernetes-preserve-unknown-fields"] == true;
            for (key, child) in map {
                let child_path = format!("{path}.{key}");
                match (
                    props.and_then(|p| p.get(key)),
                    &schema["additionalProperties"],
                ) {
                    (Some(s), _) => check_schema(s, child, &child_path, errs),
                    (None, Value::Object(_)) => {
                        check_schema(&schema["additionalProperties"], child, &child_path, errs)
                    }
                    (None, Value::Bool(true)) => {}
                    (None, _) if keeps_unknown => {}
                    (None, _) => errs.push(format!(
                        "{child_path}: unknown field (the CRD schema has no such property)"
                    )),
                }
            }
        }
        Value::Array(items) if schema["items"].is_object() => {
            for (i, item) in items.iter().enumerate() {
                check_schema(&schema["items"], item, &format!("{path}[{i}]"), errs);
            }
        }
        _ => {}
    }
}

/// A rendered resource as the API server stores it: with a uid (owner references need one).
fn stored<T: serde::de::DeserializeOwned>(obj: &Value) -> T {
    let mut obj = obj.clone();
    let name = obj["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    obj["metadata"]["uid"] = json!(format!("uid-{name}"));
    serde_json::from_value(obj).unwrap_or_else(|e| panic!("{name} into the operator's type: {e}"))
}

/// The checks every render must pass (see the file's header). Returns the operator's slurm.conf
/// for the Controller, when it is not external.
fn check_cluster(r: &Rendered, inputs: &Inputs) -> Option<String> {
    let mut errs = Vec::new();

    // Every object is namespaced in the release namespace (but the PriorityClass), and no
    // name is rendered twice.
    let mut seen = BTreeSet::new();
    for o in &r.0 {
        let (kind, name) = (
            o["kind"].as_str().unwrap_or_default(),
            &o["metadata"]["name"],
        );
        assert!(
            seen.insert((kind.to_owned(), name.to_string())),
            "{kind} {name} is rendered twice"
        );
        if kind != "PriorityClass" {
            assert_eq!(o["metadata"]["namespace"], NS, "{kind} {name}: namespace");
        }
    }

    // CRD schemas and CEL rules.
    for (kind, plural) in CR_KINDS {
        let schema = crd_schema(plural);
        for o in r.all(kind) {
            assert_eq!(o["apiVersion"], "slinky.slurm.net/v1beta1");
            let path = format!("{kind} {}", o["metadata"]["name"]);
            let body = json!({"spec": o["spec"]});
            check_schema(&schema, &body, &path, &mut errs);
        }
    }

    // References: rendered, or a documented user input.
    let secret_ok = |name: &str, key: &str| {
        r.secret_value(name, key).is_some()
            || inputs.secrets.iter().any(|(n, k)| *n == name && *k == key)
    };
    let cm_ok = |name: &str, key: Option<&str>| match r.config_map_keys(name) {
        Some(keys) => key.is_none_or(|k| keys.contains(k)),
        None => inputs
            .config_maps
            .iter()
            .any(|(n, k)| *n == name && key.is_none_or(|key| key == *k)),
    };
    let mut check_ref = |path: String, kind: &str, reference: &Value| {
        if reference.is_null() {
            return;
        }
        let name = reference["name"].as_str().unwrap_or_default();
        let key = reference["key"].as_str();
        let ok = match kind {
            "Secret" => secret_ok(name, key.unwrap_or_default()),
            "ConfigMap" => cm_ok(name, key),
            other => r.find(other, name).is_some(),
        };
        if !ok {
            errs.push(format!(
                "{path}: {kind} {name:?}{} is neither rendered nor a documented input",
                key.map(|k| format!(" (key {k:?})")).unwrap_or_default()
            ));
        }
    };
    for o in &r.0 {
        let kind = o["kind"].as_str().unwrap_or_default();
        let at = |f: &str| format!("{kind} {}.spec.{f}", o["metadata"]["name"]);
        let s = &o["spec"];
        match kind {
            "Controller" | "Accounting" => {
                if s["external"] != true {
                    for f in ["slurmKeyRef", "jwtKeyRef"] {
                        check_ref(at(f), "Secret", &s[f]);
                    }
                    check_ref(at("jwksKeyRef"), "ConfigMap", &s["jwksKeyRef"]);
                }
                check_ref(at("accountingRef"), "Accounting", &s["accountingRef"]);
                for f in [
                    "configFileRefs",
                    "prologScriptRefs",
                    "epilogScriptRefs",
                    "prologSlurmctldScriptRefs",
                    "epilogSlurmctldScriptRefs",
                ] {
                    for cm in s[f].as_array().into_iter().flatten() {
                        check_ref(at(f), "ConfigMap", cm);
                    }
                }
                check_ref(
                    at("storageConfig.passwordKeyRef"),
                    "Secret",
                    &s["storageConfig"]["passwordKeyRef"],
                );
            }
            "NodeSet" | "LoginSet" | "RestApi" => {
                check_ref(at("controllerRef"), "Controller", &s["controllerRef"]);
                check_ref(at("sssdConfRef"), "Secret", &s["sssdConfRef"]);
                check_ref(at("ssh.sssdConfRef"), "Secret", &s["ssh"]["sssdConfRef"]);
            }
            _ => {}
        }
    }
    assert!(
        errs.is_empty(),
        "the render breaks:\n  {}",
        errs.join("\n  ")
    );

    // The operator's types and admission webhook.
    let mut lookups = Lookups::default();
    for cm in r.all("ConfigMap") {
        let name = cm["metadata"]["name"].as_str().unwrap().to_owned();
        let keys = r.config_map_keys(&name).unwrap();
        lookups.config_maps.insert(name, Lookup::Found(keys));
    }
    for (name, key) in &inputs.config_maps {
        lookups.config_maps.insert(
            name.to_string(),
            Lookup::Found(BTreeSet::from([key.to_string()])),
        );
    }
    for c in r.all("Controller") {
        let name = c["metadata"]["name"].as_str().unwrap().to_owned();
        lookups.controllers.insert(name, Lookup::Found(()));
    }
    let admit = |what: String, v: slurm_operator::webhook::Verdict| {
        assert!(v.allowed, "the webhook refuses {what}: {}", v.message);
        assert!(
            v.warnings.is_empty(),
            "the webhook warns about {what}: {:?}",
            v.warnings
        );
    };
    let controllers: Vec<Controller> = r.all("Controller").map(stored).collect();
    let nodesets: Vec<NodeSet> = r.all("NodeSet").map(stored).collect();
    let loginsets: Vec<LoginSet> = r.all("LoginSet").map(stored).collect();
    let restapis: Vec<RestApi> = r.all("RestApi").map(stored).collect();
    let accountings: Vec<Accounting> = r.all("Accounting").map(stored).collect();
    for c in &controllers {
        admit(
            format!("Controller {:?}", c.metadata.name),
            validate_controller(c, None, &lookups),
        );
    }
    for n in &nodesets {
        admit(
            format!("NodeSet {:?}", n.metadata.name),
            validate_nodeset(n, None, &lookups),
        );
    }
    for l in &loginsets {
        admit(
            format!("LoginSet {:?}", l.metadata.name),
            validate_loginset(l, None, &lookups),
        );
    }
    for a in &restapis {
        admit(
            format!("RestApi {:?}", a.metadata.name),
            validate_restapi(a, None, &lookups),
        );
    }
    for a in &accountings {
        admit(
            format!("Accounting {:?}", a.metadata.name),
            validate_accounting(a, None, &lookups),
        );
    }

    // The operator's rendering of the children. Inputs the user makes stand in as objects.
    assert_eq!(controllers.len(), 1, "one Controller per release");
    let controller = &controllers[0];
    let mut config_maps: Vec<ConfigMap> = r.all("ConfigMap").map(stored).collect();
    for (name, key) in &inputs.config_maps {
        config_maps.push(stored(&json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": NS},
            "data": {*key: "{}"},
        })));
    }
    let mut secrets: Vec<Secret> = r.all("Secret").map(stored).collect();
    for (name, key) in &inputs.secrets {
        secrets.push(stored(&json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": name, "namespace": NS},
            "data": {*key: "c2VjcmV0"},
        })));
    }
    let inputs_of_controller = render::controller::ControllerInputs {
        nodesets: &nodesets,
        accounting: accountings.first(),
        config_maps: &config_maps,
        secrets: &secrets,
    };
    let children = render::controller::render(controller, &inputs_of_controller)
        .unwrap_or_else(|e| panic!("the operator cannot render the Controller: {e}"));
    let slurm_conf = children.config_maps[0]
        .data
        .as_ref()
        .and_then(|d| d.get("slurm.conf"))
        .cloned();
    for a in &restapis {
        render::restapi::render(a, controller)
            .unwrap_or_else(|e| panic!("the operator cannot render RestApi: {e}"));
    }
    for n in &nodesets {
        let (pod, node) = if n.spec.scaling_mode == ScalingMode::DaemonSet {
            let pod = render::nodeset_pod::daemon_pod(
                n,
                controller,
                "node1",
                None,
                "rev",
                "cluster.local",
            );
            (pod, "node1".to_owned())
        } else {
            let prefix = n
                .spec
                .template
                .spec
                .0
                .get("hostname")
                .and_then(Value::as_str);
            let pod = render::nodeset_pod::pod(n, controller, 0, "rev", "cluster.local");
            (pod, format!("{}0", prefix.unwrap_or_default()))
        };
        let pod = pod.unwrap_or_else(|e| panic!("the operator cannot render a worker pod: {e}"));
        assert_eq!(
            pod.spec.unwrap().hostname.unwrap(),
            node,
            "the Slurm node name"
        );
    }
    for l in &loginsets {
        render::loginset::render(l, controller, &secrets, "cluster.local")
            .unwrap_or_else(|e| panic!("the operator cannot render a LoginSet: {e}"));
    }
    for a in accountings.iter().filter(|a| !a.spec.external) {
        let password = secrecy::SecretSlice::from(b"secret".to_vec());
        render::accounting::render(a, &password, &secrets)
            .unwrap_or_else(|e| panic!("the operator cannot render the Accounting: {e}"));
    }
    if controller.spec.external {
        None
    } else {
        Some(slurm_conf.expect("the Controller's slurm.conf"))
    }
}

// ---------------------------------------------------------------------------------------------
// The tests.

#[test]
fn chart_lints_clean() {
    let chart = test_support::helm::workspace().join(CHART);
    let chart = chart.to_str().unwrap();
    let values = Path::new(env!("CARGO_MANIFEST_DIR")).join(SLINKY_VALUES);
    // Lint renders NOTES.txt too, which `helm template` leaves out.
    for extra in [vec![], vec!["-f", values.to_str().unwrap()]] {
        let mut args = vec!["lint", "--strict", chart];
        args.extend(extra);
        let out = test_support::helm::helm(&args, None)
            .unwrap_or_else(|e| panic!("helm {}: {e}", args.join(" ")));
        assert!(out.contains("clean"), "{out}");
    }
}

#[test]
fn default_render_is_a_small_runnable_cluster() {
    let r = render("slurm", &[]);
    assert_eq!(
        r.kinds_and_names(),
        BTreeSet::from([
            kn("Secret", "slurm-auth-slurm"),
            kn("Secret", "slurm-auth-jwt"),
            kn("Controller", "slurm"),
            kn("RestApi", "slurm"),
            kn("NodeSet", "slurm-worker-slinky"),
        ]),
        "no Accounting, no LoginSet, no extra config files by default"
    );
    let slurm_conf = check_cluster(&r, &Inputs::default()).unwrap();

    let c = &r.get("Controller", "slurm")["spec"];
    assert_eq!(
        c["slurmKeyRef"],
        json!({"name": "slurm-auth-slurm", "key": "slurm.key"})
    );
    assert_eq!(
        c["jwtKeyRef"],
        json!({"name": "slurm-auth-jwt", "key": "jwt.key"})
    );
    assert!(c.get("configFileRefs").is_none(), "{c}");
    assert_eq!(c["slurmctld"]["image"], image("slurmctld"));
    assert_eq!(c["reconfigure"]["image"], image("slurmctld"));
    assert_eq!(c["logfile"]["image"], "docker.io/library/alpine:latest");
    assert_eq!(c["slurmctld"]["imagePullPolicy"], "IfNotPresent");
    assert_eq!(c["persistence"]["enabled"], true);
    assert_eq!(c["persistence"]["resources"]["requests"]["storage"], "4Gi");
    assert!(c.get("accountingRef").is_none() && c.get("clusterName").is_none());
    // cgroups on, as in Slinky's chart: nothing added, the operator's cgroup.conf applies.
    assert_eq!(
        c["extraConf"],
        "PartitionName=all Nodes=ALL Default=YES MaxTime=UNLIMITED\n"
    );

    let n = &r.get("NodeSet", "slurm-worker-slinky")["spec"];
    assert_eq!(n["controllerRef"]["name"], "slurm");
    assert_eq!(n["replicas"], 1);
    assert_eq!(n["scalingMode"], "StatefulSet");
    assert_eq!(n["slurmd"]["image"], image("slurmd"));
    assert_eq!(n["template"]["spec"]["hostname"], "slinky-");
    assert_eq!(
        n["template"]["spec"]["nodeSelector"]["kubernetes.io/os"],
        "linux"
    );

    let a = &r.get("RestApi", "slurm")["spec"];
    assert_eq!(a["controllerRef"]["name"], "slurm");
    assert_eq!(a["replicas"], 1);
    assert_eq!(a["slurmrestd"]["image"], image("slurmrestd"));

    // What the operator makes of it: the NodeSet `slinky` and the partition of all nodes.
    for line in [
        "ClusterName=slurm_slurm",
        "NodeSet=slinky Feature=slinky",
        "PartitionName=all Nodes=ALL Default=YES MaxTime=UNLIMITED",
    ] {
        assert!(
            slurm_conf.lines().any(|l| l == line),
            "{line:?} not in slurm.conf:\n{slurm_conf}"
        );
    }
    assert!(!slurm_conf.contains("proctrack/linuxproc"), "{slurm_conf}");

    // The chart labels, on the resources and their pods; none of the operator's selector labels.
    for o in &r.0 {
        let labels = &o["metadata"]["labels"];
        assert_eq!(
            labels["helm.sh/chart"],
            concat!("slurm-", env!("CARGO_PKG_VERSION"))
        );
        assert_eq!(labels["app.kubernetes.io/part-of"], "slurm");
        assert!(labels.get("app.kubernetes.io/name").is_none());
    }
    assert_eq!(
        n["template"]["metadata"]["labels"]["app.kubernetes.io/part-of"],
        "slurm"
    );
}

#[test]
fn names_follow_the_release() {
    let r = render("hpc", &[]);
    let names = r.kinds_and_names();
    for (kind, name) in [
        ("Controller", "hpc-slurm"),
        ("RestApi", "hpc-slurm"),
        ("NodeSet", "hpc-slurm-worker-slinky"),
        ("Secret", "hpc-slurm-auth-slurm"),
        ("Secret", "hpc-slurm-auth-jwt"),
    ] {
        assert!(
            names.contains(&kn(kind, name)),
            "{kind} {name} in {names:?}"
        );
    }
    check_cluster(&r, &Inputs::default());
    let r = render("x", &["--set", "fullnameOverride=lab"]);
    assert!(r.find("Controller", "lab").is_some());
    assert!(r.find("NodeSet", "lab-worker-slinky").is_some());
    check_cluster(&r, &Inputs::default());
}

#[test]
fn slinky_values_file_renders_the_expected_resources() {
    let values = Path::new(env!("CARGO_MANIFEST_DIR")).join(SLINKY_VALUES);
    let r = render("slurm", &["-f", values.to_str().unwrap()]);
    assert_eq!(
        r.kinds_and_names(),
        BTreeSet::from([
            kn("Secret", "hpc-auth-slurm"),
            kn("Secret", "hpc-auth-jwt"),
            kn("Secret", "hpc-sssd-conf"),
            kn("ConfigMap", "hpc-config-extra"),
            kn("ConfigMap", "hpc-prolog-scripts"),
            kn("ConfigMap", "hpc-epilog-slurmctld-scripts"),
            kn("PriorityClass", "slurm-critical"),
            kn("PodDisruptionBudget", "hpc-restapi"),
            kn("Controller", "hpc"),
            kn("RestApi", "hpc"),
            kn("Accounting", "hpc"),
            kn("LoginSet", "hpc-login-slinky"),
            kn("NodeSet", "hpc-worker-cpu"),
            kn("NodeSet", "hpc-worker-gpu"),
        ]),
        "the disabled NodeSet `old` and no default NodeSet"
    );
    let inputs = Inputs {
        secrets: vec![("mariadb-password", "password")],
        ..Inputs::default()
    };
    let slurm_conf = check_cluster(&r, &inputs).unwrap();

    let c = &r.get("Controller", "hpc")["spec"];
    assert_eq!(c["clusterName"], "hpc-prod");
    assert_eq!(c["accountingRef"]["name"], "hpc");
    assert_eq!(c["inplaceReconfigure"], true);
    assert_eq!(c["slurmctld"]["args"], json!(["-vvv"]));
    assert_eq!(c["slurmctld"]["imagePullPolicy"], "Always");
    assert_eq!(
        c["persistence"]["storageClassName"], "",
        "`-` means no class"
    );
    assert_eq!(c["persistence"]["resources"]["requests"]["storage"], "1Gi");
    assert_eq!(c["metrics"]["enabled"], true);
    assert_eq!(c["metadata"], Value::Null);
    assert_eq!(
        r.get("Controller", "hpc")["metadata"]["annotations"]["team"],
        "hpc"
    );
    assert_eq!(
        c["prologScriptRefs"],
        json!([{"name": "hpc-prolog-scripts"}])
    );
    assert_eq!(
        c["epilogSlurmctldScriptRefs"],
        json!([{"name": "hpc-epilog-slurmctld-scripts"}])
    );
    assert!(c.get("epilogScriptRefs").is_none());
    // extraConf wins over extraConfMap (as in Slinky's chart); the partitions follow.
    assert_eq!(
        c["extraConf"],
        "SchedulerParameters=defer\nReturnToService=2\n\
         PartitionName=all Nodes=ALL Default=YES MaxTime=UNLIMITED\n\
         PartitionName=gpu Nodes=gpu MaxTime=4:00:00 State=UP\n"
    );
    let pod = &c["template"]["spec"];
    assert_eq!(pod["imagePullSecrets"], json!([{"name": "regcred"}]));
    assert_eq!(pod["priorityClassName"], "slurm-critical");
    assert_eq!(pod["tolerations"][0]["key"], "dedicated");

    assert_eq!(
        r.get("ConfigMap", "hpc-config-extra")["data"],
        json!({"gres.conf": "AutoDetect=off\n", "cgroup.conf": "CgroupPlugin=disabled\n"}),
        "the values' own cgroup.conf is kept"
    );
    assert_eq!(
        r.get("ConfigMap", "hpc-prolog-scripts")["data"],
        json!({"prolog-00-hello.sh": "#!/usr/bin/env bash\necho prolog\n"})
    );
    let key = r.get("Secret", "hpc-auth-slurm");
    assert_eq!(
        key["metadata"]["annotations"]["helm.sh/resource-policy"],
        "keep"
    );

    let cpu = &r.get("NodeSet", "hpc-worker-cpu")["spec"];
    assert_eq!(cpu["replicas"], 2);
    assert_eq!(cpu["extraConf"], "Features=cpu,x86 Weight=10");
    assert_eq!(
        cpu["partition"],
        json!({"enabled": true, "config": "MaxTime=1-00:00:00 State=UP"})
    );
    assert_eq!(
        cpu["slurmd"]["resources"]["limits"]["cpu"], 2,
        "nodesetDefaults"
    );
    assert_eq!(cpu["template"]["spec"]["hostname"], "cpu-");
    let gpu = &r.get("NodeSet", "hpc-worker-gpu")["spec"];
    assert_eq!(gpu["extraConf"], "Gres=gpu:2 Features=gpu");
    assert_eq!(gpu["updateStrategy"]["type"], "OnDelete");
    assert_eq!(
        gpu["slurmd"]["resources"]["limits"],
        json!({"cpu": 2, "memory": "2Gi", "nvidia.com/gpu": 2}),
        "maps merge over nodesetDefaults"
    );
    assert_eq!(
        gpu["template"]["spec"]["tolerations"][0]["key"],
        "nvidia.com/gpu"
    );
    assert_eq!(gpu["template"]["spec"]["hostname"], "gpu-");

    let login = &r.get("LoginSet", "hpc-login-slinky")["spec"];
    assert_eq!(login["controllerRef"]["name"], "hpc");
    assert_eq!(
        login["sssdConfRef"],
        json!({"name": "hpc-sssd-conf", "key": "sssd.conf"})
    );
    assert!(
        login["rootSshAuthorizedKeys"]
            .as_str()
            .unwrap()
            .starts_with("ssh-ed25519 ")
    );
    assert_eq!(login["login"]["image"], image("login"));
    assert_eq!(login["login"]["volumeMounts"][0]["mountPath"], "/home");
    assert_eq!(login["template"]["spec"]["volumes"][0]["name"], "home");
    assert_eq!(login["service"]["spec"]["type"], "ClusterIP");
    let sssd = r.secret_value("hpc-sssd-conf", "sssd.conf").unwrap();
    assert!(String::from_utf8(sssd).unwrap().starts_with("[sssd]\n"));

    let a = &r.get("Accounting", "hpc")["spec"];
    assert_eq!(a["slurmKeyRef"]["name"], "hpc-auth-slurm");
    assert_eq!(a["jwtKeyRef"]["name"], "hpc-auth-jwt");
    assert_eq!(
        a["storageConfig"],
        json!({
            "host": "mariadb.db.svc", "port": 3306, "database": "slurm_acct_db",
            "username": "slurm", "passwordKeyRef": {"name": "mariadb-password", "key": "password"},
        })
    );
    assert_eq!(a["extraConf"], "CommitDelay=1\nPurgeJobAfter=12month\n");
    assert_eq!(a["slurmdbd"]["image"], image("slurmdbd"));

    let api = &r.get("RestApi", "hpc")["spec"];
    assert_eq!(api["replicas"], 2);
    assert_eq!(api["slurmrestd"]["env"][0]["name"], "SLURMRESTD_DEBUG");
    let pdb = &r.get("PodDisruptionBudget", "hpc-restapi")["spec"];
    assert_eq!(pdb["minAvailable"], 1);
    assert_eq!(
        pdb["selector"]["matchLabels"],
        json!({"app.kubernetes.io/name": "slurmrestd", "app.kubernetes.io/instance": "hpc"})
    );
    let pc = r.get("PriorityClass", "slurm-critical");
    assert_eq!(pc["value"], 1000000);

    for line in [
        "ClusterName=hpc-prod",
        "NodeSet=cpu Feature=cpu",
        "NodeSet=gpu Feature=gpu",
        "PartitionName=cpu Nodes=cpu MaxTime=1-00:00:00 State=UP",
        "PartitionName=gpu Nodes=gpu MaxTime=4:00:00 State=UP",
        "AccountingStorageHost=hpc-accounting",
        "MetricsType=metrics/openmetrics",
        "Prolog=prolog-00-hello.sh",
        "EpilogSlurmctld=/etc/slurm/epilog-slurmctld-00-bye.sh",
    ] {
        assert!(
            slurm_conf.lines().any(|l| l == line),
            "{line:?} not in slurm.conf:\n{slurm_conf}"
        );
    }
}

#[test]
fn other_value_combinations_render_valid_resources() {
    // Keys of your own, JWKS, an outside slurmdbd, a DaemonSet NodeSet with ssh and claims, a
    // LoginSet with a custom sssd Secret, script ConfigMaps of your own, v1.0 key names.
    let r = render(
        "slurm",
        &[
            "--set",
            "slurmKey.create=false,slurmKey.secretRef.name=my-slurm-key",
            "--set",
            "jwtHs256KeyRef.name=my-jwt,jwtHs256KeyRef.key=jwt_hs256.key",
            "--set",
            "jwksKeys.enabled=true",
            "--set",
            "accounting.enabled=true,accounting.external=true,accounting.externalConfig.host=dbd.example",
            "--set",
            "nodesets.d.scalingMode=DaemonSet,nodesets.d.ssh.enabled=true,nodesets.d.minReadySeconds=5",
            "--set",
            "nodesets.d.volumeClaimTemplates[0].metadata.name=scratch,nodesets.d.volumeClaimTemplates[0].spec.resources.requests.storage=1Gi",
            "--set",
            "nodesets.d.persistentVolumeClaimRetentionPolicy.whenDeleted=Delete",
            "--set",
            "nodesets.d.updateStrategy.type=ScheduledUpdate,nodesets.d.updateStrategy.scheduledUpdate.startTime=2030-01-01T00:00:00Z,nodesets.d.updateStrategy.scheduledUpdate.duration=1h",
            "--set",
            "loginsets.x.replicas=2,sssd.secretRef.name=site-sssd",
            "--set",
            "prologScriptRefs[0].name=site-prolog",
            "--set",
            "cgroups.enabled=false,controller.extraConfMap.ProctrackType=proctrack/cgroup,controller.extraConfMap.DebugFlags=",
            "--set",
            "partitions.d.enabled=true,partitions.d.nodesets[0]=d,partitions.d.configMap.MaxNodes=0",
            "--set",
            "imagePullPolicy=,restapi.slurmrestd.image=registry.example/slurmrestd@sha256:abc",
        ],
    );
    let inputs = Inputs {
        secrets: vec![
            ("my-slurm-key", "slurm.key"),
            ("my-jwt", "jwt_hs256.key"),
            ("site-sssd", "sssd.conf"),
        ],
        config_maps: vec![
            ("slurm-auth-jwks", "jwks.json"),
            ("site-prolog", "prolog-x.sh"),
        ],
    };
    check_cluster(&r, &inputs);
    assert!(r.find("Secret", "slurm-auth-slurm").is_none());
    assert!(r.find("Secret", "slurm-auth-jwt").is_none());
    assert!(r.find("Secret", "slurm-sssd-conf").is_none());
    let c = &r.get("Controller", "slurm")["spec"];
    assert_eq!(
        c["slurmKeyRef"],
        json!({"name": "my-slurm-key", "key": "slurm.key"})
    );
    assert_eq!(
        c["jwtKeyRef"],
        json!({"name": "my-jwt", "key": "jwt_hs256.key"})
    );
    assert_eq!(
        c["jwksKeyRef"],
        json!({"name": "slurm-auth-jwks", "key": "jwks.json"})
    );
    assert_eq!(c["prologScriptRefs"], json!([{"name": "site-prolog"}]));
    assert!(c["slurmctld"].get("imagePullPolicy").is_none());
    // cgroups off, and the values set ProctrackType: the chart leaves that one out; empty map
    // values are left out, 0 is kept.
    let extra = c["extraConf"].as_str().unwrap();
    assert!(extra.starts_with("TaskPlugin=task/none\nJobAcctGatherType=jobacct_gather/none\n"));
    assert!(
        extra.contains("\nProctrackType=proctrack/cgroup\n"),
        "{extra}"
    );
    assert!(!extra.contains("DebugFlags"), "{extra}");
    assert!(
        extra.contains("PartitionName=d Nodes=d MaxNodes=0\n"),
        "{extra}"
    );
    let a = &r.get("Accounting", "slurm")["spec"];
    assert_eq!(
        a,
        &json!({"external": true, "externalConfig": {"host": "dbd.example", "port": 6819}})
    );
    let d = &r.get("NodeSet", "slurm-worker-d")["spec"];
    assert_eq!(d["scalingMode"], "DaemonSet");
    assert_eq!(
        d["ssh"],
        json!({"enabled": true, "sssdConfRef": {"name": "site-sssd", "key": "sssd.conf"}})
    );
    assert_eq!(d["volumeClaimTemplates"][0]["metadata"]["name"], "scratch");
    assert_eq!(d["minReadySeconds"], 5);
    assert!(
        r.find("NodeSet", "slurm-worker-slinky").is_none(),
        "no default NodeSet"
    );
    let l = &r.get("LoginSet", "slurm-login-x")["spec"];
    assert_eq!(l["replicas"], 2);
    assert_eq!(
        l["service"]["spec"]["type"], "LoadBalancer",
        "Slinky's default"
    );
    assert_eq!(
        r.get("RestApi", "slurm")["spec"]["slurmrestd"]["image"],
        "registry.example/slurmrestd@sha256:abc"
    );

    // slurmctld outside the cluster: no keys of the chart's, the key refs are yours.
    let r = render(
        "slurm",
        &[
            "--set",
            "controller.external=true,controller.externalConfig.host=ctld.example",
        ],
    );
    let inputs = Inputs {
        secrets: vec![
            ("slurm-auth-slurm", "slurm.key"),
            ("slurm-auth-jwt", "jwt.key"),
        ],
        ..Inputs::default()
    };
    assert!(check_cluster(&r, &inputs).is_none());
    assert!(r.all("Secret").next().is_none());
    assert_eq!(
        r.get("Controller", "slurm")["spec"]["externalConfig"],
        json!({"host": "ctld.example", "port": 6817})
    );

    // cgroups off, for hosts that cannot delegate them (the test ground): cgroup.conf off, and
    // slurm.conf lines that need no cgroup plugin.
    let r = render("slurm", &["--set", "cgroups.enabled=false"]);
    let conf = check_cluster(&r, &Inputs::default()).unwrap();
    assert_eq!(
        r.get("ConfigMap", "slurm-config-extra")["data"],
        json!({"cgroup.conf": "CgroupPlugin=disabled\n"})
    );
    let c = &r.get("Controller", "slurm")["spec"];
    assert_eq!(c["configFileRefs"], json!([{"name": "slurm-config-extra"}]));
    assert_eq!(
        c["extraConf"],
        "ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\n\
         JobAcctGatherType=jobacct_gather/none\n\
         PartitionName=all Nodes=ALL Default=YES MaxTime=UNLIMITED\n"
    );
    assert!(
        conf.lines()
            .any(|l| l == "ProctrackType=proctrack/linuxproc"),
        "{conf}"
    );
}

#[test]
fn schema_refuses_typos_and_impossible_values() {
    for (set, says) in [
        ("controller.persistance.enabled=false", "persistance"),
        ("nodeset.slinky.replicas=2", "nodeset"),
        ("nodesets.slinky.replica=2", "replica"),
        ("nodesetDefaults.slurmd.imagee=x", "imagee"),
        ("nodesetDefaults.podSpec.nodeSelektor.a=b", "nodeSelektor"),
        ("restapi.service.spec.tpye=NodePort", "tpye"),
        ("partitions.all.nodeset[0]=ALL", "nodeset"),
        ("loginsets.x.rootSshAuthorizedKey=k", "rootSshAuthorizedKey"),
        ("nodesets.slinky.scalingMode=Deployment", "scalingMode"),
        ("nodesets.Big_Name.replicas=1", "Big_Name"),
        ("configFiles.slurm\\.conf=x", "configFiles"),
        (
            "clusterName=a-cluster-name-much-longer-than-forty-characters",
            "clusterName",
        ),
        ("cgroups.enable=true", "enable"),
    ] {
        let err = refused(&["--set", set]);
        assert!(
            err.contains(says),
            "--set {set}: the error does not name {says:?}: {err}"
        );
    }
}

#[test]
fn vendor_presets_are_rendered_or_refused_by_name() {
    // NVIDIA DCGM, as Slinky's chart renders it: the scripts' ConfigMaps, the Controller's refs,
    // and the job-mapping directory in the NodeSet that asks for GPUs only.
    let r = render(
        "slurm",
        &[
            "--set",
            "vendor.nvidia.dcgm.enabled=true",
            "--set-json",
            r#"nodesets={"gpu":{"slurmd":{"resources":{"limits":{"nvidia.com/gpu":8}}}},"cpu":{}}"#,
        ],
    );
    let prolog = r.get("ConfigMap", "slurm-prolog-dcgm");
    let script = prolog["data"]["prolog-90-dcgm.sh"].as_str().unwrap();
    assert!(
        script.starts_with("#!/bin/bash")
            && script.contains("dir='/var/lib/dcgm-exporter/job-mapping'")
            && script.contains("SLURM_JOB_GPUS")
            && script.trim_end().ends_with("exit 0"),
        "{script}"
    );
    let epilog = r.get("ConfigMap", "slurm-epilog-dcgm");
    assert!(
        epilog["data"]["epilog-90-dcgm.sh"]
            .as_str()
            .unwrap()
            .contains("rm -f")
    );
    let controller = r.get("Controller", "slurm");
    for (field, name) in [
        ("prologScriptRefs", "slurm-prolog-dcgm"),
        ("epilogScriptRefs", "slurm-epilog-dcgm"),
    ] {
        assert!(
            controller["spec"][field]
                .as_array()
                .is_some_and(|refs| refs.iter().any(|x| x["name"] == name)),
            "{field}: {}",
            controller["spec"]
        );
    }
    let gpu = r.get("NodeSet", "slurm-worker-gpu");
    assert_eq!(
        gpu["spec"]["slurmd"]["volumeMounts"][0],
        serde_json::json!({"name": "dcgm-job-mapping", "mountPath": "/var/lib/dcgm-exporter/job-mapping"})
    );
    assert_eq!(
        gpu["spec"]["template"]["spec"]["volumes"][0]["hostPath"],
        serde_json::json!({"type": "DirectoryOrCreate", "path": "/var/lib/dcgm-exporter/job-mapping"})
    );
    let cpu = r.get("NodeSet", "slurm-worker-cpu");
    assert!(
        !cpu.to_string().contains("dcgm-job-mapping"),
        "no GPUs asked for: {cpu}"
    );
    // Off (the default): nothing of it.
    assert!(
        render("slurm", &[])
            .find("ConfigMap", "slurm-prolog-dcgm")
            .is_none()
    );

    // What would go into a script unquoted, and the presets not rendered, are refused by name.
    for (args, says) in [
        (
            vec![
                "--set",
                "vendor.nvidia.dcgm.enabled=true,vendor.nvidia.dcgm.jobMappingDir=/x'; rm -rf /",
            ],
            "vendor.nvidia.dcgm.jobMappingDir",
        ),
        (
            vec![
                "--set-json",
                r#"vendor.google.a3mega=[{"targetNodeSet":"gpu"}]"#,
            ],
            "vendor.google.a3mega: Slinky's Google a3mega preset",
        ),
    ] {
        let err = refused(&args);
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

#[test]
fn inconsistent_values_fail_with_a_message() {
    for (args, says) in [
        (
            vec![
                "--set",
                "partitions.gpu.enabled=true,partitions.gpu.nodesets[0]=gpu",
            ],
            "\"gpu\" is not an enabled NodeSet",
        ),
        (
            vec!["--set", "partitions.all.nodesets=null"],
            "list at least one NodeSet",
        ),
        (
            vec![
                "--set",
                "nodesets.a.partition.enabled=true",
                "--set-json",
                r#"nodesets.a.partition.config="x\ny""#,
            ],
            "config",
        ),
        (vec!["--set", "controller.ha.enabled=true"], "existingClaim"),
        (
            vec![
                "--set",
                "fullnameOverride=a-very-long-full-name-of-fifty-three-characters-xxxxx",
            ],
            "characters long; at most",
        ),
    ] {
        let err = refused(&args);
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

#[test]
fn key_secrets_are_random_per_offline_render_and_kept_by_lookup() {
    let first = render("slurm", &[]);
    let second = render("slurm", &[]);
    for (name, key) in [
        ("slurm-auth-slurm", "slurm.key"),
        ("slurm-auth-jwt", "jwt.key"),
    ] {
        let a = first.secret_value(name, key).unwrap();
        let b = second.secret_value(name, key).unwrap();
        assert_eq!(a.len(), 1024, "{name}: 1024 characters");
        assert!(
            a.iter().all(|c| (b' '..=b'~').contains(c)),
            "{name}: printable"
        );
        assert_ne!(a, b, "{name}: a fresh key per offline render");
        assert_eq!(first.get("Secret", name)["immutable"], true);
        assert_eq!(first.get("Secret", name)["type"], "Opaque");
    }
    assert_ne!(
        first.secret_value("slurm-auth-slurm", "slurm.key"),
        first.secret_value("slurm-auth-jwt", "jwt.key")
    );
    // On a real API server the chart reads the existing Secret back and keeps its key: the
    // template looks it up by the name and namespace it renders.
    let template = std::fs::read_to_string(
        test_support::helm::workspace()
            .join(CHART)
            .join("templates/secrets.yaml"),
    )
    .unwrap();
    assert!(
        template.contains(r#"lookup "v1" "Secret" $namespace $ref.name"#)
            && template.contains("index $existing.data $ref.key"),
        "templates/secrets.yaml no longer reuses the existing key"
    );
}

#[test]
fn values_schema_is_draft_07_and_covers_the_values_file() {
    let chart = test_support::helm::workspace().join(CHART);
    let schema: Value =
        serde_json::from_str(&std::fs::read_to_string(chart.join("values.schema.json")).unwrap())
            .unwrap();
    assert_eq!(schema["$schema"], "http://json-schema.org/draft-07/schema#");
    assert_eq!(schema["additionalProperties"], false);
    let values: Value =
        serde_yaml::from_str(&std::fs::read_to_string(chart.join("values.yaml")).unwrap()).unwrap();
    // Every key of values.yaml has a schema of its own (two levels deep), so that the schema's
    // refusal of unknown keys never refuses the chart's own.
    let props = schema["properties"].as_object().unwrap();
    let resolve = |s: &Value| -> Value {
        match s["$ref"].as_str() {
            Some(r) => schema["definitions"][r.trim_start_matches("#/definitions/")].clone(),
            None => s.clone(),
        }
    };
    let mut missing = Vec::new();
    for (key, value) in values.as_object().unwrap() {
        let Some(s) = props.get(key) else {
            missing.push(key.clone());
            continue;
        };
        let s = resolve(s);
        if let (Some(inner), Some(sub)) = (value.as_object(), s["properties"].as_object()) {
            for k in inner.keys() {
                if !sub.contains_key(k) {
                    missing.push(format!("{key}.{k}"));
                }
            }
        }
    }
    assert!(
        missing.is_empty(),
        "values.yaml keys without a schema: {missing:?}"
    );
}
