//! The bridge's Prometheus metrics.

use std::sync::Mutex;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// A label set of one `operation` (a Slurm call or a bridge action).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Operation {
    /// e.g. `submit_job`, `get_job`, `bind`.
    pub operation: String,
}

/// A failed call: its operation and the error's kind.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Failure {
    /// As in [`Operation`].
    pub operation: String,
    /// The client's error kind (`transport`, `rejected`, …) or `kube`.
    pub kind: String,
}

/// A state or reason label.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct State {
    /// e.g. `pending`, `running`; for waiting pods the reason (`Priority`, `Resources`, …).
    pub state: String,
}

/// Every metric of the bridge.
pub struct Metrics {
    registry: Registry,
    slurm_calls: Family<Operation, Counter>,
    slurm_errors: Family<Failure, Counter>,
    actions: Family<Operation, Counter>,
    action_errors: Family<Failure, Counter>,
    jobs: Family<State, Gauge>,
    waiting: Family<State, Gauge>,
    bind_seconds: Histogram,
    start_to_bind_seconds: Histogram,
    known_states: Mutex<Vec<String>>,
}

impl Default for Metrics {
    fn default() -> Metrics {
        let mut registry = Registry::with_prefix("slurm_bridge");
        let slurm_calls = Family::default();
        registry.register(
            "slurm_requests",
            "Slurm REST calls by operation",
            slurm_calls.clone(),
        );
        let slurm_errors = Family::default();
        registry.register(
            "slurm_request_errors",
            "Failed Slurm REST calls by operation and error kind",
            slurm_errors.clone(),
        );
        let actions = Family::default();
        registry.register(
            "actions",
            "Actions applied (submit, bind, cancel, delete, …)",
            actions.clone(),
        );
        let action_errors = Family::default();
        registry.register(
            "action_errors",
            "Actions that failed, by kind",
            action_errors.clone(),
        );
        let jobs = Family::default();
        registry.register("jobs", "The bridge's Slurm jobs by state", jobs.clone());
        let waiting = Family::default();
        registry.register(
            "pods_waiting",
            "Pods waiting for a node, by reason",
            waiting.clone(),
        );
        let bind_seconds =
            Histogram::new([0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0]);
        registry.register(
            "pod_bind_seconds",
            "Time from a pod's creation to its binding",
            bind_seconds.clone(),
        );
        let start_to_bind_seconds =
            Histogram::new([0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0]);
        registry.register(
            "pod_bind_after_job_start_seconds",
            "Time from the bridge seeing a pod's Slurm job start to the pod's binding",
            start_to_bind_seconds.clone(),
        );
        Metrics {
            registry,
            slurm_calls,
            slurm_errors,
            actions,
            action_errors,
            jobs,
            waiting,
            bind_seconds,
            start_to_bind_seconds,
            known_states: Mutex::default(),
        }
    }
}

impl Metrics {
    /// Counts a Slurm call and, when it failed, its error.
    pub fn slurm_call(&self, operation: &str, error: Option<&slurm_client::Error>) {
        let labels = Operation {
            operation: operation.into(),
        };
        self.slurm_calls.get_or_create(&labels).inc();
        if let Some(e) = error {
            self.slurm_errors
                .get_or_create(&Failure {
                    operation: operation.into(),
                    kind: e.kind().to_string(),
                })
                .inc();
        }
    }

    /// Counts an applied action, and its failure kind if it failed.
    pub fn action(&self, action: &str, failure: Option<&str>) {
        self.actions
            .get_or_create(&Operation {
                operation: action.into(),
            })
            .inc();
        if let Some(kind) = failure {
            self.action_errors
                .get_or_create(&Failure {
                    operation: action.into(),
                    kind: kind.into(),
                })
                .inc();
        }
    }

    /// A pod bound `seconds` after its creation.
    pub fn bound_after(&self, seconds: f64) {
        self.bind_seconds.observe(seconds);
    }

    /// A pod bound `seconds` after the bridge saw its job start.
    pub fn bound_after_start(&self, seconds: f64) {
        self.start_to_bind_seconds.observe(seconds);
    }

    /// The jobs by state (states not listed go to 0).
    pub fn set_jobs(&self, counts: &[(String, usize)]) {
        let mut known = self.known_states.lock().expect("not poisoned");
        for state in known.iter() {
            self.jobs
                .get_or_create(&State {
                    state: state.clone(),
                })
                .set(0);
        }
        for (state, n) in counts {
            self.jobs
                .get_or_create(&State {
                    state: state.clone(),
                })
                .set(*n as i64);
            if !known.contains(state) {
                known.push(state.clone());
            }
        }
    }

    /// The waiting pods by reason.
    pub fn set_waiting(&self, counts: &[(String, usize)]) {
        self.waiting.clear();
        for (reason, n) in counts {
            self.waiting
                .get_or_create(&State {
                    state: reason.clone(),
                })
                .set(*n as i64);
        }
    }

    /// The text exposition.
    pub fn encode(&self) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry)
            .expect("writing to a String cannot fail");
        text
    }
}
