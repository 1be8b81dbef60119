//! The cluster's names and their addresses, as CoreDNS's kubernetes plugin answers them, built
//! from Services, EndpointSlices and Pods. Pure.
//!
//! - `<svc>.<ns>.svc.cluster.local`: the ClusterIP; for a headless Service its endpoints' addresses.
//! - `<host>.<svc>.<ns>.svc.cluster.local`: an endpoint's address, `<host>` being the endpoint's
//!   `hostname` or else its address with dashes (`10-244-0-5`), for any Service.
//! - `<a-b-c-d>.<ns>.pod.cluster.local`: when a pod in `<ns>` has that IP (CoreDNS's `pods
//!   verified`).
//!
//! Endpoints count when ready (an unset condition is ready, as the API documents), or when the
//! Service has `publishNotReadyAddresses`. This is CoreDNS's rule: it reads only ready endpoints,
//! and `publishNotReadyAddresses` works through the EndpointSlice controller marking every endpoint
//! ready; the Service's flag is honoured here too so that the rule does not hang on the stand-in
//! controller doing so. So a StatefulSet pod's `<host>.<svc>` name resolves before the pod is ready
//! exactly when its governing Service publishes not-ready addresses.
//!
//! Every name above a record exists (NOERROR without answers, as RFC 8020 has it); other names
//! in `cluster.local` do not; names outside it are not this server's.

use std::collections::{BTreeSet, HashMap};
use std::net::Ipv4Addr;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointSlice};

use super::dns::Lookup;

pub const ZONE: &str = "cluster.local";
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

#[derive(Debug, Default)]
pub struct Index {
    /// Name (lower case, no trailing dot) → its A records, sorted; empty for a name that only
    /// has names below it.
    names: HashMap<String, BTreeSet<Ipv4Addr>>,
    /// (namespace, name) of every Service, lower case → its ClusterIP, `None` when it has none
    /// (headless, ExternalName): what netd's dial endpoint resolves ([`super::dial`]).
    services: HashMap<(String, String), Option<Ipv4Addr>>,
}

impl Index {
    pub fn build(
        services: &[Arc<Service>],
        slices: &[Arc<EndpointSlice>],
        pods: &[Arc<Pod>],
    ) -> Self {
        let mut index = Index::default();
        index.add(ZONE, None);
        for sub in ["svc", "pod"] {
            index.add(&format!("{sub}.{ZONE}"), None);
        }
        for svc in services {
            let (Some(ns), Some(name)) = (&svc.metadata.namespace, &svc.metadata.name) else {
                continue;
            };
            let spec = svc.spec.clone().unwrap_or_default();
            let fqdn = format!("{name}.{ns}.svc.{ZONE}");
            let publish_all = spec.publish_not_ready_addresses == Some(true);
            let headless = spec.cluster_ip.as_deref() == Some("None");
            index.add(&fqdn, None);
            let cluster_ip = spec.cluster_ip.as_deref().and_then(|ip| ip.parse().ok());
            index.services.insert(
                (ns.to_ascii_lowercase(), name.to_ascii_lowercase()),
                cluster_ip,
            );
            if let Some(ip) = cluster_ip {
                index.add(&fqdn, Some(ip));
            }
            for ep in slices_of(slices, ns, name).flat_map(|s| s.endpoints.iter().flatten()) {
                if !(publish_all || ready(ep)) {
                    continue;
                }
                for ip in ep
                    .addresses
                    .iter()
                    .filter_map(|a| a.parse::<Ipv4Addr>().ok())
                {
                    if headless {
                        index.add(&fqdn, Some(ip));
                    }
                    let host = match &ep.hostname {
                        Some(h) => h.clone(),
                        None => dashed(ip),
                    };
                    index.add(&format!("{host}.{fqdn}"), Some(ip));
                }
            }
        }
        for pod in pods {
            let Some(ns) = &pod.metadata.namespace else {
                continue;
            };
            let status = pod.status.clone().unwrap_or_default();
            let ips = status
                .pod_ips
                .iter()
                .flatten()
                .map(|p| p.ip.clone())
                .chain(status.pod_ip);
            for ip in ips.filter_map(|ip| ip.parse::<Ipv4Addr>().ok()) {
                index.add(&format!("{}.{ns}.pod.{ZONE}", dashed(ip)), Some(ip));
            }
        }
        index
    }

