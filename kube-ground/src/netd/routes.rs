//! Where a connection to a Service's ClusterIP and port goes, as kube-proxy decides it: one of the
//! ready endpoints in turn, at the port the EndpointSlice gives for the Service port's name. Pure.

use std::collections::{BTreeMap, HashMap};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::names::{ready, slices_of};

/// The `kubernetes` Service: its port 443 goes to the API server on the host's loopback, whether
/// the Service object exists or not (pods are told this address in `KUBERNETES_SERVICE_HOST`).
pub const API_SERVICE: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 96, 0, 1), 443);
/// Answered by the DNS server itself, never proxied.
pub const DNS_SERVICE: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 96, 0, 10), 53);

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// A host address, connected to from the host's namespace.
    Host(SocketAddr),
    /// Ready endpoints in the ground namespace, in a stable order; empty rejects.
    Endpoints(Vec<SocketAddrV4>),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Route {
    /// `ns/name:port`, for logs.
    pub service: String,
    pub target: Target,
}

/// ClusterIP:port → route, for every TCP port of every Service with a ClusterIP.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Routes(pub BTreeMap<SocketAddrV4, Route>);

impl Routes {
    pub fn build(
        services: &[Arc<Service>],
        slices: &[Arc<EndpointSlice>],
        apiserver: SocketAddr,
    ) -> Self {
        let mut routes = BTreeMap::new();
        routes.insert(
            API_SERVICE,
            Route {
                service: "default/kubernetes:https".into(),
                target: Target::Host(apiserver),
            },
        );
        for svc in services {
            let (Some(ns), Some(name)) = (&svc.metadata.namespace, &svc.metadata.name) else {
                continue;
            };
            let Some(spec) = &svc.spec else { continue };
            let Some(ip) = spec
                .cluster_ip
                .as_deref()
                .and_then(|ip| ip.parse::<Ipv4Addr>().ok())
            else {
                continue;
            };
            for port in spec.ports.iter().flatten() {
                let Ok(number) = u16::try_from(port.port) else {
                    continue;
                };
                let at = SocketAddrV4::new(ip, number);
                if !is_tcp(port.protocol.as_deref()) || at == API_SERVICE || at == DNS_SERVICE {
                    continue;
                }
                let port_name = port.name.clone().unwrap_or_default();
                let mut endpoints = Vec::new();
                for slice in slices_of(slices, ns, name) {
                    let Some(target_port) =
                        slice_port(slice, &port_name).or_else(|| match &port.target_port {
                            Some(IntOrString::Int(n)) => u16::try_from(*n).ok(),
                            Some(IntOrString::String(_)) => None,
                            None => Some(number),
                        })
                    else {
                        continue;
                    };
                    for ep in slice.endpoints.iter().flatten().filter(|ep| ready(ep)) {
                        endpoints.extend(
                            ep.addresses
                                .iter()
                                .filter_map(|a| a.parse::<Ipv4Addr>().ok())
                                .map(|a| SocketAddrV4::new(a, target_port)),
                        );
                    }
                }
                endpoints.sort();
                endpoints.dedup();
                routes.insert(
                    at,
                    Route {
                        service: format!(
                            "{ns}/{name}:{}",
                            port.name.as_deref().unwrap_or(&number.to_string())
                        ),
                        target: Target::Endpoints(endpoints),
                    },
                );
            }
        }
        Routes(routes)
    }

    /// The ClusterIPs that must be local addresses of the ground namespace.
    pub fn addresses(&self) -> impl Iterator<Item = Ipv4Addr> + '_ {
        self.0.keys().map(|a| *a.ip())
    }
}

fn is_tcp(protocol: Option<&str>) -> bool {
    protocol.is_none_or(|p| p == "TCP")
}

/// The port the slice gives for the Service port named `name` (the EndpointSlice controller has
/// resolved a named targetPort into it).
fn slice_port(slice: &EndpointSlice, name: &str) -> Option<u16> {
    slice
        .ports
        .iter()
        .flatten()
        .find(|p| p.name.as_deref().unwrap_or("") == name && is_tcp(p.protocol.as_deref()))
        .and_then(|p| p.port)
        .and_then(|p| u16::try_from(p).ok())
}

/// Turns per ClusterIP:port, kept across route rebuilds.
#[derive(Debug, Default)]
pub struct RoundRobin(Mutex<HashMap<SocketAddrV4, usize>>);

impl RoundRobin {
    /// The next endpoint for a connection to `at`; `None` when there is none.
    pub fn pick(&self, at: SocketAddrV4, endpoints: &[SocketAddrV4]) -> Option<SocketAddrV4> {
        if endpoints.is_empty() {
            return None;
        }
        let mut turns = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let turn = turns.entry(at).or_default();
        let chosen = endpoints[*turn % endpoints.len()];
        *turn = turn.wrapping_add(1);
        Some(chosen)
    }
}

