//! Quality of service records: priority, usage factor, preemption and limits.

use serde::Serialize;

use crate::model::{Limit, Tres};

/// A QoS (`sacctmgr show qos`).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[non_exhaustive]
pub struct Qos {
    /// Database id.
    pub id: Option<u32>,
    /// Name.
    pub name: String,
    /// Description.
    pub description: Option<String>,
    /// `Priority`.
    pub priority: Limit<u32>,
    /// `UsageFactor`: multiplier of the usage jobs in this QoS are charged.
    pub usage_factor: Limit<f64>,
    /// `UsageThreshold`.
    pub usage_threshold: Limit<f64>,
    /// `LimitFactor`.
    pub limit_factor: Limit<f64>,
    /// `GraceTime`, seconds.
    pub grace_time_seconds: Option<u32>,
    /// Flags such as `DENY_LIMIT`, `NO_DECAY`.
    pub flags: Vec<String>,
    /// `Preempt`: QoS this one may preempt.
    pub preempt: Vec<String>,
    /// `PreemptMode`, e.g. `["CANCEL"]` (`DISABLED` when off).
    pub preempt_mode: Vec<String>,
    /// `PreemptExemptTime`, seconds.
    pub preempt_exempt_seconds: Limit<u32>,
    /// Limits.
    pub limits: QosLimits,
}

/// The limits of a QoS, named as `sacctmgr` names them.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[non_exhaustive]
pub struct QosLimits {
    /// `MaxJobsPerUser`: running jobs per user.
    pub max_jobs_per_user: Limit<u32>,
    /// `MaxJobsPerAccount`.
    pub max_jobs_per_account: Limit<u32>,
    /// `MaxSubmitJobsPerUser`.
    pub max_submit_jobs_per_user: Limit<u32>,
    /// `MaxSubmitJobsPerAccount`.
    pub max_submit_jobs_per_account: Limit<u32>,
    /// `MaxJobsAccruePerUser`.
    pub max_jobs_accrue_per_user: Limit<u32>,
    /// `MaxJobsAccruePerAccount`.
    pub max_jobs_accrue_per_account: Limit<u32>,
    /// `MaxTRESPerUser`.
    pub max_tres_per_user: Tres,
    /// `MaxTRESPerAccount`.
    pub max_tres_per_account: Tres,
    /// `MaxTRESPerJob`.
    pub max_tres_per_job: Tres,
    /// `MaxTRESPerNode`.
    pub max_tres_per_node: Tres,
    /// `MaxTRESMinsPerJob`.
    pub max_tres_minutes_per_job: Tres,
    /// `MaxWall`: per job, minutes.
    pub max_wall_minutes_per_job: Limit<u32>,
    /// `GrpJobs`: running jobs in the QoS.
    pub grp_jobs: Limit<u32>,
    /// `GrpJobsAccrue`.
    pub grp_jobs_accrue: Limit<u32>,
    /// `GrpSubmitJobs`.
    pub grp_submit_jobs: Limit<u32>,
    /// `GrpTRES`.
    pub grp_tres: Tres,
    /// `GrpTRESMins`.
    pub grp_tres_minutes: Tres,
    /// `GrpWall`, minutes.
    pub grp_wall_minutes: Limit<u32>,
    /// `MinTRESPerJob`.
    pub min_tres_per_job: Tres,
    /// `MinPrioThreshold`.
    pub min_priority_threshold: Limit<u32>,
}

/// A QoS to create or change ([`Client::put_qos`](crate::Client::put_qos)): unset fields
/// are left as they are (or at Slurm's defaults for a new QoS).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[non_exhaustive]
pub struct QosSpec {
    /// Name (required).
    pub name: String,
    /// Description.
    pub description: Option<String>,
    /// `Priority`.
    pub priority: Option<Limit<u32>>,
    /// `UsageFactor`.
    pub usage_factor: Option<Limit<f64>>,
    /// Flags (replace the QoS's flags).
    pub flags: Option<Vec<String>>,
    /// `Preempt` list (replaces it).
    pub preempt: Option<Vec<String>>,
    /// `PreemptMode`, e.g. `["CANCEL"]`.
    pub preempt_mode: Option<Vec<String>>,
    /// `MaxJobsPerUser`.
    pub max_jobs_per_user: Option<Limit<u32>>,
    /// `MaxSubmitJobsPerUser`.
    pub max_submit_jobs_per_user: Option<Limit<u32>>,
    /// `MaxWall` per job, minutes.
    pub max_wall_minutes_per_job: Option<Limit<u32>>,
    /// `GrpJobs`.
    pub grp_jobs: Option<Limit<u32>>,
    /// `MaxTRESPerUser`, e.g. `Tres::parse("cpu=8,gres/gpu=1")`.
    pub max_tres_per_user: Option<Tres>,
    /// `MaxTRESPerJob`.
    pub max_tres_per_job: Option<Tres>,
    /// `GrpTRES`.
    pub grp_tres: Option<Tres>,
}

