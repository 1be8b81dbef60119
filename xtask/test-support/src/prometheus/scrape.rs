//! prometheus-operator's ServiceMonitors as Prometheus scrape jobs, the way the operator generates
//! them: one job per endpoint, a target for each address of the selected Services'
//! EndpointSlices whose port has the endpoint's name, labelled `namespace`, `service`, `pod`,
//! `container`, `endpoint`, and `job` (the Service's name, or its `jobLabel` label).
//!
//! Debian builds Prometheus without its Kubernetes discovery, so the discovery is done here, from
//! the objects the API server lists, and handed to Prometheus as file-based discovery (the same
//! targets and labels the operator's relabelling would produce). Only the fields the charts render
//! are translated; any other is refused by name, so that a chart that starts using one cannot be
//! scraped differently from what prometheus-operator would do without a test noticing.

use std::path::Path;

use serde_json::{Map, Value, json};

/// One endpoint of a ServiceMonitor.
#[derive(Clone, Debug, PartialEq)]
pub struct ScrapeJob {
    /// `serviceMonitor/<namespace>/<name>/<endpoint index>`, as the operator names it.
    pub name: String,
    pub namespaces: Vec<String>,
    /// `spec.selector.matchLabels`.
    pub selector: Vec<(String, String)>,
    /// The Service port's name.
    pub port: String,
    pub path: String,
    pub scheme: String,
    pub interval: Option<String>,
    pub timeout: Option<String>,
    pub honor_labels: bool,
    pub job_label: Option<String>,
}

const SPEC_FIELDS: [&str; 4] = ["selector", "namespaceSelector", "endpoints", "jobLabel"];
const ENDPOINT_FIELDS: [&str; 6] = [
    "port",
    "path",
    "scheme",
    "interval",
    "scrapeTimeout",
    "honorLabels",
];

/// The scrape jobs of the ServiceMonitors among `objects` (rendered chart objects; the others are
/// skipped).
pub fn jobs(objects: &[Value]) -> Result<Vec<ScrapeJob>, String> {
    let mut out = Vec::new();
    for object in objects {
        let api = object["apiVersion"].as_str().unwrap_or_default();
        let kind = object["kind"].as_str().unwrap_or_default();
        if !api.starts_with("monitoring.coreos.com/") {
            continue;
        }
        let name = format!(
            "{}/{}",
            object["metadata"]["namespace"]
                .as_str()
                .unwrap_or("default"),
            object["metadata"]["name"].as_str().unwrap_or_default()
        );
        if kind != "ServiceMonitor" {
            return Err(format!(
                "{kind} {name}: only ServiceMonitors are translated"
            ));
        }
        out.extend(
            service_monitor(object, &name).map_err(|e| format!("ServiceMonitor {name}: {e}"))?,
        );
    }
    Ok(out)
}

fn service_monitor(object: &Value, name: &str) -> Result<Vec<ScrapeJob>, String> {
    let spec = fields(&object["spec"], "spec", &SPEC_FIELDS)?;
    let namespaces = namespaces(spec.get("namespaceSelector"), object)?;
    let selector = match_labels(spec.get("selector"))?;
    let endpoints = spec
        .get("endpoints")
        .and_then(Value::as_array)
        .ok_or("spec.endpoints is not a list")?;
    let mut out = Vec::new();
    for (i, endpoint) in endpoints.iter().enumerate() {
        let at = format!("spec.endpoints[{i}]");
        let e = fields(endpoint, &at, &ENDPOINT_FIELDS)?;
        let text = |field: &str| {
            e.get(field)
                .and_then(Value::as_str)
                .filter(|v| !v.is_empty())
                .map(str::to_owned)
        };
        out.push(ScrapeJob {
            name: format!("serviceMonitor/{name}/{i}"),
            namespaces: namespaces.clone(),
            selector: selector.clone(),
            port: text("port").ok_or(format!(
                "{at}.port: a port name is the only form translated"
            ))?,
            path: text("path").unwrap_or_else(|| "/metrics".into()),
            scheme: text("scheme").unwrap_or_else(|| "http".into()),
            interval: text("interval"),
            timeout: text("scrapeTimeout"),
            honor_labels: e
                .get("honorLabels")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            job_label: spec
                .get("jobLabel")
                .and_then(Value::as_str)
                .map(str::to_owned),
        });
    }
    Ok(out)
}

