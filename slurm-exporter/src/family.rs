//! A metric family being built: name, type, HELP, label names and one value per label set.
//!
//! Samples are kept in a map keyed by label values, so a family can never hold the same
//! series twice, and counting ("jobs by state") is one `add` per object.

use std::collections::BTreeMap;

/// The metric types the exporter emits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A value that goes up and down.
    Gauge,
    /// A monotonically increasing count. The family name has no `_total`; rendering adds it.
    Counter,
    /// Constant 1 whose labels carry text. The family name has no `_info`; rendering adds it.
    Info,
}

/// One metric family.
#[derive(Clone, Debug)]
pub struct Family {
    pub(crate) name: &'static str,
    pub(crate) help: &'static str,
    pub(crate) kind: Kind,
    pub(crate) unit: Option<&'static str>,
    pub(crate) labels: &'static [&'static str],
    pub(crate) samples: BTreeMap<Vec<String>, f64>,
}

impl Family {
    fn new(
        kind: Kind,
        name: &'static str,
        help: &'static str,
        labels: &'static [&'static str],
    ) -> Family {
        debug_assert!(
            !name.ends_with("_total") && !name.ends_with("_info"),
            "{name}: the suffix is added when rendering"
        );
        Family {
            name,
            help,
            kind,
            unit: unit_of(name),
            labels,
            samples: BTreeMap::new(),
        }
    }

    /// A gauge family.
    pub fn gauge(name: &'static str, help: &'static str, labels: &'static [&'static str]) -> Self {
        Family::new(Kind::Gauge, name, help, labels)
    }

    /// A counter family; `name` without `_total`.
    pub fn counter(
        name: &'static str,
        help: &'static str,
        labels: &'static [&'static str],
    ) -> Self {
        Family::new(Kind::Counter, name, help, labels)
    }

    /// An info family; `name` without `_info`.
    pub fn info(name: &'static str, help: &'static str, labels: &'static [&'static str]) -> Self {
        Family::new(Kind::Info, name, help, labels)
    }

    /// Sets the value of the series with these label values (one per label name).
    pub fn set<S: AsRef<str>>(&mut self, values: &[S], value: f64) {
        *self.slot(values) = value;
    }

    /// Adds `value` to the series with these label values (created at 0).
    pub fn add<S: AsRef<str>>(&mut self, values: &[S], value: f64) {
        *self.slot(values) += value;
    }

    /// Makes sure the series exists (at 0 unless already set), so that "none in this
    /// state" is reported as 0 rather than missing.
    pub fn touch<S: AsRef<str>>(&mut self, values: &[S]) {
        self.slot(values);
    }

    /// Sets the value only when there is one.
    pub fn set_opt<S: AsRef<str>>(&mut self, values: &[S], value: Option<f64>) {
        if let Some(v) = value {
            self.set(values, v);
        }
    }

    /// An info series (value 1).
    pub fn info_series<S: AsRef<str>>(&mut self, values: &[S]) {
        self.set(values, 1.0);
    }

    fn slot<S: AsRef<str>>(&mut self, values: &[S]) -> &mut f64 {
        assert_eq!(
            values.len(),
            self.labels.len(),
            "{}: label values do not match label names {:?}",
            self.name,
            self.labels
        );
        let key: Vec<String> = values.iter().map(|v| v.as_ref().to_owned()).collect();
        self.samples.entry(key).or_insert(0.0)
    }

    /// The family name as written in `# HELP`/`# TYPE` of the Prometheus text format.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Number of series.
    pub fn len(&self) -> usize {
        self.samples.len()
    }

    /// Whether the family has no series.
    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }

    /// The value of one series, if present (for tests).
    pub fn get<S: AsRef<str>>(&self, values: &[S]) -> Option<f64> {
        let key: Vec<String> = values.iter().map(|v| v.as_ref().to_owned()).collect();
        self.samples.get(&key).copied()
    }
}

/// The OpenMetrics unit implied by a name's suffix.
fn unit_of(name: &str) -> Option<&'static str> {
    ["seconds", "bytes", "ratio"]
        .into_iter()
        .find(|u| name.ends_with(&format!("_{u}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn add_accumulates_and_set_replaces() {
        let mut f = Family::gauge("slurm_jobs", "Jobs.", &["state"]);
        f.add(&["running"], 1.0);
        f.add(&["running"], 1.0);
        f.touch(&["pending"]);
        f.set(&["failed"], 3.0);
        f.set(&["failed"], 4.0);
        assert_eq!(f.get(&["running"]), Some(2.0));
        assert_eq!(f.get(&["pending"]), Some(0.0));
        assert_eq!(f.get(&["failed"]), Some(4.0));
        assert_eq!(f.len(), 3);
    }

    #[test]
    fn units_follow_the_suffix() {
        assert_eq!(
            Family::gauge("slurm_x_seconds", "x", &[]).unit,
            Some("seconds")
        );
        assert_eq!(Family::gauge("slurm_x_bytes", "x", &[]).unit, Some("bytes"));
        assert_eq!(Family::gauge("slurm_x", "x", &[]).unit, None);
    }

    #[test]
    #[should_panic(expected = "label values do not match")]
    fn wrong_label_count_panics() {
        Family::gauge("slurm_x", "x", &["a", "b"]).set(&["only one"], 1.0);
    }
}
