//! `cargo xtask semver`: the public API of each published crate compared with the last release by
//! cargo-semver-checks (from crates.io, installed here on first use). A breaking change fails unless
//! the version in Cargo.toml announces it (0.1 → 0.2 while the project is 0.x).

use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result, bail};

/// The crates meant for crates.io. The operator, the bridge, the exporter and kube-support ship as
/// images and charts (`publish = false`): their API is not anyone's dependency.
pub const PUBLISHED: &[&str] = &["slurm-client"];

/// The cargo-semver-checks release CI installs. Each release reads the rustdoc JSON of a range
/// of Rust releases: move it forward with the toolchain.
const TOOL_VERSION: &str = "0.51.0";

/// The commit of the last release: its tag `vX.Y.Z` when the clone has tags, else the newest
/// commit whose subject is `release: vX.Y.Z` (what `cargo xtask release` commits), which a clone
/// without tags still has.
pub fn last_release(workspace: &Path) -> Result<Option<String>> {
    let tag = git(
        workspace,
        &["describe", "--tags", "--abbrev=0", "--match", "v[0-9]*"],
    );
    if let Ok(tag) = tag {
        return Ok(Some(tag));
    }
    let commit = git(
        workspace,
        &[
            "log",
            "-1",
            "--format=%H",
            "--extended-regexp",
            "--grep=^release: v[0-9]+\\.[0-9]+\\.[0-9]+$",
        ],
    )?;
    Ok((!commit.is_empty()).then_some(commit))
}

/// What a published crate's public API is made from, besides its own directory and the
/// workspace's `[workspace.dependencies]` (the versions of the types it exposes): the specs and
/// overlay its generated modules come from.
const API_INPUTS: &[&str] = &["openapi"];

/// Compares each published crate with `baseline` (a git revision), or with the last release.
/// With `if_changed`, a crate whose API inputs are as they were at the baseline is skipped:
/// the check costs a tool build and two rustdoc builds, and would find nothing.
pub fn check(workspace: &Path, baseline: Option<&str>, if_changed: bool) -> Result<()> {
    let baseline = match baseline {
        Some(rev) => rev.to_owned(),
        None => last_release(workspace)?.context(
            "no release to compare the API with: no tag v* and no `release: v…` commit in this \
             clone's history (a shallow clone? fetch the history, or pass --baseline REV)",
        )?,
    };
    let changed: Vec<&str> = PUBLISHED
        .iter()
        .copied()
        .filter(|krate| !if_changed || inputs_changed(workspace, &baseline, krate))
        .collect();
    for krate in PUBLISHED.iter().filter(|k| !changed.contains(k)) {
        eprintln!(
            "{krate}: nothing in {krate}/src, its build.rs, its manifest (test-only tables aside), {} or the workspace's dependencies changed since {baseline}; its API cannot have (semver check skipped)",
            API_INPUTS.join(", ")
        );
    }
    if changed.is_empty() {
        return Ok(());
    }
    ensure_tool()?;
    for krate in changed {
        eprintln!("cargo semver-checks: {krate} against {baseline}");
        // Every feature: the generated module of each REST version is public API too.
        let status = cargo(workspace)
            .args(["semver-checks", "--package", krate])
            .args(["--baseline-rev", &baseline, "--all-features"])
            .status()
            .context("running cargo semver-checks")?;
        if !status.success() {
            bail!(
                "{krate}'s public API breaks semver against {baseline} (above): undo the change, or \
                 announce it by raising the version in Cargo.toml's [workspace.package] (a breaking \
                 change while 0.x: 0.1.0 → 0.2.0) and write it in {krate}/CHANGELOG.md"
            );
        }
    }
    Ok(())
}

/// Whether what `krate`'s public API is made of differs between `baseline` and the work tree:
/// its `src/` and `build.rs`, [`API_INPUTS`], its manifest but for the test-only tables, and the
/// workspace's dependencies (an unreadable answer counts as a change). Its changelog, examples,
/// tests and benchmarks cannot change the API.
fn inputs_changed(workspace: &Path, baseline: &str, krate: &str) -> bool {
    let status = Command::new("git")
        .current_dir(workspace)
        .args(["diff", "--quiet", baseline, "--"])
        .args([format!("{krate}/src"), format!("{krate}/build.rs")])
        .args(API_INPUTS)
        .status();
    if !matches!(status, Ok(s) if s.success()) {
        return true;
    }
    let differs = |file: &str, part: fn(&str) -> String| {
        let then = git(workspace, &["show", &format!("{baseline}:{file}")]);
        let now = std::fs::read_to_string(workspace.join(file));
        match (then, now) {
            (Ok(then), Ok(now)) => part(&then) != part(&now),
            _ => true,
        }
    };
    differs("Cargo.toml", |m| dependencies(m).to_owned())
        || differs(&format!("{krate}/Cargo.toml"), api_tables)
}

