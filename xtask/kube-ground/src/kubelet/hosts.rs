//! A pod's hostname, /etc/hosts and /etc/resolv.conf, as the kubelet writes them.

use k8s_openapi::api::core::v1::Pod;

/// The ground's DNS server (the `kube-dns` Service's ClusterIP, answered by netd).
pub const DNS_IP: &str = "10.96.0.10";
pub const CLUSTER_DOMAIN: &str = "cluster.local";

/// `spec.hostname`, else the pod's name, cut to 63 characters as Kubernetes does.
pub fn hostname(pod: &Pod) -> String {
    let name = pod
        .spec
        .as_ref()
        .and_then(|s| s.hostname.clone())
        .or_else(|| pod.metadata.name.clone())
        .unwrap_or_default();
    name.chars()
        .take(63)
        .collect::<String>()
        .trim_end_matches(['-', '.'])
        .to_string()
}

/// The pod's fully qualified name when it has a subdomain: `host.sub.ns.svc.cluster.local`.
pub fn fqdn(pod: &Pod) -> Option<String> {
    let sub = pod.spec.as_ref()?.subdomain.as_ref()?;
    let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
    Some(format!("{}.{sub}.{ns}.svc.{CLUSTER_DOMAIN}", hostname(pod)))
}

pub fn etc_hosts(pod: &Pod, ip: &str) -> String {
    let mut out = String::from(
        "# Kubernetes-managed hosts file (kube-ground).\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n",
    );
    let host = hostname(pod);
    match fqdn(pod) {
        Some(fqdn) => out.push_str(&format!("{ip}\t{fqdn}\t{host}\n")),
        None => out.push_str(&format!("{ip}\t{host}\n")),
    }
    for alias in pod
        .spec
        .iter()
        .flat_map(|s| s.host_aliases.iter().flatten())
    {
        if let Some(names) = &alias.hostnames {
            out.push_str(&format!("{}\t{}\n", alias.ip, names.join("\t")));
        }
    }
    out
}

/// ClusterFirst resolution through the ground's DNS; `None` and `dnsConfig` as the API defines them.
pub fn resolv_conf(pod: &Pod) -> String {
    let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
    let spec = pod.spec.as_ref();
    let policy = spec
        .and_then(|s| s.dns_policy.as_deref())
        .unwrap_or("ClusterFirst");
    let mut servers = Vec::new();
    let mut searches = Vec::new();
    let mut options = Vec::new();
    if policy != "None" {
        servers.push(DNS_IP.to_string());
        searches.extend([
            format!("{ns}.svc.{CLUSTER_DOMAIN}"),
            format!("svc.{CLUSTER_DOMAIN}"),
            CLUSTER_DOMAIN.to_string(),
        ]);
        options.push("ndots:5".to_string());
    }
    if let Some(cfg) = spec.and_then(|s| s.dns_config.as_ref()) {
        servers.extend(cfg.nameservers.iter().flatten().cloned());
        searches.extend(cfg.searches.iter().flatten().cloned());
        for o in cfg.options.iter().flatten() {
            if let Some(name) = &o.name {
                options.retain(|x: &String| x.split(':').next() != Some(name.as_str()));
                options.push(match &o.value {
                    Some(v) => format!("{name}:{v}"),
                    None => name.clone(),
                });
            }
        }
    }
    let mut out = String::new();
    for s in servers {
        out.push_str(&format!("nameserver {s}\n"));
    }
    if !searches.is_empty() {
        out.push_str(&format!("search {}\n", searches.join(" ")));
    }
    if !options.is_empty() {
        out.push_str(&format!("options {}\n", options.join(" ")));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(yaml: serde_json::Value) -> Pod {
        serde_json::from_value(yaml).unwrap()
    }

    #[test]
    fn subdomain_gives_the_fqdn_line() {
        let p = pod(serde_json::json!({
            "metadata": {"name": "slurm-controller-0", "namespace": "slurm"},
            "spec": {"containers": [], "hostname": "slurm-controller-0", "subdomain": "slurm-controller"}
        }));
        let hosts = etc_hosts(&p, "10.244.1.5");
        assert!(hosts.contains(
            "10.244.1.5\tslurm-controller-0.slurm-controller.slurm.svc.cluster.local\tslurm-controller-0\n"
        ));
        let resolv = resolv_conf(&p);
        assert!(resolv.starts_with("nameserver 10.96.0.10\nsearch slurm.svc.cluster.local svc.cluster.local cluster.local\n"));
    }
}
