//! What a pod asks of a node, as Slurm counts it: whole CPUs, MiB of memory, GPUs.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use kube_support::quantity;

/// GPU resource names of device plugins, sent to Slurm as `gres/gpu`.
pub const GPU_RESOURCES: &[&str] = &["nvidia.com/gpu", "amd.com/gpu"];

/// The prefix of Dynamic Resource Allocation's extended resources
/// (`deviceclass.resource.kubernetes.io/<device class>`): kube-scheduler turns such a request
/// into a ResourceClaim it allocates. The bridge allocates no DRA devices, so a pod bound with
/// one would run without its device.
pub const DRA_EXTENDED_PREFIX: &str = "deviceclass.resource.kubernetes.io/";

/// One pod's needs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PodNeeds {
    /// CPUs, rounded up (the larger of request and limit).
    pub cpus: u32,
    /// Memory in MiB, rounded up (the larger of request and limit).
    pub memory_mb: u64,
    /// GPUs.
    pub gpus: u32,
}

/// The pod's needs as the Kubernetes scheduler computes them: the sum over containers, or the
/// largest init container if that is more, plus the pod's overhead; the larger of requests and
/// limits. A quantity that does not parse is an error naming the container and resource.
pub fn pod_needs(pod: &Pod) -> Result<PodNeeds, String> {
    let Some(spec) = &pod.spec else {
        return Ok(PodNeeds::default());
    };
    refuse_dra(spec)?;
    let mut needs = PodNeeds::default();
    for resource in ["cpu", "memory"]
        .into_iter()
        .chain(GPU_RESOURCES.iter().copied())
    {
        let mut most = 0f64;
        for pick in [Pick::Requests, Pick::Limits] {
            let sum: f64 = sum_of(&spec.containers, resource, pick)?;
            let init = spec
                .init_containers
                .iter()
                .flatten()
                .map(|c| amount(c, resource, pick))
                .try_fold(0f64, |m, v| v.map(|v| m.max(v)))?;
            let overhead = spec
                .overhead
                .as_ref()
                .and_then(|o| o.get(resource))
                .map(|q| parse(q, "overhead", resource))
                .transpose()?
                .unwrap_or(0.0);
            most = most.max(sum.max(init) + overhead);
        }
        match resource {
            "cpu" => needs.cpus = most.ceil() as u32,
            "memory" => needs.memory_mb = (most / 1048576.0).ceil() as u64,
            _ => needs.gpus += most.ceil() as u32,
        }
    }
    Ok(needs)
}

/// What a pod's requests take of a node's allocatable, as the kubelet admits pods: CPU in
/// cores, memory in bytes (the sum over containers, or the largest init container if that is
/// more, plus the overhead). A quantity that does not parse counts as 0: the API server has
/// already accepted the pod.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Requests {
    pub cpu: f64,
    pub memory: f64,
}

impl Requests {
    pub fn of(pod: &Pod) -> Requests {
        let Some(spec) = &pod.spec else {
            return Requests::default();
        };
        let of = |resource: &str| {
            let sum = sum_of(&spec.containers, resource, Pick::Requests).unwrap_or(0.0);
            let init = spec
                .init_containers
                .iter()
                .flatten()
                .map(|c| amount(c, resource, Pick::Requests).unwrap_or(0.0))
                .fold(0f64, f64::max);
            let overhead = spec
                .overhead
                .as_ref()
                .and_then(|o| o.get(resource))
                .and_then(|q| parse(q, "overhead", resource).ok())
                .unwrap_or(0.0);
            sum.max(init) + overhead
        };
        Requests {
            cpu: of("cpu"),
            memory: of("memory"),
        }
    }
}

/// Why the pod asks for devices through Dynamic Resource Allocation (a claim, or a DRA
/// extended resource in a container), naming the field; the bridge allocates none.
fn refuse_dra(spec: &PodSpec) -> Result<(), String> {
    const INSTEAD: &str = "slurm-bridge does not allocate DRA devices; request GPUs from a device plugin (nvidia.com/gpu, amd.com/gpu) or with the gres annotation";
    if spec.resource_claims.as_ref().is_some_and(|c| !c.is_empty()) {
        return Err(format!("resourceClaims: {INSTEAD}"));
    }
    let init = spec
        .init_containers
        .iter()
        .flatten()
        .map(|c| ("initContainers", c));
    let main = spec.containers.iter().map(|c| ("containers", c));
    for (list, container) in init.chain(main) {
        let resources = container.resources.as_ref();
        let maps = [
            ("requests", resources.and_then(|r| r.requests.as_ref())),
            ("limits", resources.and_then(|r| r.limits.as_ref())),
        ];
        for (which, map) in maps {
            if let Some(name) = map
                .into_iter()
                .flat_map(|m| m.keys())
                .find(|k| k.starts_with(DRA_EXTENDED_PREFIX))
            {
                return Err(format!(
                    "{list}[{}].resources.{which}[{name}]: a DRA extended resource (device class {}); {INSTEAD}",
                    container.name,
                    &name[DRA_EXTENDED_PREFIX.len()..]
                ));
            }
        }
    }
    Ok(())
}