    /// Adds `name` (and every name between it and the zone) with `ip`, if any, as a record.
    fn add(&mut self, name: &str, ip: Option<Ipv4Addr>) {
        let name = name.to_ascii_lowercase();
        let records = self.names.entry(name.clone()).or_default();
        records.extend(ip);
        let mut rest = name.as_str();
        while let Some((_, parent)) = rest.split_once('.') {
            if parent.len() < ZONE.len() {
                break;
            }
            self.names.entry(parent.to_string()).or_default();
            rest = parent;
        }
    }

    /// `name` in lower case without the trailing dot, as [`super::dns::Name::to_key`] gives it.
    pub fn lookup(&self, name: &str) -> Lookup {
        if name != ZONE && !name.ends_with(&format!(".{ZONE}")) {
            return Lookup::Refused;
        }
        match self.names.get(name) {
            Some(ips) => Lookup::Exists(ips.iter().copied().collect()),
            None => Lookup::NxDomain,
        }
    }

    /// Service `namespace/name`'s ClusterIP: `None` when there is no such Service, `Some(None)`
    /// when it has no ClusterIP.
    pub fn cluster_ip(&self, namespace: &str, name: &str) -> Option<Option<Ipv4Addr>> {
        let key = (namespace.to_ascii_lowercase(), name.to_ascii_lowercase());
        self.services.get(&key).copied()
    }
}

/// The EndpointSlices of Service `ns/name` (IPv4 only: the ground has no IPv6).
pub fn slices_of<'a>(
    slices: &'a [Arc<EndpointSlice>],
    ns: &'a str,
    name: &'a str,
) -> impl Iterator<Item = &'a EndpointSlice> {
    slices.iter().map(AsRef::as_ref).filter(move |s| {
        s.metadata.namespace.as_deref() == Some(ns)
            && s.address_type == "IPv4"
            && s.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(SERVICE_NAME_LABEL))
                .is_some_and(|n| n == name)
    })
}

/// An endpoint's readiness: unset means ready.
pub fn ready(ep: &Endpoint) -> bool {
    ep.conditions.as_ref().and_then(|c| c.ready) != Some(false)
}

fn dashed(ip: Ipv4Addr) -> String {
    ip.to_string().replace('.', "-")
}

#[cfg(test)]
pub mod fixtures {
    //! Services, EndpointSlices and Pods as the API server and the stand-in controller write them.
    use super::*;

    pub fn service(ns: &str, name: &str, spec: serde_json::Value) -> Arc<Service> {
        Arc::new(
            serde_json::from_value(serde_json::json!({
                "metadata": {"namespace": ns, "name": name},
                "spec": spec,
            }))
            .unwrap(),
        )
    }

    /// `endpoints`: (address, ready, hostname).
    pub fn slice(
        ns: &str,
        svc: &str,
        ports: serde_json::Value,
        endpoints: &[(&str, Option<bool>, Option<&str>)],
    ) -> Arc<EndpointSlice> {
        let endpoints: Vec<serde_json::Value> = endpoints
            .iter()
            .map(|(ip, ready, host)| {
                let mut ep = serde_json::json!({"addresses": [ip], "conditions": {}});
                if let Some(r) = ready {
                    ep["conditions"]["ready"] = (*r).into();
                }
                if let Some(h) = host {
                    ep["hostname"] = (*h).into();
                }
                ep
            })
            .collect();
        Arc::new(
            serde_json::from_value(serde_json::json!({
                "metadata": {"namespace": ns, "name": format!("{svc}-ground"), "labels": {SERVICE_NAME_LABEL: svc}},
                "addressType": "IPv4",
                "endpoints": endpoints,
                "ports": ports,
            }))
            .unwrap(),
        )
    }

