//! Gauges read off the watched NodeSets and Tokens at each scrape, as kube-state-metrics reads
//! Deployments: the values are the objects' own status, and a deleted object's series go with
//! it instead of staying at their last value.

use std::sync::{Arc, Mutex};

use kube::ResourceExt;
use kube::runtime::reflector::Store;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;

use crate::crd::{NodeSet, Token};

/// Labels of a NodeSet.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct NodeSetLabels {
    namespace: String,
    nodeset: String,
}

/// Labels of NodeSet pods counted by the state of their Slurm node.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct NodeSetStateLabels {
    namespace: String,
    nodeset: String,
    /// `idle`, `allocated` (or mixed), `down`, `drain` (a flag: also counted in its base state)
    /// or `unregistered` (none of those base states: the pod's Slurm node has not registered).
    state: String,
}

/// Labels of a Token.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TokenLabels {
    namespace: String,
    token: String,
    /// `spec.refresh`: whether the operator renews the token before it expires.
    refresh: String,
}

/// One watched scope's stores.
type Scope = (Store<NodeSet>, Store<Token>);

/// The stores of every watched scope, added as each scope's cache starts.
#[derive(Debug, Default, Clone)]
pub struct Objects {
    stores: Arc<Mutex<Vec<Scope>>>,
}

