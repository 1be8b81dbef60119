//! Every metric family the exporter can emit, with its source, type, HELP and labels.
//!
//! Built by calling each source's own family builder on empty input, so it is the code's
//! list, not a copy of it. The dashboard test checks its queries against it, and the
//! cluster test checks that a real scrape has exactly these families.

use clap::ValueEnum;
use slurm_client::{Diag, Ping};

use crate::family::{Family, Kind};
use crate::render;
use crate::sources::{self, SourceKind};
use crate::status::{self, SourceStatus};

/// One metric family.
#[derive(Clone, Debug)]
pub struct Entry {
    /// The source that emits it; `None` for the exporter's own families.
    pub source: Option<SourceKind>,
    /// The family's name as written in the Prometheus text format (`…_total` for counters,
    /// `…_info` for info metrics).
    pub name: String,
    /// Its type.
    pub kind: Kind,
    /// Its HELP text.
    pub help: &'static str,
    /// Its label names.
    pub labels: &'static [&'static str],
    /// Whether it is emitted on every collection (`false`: only once Slurm reports the
    /// value, e.g. the time of the last backfill cycle).
    pub always: bool,
}

/// The families of every source and the exporter's own, as when every source is enabled.
pub fn all() -> Vec<Entry> {
    catalogue(SourceKind::value_variants())
}

/// The families emitted with these sources enabled: theirs and the exporter's own.
pub fn catalogue(kinds: &[SourceKind]) -> Vec<Entry> {
    let mut out = Vec::new();
    for &kind in kinds {
        let (always, sometimes) = source_families(kind);
        push(&mut out, Some(kind), &always, true);
        let optional: Vec<Family> = sometimes
            .into_iter()
            .filter(|f| !always.iter().any(|a| a.name() == f.name()))
            .collect();
        push(&mut out, Some(kind), &optional, false);
    }
    let states: Vec<SourceStatus> = kinds.iter().map(|k| SourceStatus::new(*k)).collect();
    let mut own = status::families(&states);
    own.push(crate::http::snapshot_age(0.0));
    push(&mut out, None, &own, true);
    out
}

/// A source's families from empty input, and from input where every optional value is
/// present (a superset of the first).
fn source_families(kind: SourceKind) -> (Vec<Family>, Vec<Family>) {
    use sources::*;
    let empty = match kind {
        SourceKind::Diag => diag_families(&Diag::default()),
        SourceKind::Nodes => nodes::families(&[]),
        SourceKind::Jobs => jobs::families(&[], &[]),
        SourceKind::Partitions => partitions::families(&[]),
        SourceKind::Reservations => reservations::families(&[], 0),
        SourceKind::Licenses => licenses::families(&[]),
        SourceKind::Shares => shares::families(&[]),
        SourceKind::Qos => qos::families(&[]),
        SourceKind::Associations => associations::families(&[]),
    };
    let full = match kind {
        SourceKind::Diag => {
            let mut d = Diag::default();
            d.since = Some(1);
            d.backfill.last_cycle_time = Some(1);
            diag_families(&d)
        }
        _ => Vec::new(),
    };
    (empty, full)
}

/// What the diag source emits for one `diag` answer.
fn diag_families(d: &Diag) -> Vec<Family> {
    let mut out = sources::diag::families(d);
    out.extend(sources::diag::ping_families(&Ping::default()));
    out.push(sources::diag::controller_info("", "", ""));
    out
}

fn push(out: &mut Vec<Entry>, source: Option<SourceKind>, families: &[Family], always: bool) {
    for f in families {
        out.push(Entry {
            source,
            name: written_name(f),
            kind: f.kind,
            help: f.help,
            labels: f.labels,
            always,
        });
    }
}

/// The name rendering gives the family (with `_total`/`_info` as the type asks).
fn written_name(f: &Family) -> String {
    let text = render::render(std::slice::from_ref(f)).prometheus;
    text.lines()
        .find_map(|l| l.strip_prefix("# TYPE "))
        .and_then(|l| l.split(' ').next())
        .expect("a rendered family has a TYPE line")
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_suffixed_by_type() {
        let all = all();
        let mut names: Vec<&str> = all.iter().map(|e| e.name.as_str()).collect();
        names.sort_unstable();
        let before = names.len();
        names.dedup();
        assert_eq!(before, names.len(), "a family is emitted by two sources");
        for e in &all {
            assert_eq!(e.kind == Kind::Counter, e.name.ends_with("_total"), "{e:?}");
            assert_eq!(e.kind == Kind::Info, e.name.ends_with("_info"), "{e:?}");
            assert!(e.name.starts_with("slurm_"), "{e:?}");
        }
        let optional: Vec<&str> = all
            .iter()
            .filter(|e| !e.always)
            .map(|e| e.name.as_str())
            .collect();
        assert_eq!(
            optional,
            [
                "slurm_backfill_last_cycle_timestamp_seconds",
                "slurm_controller_statistics_reset_timestamp_seconds"
            ]
        );
    }

    #[test]
    fn accounting_up_only_with_an_accounting_source() {
        let has = |kinds: &[SourceKind]| {
            catalogue(kinds)
                .iter()
                .any(|e| e.name == "slurm_accounting_up")
        };
        assert!(has(&[SourceKind::Jobs, SourceKind::Qos]));
        assert!(!has(&[SourceKind::Jobs]));
    }
}
