//! The job-field annotations (`slurmjob.slinky.slurm.net/<key>`, or the 0.x spelling
//! `slinky.slurm.net/<key>`), parsed and checked. The webhook and the scheduler use the same
//! parser, so a value the webhook lets through is one the scheduler can submit.

use std::collections::BTreeMap;
use std::fmt;

use crate::keys::{JOB_ANNOTATION_PREFIX, LEGACY_JOB_ANNOTATION_PREFIX};
use kube_support::quantity;

/// The keys, as Slinky names them.
pub const KEYS: &[&str] = &[
    "account",
    "constraints",
    "cpu-per-task",
    "exclusive",
    "gres",
    "group-id",
    "job-name",
    "licenses",
    "max-nodes",
    "min-nodes",
    "mem-per-node",
    "partition",
    "priority",
    "qos",
    "reservation",
    "timelimit",
    "user-id",
    "wckey",
];

/// The job fields a workload's annotations set.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JobFields {
    /// `account`.
    pub account: Option<String>,
    /// `constraints` (node features).
    pub constraints: Option<String>,
    /// `cpu-per-task`.
    pub cpus_per_task: Option<u32>,
    /// `exclusive`: `"true"` (whole nodes) or `"false"` (pack by requests).
    pub exclusive: Option<bool>,
    /// `gres`, e.g. `gpu:2` or `gres/gpu:a100=1`.
    pub gres: Option<String>,
    /// `group-id`.
    pub group_id: Option<u32>,
    /// `job-name`.
    pub job_name: Option<String>,
    /// `licenses`.
    pub licenses: Option<String>,
    /// `max-nodes`.
    pub max_nodes: Option<u32>,
    /// `min-nodes`.
    pub min_nodes: Option<u32>,
    /// `mem-per-node` (a Kubernetes quantity), in MiB.
    pub memory_per_node_mb: Option<u64>,
    /// `partition`.
    pub partition: Option<String>,
    /// `priority`.
    pub priority: Option<u32>,
    /// `qos`.
    pub qos: Option<String>,
    /// `reservation`.
    pub reservation: Option<String>,
    /// `timelimit`, in minutes.
    pub time_limit_minutes: Option<u32>,
    /// `user-id`.
    pub user_id: Option<u32>,
    /// `wckey`.
    pub wckey: Option<String>,
}

/// An annotation the bridge cannot use; the message names it and says what it expects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid {
    /// The annotation's full key (or the field) that is wrong.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for Invalid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

impl std::error::Error for Invalid {}

/// Which annotation set each job field: the short key (`user-id`) → the full key of the
/// annotation that won (`slurmjob.slinky.slurm.net/user-id`, or its 0.x spelling), so that a
/// refusal names the annotation the user wrote.
pub type Sources = BTreeMap<&'static str, String>;

/// Reads the job fields from `layers` of annotations, later layers winning (e.g. the pod's, then
/// the root object's). Within one layer the current prefix wins over the 0.x one. An unknown key
/// under `slurmjob.slinky.slurm.net/` is an error (a typo would otherwise be ignored silently).
pub fn job_fields(layers: &[&BTreeMap<String, String>]) -> Result<JobFields, Invalid> {
    job_fields_with_sources(layers).map(|(fields, _)| fields)
}

