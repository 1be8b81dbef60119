//! The prometheus-operator ServiceMonitor `N` of a Controller with `metrics.enabled` and
//! `metrics.serviceMonitor.enabled`: slurmctld's own OpenMetrics endpoints (Slurm 25.11+,
//! `MetricsType=metrics/openmetrics`) scraped on the `slurmctld` port of the `N-controller`
//! Service. Named, labelled and defaulted as Slinky's operator makes it.

use kube::ResourceExt;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use serde_json::{Value, json};

use super::labels::{self, Component};
use super::{RenderError, child_meta, controller_ref, cr_annotations, cr_labels, merge_maps};
use crate::crd::Controller;

/// slurmctld's endpoints scraped when `serviceMonitor.endpoints` is empty (Slinky's list;
/// `/metrics/jobs-users-accts` is left out, as its series grow with the users).
pub const DEFAULT_PATHS: [&str; 4] = [
    "/metrics/jobs",
    "/metrics/nodes",
    "/metrics/partitions",
    "/metrics/scheduler",
];

/// The ServiceMonitor kind, `monitoring.coreos.com/v1`.
pub fn api_resource() -> ApiResource {
    ApiResource::from_gvk(&GroupVersionKind::gvk(
        "monitoring.coreos.com",
        "v1",
        "ServiceMonitor",
    ))
}

/// Whether `controller` wants a ServiceMonitor. An external Controller has no slurmctld pod here
/// to scrape.
pub fn wanted(controller: &Controller) -> bool {
    let m = &controller.spec.metrics;
    m.enabled && m.service_monitor.enabled && !controller.spec.external
}

/// The ServiceMonitor `N`, or `None` when [`wanted`] is false.
pub fn render(controller: &Controller) -> Result<Option<DynamicObject>, RenderError> {
    if !wanted(controller) {
        return Ok(None);
    }
    let name = controller.name_any();
    let namespace = controller.namespace().unwrap_or_default();
    let monitor = &controller.spec.metrics.service_monitor;
    let endpoint = |path: &str, interval: Option<&String>, timeout: Option<&String>| {
        let mut e = json!({
            "path": path,
            "port": Component::Controller.app(),
            "scheme": "http",
        });
        // Unset or empty: Prometheus' own defaults (an empty duration is not a valid one).
        for (key, value) in [("interval", interval), ("scrapeTimeout", timeout)] {
            if let Some(v) = value.filter(|v| !v.is_empty()) {
                e[key] = Value::String(v.clone());
            }
        }
        e
    };
    let (interval, timeout) = (monitor.interval.as_ref(), monitor.scrape_timeout.as_ref());
    let endpoints: Vec<Value> = if monitor.endpoints.is_empty() {
        DEFAULT_PATHS
            .iter()
            .map(|p| endpoint(p, interval, timeout))
            .collect()
    } else {
        monitor
            .endpoints
            .iter()
            .map(|e| {
                endpoint(
                    &e.path,
                    e.interval.as_ref().or(interval),
                    e.scrape_timeout.as_ref().or(timeout),
                )
            })
            .collect()
    };
    let mut object = DynamicObject::new(&name, &api_resource()).data(json!({
        "spec": {
            "selector": {"matchLabels": labels::selector_labels(Component::Controller, &name)},
            "namespaceSelector": {"matchNames": [namespace]},
            "endpoints": endpoints,
        }
    }));
    object.metadata = child_meta(
        name.clone(),
        &namespace,
        merge_maps([
            &cr_labels(&controller.metadata),
            &monitor.labels,
            &labels::component_labels(Component::Controller, &name),
        ]),
        merge_maps([&cr_annotations(&controller.metadata), &monitor.annotations]),
        vec![controller_ref(controller)?],
    );
    Ok(Some(object))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn controller(spec: Value) -> Controller {
        let mut c: Controller = serde_json::from_value(json!({
            "apiVersion": "slinky.slurm.net/v1beta1",
            "kind": "Controller",
            "metadata": {"name": "slurm", "namespace": "hpc", "uid": "u1", "labels": {"team": "a"}},
            "spec": {"slurmKeyRef": {"name": "k", "key": "k"}, "jwtKeyRef": {"name": "j", "key": "j"}},
        }))
        .unwrap();
        let mut value = serde_json::to_value(&c.spec).unwrap();
        for (k, v) in spec.as_object().unwrap() {
            value[k] = v.clone();
        }
        c.spec = serde_json::from_value(value).unwrap();
        c
    }

    #[test]
    fn none_unless_metrics_and_monitor_are_enabled_on_a_cluster_run_here() {
        for spec in [
            json!({}),
            json!({"metrics": {"enabled": true}}),
            json!({"metrics": {"serviceMonitor": {"enabled": true}}}),
            json!({"external": true, "metrics": {"enabled": true, "serviceMonitor": {"enabled": true}}}),
        ] {
            assert!(
                render(&controller(spec.clone())).unwrap().is_none(),
                "{spec}"
            );
        }
    }

    #[test]
    fn default_endpoints_select_the_controller_service_port() {
        let c = controller(json!({"metrics": {"enabled": true, "serviceMonitor": {
            "enabled": true, "interval": "30s", "scrapeTimeout": "", "labels": {"release": "prom"}}}}));
        let m = render(&c).unwrap().unwrap();
        assert_eq!(m.metadata.name.as_deref(), Some("slurm"));
        assert_eq!(m.metadata.namespace.as_deref(), Some("hpc"));
        let labels = m.metadata.labels.clone().unwrap();
        assert_eq!(labels["release"], "prom");
        assert_eq!(labels["team"], "a");
        assert_eq!(labels["app.kubernetes.io/name"], "slurmctld");
        assert_eq!(
            m.metadata.owner_references.as_ref().unwrap()[0].name,
            "slurm"
        );
        let spec = &m.data["spec"];
        assert_eq!(
            spec["selector"]["matchLabels"],
            json!({"app.kubernetes.io/name": "slurmctld", "app.kubernetes.io/instance": "slurm"})
        );
        assert_eq!(spec["namespaceSelector"], json!({"matchNames": ["hpc"]}));
        let endpoints = spec["endpoints"].as_array().unwrap();
        let paths: Vec<&str> = endpoints
            .iter()
            .map(|e| e["path"].as_str().unwrap())
            .collect();
        assert_eq!(paths, DEFAULT_PATHS);
        assert_eq!(
            endpoints[0],
            json!({"path": "/metrics/jobs", "port": "slurmctld", "scheme": "http", "interval": "30s"})
        );
    }

    #[test]
    fn endpoints_given_replace_the_defaults_and_inherit_durations() {
        let c = controller(json!({"metrics": {"enabled": true, "serviceMonitor": {
            "enabled": true, "interval": "30s", "scrapeTimeout": "10s",
            "endpoints": [{"path": "/metrics/nodes", "interval": "5s"}, {"path": "/metrics/jobs-users-accts"}]}}}));
        let m = render(&c).unwrap().unwrap();
        assert_eq!(
            m.data["spec"]["endpoints"],
            json!([
                {"path": "/metrics/nodes", "port": "slurmctld", "scheme": "http", "interval": "5s", "scrapeTimeout": "10s"},
                {"path": "/metrics/jobs-users-accts", "port": "slurmctld", "scheme": "http", "interval": "30s", "scrapeTimeout": "10s"},
            ])
        );
    }
}
