//! The parts every slurmrestd answer shares — `errors[]`, `warnings[]` and `meta` —
//! read generically, without the generated per-version types.
//!
//! A successful answer is parsed once: [`capture`] wraps the deserializer the body's type
//! reads from and copies the three top-level keys aside as they go by, so a 100 MB job
//! listing is not parsed a second time just to find its `warnings[]`.

mod capture;

pub(crate) use capture::capture;

use serde::{Deserialize, Serialize};

/// One entry of the `errors[]` array slurmrestd puts in its answers.
///
/// Every field is kept as sent; any may be missing.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default)]
#[non_exhaustive]
pub struct SlurmError {
    /// Slurm's numeric error code (e.g. 2017 for "Invalid job id specified").
    pub error_number: Option<i64>,
    /// Slurm's text for the error code.
    pub error: Option<String>,
    /// What went wrong, in words.
    pub description: Option<String>,
    /// Which part of slurmrestd reported it.
    pub source: Option<String>,
}

/// One entry of the `warnings[]` array slurmrestd puts in its answers.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default)]
#[non_exhaustive]
pub struct SlurmWarning {
    /// The warning, in words.
    pub description: Option<String>,
    /// Which part of slurmrestd reported it.
    pub source: Option<String>,
}

/// What an answer's `meta` says about the server.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Meta {
    /// The Slurm release, e.g. `"24.11.5"` (`meta.slurm.release`).
    pub release: Option<String>,
    /// The cluster name (`meta.slurm.cluster`).
    pub cluster: Option<String>,
    /// The data parser that produced the answer, e.g. `"data_parser/v0.0.42"`
    /// (`meta.plugin.data_parser`).
    pub data_parser: Option<String>,
}

/// The shared parts of an answer. Anything unexpected in them is ignored: they are
/// read on a best-effort basis so that a strange `meta` never hides the real answer.
#[derive(Debug, Default)]
pub(crate) struct Envelope {
    pub errors: Vec<SlurmError>,
    pub warnings: Vec<SlurmWarning>,
    pub meta: Meta,
}

/// The envelope keys as found, before they are read leniently into an [`Envelope`].
#[derive(Deserialize, Default)]
#[serde(default)]
pub(crate) struct RawEnvelope {
    errors: serde_json::Value,
    warnings: serde_json::Value,
    meta: serde_json::Value,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct RawMeta {
    slurm: Option<RawSlurm>,
    plugin: Option<RawPlugin>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct RawSlurm {
    release: Option<String>,
    cluster: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct RawPlugin {
    data_parser: Option<String>,
}

impl Envelope {
    /// Reads the shared parts of a body; a body that is not a JSON object gives an empty envelope.
    ///
    /// A successful answer's envelope is read while its body decodes (see [`capture`]); this
    /// separate pass is for error answers and bodies that do not decode.
    pub fn parse(body: &[u8]) -> Envelope {
        serde_json::from_slice::<RawEnvelope>(body)
            .map(Envelope::from_raw)
            .unwrap_or_default()
    }

    /// Reads the envelope keys leniently.
    pub fn from_raw(raw: RawEnvelope) -> Envelope {
        let meta: RawMeta = serde_json::from_value(raw.meta).unwrap_or_default();
        let slurm = meta.slurm.unwrap_or_default();
        Envelope {
            errors: entries(raw.errors).map(error_entry).collect(),
            warnings: entries(raw.warnings).map(warning_entry).collect(),
            meta: Meta {
                release: slurm.release,
                cluster: slurm.cluster,
                data_parser: meta.plugin.unwrap_or_default().data_parser,
            },
        }
    }

    /// Whether any error entry carries this Slurm error number.
    pub fn has_error_number(&self, number: i64) -> bool {
        self.errors.iter().any(|e| e.error_number == Some(number))
    }
}

fn entries(list: serde_json::Value) -> impl Iterator<Item = serde_json::Value> {
    match list {
        serde_json::Value::Array(items) => items.into_iter(),
        _ => Vec::new().into_iter(),
    }
}

fn warning_entry(value: serde_json::Value) -> SlurmWarning {
    match serde_json::from_value::<SlurmWarning>(value.clone()) {
        Ok(w) => w,
        Err(_) => SlurmWarning {
            description: Some(value.to_string()),
            ..SlurmWarning::default()
        },
    }
}

/// An entry that does not have the usual shape is kept as its JSON text, not dropped.
fn error_entry(value: serde_json::Value) -> SlurmError {
    match serde_json::from_value::<SlurmError>(value.clone()) {
        Ok(e) => e,
        Err(_) => SlurmError {
            description: Some(value.to_string()),
            ..SlurmError::default()
        },
    }
}

impl std::fmt::Display for SlurmError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let text = self
            .description
            .as_deref()
            .filter(|d| !d.is_empty())
            .or(self.error.as_deref())
            .unwrap_or("(no description)");
        match self.error_number {
            Some(n) => write!(f, "{text} (error {n}")?,
            None => write!(f, "{text} (")?,
        }
        if let Some(e) = self
            .error
            .as_deref()
            .filter(|e| Some(*e) != self.description.as_deref())
        {
            if self.error_number.is_some() {
                f.write_str(": ")?;
            }
            f.write_str(e)?;
        }
        if let Some(s) = &self.source {
            write!(f, ", from {s}")?;
        }
        f.write_str(")")
    }
}

impl std::fmt::Display for SlurmWarning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.description.as_deref().unwrap_or("(no description)"))?;
        if let Some(s) = &self.source {
            write!(f, " (from {s})")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_errors_warnings_and_meta() {
        let body = br#"{
            "meta": {"plugin": {"data_parser": "data_parser/v0.0.42"},
                     "slurm": {"version": {"major": "24", "minor": "11", "micro": "5"},
                               "release": "24.11.5", "cluster": "dev"}},
            "errors": [{"error_number": 2017, "error": "Invalid job id specified",
                        "description": "Unable to find job", "source": "slurm_kill_job()"}],
            "warnings": [{"description": "deprecated field", "source": "parser"}],
            "jobs": []
        }"#;
        let env = Envelope::parse(body);
        assert_eq!(env.meta.release.as_deref(), Some("24.11.5"));
        assert_eq!(env.meta.cluster.as_deref(), Some("dev"));
        assert_eq!(env.meta.data_parser.as_deref(), Some("data_parser/v0.0.42"));
        assert!(env.has_error_number(2017));
        assert_eq!(
            env.warnings[0].description.as_deref(),
            Some("deprecated field")
        );
        let shown = env.errors[0].to_string();
        assert!(
            shown.contains("Unable to find job") && shown.contains("2017"),
            "{shown}"
        );
    }

    #[test]
    fn non_json_and_odd_entries_do_not_fail() {
        assert!(Envelope::parse(b"Authentication failure").errors.is_empty());
        assert!(Envelope::parse(b"").errors.is_empty());
        let env = Envelope::parse(br#"{"errors": ["plain text"], "warnings": 3, "meta": 5}"#);
        assert_eq!(env.errors[0].description.as_deref(), Some("\"plain text\""));
        assert!(env.warnings.is_empty());
        assert_eq!(env.meta, Meta::default());
    }
}
