//! The operator's own Prometheus metrics (Slinky's operator has only controller-runtime's).

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use super::objects::Objects;

/// The reconcilers, as the `controller` label names them.
pub const CONTROLLERS: [&str; 6] = [
    "controller",
    "nodeset",
    "restapi",
    "accounting",
    "loginset",
    "token",
];

/// Labels of a reconcile: which controller, and how it ended.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReconcileLabels {
    /// `controller`, `nodeset`, `restapi`, `accounting`, `loginset` or `token`.
    pub controller: String,
    /// `ok`, or the error's metric label.
    pub result: String,
}

/// Labels naming a controller only.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ControllerLabel {
    /// As in [`ReconcileLabels`].
    pub controller: String,
}

/// Labels of a Slurm REST call.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SlurmCallLabels {
    /// e.g. `drain_node`.
    pub operation: String,
}

/// Labels of a failed Slurm REST call.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SlurmErrorLabels {
    /// e.g. `drain_node`.
    pub operation: String,
    /// The client's error kind, e.g. `transport`, `slurm`, `not_found`.
    pub kind: String,
}

/// Every metric of the operator, registered in one registry.
pub struct Metrics {
    /// The registry `/metrics` encodes.
    pub registry: Registry,
    reconciles: Family<ReconcileLabels, Counter>,
    reconcile_errors: Family<ControllerLabel, Counter>,
    reconcile_seconds: Family<ControllerLabel, Histogram>,
    slurm_calls: Family<SlurmCallLabels, Counter>,
    slurm_errors: Family<SlurmErrorLabels, Counter>,
    /// Slurm nodes the operator is draining before it deletes their pods.
    pub drains_in_progress: Family<ControllerLabel, Gauge>,
    /// The NodeSets' and Tokens' gauges, read off the watches at each scrape.
    pub objects: Objects,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("slurm_operator");
        let reconciles = Family::<ReconcileLabels, Counter>::default();
        registry.register(
            "reconciles",
            "Reconciles by controller and result",
            reconciles.clone(),
        );
        let reconcile_errors = Family::<ControllerLabel, Counter>::default();
        registry.register(
            "reconcile_errors",
            "Reconciles that failed, by controller",
            reconcile_errors.clone(),
        );
        // Every controller's successes and errors are exported from the start, at 0, as
        // controller-runtime does for Slinky's: an empty family is not exported at all, and a
        // series that appears only with its first error cannot be alerted on by rate() or
        // increase().
        for controller in CONTROLLERS {
            drop(reconciles.get_or_create(&ReconcileLabels {
                controller: controller.into(),
                result: "ok".into(),
            }));
            drop(reconcile_errors.get_or_create(&ControllerLabel {
                controller: controller.into(),
            }));
        }
        let reconcile_seconds = Family::<ControllerLabel, Histogram>::new_with_constructor(|| {
            Histogram::new([
                0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
            ])
        });
        registry.register(
            "reconcile_duration_seconds",
            "Time a reconcile took, by controller",
            reconcile_seconds.clone(),
        );
        let slurm_calls = Family::<SlurmCallLabels, Counter>::default();
        registry.register(
            "slurm_requests",
            "Slurm REST calls made by the reconcilers, by operation",
            slurm_calls.clone(),
        );
        let slurm_errors = Family::<SlurmErrorLabels, Counter>::default();
        registry.register(
            "slurm_request_errors",
            "Failed Slurm REST calls, by operation and error kind",
            slurm_errors.clone(),
        );
        let drains_in_progress = Family::<ControllerLabel, Gauge>::default();
        registry.register(
            "drains_in_progress",
            "Slurm nodes being drained before their pods are deleted",
            drains_in_progress.clone(),
        );
        let objects = Objects::default();
        registry.register_collector(Box::new(objects.clone()));
        Metrics {
            registry,
            reconciles,
            reconcile_errors,
            reconcile_seconds,
            slurm_calls,
            slurm_errors,
            drains_in_progress,
            objects,
        }
    }
}

impl Metrics {
    /// Counts one reconcile of `controller` that ended with `result` after `took`.
    pub fn reconciled(&self, controller: &str, result: &str, took: Duration) {
        self.reconciles
            .get_or_create(&ReconcileLabels {
                controller: controller.into(),
                result: result.into(),
            })
            .inc();
        if result != "ok" {
            self.reconcile_errors
                .get_or_create(&ControllerLabel {
                    controller: controller.into(),
                })
                .inc();
        }
        self.reconcile_seconds
            .get_or_create(&ControllerLabel {
                controller: controller.into(),
            })
            .observe(took.as_secs_f64());
    }

    /// Counts a Slurm REST call and, when it failed, its error kind.
    pub fn slurm_call<T>(&self, operation: &str, result: &Result<T, slurm_client::Error>) {
        self.slurm_calls
            .get_or_create(&SlurmCallLabels {
                operation: operation.into(),
            })
            .inc();
        if let Err(e) = result {
            self.slurm_errors
                .get_or_create(&SlurmErrorLabels {
                    operation: operation.into(),
                    kind: error_kind(e),
                })
                .inc();
        }
    }

    /// The text exposition of every metric.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)
            .expect("writing to a String cannot fail");
        out
    }
}

/// What `/metrics` ([`kube_support::http::serve`]) answers.
impl kube_support::http::EncodeMetrics for Metrics {
    fn encode(&self) -> String {
        Metrics::encode(self)
    }
}

fn error_kind(e: &slurm_client::Error) -> String {
    e.kind().as_str().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_controller_is_exported_from_the_start_and_errors_are_counted() {
        let m = Metrics::default();
        let text = m.encode();
        for c in CONTROLLERS {
            assert!(
                text.contains(&format!(
                    "slurm_operator_reconciles_total{{controller=\"{c}\",result=\"ok\"}} 0\n"
                )),
                "{text}"
            );
            assert!(
                text.contains(&format!(
                    "slurm_operator_reconcile_errors_total{{controller=\"{c}\"}} 0\n"
                )),
                "{text}"
            );
        }
        m.reconciled("nodeset", "ok", Duration::from_millis(5));
        m.reconciled("nodeset", "slurm", Duration::from_millis(5));
        m.reconciled("nodeset", "invalid_reference", Duration::from_millis(5));
        let text = m.encode();
        for line in [
            "slurm_operator_reconciles_total{controller=\"nodeset\",result=\"ok\"} 1\n",
            "slurm_operator_reconciles_total{controller=\"nodeset\",result=\"slurm\"} 1\n",
            "slurm_operator_reconcile_errors_total{controller=\"nodeset\"} 2\n",
            "slurm_operator_reconcile_errors_total{controller=\"token\"} 0\n",
            "slurm_operator_reconcile_duration_seconds_count{controller=\"nodeset\"} 3\n",
        ] {
            assert!(text.contains(line), "{line:?} missing in\n{text}");
        }
    }
}