/// A package manifest without its comments and the tables that only tests, examples and
/// benchmarks read.
fn api_tables(manifest: &str) -> String {
    let mut kept = String::new();
    let mut test_only = false;
    for line in manifest.lines() {
        let line = line.split('#').next().unwrap_or_default().trim_end();
        if let Some(header) = line.trim_start().strip_prefix('[') {
            let name = header.trim_start_matches('[').trim_end_matches(']');
            test_only = matches!(name, "example" | "test" | "bench")
                || name == "dev-dependencies"
                || name.starts_with("dev-dependencies.")
                || name.ends_with(".dev-dependencies");
        }
        if !test_only && !line.is_empty() {
            kept.push_str(line);
            kept.push('\n');
        }
    }
    kept
}

/// The `[workspace.dependencies]` table of a workspace manifest, as text.
fn dependencies(manifest: &str) -> &str {
    let Some(start) = manifest.find("[workspace.dependencies]") else {
        return "";
    };
    let rest = &manifest[start..];
    let end = rest[1..].find("\n[").map_or(rest.len(), |i| i + 1);
    &rest[..end]
}

/// Installs cargo-semver-checks `TOOL_VERSION` unless that version is on the PATH already.
fn ensure_tool() -> Result<()> {
    let installed = Command::new(cargo_program())
        .args(["semver-checks", "--version"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).contains(TOOL_VERSION))
        .unwrap_or(false);
    if installed {
        return Ok(());
    }
    eprintln!("installing cargo-semver-checks {TOOL_VERSION} from crates.io (once per machine)");
    // Its release profile asks for fat LTO in one codegen unit at opt-level 3, which is most of
    // the build's CPU time (on a fresh 2-core CI machine it sits on the critical path); a check
    // of one crate does not need that last bit of speed.
    let status = Command::new(cargo_program())
        .args(["install", "--locked", "cargo-semver-checks", "--version"])
        .arg(format!("={TOOL_VERSION}"))
        .env("CARGO_PROFILE_RELEASE_LTO", "false")
        .env("CARGO_PROFILE_RELEASE_CODEGEN_UNITS", "16")
        .env("CARGO_PROFILE_RELEASE_DEBUG", "false")
        .env("CARGO_PROFILE_RELEASE_OPT_LEVEL", "1")
        .status()
        .context("running cargo install")?;
    if !status.success() {
        bail!("cargo install cargo-semver-checks {TOOL_VERSION} failed (above)");
    }
    Ok(())
}

fn cargo_program() -> std::ffi::OsString {
    std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into())
}

fn cargo(workspace: &Path) -> Command {
    let mut cmd = Command::new(cargo_program());
    cmd.current_dir(workspace);
    cmd
}

/// `git <args>` in the workspace; its trimmed stdout.
pub fn git(workspace: &Path, args: &[&str]) -> Result<String> {
    let out = Command::new("git")
        .current_dir(workspace)
        .args(args)
        .output()
        .context("running git")?;
    if !out.status.success() {
        bail!(
            "git {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_dependency_table_counts() {
        let a = "[workspace]\nmembers = [\"a\"]\n\n[workspace.dependencies]\nurl = \"2\"\n\n[profile.dev]\ndebug = 0\n";
        let b = a
            .replace("members = [\"a\"]", "members = [\"a\", \"b\"]")
            .replace("debug = 0", "debug = 1");
        assert_eq!(dependencies(a), dependencies(&b));
        assert_eq!(dependencies(a), "[workspace.dependencies]\nurl = \"2\"\n");
        assert_ne!(dependencies(a), dependencies(&a.replace("\"2\"", "\"3\"")));
        assert_eq!(dependencies("[package]\n"), "");
    }

    #[test]
    fn test_only_tables_and_comments_do_not_count() {
        let a = "[package]\nname = \"c\"\n\n[dependencies]\nurl = \"2\"\n\n[dev-dependencies]\nt = { path = \"../t\" }\n\n[[example]]\nname = \"e\"\nharness = false\n";
        let b = a
            .replace("../t", "../xtask/t")
            .replace("[[example]]", "# run by CI\n[[example]]\n")
            + "\n[[test]]\nname = \"integration\"\n";
        assert_eq!(api_tables(a), api_tables(&b));
        assert_eq!(
            api_tables(a),
            "[package]\nname = \"c\"\n[dependencies]\nurl = \"2\"\n"
        );
        assert_ne!(
            api_tables(a),
            api_tables(&a.replace("url = \"2\"", "url = \"3\""))
        );
        assert_ne!(
            api_tables(a),
            api_tables(&format!("{a}[features]\ncli = []\n"))
        );
    }
}
