//! Writing families as Prometheus text (version 0.0.4) and OpenMetrics text (1.0.0).
//!
//! Both are rendered once per collection, so a scrape only copies bytes. The OpenMetrics
//! text is rendered without its closing `# EOF`, which the HTTP handler appends after the
//! few lines it computes per scrape. Families with no series keep their HELP and TYPE in
//! the Prometheus text (so tools see every name) and are left out of OpenMetrics.

use std::fmt::Write;

use crate::family::{Family, Kind};

/// The two renderings of the same families.
#[derive(Clone, Debug, Default)]
pub struct Rendered {
    /// Prometheus text format 0.0.4.
    pub prometheus: String,
    /// OpenMetrics 1.0.0, without the final `# EOF` line.
    pub openmetrics: String,
}

impl Rendered {
    /// Appends another rendering (families must not be split across the two).
    pub fn push(&mut self, other: &Rendered) {
        self.prometheus.push_str(&other.prometheus);
        self.openmetrics.push_str(&other.openmetrics);
    }
}

/// Renders families in both formats.
pub fn render(families: &[Family]) -> Rendered {
    let size: usize = families.iter().map(|f| 64 + f.len() * 64).sum();
    let mut out = Rendered {
        prometheus: String::with_capacity(size),
        openmetrics: String::with_capacity(size),
    };
    for family in families {
        prometheus(&mut out.prometheus, family);
        openmetrics(&mut out.openmetrics, family);
    }
    out
}

/// The name each sample line starts with (the same in both formats).
fn sample_name(f: &Family) -> String {
    match f.kind {
        Kind::Gauge => f.name.to_owned(),
        Kind::Counter => format!("{}_total", f.name),
        Kind::Info => format!("{}_info", f.name),
    }
}

fn prometheus(out: &mut String, f: &Family) {
    let name = sample_name(f);
    let kind = match f.kind {
        Kind::Counter => "counter",
        Kind::Gauge | Kind::Info => "gauge",
    };
    let _ = writeln!(out, "# HELP {name} {}", escape_help(f.help, false));
    let _ = writeln!(out, "# TYPE {name} {kind}");
    samples(out, f, &name);
}

fn openmetrics(out: &mut String, f: &Family) {
    // A family without samples is allowed by the format, but parsers disagree about it.
    if f.is_empty() {
        return;
    }
    let kind = match f.kind {
        Kind::Counter => "counter",
        Kind::Gauge => "gauge",
        Kind::Info => "info",
    };
    let _ = writeln!(out, "# TYPE {} {kind}", f.name);
    if let Some(unit) = f.unit {
        let _ = writeln!(out, "# UNIT {} {unit}", f.name);
    }
    let _ = writeln!(out, "# HELP {} {}", f.name, escape_help(f.help, true));
    samples(out, f, &sample_name(f));
}

fn samples(out: &mut String, f: &Family, name: &str) {
    for (values, value) in &f.samples {
        out.push_str(name);
        if !f.labels.is_empty() {
            out.push('{');
            for (i, (label, v)) in f.labels.iter().zip(values).enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(label);
                out.push_str("=\"");
                escape_label_value(out, v);
                out.push('"');
            }
            out.push('}');
        }
        out.push(' ');
        write_value(out, *value);
        out.push('\n');
    }
}

/// Writes a sample value: integers without a fraction, specials as the formats spell them.
pub(crate) fn write_value(out: &mut String, v: f64) {
    if v.is_nan() {
        out.push_str("NaN");
    } else if v.is_infinite() {
        out.push_str(if v > 0.0 { "+Inf" } else { "-Inf" });
    } else {
        let _ = write!(out, "{v}");
    }
}

fn escape_label_value(out: &mut String, v: &str) {
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

fn escape_help(help: &str, quotes: bool) -> String {
    let mut s = String::with_capacity(help.len());
    for c in help.chars() {
        match c {
            '\\' => s.push_str("\\\\"),
            '\n' => s.push_str("\\n"),
            '"' if quotes => s.push_str("\\\""),
            c => s.push(c),
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn families() -> Vec<Family> {
        let mut jobs = Family::gauge("slurm_jobs", "Jobs by state.", &["state"]);
        jobs.set(&["running"], 2.0);
        jobs.set(&["pend\"ing\\\n"], 1.5);
        let mut sub = Family::counter("slurm_jobs_submitted", "Jobs submitted.", &[]);
        sub.set::<&str>(&[], 7.0);
        let mut info = Family::info("slurm_node", "Node facts.", &["node", "reason"]);
        info.info_series(&["n1", "maint"]);
        let mut secs = Family::gauge("slurm_cycle_seconds", "A time.", &[]);
        secs.set::<&str>(&[], f64::INFINITY);
        vec![jobs, sub, info, secs]
    }

    #[test]
    fn prometheus_text() {
        let r = render(&families());
        assert_eq!(
            r.prometheus,
            "# HELP slurm_jobs Jobs by state.\n# TYPE slurm_jobs gauge\n\
             slurm_jobs{state=\"pend\\\"ing\\\\\\n\"} 1.5\nslurm_jobs{state=\"running\"} 2\n\
             # HELP slurm_jobs_submitted_total Jobs submitted.\n# TYPE slurm_jobs_submitted_total counter\n\
             slurm_jobs_submitted_total 7\n\
             # HELP slurm_node_info Node facts.\n# TYPE slurm_node_info gauge\n\
             slurm_node_info{node=\"n1\",reason=\"maint\"} 1\n\
             # HELP slurm_cycle_seconds A time.\n# TYPE slurm_cycle_seconds gauge\n\
             slurm_cycle_seconds +Inf\n"
        );
    }

    #[test]
    fn openmetrics_text() {
        let r = render(&families());
        assert_eq!(
            r.openmetrics,
            "# TYPE slurm_jobs gauge\n# HELP slurm_jobs Jobs by state.\n\
             slurm_jobs{state=\"pend\\\"ing\\\\\\n\"} 1.5\nslurm_jobs{state=\"running\"} 2\n\
             # TYPE slurm_jobs_submitted counter\n# HELP slurm_jobs_submitted Jobs submitted.\n\
             slurm_jobs_submitted_total 7\n\
             # TYPE slurm_node info\n# HELP slurm_node Node facts.\n\
             slurm_node_info{node=\"n1\",reason=\"maint\"} 1\n\
             # TYPE slurm_cycle_seconds gauge\n# UNIT slurm_cycle_seconds seconds\n\
             # HELP slurm_cycle_seconds A time.\nslurm_cycle_seconds +Inf\n"
        );
    }
}