#[cfg(test)]
mod tests {
    use super::super::names::fixtures::{service, slice};
    use super::*;
    use serde_json::json;

    fn sa(s: &str) -> SocketAddrV4 {
        s.parse().unwrap()
    }

    const APISERVER: &str = "127.0.0.1:6443";

    #[test]
    fn only_ready_endpoints_at_the_named_port() {
        let services = [service(
            "default",
            "web",
            json!({"clusterIP": "10.96.3.4", "ports": [
                {"name": "http", "port": 80, "targetPort": "web"},
                {"name": "metrics", "port": 9100, "targetPort": 9100},
                {"name": "dns", "port": 53, "protocol": "UDP"},
            ]}),
        )];
        let slices = [slice(
            "default",
            "web",
            json!([{"name": "http", "port": 8080, "protocol": "TCP"}, {"name": "metrics", "port": 9101}]),
            &[
                ("10.244.0.6", Some(true), None),
                ("10.244.0.5", None, None),
                ("10.244.0.7", Some(false), None),
            ],
        )];
        let routes = Routes::build(&services, &slices, APISERVER.parse().unwrap());
        assert_eq!(
            routes.0[&sa("10.96.3.4:80")],
            Route {
                service: "default/web:http".into(),
                target: Target::Endpoints(vec![sa("10.244.0.5:8080"), sa("10.244.0.6:8080")]),
            }
        );
        // The slice's port wins over the Service's targetPort, as kube-proxy reads it.
        assert_eq!(
            routes.0[&sa("10.96.3.4:9100")].target,
            Target::Endpoints(vec![sa("10.244.0.5:9101"), sa("10.244.0.6:9101")])
        );
        assert!(
            !routes.0.contains_key(&sa("10.96.3.4:53")),
            "UDP is not proxied"
        );
        assert_eq!(
            routes.0[&API_SERVICE].target,
            Target::Host(APISERVER.parse().unwrap())
        );
        let ips: Vec<Ipv4Addr> = routes.addresses().collect();
        assert_eq!(
            ips,
            [
                Ipv4Addr::new(10, 96, 0, 1),
                Ipv4Addr::new(10, 96, 3, 4),
                Ipv4Addr::new(10, 96, 3, 4)
            ]
        );
    }

    #[test]
    fn services_without_endpoints_or_clusterip() {
        let services = [
            service(
                "default",
                "empty",
                json!({"clusterIP": "10.96.3.5", "ports": [{"port": 80, "targetPort": "http"}]}),
            ),
            service(
                "default",
                "headless",
                json!({"clusterIP": "None", "ports": [{"port": 80}]}),
            ),
            service(
                "kube-system",
                "kube-dns",
                json!({"clusterIP": "10.96.0.10", "ports": [{"name": "dns-tcp", "port": 53, "protocol": "TCP"}]}),
            ),
            service(
                "default",
                "kubernetes",
                json!({"clusterIP": "10.96.0.1", "ports": [{"name": "https", "port": 443, "targetPort": 6443}]}),
            ),
        ];
        // A slice without ports cannot resolve a named targetPort: rejected, as kube-proxy does.
        let slices = [slice(
            "default",
            "empty",
            json!([]),
            &[("10.244.0.5", Some(true), None)],
        )];
        let routes = Routes::build(&services, &slices, APISERVER.parse().unwrap());
        assert_eq!(
            routes.0[&sa("10.96.3.5:80")].target,
            Target::Endpoints(vec![])
        );
        assert_eq!(routes.0.len(), 2, "{routes:?}");
        assert_eq!(
            routes.0[&API_SERVICE].target,
            Target::Host(APISERVER.parse().unwrap())
        );
    }

    #[test]
    fn round_robin_per_service_port() {
        let rr = RoundRobin::default();
        let eps = [
            sa("10.244.0.5:80"),
            sa("10.244.0.6:80"),
            sa("10.244.0.7:80"),
        ];
        let (a, b) = (sa("10.96.3.4:80"), sa("10.96.3.4:81"));
        let picks: Vec<_> = (0..4).map(|_| rr.pick(a, &eps).unwrap()).collect();
        assert_eq!(picks, [eps[0], eps[1], eps[2], eps[0]]);
        assert_eq!(rr.pick(b, &eps), Some(eps[0]), "each port has its own turn");
        assert_eq!(rr.pick(a, &[]), None);
        // An endpoint gone: the turn goes on over what is left.
        assert_eq!(rr.pick(a, &eps[..2]), Some(eps[0]));
    }
}
