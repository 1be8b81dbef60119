//! Controller health (`scontrol ping`).

use serde::Serialize;

/// The answer of every slurmctld (primary and backups).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Ping {
    /// One entry per configured controller.
    pub controllers: Vec<ControllerPing>,
}

impl Ping {
    /// Whether some controller answered.
    pub fn any_responding(&self) -> bool {
        self.controllers.iter().any(|c| c.responding)
    }
}

/// One controller's answer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct ControllerPing {
    /// Host name.
    pub hostname: String,
    /// Whether it answered.
    pub responding: bool,
    /// Whether it is the primary controller (`None` where the version does not say).
    pub primary: Option<bool>,
    /// Round-trip time in microseconds.
    pub latency_us: Option<u64>,
    /// Its role as Slurm words it, e.g. `"primary"` or `"backup"`.
    pub mode: Option<String>,
}