impl QosSpec {
    /// A QoS named `name`, changing nothing else.
    pub fn new(name: impl Into<String>) -> QosSpec {
        QosSpec {
            name: name.into(),
            ..QosSpec::default()
        }
    }

    /// Sets the description.
    pub fn description(mut self, text: impl Into<String>) -> QosSpec {
        self.description = Some(text.into());
        self
    }

    /// Sets `Priority`.
    pub fn priority(mut self, priority: impl Into<Limit<u32>>) -> QosSpec {
        self.priority = Some(priority.into());
        self
    }

    /// Sets `UsageFactor`.
    pub fn usage_factor(mut self, factor: f64) -> QosSpec {
        self.usage_factor = Some(Limit::Value(factor));
        self
    }

    /// Sets the flags.
    pub fn flags<S: Into<String>>(mut self, flags: impl IntoIterator<Item = S>) -> QosSpec {
        self.flags = Some(flags.into_iter().map(Into::into).collect());
        self
    }

    /// Sets the QoS this one may preempt.
    pub fn preempt<S: Into<String>>(mut self, qos: impl IntoIterator<Item = S>) -> QosSpec {
        self.preempt = Some(qos.into_iter().map(Into::into).collect());
        self
    }

    /// Sets `PreemptMode`.
    pub fn preempt_mode<S: Into<String>>(mut self, modes: impl IntoIterator<Item = S>) -> QosSpec {
        self.preempt_mode = Some(modes.into_iter().map(Into::into).collect());
        self
    }

    /// Sets `MaxJobsPerUser`.
    pub fn max_jobs_per_user(mut self, limit: impl Into<Limit<u32>>) -> QosSpec {
        self.max_jobs_per_user = Some(limit.into());
        self
    }

    /// Sets `MaxSubmitJobsPerUser`.
    pub fn max_submit_jobs_per_user(mut self, limit: impl Into<Limit<u32>>) -> QosSpec {
        self.max_submit_jobs_per_user = Some(limit.into());
        self
    }

    /// Sets `MaxWall` per job, in minutes.
    pub fn max_wall_minutes_per_job(mut self, limit: impl Into<Limit<u32>>) -> QosSpec {
        self.max_wall_minutes_per_job = Some(limit.into());
        self
    }

    /// Sets `GrpJobs`.
    pub fn grp_jobs(mut self, limit: impl Into<Limit<u32>>) -> QosSpec {
        self.grp_jobs = Some(limit.into());
        self
    }

    /// Sets `MaxTRESPerUser`.
    pub fn max_tres_per_user(mut self, tres: Tres) -> QosSpec {
        self.max_tres_per_user = Some(tres);
        self
    }

    /// Sets `MaxTRESPerJob`.
    pub fn max_tres_per_job(mut self, tres: Tres) -> QosSpec {
        self.max_tres_per_job = Some(tres);
        self
    }

    /// Sets `GrpTRES`.
    pub fn grp_tres(mut self, tres: Tres) -> QosSpec {
        self.grp_tres = Some(tres);
        self
    }

    pub(crate) fn validate(&self) -> Result<(), String> {
        super::account::valid_name("QoS", &self.name)?;
        for tres in [
            &self.max_tres_per_user,
            &self.max_tres_per_job,
            &self.grp_tres,
        ]
        .into_iter()
        .flatten()
        {
            for (name, value) in &tres.entries {
                if tres.count(name).is_none() {
                    return Err(format!("TRES {name}={value} is not a count"));
                }
            }
        }
        Ok(())
    }
}