#[derive(Clone, Copy)]
enum Pick {
    Requests,
    Limits,
}

fn sum_of(containers: &[Container], resource: &str, pick: Pick) -> Result<f64, String> {
    containers.iter().map(|c| amount(c, resource, pick)).sum()
}

fn amount(container: &Container, resource: &str, pick: Pick) -> Result<f64, String> {
    let resources = container.resources.as_ref();
    let map: Option<&BTreeMap<String, Quantity>> = match pick {
        Pick::Requests => resources.and_then(|r| r.requests.as_ref()),
        Pick::Limits => resources.and_then(|r| r.limits.as_ref()),
    };
    map.and_then(|m| m.get(resource))
        .map(|q| parse(q, &format!("container {}", container.name), resource))
        .transpose()
        .map(|v| v.unwrap_or(0.0))
}

fn parse(q: &Quantity, whose: &str, resource: &str) -> Result<f64, String> {
    quantity::parse(&q.0).map_err(|e| format!("{whose}: {resource}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_limits_and_init_containers() {
        let pod: Pod = serde_yaml::from_str(
            "spec:\n  initContainers:\n  - {name: init, resources: {requests: {cpu: '3'}}}\n  containers:\n  - {name: a, resources: {requests: {cpu: 500m, memory: 100Mi}, limits: {memory: 1Gi, nvidia.com/gpu: '1'}}}\n  - {name: b, resources: {requests: {cpu: '1'}}}\n",
        )
        .unwrap();
        let needs = pod_needs(&pod).unwrap();
        assert_eq!(
            needs,
            PodNeeds {
                cpus: 3,
                memory_mb: 1024,
                gpus: 1
            }
        );
        let bad: Pod = serde_yaml::from_str(
            "spec:\n  containers:\n  - {name: a, resources: {requests: {cpu: lots}}}\n",
        )
        .unwrap();
        assert!(pod_needs(&bad).unwrap_err().contains("container a: cpu"));
    }

    #[test]
    fn dra_requests_are_refused_naming_the_field() {
        // As Slinky's bridge examples write a GPU through DRA's extended resource.
        let extended: Pod = serde_yaml::from_str(
            "spec:\n  containers:\n  - {name: cuda, resources: {limits: {deviceclass.resource.kubernetes.io/gpu.nvidia.com: '1'}}}\n",
        )
        .unwrap();
        let why = pod_needs(&extended).unwrap_err();
        assert!(
            why.starts_with(
                "containers[cuda].resources.limits[deviceclass.resource.kubernetes.io/gpu.nvidia.com]: a DRA extended resource (device class gpu.nvidia.com)"
            ),
            "{why}"
        );
        let init: Pod = serde_yaml::from_str(
            "spec:\n  initContainers:\n  - {name: warm, resources: {requests: {deviceclass.resource.kubernetes.io/gpu.amd.com: '2'}}}\n  containers: [{name: a}]\n",
        )
        .unwrap();
        assert!(
            pod_needs(&init)
                .unwrap_err()
                .starts_with("initContainers[warm].resources.requests[")
        );
        let claim: Pod = serde_yaml::from_str(
            "spec: {containers: [{name: a}], resourceClaims: [{name: gpu}]}\n",
        )
        .unwrap();
        assert!(
            pod_needs(&claim)
                .unwrap_err()
                .starts_with("resourceClaims: ")
        );
        // Other extended resources are not Slurm's business and stay allowed.
        let other: Pod = serde_yaml::from_str(
            "spec:\n  containers:\n  - {name: a, resources: {limits: {example.com/foo: '1'}}}\n",
        )
        .unwrap();
        assert_eq!(pod_needs(&other), Ok(PodNeeds::default()));
    }
}