impl ScrapeJob {
    /// Its scrape configuration, its targets read from `targets_file` (see [`ScrapeJob::targets`]).
    pub fn config(&self, targets_file: &Path) -> Value {
        let mut config = json!({
            "job_name": self.name,
            "honor_labels": self.honor_labels,
            "metrics_path": self.path,
            "scheme": self.scheme,
            "file_sd_configs": [{"files": [targets_file]}],
        });
        if let Some(v) = &self.interval {
            config["scrape_interval"] = json!(v);
        }
        if let Some(v) = &self.timeout {
            config["scrape_timeout"] = json!(v);
        }
        config
    }

    /// Its targets, as file-based discovery's target groups, from the Services, EndpointSlices
    /// and pods among `objects` (the items of a list of all three).
    pub fn targets(&self, objects: &[Value]) -> Value {
        fn of_kind<'a>(
            objects: &'a [Value],
            kind: &'static str,
        ) -> impl Iterator<Item = &'a Value> {
            objects.iter().filter(move |o| o["kind"] == kind)
        }
        let mut groups = Vec::new();
        for service in of_kind(objects, "Service") {
            let ns = service["metadata"]["namespace"]
                .as_str()
                .unwrap_or_default();
            let name = service["metadata"]["name"].as_str().unwrap_or_default();
            let labels = &service["metadata"]["labels"];
            if !self.namespaces.iter().any(|n| n == ns)
                || !self.selector.iter().all(|(k, v)| labels[k] == v.as_str())
            {
                continue;
            }
            let job = self
                .job_label
                .as_ref()
                .and_then(|l| labels[l].as_str())
                .filter(|v| !v.is_empty())
                .unwrap_or(name);
            let slices = of_kind(objects, "EndpointSlice").filter(|s| {
                s["metadata"]["namespace"] == ns
                    && s["metadata"]["labels"]["kubernetes.io/service-name"] == name
            });
            for slice in slices {
                let Some(port) = slice["ports"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .find(|p| p["name"] == self.port.as_str())
                    .and_then(|p| p["port"].as_u64())
                else {
                    continue;
                };
                for endpoint in slice["endpoints"].as_array().into_iter().flatten() {
                    let pod = (endpoint["targetRef"]["kind"] == "Pod")
                        .then(|| endpoint["targetRef"]["name"].as_str())
                        .flatten();
                    let container = pod.and_then(|p| container_of(objects, ns, p, port));
                    for address in endpoint["addresses"].as_array().into_iter().flatten() {
                        let Some(address) = address.as_str() else {
                            continue;
                        };
                        let mut labels = json!({
                            "namespace": ns,
                            "service": name,
                            "endpoint": self.port,
                            "job": job,
                        });
                        if let Some(pod) = pod {
                            labels["pod"] = json!(pod);
                        }
                        if let Some(c) = container {
                            labels["container"] = json!(c);
                        }
                        groups.push(
                            json!({"targets": [format!("{address}:{port}")], "labels": labels}),
                        );
                    }
                }
            }
        }
        Value::Array(groups)
    }
}

/// The container of pod `ns/pod` that declares `port`.
fn container_of<'a>(objects: &'a [Value], ns: &str, pod: &str, port: u64) -> Option<&'a str> {
    let pod = objects.iter().find(|o| {
        o["kind"] == "Pod" && o["metadata"]["namespace"] == ns && o["metadata"]["name"] == pod
    })?;
    pod["spec"]["containers"].as_array()?.iter().find(|c| {
        c["ports"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|p| p["containerPort"].as_u64() == Some(port))
    })?["name"]
        .as_str()
}

/// `value` as an object whose keys are all in `known`.
fn fields<'a>(
    value: &'a Value,
    at: &str,
    known: &[&str],
) -> Result<&'a Map<String, Value>, String> {
    let map = value.as_object().ok_or(format!("{at} is not an object"))?;
    match map.keys().find(|k| !known.contains(&k.as_str())) {
        Some(k) => Err(format!(
            "{at}.{k} is not translated (known: {})",
            known.join(", ")
        )),
        None => Ok(map),
    }
}

fn namespaces(selector: Option<&Value>, object: &Value) -> Result<Vec<String>, String> {
    let own = || {
        vec![
            object["metadata"]["namespace"]
                .as_str()
                .unwrap_or("default")
                .to_owned(),
        ]
    };
    let Some(selector) = selector else {
        return Ok(own());
    };
    let s = fields(selector, "spec.namespaceSelector", &["matchNames"])?;
    let names: Vec<String> = s
        .get("matchNames")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|n| n.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    Ok(if names.is_empty() { own() } else { names })
}

