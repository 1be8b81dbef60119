//! REST API versions (`v0.0.40` … `v0.0.45`) and which of them are compiled in.

use std::fmt;
use std::str::FromStr;

/// A slurmrestd REST API version, e.g. `v0.0.42`.
///
/// Every version slurmrestd has served since Slurm 24.05 has a variant, whether or not
/// its generated bindings are compiled in; [`ApiVersion::is_compiled`] tells (one cargo
/// feature per version, `v0_0_40` … `v0_0_45`). Variants are ordered oldest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum ApiVersion {
    /// `v0.0.40` (first served by Slurm 23.11).
    V0_0_40,
    /// `v0.0.41` (first served by Slurm 24.05).
    V0_0_41,
    /// `v0.0.42` (first served by Slurm 24.11).
    V0_0_42,
    /// `v0.0.43` (first served by Slurm 25.05).
    V0_0_43,
    /// `v0.0.44` (first served by Slurm 25.11).
    V0_0_44,
    /// `v0.0.45` (first served by Slurm 26.05).
    V0_0_45,
}

impl ApiVersion {
    /// Every known version, oldest first.
    pub const ALL: [ApiVersion; 6] = [
        ApiVersion::V0_0_40,
        ApiVersion::V0_0_41,
        ApiVersion::V0_0_42,
        ApiVersion::V0_0_43,
        ApiVersion::V0_0_44,
        ApiVersion::V0_0_45,
    ];

    /// The version as it appears in URL paths, e.g. `"v0.0.42"`.
    pub const fn as_str(self) -> &'static str {
        match self {
            ApiVersion::V0_0_40 => "v0.0.40",
            ApiVersion::V0_0_41 => "v0.0.41",
            ApiVersion::V0_0_42 => "v0.0.42",
            ApiVersion::V0_0_43 => "v0.0.43",
            ApiVersion::V0_0_44 => "v0.0.44",
            ApiVersion::V0_0_45 => "v0.0.45",
        }
    }

    /// The cargo feature that compiles this version in, e.g. `"v0_0_42"`.
    pub const fn feature(self) -> &'static str {
        match self {
            ApiVersion::V0_0_40 => "v0_0_40",
            ApiVersion::V0_0_41 => "v0_0_41",
            ApiVersion::V0_0_42 => "v0_0_42",
            ApiVersion::V0_0_43 => "v0_0_43",
            ApiVersion::V0_0_44 => "v0_0_44",
            ApiVersion::V0_0_45 => "v0_0_45",
        }
    }

    /// Whether this version's bindings are compiled into this build (its cargo feature is on).
    pub const fn is_compiled(self) -> bool {
        match self {
            ApiVersion::V0_0_40 => cfg!(feature = "v0_0_40"),
            ApiVersion::V0_0_41 => cfg!(feature = "v0_0_41"),
            ApiVersion::V0_0_42 => cfg!(feature = "v0_0_42"),
            ApiVersion::V0_0_43 => cfg!(feature = "v0_0_43"),
            ApiVersion::V0_0_44 => cfg!(feature = "v0_0_44"),
            ApiVersion::V0_0_45 => cfg!(feature = "v0_0_45"),
        }
    }

    /// The compiled-in versions, oldest first.
    pub fn compiled() -> Vec<ApiVersion> {
        Self::ALL.into_iter().filter(|v| v.is_compiled()).collect()
    }
}

impl fmt::Display for ApiVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The error from parsing an unknown version string.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown Slurm REST API version {0:?}: expected one of v0.0.40 … v0.0.45")]
pub struct ParseApiVersionError(String);

impl FromStr for ApiVersion {
    type Err = ParseApiVersionError;

    /// Accepts `v0.0.42`, `0.0.42` and `v0_0_42`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim();
        let t = t.strip_prefix('v').unwrap_or(t).replace('_', ".");
        Self::ALL
            .into_iter()
            .find(|v| v.as_str()[1..] == t)
            .ok_or_else(|| ParseApiVersionError(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_and_parse_round_trip() {
        for v in ApiVersion::ALL {
            assert_eq!(v.to_string().parse::<ApiVersion>(), Ok(v));
            assert_eq!(v.feature().parse::<ApiVersion>(), Ok(v));
        }
        assert_eq!(ApiVersion::V0_0_42.to_string(), "v0.0.42");
        assert_eq!("0.0.45".parse(), Ok(ApiVersion::V0_0_45));
    }

    #[test]
    fn unknown_version_is_named_in_error() {
        let err = "v0.0.39".parse::<ApiVersion>().unwrap_err();
        assert!(err.to_string().contains("\"v0.0.39\""), "{err}");
    }

    #[test]
    fn ordering_is_oldest_first() {
        assert!(ApiVersion::V0_0_40 < ApiVersion::V0_0_45);
        let compiled = ApiVersion::compiled();
        assert!(compiled.windows(2).all(|w| w[0] < w[1]));
    }
}