    pub fn pod(ns: &str, name: &str, ip: &str) -> Arc<Pod> {
        Arc::new(
            serde_json::from_value(serde_json::json!({
                "metadata": {"namespace": ns, "name": name},
                "status": {"podIP": ip, "podIPs": [{"ip": ip}]},
            }))
            .unwrap(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::fixtures::*;
    use super::*;
    use serde_json::json;

    fn ips(list: &[&str]) -> Lookup {
        Lookup::Exists(list.iter().map(|s| s.parse().unwrap()).collect())
    }

    #[test]
    fn answers_for_each_kind_of_name() {
        let services = [
            service(
                "default",
                "web",
                json!({"clusterIP": "10.96.3.4", "ports": [{"port": 80}]}),
            ),
            service("slurm", "ctld", json!({"clusterIP": "None"})),
            service(
                "slurm",
                "all",
                json!({"clusterIP": "None", "publishNotReadyAddresses": true}),
            ),
            service(
                "default",
                "ext",
                json!({"type": "ExternalName", "externalName": "example.com"}),
            ),
        ];
        let slices = [
            slice(
                "default",
                "web",
                json!([]),
                &[
                    ("10.244.0.5", Some(true), None),
                    ("10.244.0.6", Some(false), None),
                ],
            ),
            slice(
                "slurm",
                "ctld",
                json!([]),
                &[
                    ("10.244.0.9", Some(true), Some("ctld-0")),
                    ("10.244.0.10", None, Some("ctld-1")),
                    ("10.244.0.11", Some(false), Some("ctld-2")),
                ],
            ),
            slice(
                "slurm",
                "all",
                json!([]),
                &[("10.244.0.12", Some(false), Some("x-0"))],
            ),
            // Same service name, other namespace: not web's.
            slice(
                "other",
                "web",
                json!([]),
                &[("10.244.0.99", Some(true), None)],
            ),
        ];
        let pods = [pod("slurm", "ctld-0", "10.244.0.9")];
        let index = Index::build(&services, &slices, &pods);
        let table: &[(&str, Lookup)] = &[
            ("web.default.svc.cluster.local", ips(&["10.96.3.4"])),
            (
                "10-244-0-5.web.default.svc.cluster.local",
                ips(&["10.244.0.5"]),
            ),
            ("10-244-0-6.web.default.svc.cluster.local", Lookup::NxDomain),
            (
                "10-244-0-99.web.default.svc.cluster.local",
                Lookup::NxDomain,
            ),
            // Headless: ready endpoints (unset = ready), not the unready one.
            (
                "ctld.slurm.svc.cluster.local",
                ips(&["10.244.0.9", "10.244.0.10"]),
            ),
            ("ctld-0.ctld.slurm.svc.cluster.local", ips(&["10.244.0.9"])),
            ("ctld-1.ctld.slurm.svc.cluster.local", ips(&["10.244.0.10"])),
            ("ctld-2.ctld.slurm.svc.cluster.local", Lookup::NxDomain),
            // publishNotReadyAddresses: unready endpoints too.
            ("all.slurm.svc.cluster.local", ips(&["10.244.0.12"])),
            ("x-0.all.slurm.svc.cluster.local", ips(&["10.244.0.12"])),
            ("ext.default.svc.cluster.local", ips(&[])),
            ("10-244-0-9.slurm.pod.cluster.local", ips(&["10.244.0.9"])),
            ("10-244-0-9.default.pod.cluster.local", Lookup::NxDomain),
            ("10-244-0-77.slurm.pod.cluster.local", Lookup::NxDomain),
            // Names above records exist; the server does not expand short names.
            ("slurm.svc.cluster.local", ips(&[])),
            ("svc.cluster.local", ips(&[])),
            ("cluster.local", ips(&[])),
            ("web", Lookup::Refused),
            ("web.default", Lookup::Refused),
            ("nothing.default.svc.cluster.local", Lookup::NxDomain),
            ("example.com", Lookup::Refused),
            ("evilcluster.local", Lookup::Refused),
        ];
        for (name, want) in table {
            assert_eq!(&index.lookup(name), want, "{name}");
        }
    }

    #[test]
    fn names_are_case_insensitive_through_the_wire() {
        use super::super::dns::{TYPE_A, UDP_MAX, respond, testing::*};
        let services = [service("Default", "Web", json!({"clusterIP": "10.96.3.4"}))];
        let index = Index::build(&services, &[], &[]);
        let q = encode_query(1, "WEB.default.SVC.cluster.local", TYPE_A);
        let r = decode_response(&respond(&q, |n| index.lookup(n), 5, UDP_MAX).unwrap());
        assert_eq!(r.answers.len(), 1);
        assert_eq!(r.answers[0].2, Ipv4Addr::new(10, 96, 3, 4));
    }
}
