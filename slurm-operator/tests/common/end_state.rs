//! The check every day-2 scenario on the ground ends with: the cluster is back at full service.
//!
//! - The NodeSet has as many ready pods as it wants.
//! - Every pod's Slurm node is usable: registered, answering, not down, and not drained by the
//!   operator; no pod carries a `pod-cordon` the operator set. An administrator's drain
//!   (a reason without the operator's prefix) is theirs and may stay.
//! - A Slurm node record that no pod backs any more is one the operator may leave, as Slinky
//!   does with `pruneSlurmNodeRecords: Never` (the default): DOWN, with the reason the slurmd's
//!   preStop hook wrote. It takes no job, and the pod that comes back under its name resumes it.
//! - The scenario's jobs were not lost or failed: each ended COMPLETED (or was cancelled by the
//!   test), or is still running or pending, and none was requeued.
//!
//! Convergence takes a few polls, so the check waits up to [`LIMIT`] for everything to hold
//! and then reports every difference at once.

use std::time::{Duration, Instant};

use slurm_client::Client;
use slurm_client::model::{JobState, Node, NodeState};
use slurm_operator::keys::{
    ANNOTATION_CORDONED_BY_OPERATOR as OPERATOR_MARK, ANNOTATION_POD_CORDON as POD_CORDON,
};

use super::workers::{LIMIT, NODESET, pods};
use super::{TestEnv, ground};

/// The reason the slurmd's preStop hook writes as its pod stops.
const PRESTOP_REASON: &str = "slurm-operator: Pod is terminating";

/// Waits until the cluster of `env` is at full service after `scenario`, whose jobs were
/// `jobs`; panics with every difference when it does not get there.
pub async fn assert_full_service(env: &TestEnv, client: &Client, scenario: &str, jobs: &[u32]) {
    let deadline = Instant::now() + LIMIT;
    loop {
        let problems = differences(env, client, jobs).await;
        if problems.is_empty() {
            eprintln!("end state after {scenario}: full service");
            return;
        }
        if Instant::now() > deadline {
            panic!(
                "not back at full service {LIMIT:?} after {scenario}:\n- {}",
                problems.join("\n- ")
            );
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// What keeps the cluster from full service now.
async fn differences(env: &TestEnv, client: &Client, jobs: &[u32]) -> Vec<String> {
    let mut out = Vec::new();
    let nodeset = format!("nodeset/{NODESET}");
    let count = |v: String| v.parse::<u32>().unwrap_or(0);
    let desired = count(ground().get(env.name(), &nodeset, "{.spec.replicas}"));
    let ready = count(ground().get(env.name(), &nodeset, "{.status.readyReplicas}"));
    if desired != ready {
        out.push(format!("{nodeset}: {ready} ready of {desired}"));
    }

    let nodes = match client.list_nodes(&Default::default()).await {
        Ok(r) => r.value.nodes,
        Err(e) => {
            out.push(format!("Slurm nodes not listed: {e}"));
            return out;
        }
    };
    let mut hostnames = Vec::new();
    for pod in pods(env) {
        let resource = format!("pod/{pod}");
        let annotation = |key: &str| {
            let path = key.replace('.', "\\.");
            ground().get(
                env.name(),
                &resource,
                &format!("{{.metadata.annotations.{path}}}"),
            )
        };
        let host = ground().get(env.name(), &resource, "{.spec.hostname}");
        if !annotation(OPERATOR_MARK).is_empty() || !annotation(POD_CORDON).is_empty() {
            out.push(format!(
                "{pod}: still cordoned (pod-cordon {:?}, operator's mark {:?})",
                annotation(POD_CORDON),
                annotation(OPERATOR_MARK)
            ));
        }
        match nodes.iter().find(|n| n.name == host) {
            None => out.push(format!("{pod}: its Slurm node {host:?} is not registered")),
            Some(n) => {
                if let Some(problem) = unusable(n) {
                    out.push(format!("{pod}: Slurm node {host} {problem}"));
                }
            }
        }
        hostnames.push(host);
    }
    for n in nodes.iter().filter(|n| !hostnames.contains(&n.name)) {
        let left_by_prestop =
            n.state == NodeState::Down && n.reason.as_deref() == Some(PRESTOP_REASON);
        if !left_by_prestop {
            out.push(format!(
                "Slurm node {} backs no pod and is not as the preStop hook left it: {:?} {:?} {:?}",
                n.name, n.state, n.state_flags, n.reason
            ));
        }
    }

    for &id in jobs {
        match client.get_job(id).await {
            Ok(r) => {
                let job = r.value;
                let fine = matches!(
                    job.state,
                    JobState::Completed
                        | JobState::Cancelled
                        | JobState::Running
                        | JobState::Pending
                );
                if !fine || job.restart_count > 0 {
                    out.push(format!(
                        "job {id}: {:?}, restarted {} times, reason {:?}",
                        job.state, job.restart_count, job.reason
                    ));
                }
            }
            Err(e) => out.push(format!("job {id}: not found ({e})")),
        }
    }
    out
}

/// Why Slurm would not run a job on `n`, if it would not. A drain of an administrator's (a
/// reason without the operator's prefix) is theirs and is not counted.
fn unusable(n: &Node) -> Option<String> {
    let reason = n.reason.as_deref().unwrap_or_default();
    let operators = reason.is_empty() || reason.starts_with("slurm-operator: ");
    if n.is_not_responding() || n.state == NodeState::Down {
        return Some(format!(
            "is down: {:?} {:?} {reason:?}",
            n.state, n.state_flags
        ));
    }
    if n.is_draining() && operators {
        return Some(format!("is drained by the operator: {reason:?}"));
    }
    None
}
