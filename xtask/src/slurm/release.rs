//! The Slurm releases the project runs, and the Debian suite that ships each.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Release {
    /// Slurm 24.11 from Debian trixie: REST v0.0.40, v0.0.41, v0.0.42.
    #[serde(rename = "24.11")]
    R24_11,
    /// Slurm 26.05 from Debian sid: REST v0.0.42 … v0.0.45.
    #[serde(rename = "26.05")]
    R26_05,
}

impl Release {
    pub const ALL: [Release; 2] = [Release::R24_11, Release::R26_05];

    pub fn name(self) -> &'static str {
        match self {
            Release::R24_11 => "24.11",
            Release::R26_05 => "26.05",
        }
    }

    pub fn suite(self) -> &'static str {
        match self {
            Release::R24_11 => "trixie",
            Release::R26_05 => "sid",
        }
    }

    /// Host loopback port of slurmrestd when `--port` is not given.
    pub fn default_port(self) -> u16 {
        match self {
            Release::R24_11 => 6824,
            Release::R26_05 => 6826,
        }
    }

    pub fn rest_versions(self) -> &'static [&'static str] {
        match self {
            Release::R24_11 => &["v0.0.40", "v0.0.41", "v0.0.42"],
            Release::R26_05 => &["v0.0.42", "v0.0.43", "v0.0.44", "v0.0.45"],
        }
    }

    /// The REST versions whose committed spec comes from this release (each version from one release only).
    pub fn spec_versions(self) -> &'static [&'static str] {
        match self {
            Release::R24_11 => &["v0.0.40", "v0.0.41", "v0.0.42"],
            Release::R26_05 => &["v0.0.43", "v0.0.44", "v0.0.45"],
        }
    }

    /// Short name used for the network namespace and the cluster name.
    pub fn slug(self) -> &'static str {
        match self {
            Release::R24_11 => "2411",
            Release::R26_05 => "2605",
        }
    }
}

impl fmt::Display for Release {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Release {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Release::ALL
            .into_iter()
            .find(|r| r.name() == s || r.suite() == s)
            .ok_or_else(|| format!("unknown Slurm release {s:?}: expected 24.11 or 26.05"))
    }
}
