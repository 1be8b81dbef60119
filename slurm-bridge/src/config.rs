//! The configuration file, with Slinky's keys (`/etc/slurm-bridge/config.yaml`), plus the
//! bridge's own, all optional.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use crate::identity_policy::IdentityPolicy;

/// What `config.yaml` holds. Unknown keys are refused, so a typo is an error that names it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct Config {
    /// The scheduler name pods must carry (`spec.schedulerName`).
    pub scheduler_name: String,
    /// slurmrestd's URL.
    pub slurm_rest_api: String,
    /// Namespaces whose pods the webhook hands to the bridge.
    pub managed_namespaces: Vec<String>,
    /// A namespace label selector; when set it replaces `managedNamespaces`.
    pub managed_namespace_selector: Option<LabelSelector>,
    /// The MCS label of every placeholder job.
    pub mcs_label: String,
    /// The partition of jobs whose workload names none.
    pub partition: String,
    /// Whether jobs get whole nodes unless the workload's `exclusive` annotation says otherwise.
    /// Slinky always allocates whole nodes; `false` packs pods by their requests.
    pub exclusive: bool,
    /// Whether Kubernetes nodes that are Slurm nodes get the `NoExecute` taint
    /// `slinky.slurm.net/managed-node=<schedulerName>` (Slinky always sets it); `false` removes it.
    pub taint_nodes: bool,
    /// Memory in MiB of the job of a workload whose pods request none (BestEffort pods, and
    /// most pods people write). Without it Slurm would give such a job the whole node's memory
    /// (its `DefMemPerNode` default), and nothing else could pack beside it. 200 MiB is what
    /// kube-scheduler counts for a pod without a memory request; 0 leaves it to the partition.
    pub default_mem_per_pod: u64,
    /// Whether the bridge writes its PodGroups' `status` (phase and pod counts), as the
    /// scheduler that runs them. `false` when scheduler-plugins' own PodGroup controller runs
    /// in the cluster and writes it.
    pub pod_group_status: bool,
    /// Which user and group ids, accounts, QOS, partitions, reservations and priorities the
    /// pods of each namespace may ask for with the job annotations; empty: any (Slinky's
    /// behaviour). See [`IdentityPolicy`].
    pub identity_policy: IdentityPolicy,
}

/// A Kubernetes label selector (`matchLabels` and `matchExpressions`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct LabelSelector {
    /// Labels that must be present with these values.
    pub match_labels: BTreeMap<String, String>,
    /// Requirements on labels.
    pub match_expressions: Vec<LabelRequirement>,
}

/// One `matchExpressions` entry.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct LabelRequirement {
    /// The label key.
    pub key: String,
    /// `In`, `NotIn`, `Exists` or `DoesNotExist`.
    pub operator: String,
    /// Values for `In` and `NotIn`.
    pub values: Vec<String>,
}

/// kube-scheduler's `DefaultMemoryRequest` (200 MiB), the memory it counts for a pod that
/// requests none.
pub const DEFAULT_MEM_PER_POD_MIB: u64 = 200;

impl Default for Config {
    fn default() -> Config {
        Config {
            scheduler_name: "slurm-bridge-scheduler".into(),
            slurm_rest_api: "http://slurm-restapi.slurm:6820".into(),
            managed_namespaces: vec!["slurm-bridge".into()],
            managed_namespace_selector: None,
            mcs_label: "kubernetes".into(),
            partition: "slurm-bridge".into(),
            exclusive: true,
            taint_nodes: true,
            default_mem_per_pod: DEFAULT_MEM_PER_POD_MIB,
            pod_group_status: true,
            identity_policy: IdentityPolicy::default(),
        }
    }
}

impl Config {
    /// Parses `text`; an error names the file's offending key or value.
    pub fn parse(text: &str) -> Result<Config, String> {
        if text.trim().is_empty() {
            return Ok(Config::default());
        }
        let config: Config = serde_yaml::from_str(text).map_err(|e| e.to_string())?;
        if config.scheduler_name.trim().is_empty() {
            return Err("schedulerName is empty".into());
        }
        url::Url::parse(&config.slurm_rest_api)
            .map_err(|e| format!("slurmRestApi {:?} is not a URL: {e}", config.slurm_rest_api))?;
        config.identity_policy.validate()?;
        Ok(config)
    }

    /// Reads and parses the file at `path`.
    pub fn load(path: &Path) -> anyhow::Result<Config> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("cannot read the config file {}: {e}", path.display()))?;
        Config::parse(&text).map_err(|e| anyhow::anyhow!("config file {}: {e}", path.display()))
    }
}

impl LabelSelector {
    /// Whether `labels` satisfy the selector (an empty selector matches everything).
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.match_labels
            .iter()
            .all(|(k, v)| labels.get(k) == Some(v))
            && self.match_expressions.iter().all(|r| {
                let value = labels.get(&r.key);
                match r.operator.as_str() {
                    "In" => value.is_some_and(|v| r.values.contains(v)),
                    "NotIn" => !value.is_some_and(|v| r.values.contains(v)),
                    "Exists" => value.is_some(),
                    "DoesNotExist" => value.is_none(),
                    _ => false,
                }
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slinky_config_file_parses() {
        let config = Config::parse(
            "schedulerName: slurm-bridge-scheduler\nslurmRestApi: http://slurm-restapi.slurm:6820\n\
             managedNamespaces: [slurm-bridge, ml]\nmcsLabel: kubernetes\npartition: slurm-bridge\n",
        )
        .unwrap();
        assert_eq!(config.managed_namespaces, ["slurm-bridge", "ml"]);
        assert!(config.exclusive);
        assert!(config.taint_nodes);
        assert_eq!(
            config.default_mem_per_pod, 200,
            "Slinky's file has no such key"
        );
        let config = Config::parse("defaultMemPerPod: 512\n").unwrap();
        assert_eq!(config.default_mem_per_pod, 512);
    }

    #[test]
    fn a_typo_is_named() {
        let err = Config::parse("schedulerNmae: x\n").unwrap_err();
        assert!(err.contains("schedulerNmae"), "{err}");
        let err = Config::parse("slurmRestApi: not a url\n").unwrap_err();
        assert!(err.contains("slurmRestApi"), "{err}");
    }

    #[test]
    fn selector_matches_labels() {
        let config = Config::parse(
            "managedNamespaceSelector:\n  matchLabels: {team: ml}\n  matchExpressions:\n  - {key: tier, operator: NotIn, values: [prod]}\n",
        )
        .unwrap();
        let selector = config.managed_namespace_selector.unwrap();
        let labels = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        assert!(selector.matches(&labels(&[("team", "ml")])));
        assert!(!selector.matches(&labels(&[("team", "ml"), ("tier", "prod")])));
        assert!(!selector.matches(&labels(&[])));
    }
}
