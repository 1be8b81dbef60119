//! The text edits of a release, as pure functions: the project version in the workspace manifest
//! and the charts, and the changelog's Unreleased section moved under the new version.

use std::fmt;

use anyhow::{Context, Result, bail};

/// A release version, `MAJOR.MINOR.PATCH` (no pre-release or build part: the project has none).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version {
    pub major: u64,
    pub minor: u64,
    pub patch: u64,
}

impl std::str::FromStr for Version {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> Result<Version> {
        let s = s.strip_prefix('v').unwrap_or(s);
        let parts: Vec<&str> = s.split('.').collect();
        let [major, minor, patch] = parts[..] else {
            bail!("version {s:?} is not MAJOR.MINOR.PATCH");
        };
        let number = |p: &str| {
            p.parse::<u64>()
                .with_context(|| format!("version {s:?} is not MAJOR.MINOR.PATCH"))
        };
        Ok(Version {
            major: number(major)?,
            minor: number(minor)?,
            patch: number(patch)?,
        })
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

impl Version {
    /// The git tag of this release.
    pub fn tag(&self) -> String {
        format!("v{self}")
    }
}

/// The `version` of `[workspace.package]` in the workspace manifest.
pub fn workspace_version(manifest: &str) -> Result<Version> {
    let line = package_version_line(manifest)?;
    manifest.lines().nth(line).expect("found above")[VERSION_KEY.len()..]
        .trim()
        .trim_matches('"')
        .parse()
}

/// The workspace manifest with `[workspace.package]`'s `version` set to `to`.
pub fn set_workspace_version(manifest: &str, to: Version) -> Result<String> {
    let line = package_version_line(manifest)?;
    Ok(replace_lines(manifest, |i, l| {
        (i == line)
            .then(|| format!("{VERSION_KEY}\"{to}\""))
            .or(Some(l.to_owned()))
    }))
}

const VERSION_KEY: &str = "version = ";

fn package_version_line(manifest: &str) -> Result<usize> {
    let mut in_section = false;
    for (i, line) in manifest.lines().enumerate() {
        let line = line.trim();
        if line.starts_with('[') {
            in_section = line == "[workspace.package]";
        } else if in_section && line.starts_with(VERSION_KEY) {
            return Ok(i);
        }
    }
    bail!("the workspace manifest has no `version` in [workspace.package]")
}

/// A Chart.yaml with every `version: FROM` (the chart's own and a sibling chart's in
/// `dependencies`) and `appVersion: "FROM"` set to `to`. An appVersion that is not the project's
/// (the `slurm` chart's is the Slurm release it runs) is left alone.
pub fn set_chart_version(chart: &str, from: Version, to: Version) -> String {
    replace_lines(chart, |_, line| {
        let indent = &line[..line.len() - line.trim_start().len()];
        let replaced = match line.trim_start().split_once(':') {
            Some(("version", v)) if v.trim() == from.to_string() => {
                format!("{indent}version: {to}")
            }
            Some(("appVersion", v)) if v.trim().trim_matches('"') == from.to_string() => {
                format!("{indent}appVersion: \"{to}\"")
            }
            _ => line.to_owned(),
        };
        Some(replaced)
    })
}

const UNRELEASED: &str = "## [Unreleased]";

/// A Keep a Changelog text with the Unreleased section's entries moved under `## [to] - date`, an
/// empty Unreleased section left above it, and the link references at the end updated.
pub fn release_changelog(text: &str, to: Version, date: &str) -> Result<String> {
    let start = text
        .find(UNRELEASED)
        .context("the changelog has no `## [Unreleased]` section")?;
    let body_start = start + UNRELEASED.len();
    let body_end = text[body_start..]
        .find("\n## [")
        .map_or(text.len(), |i| body_start + i);
    let body = text[body_start..body_end].trim_matches('\n');
    let entries = body
        .lines()
        .take_while(|l| !l.starts_with("[Unreleased]:"))
        .filter(|l| !l.trim().is_empty())
        .count();
    if entries == 0 {
        bail!("the changelog's Unreleased section is empty: write what this release changes first");
    }
    if text.contains(&format!("## [{to}]")) {
        bail!("the changelog already has a section for {to}");
    }
    let mut out = String::with_capacity(text.len() + 100);
    out.push_str(&text[..body_start]);
    out.push_str(&format!("\n\n## [{to}] - {date}"));
    out.push_str(&text[body_start..]);
    Ok(release_links(&out, to))
}

/// `[Unreleased]: …/compare/vOLD...HEAD` becomes `…/compare/vTO...HEAD`, followed by
/// `[TO]: …/compare/vOLD...vTO`. Before the first release the Unreleased link is the repository's
/// address, and the first release's link is its tag.
fn release_links(text: &str, to: Version) -> String {
    replace_lines(text, |_, line| {
        let Some(url) = line.strip_prefix("[Unreleased]: ") else {
            return Some(line.to_owned());
        };
        let tag = to.tag();
        let Some((base, range)) = url.split_once("/compare/") else {
            return Some(format!(
                "[Unreleased]: {url}/compare/{tag}...HEAD\n[{to}]: {url}/releases/tag/{tag}"
            ));
        };
        let old = range.trim_end_matches("...HEAD");
        Some(format!(
            "[Unreleased]: {base}/compare/{tag}...HEAD\n[{to}]: {base}/compare/{old}...{tag}"
        ))
    })
}

/// `text` with each line replaced by what `f` returns for it (its index and content); the
/// trailing newline kept.
fn replace_lines(text: &str, mut f: impl FnMut(usize, &str) -> Option<String>) -> String {
    let mut out: Vec<String> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        out.extend(f(i, line));
    }
    let mut joined = out.join("\n");
    if text.ends_with('\n') {
        joined.push('\n');
    }
    joined
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Version {
        s.parse().unwrap()
    }

