//! What the exporter knows about its own sources, and the self metrics made from it.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::family::Family;
use crate::snapshot::Fragment;
use crate::sources::{Failure, SourceKind};

/// Error kinds whose `slurm_exporter_collect_errors_total` series are there from the start, at 0:
/// those an outage or a refused token produce, so that `increase()` and `rate()` see their first
/// error (a series that appears at 1 has no increase). Other kinds appear with their first count.
const EXPORTED_FROM_START: [&str; 3] = ["auth", "timeout", "transport"];

/// The state of one source between collections.
#[derive(Debug)]
pub struct SourceStatus {
    /// Which source.
    pub kind: SourceKind,
    /// The families of its last successful collection, rendered and compressed.
    pub fragment: Option<Fragment>,
    /// Number of series in `fragment`.
    pub series: usize,
    /// Outcome of the last attempt: `None` before the first one.
    pub last: Option<Result<(), Failure>>,
    /// How long the last attempt took.
    pub duration: Duration,
    /// When the last successful collection finished.
    pub last_success: Option<SystemTime>,
    /// Attempts so far.
    pub attempts: u64,
    /// Failed attempts by error kind.
    pub errors: BTreeMap<&'static str, u64>,
}

impl SourceStatus {
    /// A source that has not run yet.
    pub fn new(kind: SourceKind) -> SourceStatus {
        SourceStatus {
            kind,
            fragment: None,
            series: 0,
            last: None,
            duration: Duration::ZERO,
            last_success: None,
            attempts: 0,
            errors: EXPORTED_FROM_START.iter().map(|k| (*k, 0)).collect(),
        }
    }

    /// Whether the last attempt succeeded.
    pub fn is_up(&self) -> bool {
        matches!(self.last, Some(Ok(())))
    }
}

/// `slurm_up`: 1 when the last attempt of at least one slurmctld source succeeded (or, with
/// only accounting sources enabled, one of those). A single broken source shows in
/// `slurm_exporter_source_up` instead.
pub fn slurm_up(sources: &[SourceStatus]) -> bool {
    let ctld: Vec<&SourceStatus> = sources.iter().filter(|s| !s.kind.is_accounting()).collect();
    if ctld.is_empty() {
        sources.iter().any(SourceStatus::is_up)
    } else {
        ctld.iter().any(|s| s.is_up())
    }
}

/// The exporter's own families, built from the source states.
pub fn families(sources: &[SourceStatus]) -> Vec<Family> {
    let mut up = Family::gauge(
        "slurm_up",
        "Whether the last collection reached slurmctld through slurmrestd (1) or not (0).",
        &[],
    );
    up.set::<&str>(&[], if slurm_up(sources) { 1.0 } else { 0.0 });

    let mut own = vec![up];
    let acct: Vec<&SourceStatus> = sources.iter().filter(|s| s.kind.is_accounting()).collect();
    if !acct.is_empty() {
        let mut accounting_up = Family::gauge(
            "slurm_accounting_up",
            "Whether the last collection of an accounting source reached slurmdbd (1) or not (0).",
            &[],
        );
        let ok = acct.iter().any(|s| s.is_up());
        accounting_up.set::<&str>(&[], if ok { 1.0 } else { 0.0 });
        own.push(accounting_up);
    }

    let mut source_up = Family::gauge(
        "slurm_exporter_source_up",
        "Whether the last collection of this source succeeded (1) or failed (0); a failed source keeps serving its previous metrics.",
        &["source"],
    );
    let mut duration = Family::gauge(
        "slurm_exporter_collect_duration_seconds",
        "How long the last collection of this source took.",
        &["source"],
    );
    let mut last_success = Family::gauge(
        "slurm_exporter_last_success_timestamp_seconds",
        "When the last successful collection of this source finished (Unix time).",
        &["source"],
    );
    let mut attempts = Family::counter(
        "slurm_exporter_collections",
        "Collections of this source attempted.",
        &["source"],
    );
    let mut errors = Family::counter(
        "slurm_exporter_collect_errors",
        "Failed collections of this source by kind of error (timeout, transport, auth, …).",
        &["source", "kind"],
    );
    let mut series = Family::gauge(
        "slurm_exporter_series",
        "Series served from the last successful collection of this source.",
        &["source"],
    );
    for s in sources {
        let name = [s.kind.name()];
        if s.last.is_some() {
            source_up.set(&name, if s.is_up() { 1.0 } else { 0.0 });
            duration.set(&name, s.duration.as_secs_f64());
        }
        if let Some(t) = s.last_success {
            last_success.set(&name, unix_seconds(t));
        }
        attempts.set(&name, s.attempts as f64);
        series.set(&name, s.series as f64);
        for (kind, n) in &s.errors {
            errors.set(&[s.kind.name(), kind], *n as f64);
        }
    }

    let mut build = Family::info(
        "slurm_exporter_build",
        "The exporter's version.",
        &["version"],
    );
    build.info_series(&[env!("CARGO_PKG_VERSION")]);

    own.extend([
        source_up,
        duration,
        last_success,
        attempts,
        errors,
        series,
        build,
    ]);
    own
}

/// Seconds since the Unix epoch, with fractions.
pub fn unix_seconds(t: SystemTime) -> f64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(kind: SourceKind, ok: Option<bool>) -> SourceStatus {
        let mut s = SourceStatus::new(kind);
        s.last = ok.map(|ok| {
            if ok {
                Ok(())
            } else {
                Err(Failure {
                    kind: "timeout",
                    message: "slow".into(),
                })
            }
        });
        s
    }

    #[test]
    fn slurm_up_follows_slurmctld_sources() {
        let all_down = [
            status(SourceKind::Diag, Some(false)),
            status(SourceKind::Qos, Some(true)),
        ];
        assert!(!slurm_up(&all_down));
        let one_up = [
            status(SourceKind::Diag, Some(false)),
            status(SourceKind::Nodes, Some(true)),
        ];
        assert!(slurm_up(&one_up));
        assert!(slurm_up(&[status(SourceKind::Qos, Some(true))]));
        assert!(!slurm_up(&[status(SourceKind::Jobs, None)]));
    }

    #[test]
    fn self_metrics_per_source() {
        let mut s = status(SourceKind::Jobs, Some(false));
        s.errors.insert("timeout", 2);
        s.attempts = 3;
        let f = families(&[s, status(SourceKind::Qos, Some(true))]);
        let get = |name: &str| f.iter().find(|f| f.name() == name).unwrap();
        assert_eq!(get("slurm_up").get::<&str>(&[]), Some(0.0));
        assert_eq!(get("slurm_accounting_up").get::<&str>(&[]), Some(1.0));
        assert_eq!(
            get("slurm_exporter_collect_errors").get(&["jobs", "timeout"]),
            Some(2.0)
        );
        // The kinds an outage or a refused token produce are there before their first error.
        for kind in ["auth", "transport"] {
            assert_eq!(
                get("slurm_exporter_collect_errors").get(&["qos", kind]),
                Some(0.0)
            );
        }
        assert_eq!(
            get("slurm_exporter_collect_errors").get(&["qos", "decode"]),
            None
        );
        assert_eq!(get("slurm_exporter_source_up").get(&["jobs"]), Some(0.0));
        assert_eq!(get("slurm_exporter_collections").get(&["jobs"]), Some(3.0));
        assert!(get("slurm_exporter_last_success_timestamp_seconds").is_empty());
    }
}