/// [`job_fields`], with the annotation each field came from.
pub fn job_fields_with_sources(
    layers: &[&BTreeMap<String, String>],
) -> Result<(JobFields, Sources), Invalid> {
    let mut values: BTreeMap<&'static str, (&str, &str)> = BTreeMap::new();
    for layer in layers {
        let mut legacy = Vec::new();
        for (key, value) in layer.iter() {
            if let Some(short) = key.strip_prefix(JOB_ANNOTATION_PREFIX) {
                let Some(&known) = KEYS.iter().find(|k| **k == short) else {
                    return Err(Invalid {
                        field: key.clone(),
                        message: format!("unknown job field; known: {}", KEYS.join(", ")),
                    });
                };
                values.insert(known, (key.as_str(), value.as_str()));
            } else if let Some(short) = key.strip_prefix(LEGACY_JOB_ANNOTATION_PREFIX)
                && let Some(&known) = KEYS.iter().find(|k| **k == short)
            {
                legacy.push((known, (key.as_str(), value.as_str())));
            }
        }
        for (known, entry) in legacy {
            let current = format!("{JOB_ANNOTATION_PREFIX}{known}");
            if !layer.contains_key(&current) {
                values.insert(known, entry);
            }
        }
    }
    let sources: Sources = values
        .iter()
        .map(|(short, (key, _))| (*short, (*key).to_owned()))
        .collect();
    let mut fields = JobFields::default();
    for (short, (key, value)) in values {
        let bad = |message: &str| Invalid {
            field: key.to_owned(),
            message: format!("{value:?} {message}"),
        };
        let text = || Some(value.trim().to_owned()).filter(|v| !v.is_empty());
        let number = |what: &str| -> Result<Option<u32>, Invalid> {
            value
                .trim()
                .parse::<u32>()
                .map(Some)
                .map_err(|_| bad(&format!("is not {what}")))
        };
        match short {
            "account" => fields.account = text(),
            "constraints" => fields.constraints = text(),
            "cpu-per-task" => fields.cpus_per_task = number("a whole number of CPUs")?,
            "exclusive" => {
                fields.exclusive = Some(match value.trim() {
                    "true" => true,
                    "false" => false,
                    _ => return Err(bad("is not \"true\" or \"false\"")),
                })
            }
            "gres" => fields.gres = text(),
            "group-id" => fields.group_id = number("a numeric group id")?,
            "job-name" => fields.job_name = text(),
            "licenses" => fields.licenses = text(),
            "max-nodes" => fields.max_nodes = number("a whole number of nodes")?,
            "min-nodes" => fields.min_nodes = number("a whole number of nodes")?,
            "mem-per-node" => {
                let bytes = quantity::parse(value)
                    .map_err(|_| bad("is not a Kubernetes quantity (e.g. 4Gi, 512Mi)"))?;
                fields.memory_per_node_mb = Some((bytes / 1048576.0).ceil() as u64);
            }
            "partition" => fields.partition = text(),
            "priority" => fields.priority = number("a whole number")?,
            "qos" => fields.qos = text(),
            "reservation" => fields.reservation = text(),
            "timelimit" => fields.time_limit_minutes = number("a whole number of minutes")?,
            "user-id" => fields.user_id = number("a numeric user id")?,
            "wckey" => fields.wckey = text(),
            _ => unreachable!("every key of KEYS is handled"),
        }
    }
    if let (Some(min), Some(max)) = (fields.min_nodes, fields.max_nodes)
        && min > max
    {
        return Err(Invalid {
            field: format!("{JOB_ANNOTATION_PREFIX}min-nodes"),
            message: format!("{min} is more than max-nodes {max}"),
        });
    }
    Ok((fields, sources))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn every_key_parses() {
        let annotations = map(&[
            ("slurmjob.slinky.slurm.net/account", "physics"),
            ("slurmjob.slinky.slurm.net/cpu-per-task", "4"),
            ("slurmjob.slinky.slurm.net/exclusive", "false"),
            ("slurmjob.slinky.slurm.net/mem-per-node", "1Gi"),
            ("slurmjob.slinky.slurm.net/timelimit", "30"),
            ("slurmjob.slinky.slurm.net/qos", "high"),
            ("slurmjob.slinky.slurm.net/job-name", "train"),
            ("unrelated/key", "x"),
        ]);
        let fields = job_fields(&[&annotations]).unwrap();
        assert_eq!(fields.account.as_deref(), Some("physics"));
        assert_eq!(fields.cpus_per_task, Some(4));
        assert_eq!(fields.exclusive, Some(false));
        assert_eq!(fields.memory_per_node_mb, Some(1024));
        assert_eq!(fields.time_limit_minutes, Some(30));
        assert_eq!(fields.job_name.as_deref(), Some("train"));
    }

    #[test]
    fn legacy_spelling_and_precedence() {
        let pod = map(&[
            ("slinky.slurm.net/timelimit", "5"),
            ("slinky.slurm.net/qos", "low"),
        ]);
        let root = map(&[
            ("slinky.slurm.net/timelimit", "10"),
            ("slurmjob.slinky.slurm.net/timelimit", "20"),
            ("slinky.slurm.net/slurm-node", "n1"),
        ]);
        let fields = job_fields(&[&pod, &root]).unwrap();
        assert_eq!(fields.time_limit_minutes, Some(20));
        assert_eq!(fields.qos.as_deref(), Some("low"));
    }

    #[test]
    fn errors_name_the_annotation() {
        let err =
            job_fields(&[&map(&[("slurmjob.slinky.slurm.net/timelimit", "1h")])]).unwrap_err();
        assert_eq!(err.field, "slurmjob.slinky.slurm.net/timelimit");
        assert!(
            err.to_string()
                .contains("\"1h\" is not a whole number of minutes"),
            "{err}"
        );
        let err =
            job_fields(&[&map(&[("slurmjob.slinky.slurm.net/time-limit", "1")])]).unwrap_err();
        assert!(err.to_string().contains("unknown job field"), "{err}");
        let err =
            job_fields(&[&map(&[("slurmjob.slinky.slurm.net/exclusive", "yes")])]).unwrap_err();
        assert!(err.message.contains("\"true\" or \"false\""), "{err}");
        let err = job_fields(&[&map(&[
            ("slurmjob.slinky.slurm.net/min-nodes", "3"),
            ("slurmjob.slinky.slurm.net/max-nodes", "2"),
        ])])
        .unwrap_err();
        assert!(err.field.ends_with("min-nodes"), "{err}");
    }
}
