//! A pod's status as a kubelet reports it, computed from what its containers did: phase,
//! the four standard conditions, and one status per container. Pure, so it is table-tested.

use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStateWaiting,
    ContainerStatus, PodCondition, PodIP, PodSpec, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

/// What one container is doing now.
#[derive(Clone, Debug, PartialEq)]
pub enum Run {
    Waiting { reason: String, message: String },
    Running { since: Timestamp },
    Exited(Exit),
}

#[derive(Clone, Debug, PartialEq)]
pub struct Exit {
    pub code: i32,
    pub reason: String,
    pub started: Timestamp,
    pub finished: Timestamp,
    pub message: String,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Record {
    pub name: String,
    pub image: String,
    pub run: Run,
    /// The run before the current one, reported as lastState.
    pub last: Option<Exit>,
    pub restarts: i32,
    pub ready: bool,
    /// The startup probe passed (or there is none) while running.
    pub started: bool,
}

impl Record {
    pub fn new(name: &str, image: &str) -> Record {
        Record {
            name: name.into(),
            image: image.into(),
            run: Run::Waiting {
                reason: "ContainerCreating".into(),
                message: String::new(),
            },
            last: None,
            restarts: 0,
            ready: false,
            started: false,
        }
    }
}

/// Everything the kubelet knows of a pod's run.
#[derive(Clone, Debug, Default)]
pub struct PodRun {
    pub ip: Option<String>,
    pub host_ip: Option<String>,
    pub start: Option<Timestamp>,
    pub init: Vec<Record>,
    pub containers: Vec<Record>,
    /// The pod failed as a whole (e.g. its sandbox could not be made); phase Failed with this reason.
    pub failed: Option<(String, String)>,
}

pub fn compute(spec: &PodSpec, run: &PodRun, now: Timestamp, gates_ok: bool) -> PodStatus {
    let restart = spec.restart_policy.as_deref().unwrap_or("Always");
    let init_done = run.init.iter().all(|r| match &r.run {
        Run::Exited(e) => e.code == 0,
        // A sidecar (restartable init container) counts once it has started.
        Run::Running { .. } => is_sidecar(spec, &r.name) && r.started,
        Run::Waiting { .. } => false,
    });
    let init_failed = run.init.iter().any(|r| {
        matches!(&r.run, Run::Exited(e) if e.code != 0)
            && restart == "Never"
            && !is_sidecar(spec, &r.name)
    });
    let all_exited = !run.containers.is_empty()
        && run
            .containers
            .iter()
            .all(|r| matches!(r.run, Run::Exited(_)));
    let all_zero = run
        .containers
        .iter()
        .all(|r| matches!(&r.run, Run::Exited(e) if e.code == 0));
    let any_running = run
        .containers
        .iter()
        .any(|r| matches!(r.run, Run::Running { .. }));
    let (phase, reason, message) = if let Some((reason, message)) = &run.failed {
        ("Failed", Some(reason.clone()), Some(message.clone()))
    } else if init_failed {
        ("Failed", None, None)
    } else if all_exited && (restart == "Never" || (restart == "OnFailure" && all_zero)) {
        if all_zero {
            ("Succeeded", None, None)
        } else {
            ("Failed", None, None)
        }
    } else if init_done && (any_running || all_exited) {
        ("Running", None, None)
    } else {
        ("Pending", None, None)
    };
    let containers_ready =
        init_done && !run.containers.is_empty() && run.containers.iter().all(|r| r.ready);
    let ended = matches!(phase, "Succeeded" | "Failed");
    let condition = |type_: &str, ok: bool, reason: Option<&str>| PodCondition {
        type_: type_.into(),
        status: if ok { "True" } else { "False" }.into(),
        last_transition_time: Some(Time(now)),
        reason: if ok { None } else { reason.map(String::from) },
        ..Default::default()
    };
    let not_ready_reason = if ended {
        "PodCompleted"
    } else {
        "ContainersNotReady"
    };
    let conditions = vec![
        condition("PodScheduled", true, None),
        condition(
            "Initialized",
            init_done || ended,
            Some("ContainersNotInitialized"),
        ),
        condition(
            "ContainersReady",
            containers_ready && !ended,
            Some(not_ready_reason),
        ),
        condition(
            "Ready",
            containers_ready && gates_ok && !ended,
            Some(not_ready_reason),
        ),
    ];
    PodStatus {
        phase: Some(phase.into()),
        reason,
        message,
        conditions: Some(conditions),
        pod_ip: run.ip.clone(),
        pod_ips: run.ip.clone().map(|ip| vec![PodIP { ip }]),
        host_ip: run.host_ip.clone(),
        start_time: run.start.map(Time),
        init_container_statuses: Some(run.init.iter().map(container).collect()),
        container_statuses: Some(run.containers.iter().map(container).collect()),
        qos_class: Some(qos_class(spec).into()),
        ..Default::default()
    }
}

pub fn is_sidecar(spec: &PodSpec, name: &str) -> bool {
    spec.init_containers
        .iter()
        .flatten()
        .any(|c| c.name == name && c.restart_policy.as_deref() == Some("Always"))
}

fn terminated(e: &Exit) -> ContainerState {
    ContainerState {
        terminated: Some(ContainerStateTerminated {
            exit_code: e.code,
            reason: Some(e.reason.clone()),
            message: (!e.message.is_empty()).then(|| e.message.clone()),
            started_at: Some(Time(e.started)),
            finished_at: Some(Time(e.finished)),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn container(r: &Record) -> ContainerStatus {
    let state = match &r.run {
        Run::Waiting { reason, message } => ContainerState {
            waiting: Some(ContainerStateWaiting {
                reason: Some(reason.clone()),
                message: (!message.is_empty()).then(|| message.clone()),
            }),
            ..Default::default()
        },
        Run::Running { since } => ContainerState {
            running: Some(ContainerStateRunning {
                started_at: Some(Time(*since)),
            }),
            ..Default::default()
        },
        Run::Exited(e) => terminated(e),
    };
    ContainerStatus {
        name: r.name.clone(),
        image: r.image.clone(),
        image_id: String::new(),
        ready: r.ready,
        restart_count: r.restarts,
        started: Some(matches!(r.run, Run::Running { .. }) && r.started),
        state: Some(state),
        last_state: Some(r.last.as_ref().map(terminated).unwrap_or_default()),
        ..Default::default()
    }
}

/// Guaranteed when every container's requests equal its limits for cpu and memory, BestEffort
/// when none sets any, Burstable otherwise.
fn qos_class(spec: &PodSpec) -> &'static str {
    let mut any = false;
    let mut guaranteed = true;
    for c in spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
    {
        let r = c.resources.as_ref();
        let limits = r.and_then(|r| r.limits.as_ref());
        let requests = r.and_then(|r| r.requests.as_ref());
        for res in ["cpu", "memory"] {
            let l = limits.and_then(|m| m.get(res));
            let q = requests.and_then(|m| m.get(res)).or(l);
            any |= l.is_some() || q.is_some();
            guaranteed &= l.is_some() && l == q;
        }
    }
    match (any, guaranteed) {
        (false, _) => "BestEffort",
        (true, true) => "Guaranteed",
        (true, false) => "Burstable",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(restart: &str) -> PodSpec {
        PodSpec {
            restart_policy: Some(restart.into()),
            ..Default::default()
        }
    }

    fn exited(code: i32) -> Run {
        Run::Exited(Exit {
            code,
            reason: if code == 0 { "Completed" } else { "Error" }.into(),
            started: Timestamp::UNIX_EPOCH,
            finished: Timestamp::UNIX_EPOCH,
            message: String::new(),
        })
    }

    fn run_of(containers: Vec<Run>) -> PodRun {
        PodRun {
            containers: containers
                .into_iter()
                .enumerate()
                .map(|(i, run)| Record {
                    run,
                    ..Record::new(&format!("c{i}"), "img")
                })
                .collect(),
            ..Default::default()
        }
    }

    fn phase(restart: &str, containers: Vec<Run>) -> String {
        compute(
            &spec(restart),
            &run_of(containers),
            Timestamp::UNIX_EPOCH,
            true,
        )
        .phase
        .unwrap()
    }

    #[test]
    fn phases() {
        let running = || Run::Running {
            since: Timestamp::UNIX_EPOCH,
        };
        let waiting = || Run::Waiting {
            reason: "ContainerCreating".into(),
            message: String::new(),
        };
        assert_eq!(phase("Always", vec![waiting()]), "Pending");
        assert_eq!(phase("Always", vec![running(), waiting()]), "Running");
        assert_eq!(phase("Never", vec![exited(0), exited(0)]), "Succeeded");
        assert_eq!(phase("Never", vec![exited(0), exited(3)]), "Failed");
        assert_eq!(phase("OnFailure", vec![exited(0)]), "Succeeded");
        assert_eq!(phase("OnFailure", vec![exited(1)]), "Running");
        assert_eq!(phase("Always", vec![exited(0)]), "Running");
        assert_eq!(phase("Never", vec![running(), exited(1)]), "Running");
    }

    #[test]
    fn ready_needs_every_container_ready_and_the_gates() {
        let mut run = run_of(vec![Run::Running {
            since: Timestamp::UNIX_EPOCH,
        }]);
        let ready = |run: &PodRun, gates| {
            compute(&spec("Always"), run, Timestamp::UNIX_EPOCH, gates)
                .conditions
                .unwrap()
                .into_iter()
                .find(|c| c.type_ == "Ready")
                .unwrap()
                .status
        };
        assert_eq!(ready(&run, true), "False");
        run.containers[0].ready = true;
        assert_eq!(ready(&run, true), "True");
        assert_eq!(ready(&run, false), "False");
    }

    #[test]
    fn failed_init_container_fails_a_never_pod() {
        let mut run = run_of(vec![Run::Waiting {
            reason: "PodInitializing".into(),
            message: String::new(),
        }]);
        run.init = vec![Record {
            run: exited(2),
            ..Record::new("init", "img")
        }];
        let s = compute(&spec("Never"), &run, Timestamp::UNIX_EPOCH, true);
        assert_eq!(s.phase.as_deref(), Some("Failed"));
        let s = compute(&spec("Always"), &run, Timestamp::UNIX_EPOCH, true);
        assert_eq!(s.phase.as_deref(), Some("Pending"));
    }
}