    #[test]
    fn versions_parse_with_or_without_a_v_and_order_numerically() {
        assert_eq!(v("v0.10.2"), v("0.10.2"));
        assert!(v("0.10.0") > v("0.9.9"));
        assert_eq!(v("1.2.3").tag(), "v1.2.3");
        for bad in ["1.2", "1.2.3.4", "1.x.3", "1.2.3-rc1", ""] {
            assert!(bad.parse::<Version>().is_err(), "{bad}");
        }
    }

    #[test]
    fn only_the_workspace_package_version_changes() {
        let manifest = "[workspace]\nmembers = []\n\n[workspace.package]\nedition = \"2024\"\nversion = \"0.1.0\"\n\n[workspace.dependencies]\nfoo = { version = \"1\" }\n";
        assert_eq!(workspace_version(manifest).unwrap(), v("0.1.0"));
        let bumped = set_workspace_version(manifest, v("0.2.0")).unwrap();
        assert_eq!(
            bumped,
            manifest.replace("version = \"0.1.0\"", "version = \"0.2.0\"")
        );
        assert!(workspace_version("[workspace]\nversion = \"1.0.0\"\n").is_err());
    }

    #[test]
    fn chart_versions_follow_but_not_a_foreign_app_version() {
        let chart = "name: a\nversion: 0.1.0\nappVersion: \"0.1.0\"\ndependencies:\n  - name: crds\n    version: 0.1.0\n";
        assert_eq!(
            set_chart_version(chart, v("0.1.0"), v("0.2.0")),
            chart.replace("0.1.0", "0.2.0")
        );
        let slurm = "name: slurm\nversion: 0.1.0\nappVersion: \"26.05\"\n";
        assert_eq!(
            set_chart_version(slurm, v("0.1.0"), v("0.2.0")),
            "name: slurm\nversion: 0.2.0\nappVersion: \"26.05\"\n"
        );
    }

    const LOG: &str = "# Changelog\n\nIntro.\n\n## [Unreleased]\n\n### Added\n- b\n\n## [0.1.0] - 2026-11-27\n\n### Added\n- a\n\n[Unreleased]: https://x/compare/v0.1.0...HEAD\n[0.1.0]: https://x/releases/tag/v0.1.0\n";

    #[test]
    fn the_unreleased_entries_move_under_the_new_version() {
        let out = release_changelog(LOG, v("0.2.0"), "2027-01-02").unwrap();
        assert_eq!(
            out,
            "# Changelog\n\nIntro.\n\n## [Unreleased]\n\n## [0.2.0] - 2027-01-02\n\n### Added\n- b\n\n## [0.1.0] - 2026-11-27\n\n### Added\n- a\n\n[Unreleased]: https://x/compare/v0.2.0...HEAD\n[0.2.0]: https://x/compare/v0.1.0...v0.2.0\n[0.1.0]: https://x/releases/tag/v0.1.0\n"
        );
        // Released once, the section is empty and a second release of nothing is refused.
        let err = release_changelog(&out, v("0.2.1"), "2027-01-03").unwrap_err();
        assert!(err.to_string().contains("empty"), "{err}");
        let err = release_changelog(LOG, v("0.1.0"), "2027-01-03").unwrap_err();
        assert!(err.to_string().contains("already"), "{err}");
    }

    #[test]
    fn the_first_release_links_to_its_tag() {
        let first = "## [Unreleased]\n\n- a\n\n[Unreleased]: https://x\n";
        let out = release_changelog(first, v("0.1.0"), "2026-11-27").unwrap();
        assert_eq!(
            out,
            "## [Unreleased]\n\n## [0.1.0] - 2026-11-27\n\n- a\n\n[Unreleased]: https://x/compare/v0.1.0...HEAD\n[0.1.0]: https://x/releases/tag/v0.1.0\n"
        );
    }
}