fn match_labels(selector: Option<&Value>) -> Result<Vec<(String, String)>, String> {
    let s = fields(
        selector.unwrap_or(&Value::Null),
        "spec.selector",
        &["matchLabels"],
    )?;
    let labels = s
        .get("matchLabels")
        .and_then(Value::as_object)
        .ok_or("spec.selector.matchLabels is missing")?;
    labels
        .iter()
        .map(|(k, v)| {
            let v = v
                .as_str()
                .ok_or(format!("spec.selector.matchLabels.{k} is not a string"))?;
            Ok((k.clone(), v.to_owned()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn monitor(spec: Value) -> Value {
        json!({
            "apiVersion": "monitoring.coreos.com/v1",
            "kind": "ServiceMonitor",
            "metadata": {"name": "exporter", "namespace": "slurm"},
            "spec": spec,
        })
    }

    fn exporter_monitor() -> Value {
        monitor(json!({
            "selector": {"matchLabels": {"app.kubernetes.io/name": "slurm-exporter"}},
            "namespaceSelector": {"matchNames": ["slurm"]},
            "endpoints": [{"port": "metrics", "path": "/metrics", "scheme": "http", "interval": "5s", "scrapeTimeout": ""}],
        }))
    }

    #[test]
    fn a_service_monitor_becomes_one_job_per_endpoint() {
        let objects = [
            json!({"apiVersion": "v1", "kind": "Service"}),
            exporter_monitor(),
        ];
        let jobs = jobs(&objects).unwrap();
        assert_eq!(jobs.len(), 1);
        let config = jobs[0].config(Path::new("/t.json"));
        assert_eq!(config["job_name"], "serviceMonitor/slurm/exporter/0");
        assert_eq!(config["scrape_interval"], "5s");
        assert!(
            config.get("scrape_timeout").is_none(),
            "an empty timeout is Prometheus' default"
        );
        assert_eq!(config["file_sd_configs"][0]["files"], json!(["/t.json"]));
    }

    #[test]
    fn targets_are_the_selected_services_addresses_on_the_named_port() {
        let job = jobs(&[exporter_monitor()]).unwrap().remove(0);
        let service = |ns: &str, name: &str, app: &str| json!({"kind": "Service", "metadata": {"namespace": ns, "name": name, "labels": {"app.kubernetes.io/name": app}}});
        let slice = |ns: &str, service: &str, ip: &str| {
            json!({
                "kind": "EndpointSlice",
                "metadata": {"namespace": ns, "labels": {"kubernetes.io/service-name": service}},
                "ports": [{"name": "http", "port": 80}, {"name": "metrics", "port": 9341}],
                "endpoints": [{"addresses": [ip], "targetRef": {"kind": "Pod", "name": "exporter-abc"}}],
            })
        };
        let objects = [
            service("slurm", "slurm-exporter", "slurm-exporter"),
            slice("slurm", "slurm-exporter", "10.0.0.1"),
            service("other", "slurm-exporter", "slurm-exporter"),
            slice("other", "slurm-exporter", "10.0.0.2"),
            service("slurm", "web", "web"),
            slice("slurm", "web", "10.0.0.3"),
            json!({"kind": "Pod", "metadata": {"namespace": "slurm", "name": "exporter-abc"},
                   "spec": {"containers": [{"name": "exporter", "ports": [{"containerPort": 9341}]}]}}),
        ];
        assert_eq!(
            job.targets(&objects),
            json!([{
                "targets": ["10.0.0.1:9341"],
                "labels": {"namespace": "slurm", "service": "slurm-exporter", "endpoint": "metrics",
                           "job": "slurm-exporter", "pod": "exporter-abc", "container": "exporter"},
            }])
        );
    }

    #[test]
    fn fields_not_translated_are_refused_by_name() {
        let e = jobs(&[monitor(json!({
            "selector": {"matchLabels": {"a": "b"}},
            "endpoints": [{"port": "metrics", "tlsConfig": {}}],
        }))])
        .unwrap_err();
        assert!(e.contains("spec.endpoints[0].tlsConfig"), "{e}");
        let e = jobs(&[monitor(
            json!({"selector": {"matchExpressions": []}, "endpoints": []}),
        )])
        .unwrap_err();
        assert!(e.contains("spec.selector.matchExpressions"), "{e}");
        let e = jobs(&[json!({"apiVersion": "monitoring.coreos.com/v1", "kind": "PodMonitor", "metadata": {"name": "p"}})])
            .unwrap_err();
        assert!(e.contains("PodMonitor default/p"), "{e}");
    }
}
