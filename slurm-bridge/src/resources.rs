//! What a pod asks of a node, as Slurm counts it: whole CPUs, MiB of memory, GPUs.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use kube_support::quantity;

/// GPU resource names of device plugins, sent to Slurm as `gres/gpu`.
pub const GPU_RESOURCES: &[&str] = &["nvidia.com/gpu", "amd.com/gpu"];

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
}