impl Objects {
    /// Reads `nodesets` and `tokens` (one scope's stores) from the next scrape on.
    pub fn watch(&self, nodesets: Store<NodeSet>, tokens: Store<Token>) {
        self.lock().push((nodesets, tokens));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Scope>> {
        // A panic while pushing a store leaves the list whole; keep reading it.
        self.stores.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn families(&self) -> Families {
        let families = Families::default();
        for (nodesets, tokens) in self.lock().iter() {
            for nodeset in nodesets.state() {
                families.nodeset(&nodeset);
            }
            for token in tokens.state() {
                families.token(&token);
            }
        }
        families
    }
}

/// One scrape's values.
#[derive(Default)]
struct Families {
    replicas: Family<NodeSetLabels, Gauge>,
    ready: Family<NodeSetLabels, Gauge>,
    available: Family<NodeSetLabels, Gauge>,
    pods: Family<NodeSetStateLabels, Gauge>,
    token_expiry: Family<TokenLabels, Gauge>,
    token_lifetime: Family<TokenLabels, Gauge>,
}

impl Families {
    fn nodeset(&self, nodeset: &NodeSet) {
        let Some(namespace) = nodeset.namespace() else {
            return;
        };
        let labels = NodeSetLabels {
            namespace,
            nodeset: nodeset.name_any(),
        };
        let status = nodeset.status.clone().unwrap_or_default();
        // DaemonSet mode wants a pod per eligible node, which only the status counts.
        let desired = if nodeset.spec.is_daemonset() {
            status.desired
        } else {
            nodeset.spec.replicas()
        };
        self.replicas.get_or_create(&labels).set(desired.into());
        self.ready
            .get_or_create(&labels)
            .set(status.ready_replicas.into());
        self.available
            .get_or_create(&labels)
            .set(status.available_replicas.into());
        let registered = status.slurm_idle + status.slurm_allocated + status.slurm_down;
        for (state, count) in [
            ("idle", status.slurm_idle),
            ("allocated", status.slurm_allocated),
            ("down", status.slurm_down),
            ("drain", status.slurm_drain),
            ("unregistered", (status.replicas - registered).max(0)),
        ] {
            self.pods
                .get_or_create(&NodeSetStateLabels {
                    namespace: labels.namespace.clone(),
                    nodeset: labels.nodeset.clone(),
                    state: state.into(),
                })
                .set(count.into());
        }
    }

    fn token(&self, token: &Token) {
        let (Some(namespace), Some(issued)) = (
            token.namespace(),
            token.status.as_ref().and_then(|s| s.issued_at.as_ref()),
        ) else {
            // Nothing minted yet: there is no expiry to tell.
            return;
        };
        let lifetime = i64::try_from(token.spec.lifetime().as_secs()).unwrap_or(i64::MAX);
        let labels = TokenLabels {
            namespace,
            token: token.name_any(),
            refresh: token.spec.refresh().to_string(),
        };
        self.token_expiry
            .get_or_create(&labels)
            .set(issued.0.as_second().saturating_add(lifetime));
        self.token_lifetime.get_or_create(&labels).set(lifetime);
    }
}

impl Collector for Objects {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let f = self.families();
        let gauges: [(&str, &str, &dyn EncodeMetric); 6] = [
            (
                "nodeset_replicas",
                "Pods a NodeSet wants: spec.replicas, or its eligible nodes in DaemonSet mode",
                &f.replicas,
            ),
            (
                "nodeset_ready_replicas",
                "NodeSet pods running and Ready (status.readyReplicas)",
                &f.ready,
            ),
            (
                "nodeset_available_replicas",
                "NodeSet pods Ready for minReadySeconds (status.availableReplicas)",
                &f.available,
            ),
            (
                "nodeset_pods",
                "NodeSet pods by the state of their Slurm node",
                &f.pods,
            ),
            (
                "token_expiry_timestamp_seconds",
                "When the JWT in a Token's Secret expires (status.issuedAt plus spec.lifetime)",
                &f.token_expiry,
            ),
            (
                "token_lifetime_seconds",
                "A Token's spec.lifetime",
                &f.token_lifetime,
            ),
        ];
        for (name, help, family) in gauges {
            family.encode(encoder.encode_descriptor(name, help, None, family.metric_type())?)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use kube::runtime::reflector;
    use kube::runtime::watcher::Event;

    use super::*;
    use crate::telemetry::Metrics;

    fn nodeset(yaml: &str) -> NodeSet {
        serde_yaml::from_str(yaml).unwrap()
    }

    #[test]
    fn nodesets_and_tokens_are_read_at_scrape_and_a_deleted_ones_series_go() {
        let (nodesets, mut nodeset_writer) = reflector::store::<NodeSet>();
        let (tokens, mut token_writer) = reflector::store::<Token>();
        let metrics = Metrics::default();
        metrics.objects.watch(nodesets, tokens);

        let cpu = nodeset(
            "apiVersion: slinky.slurm.net/v1beta1\nkind: NodeSet\nmetadata: {name: cpu, namespace: slurm}\n\
             spec: {controllerRef: {name: slurm}, replicas: 3}\n\
             status: {replicas: 3, readyReplicas: 2, availableReplicas: 1, slurmIdle: 1, slurmAllocated: 1, slurmDrain: 1, nodeSetHash: h, selector: s}",
        );
        let gpu = nodeset(
            "apiVersion: slinky.slurm.net/v1beta1\nkind: NodeSet\nmetadata: {name: gpu, namespace: slurm}\n\
             spec: {controllerRef: {name: slurm}, replicas: 0, scalingMode: DaemonSet}\n\
             status: {desired: 4, nodeSetHash: h, selector: s}",
        );
        let token: Token = serde_yaml::from_str(
            "apiVersion: slinky.slurm.net/v1beta1\nkind: Token\nmetadata: {name: bridge, namespace: slurm}\n\
             spec: {username: slurm, jwtKeyRef: {name: k, key: k}, lifetime: 1h}\n\
             status: {issuedAt: '2026-12-07T10:00:00Z'}",
        )
        .unwrap();
        let unminted: Token = serde_yaml::from_str(
            "apiVersion: slinky.slurm.net/v1beta1\nkind: Token\nmetadata: {name: new, namespace: slurm}\n\
             spec: {username: slurm, jwtKeyRef: {name: k, key: k}, refresh: false}",
        )
        .unwrap();
        for n in [&cpu, &gpu] {
            nodeset_writer.apply_watcher_event(&Event::Apply(n.clone()));
        }
        for t in [&token, &unminted] {
            token_writer.apply_watcher_event(&Event::Apply(t.clone()));
        }

        let text = metrics.encode();
        let expiry = "2026-12-07T10:00:00Z"
            .parse::<jiff::Timestamp>()
            .unwrap()
            .as_second()
            + 3600;
        for line in [
            "slurm_operator_nodeset_replicas{namespace=\"slurm\",nodeset=\"cpu\"} 3\n".to_owned(),
            "slurm_operator_nodeset_ready_replicas{namespace=\"slurm\",nodeset=\"cpu\"} 2\n".into(),
            "slurm_operator_nodeset_available_replicas{namespace=\"slurm\",nodeset=\"cpu\"} 1\n"
                .into(),
            "slurm_operator_nodeset_replicas{namespace=\"slurm\",nodeset=\"gpu\"} 4\n".into(),
            "slurm_operator_nodeset_pods{namespace=\"slurm\",nodeset=\"cpu\",state=\"drain\"} 1\n"
                .into(),
            "slurm_operator_nodeset_pods{namespace=\"slurm\",nodeset=\"cpu\",state=\"unregistered\"} 1\n"
                .into(),
            format!(
                "slurm_operator_token_expiry_timestamp_seconds{{namespace=\"slurm\",token=\"bridge\",refresh=\"true\"}} {expiry}\n"
            ),
            "slurm_operator_token_lifetime_seconds{namespace=\"slurm\",token=\"bridge\",refresh=\"true\"} 3600\n"
                .into(),
        ] {
            assert!(text.contains(&line), "{line:?} missing in\n{text}");
        }
        assert!(!text.contains("token=\"new\""), "{text}");

        nodeset_writer.apply_watcher_event(&Event::Delete(cpu));
        let text = metrics.encode();
        assert!(!text.contains("nodeset=\"cpu\""), "{text}");
        assert!(text.contains("nodeset=\"gpu\""), "{text}");
    }
}
