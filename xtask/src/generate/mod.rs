//! `cargo xtask generate [--check]`: slurmrestd OpenAPI specs + overlay -> progenitor modules,
//! and the operator's Rust CRD types -> `slurm-operator/charts/slurm-operator-crds/templates/*.yaml`.
//!
//! Inputs: the pristine specs `openapi/<version>.json` and the reviewed fixes in
//! `openapi/overlay.json` (rules explained in `openapi/README.md`). Output: one module per
//! REST version in `slurm-client/src/generated/`. `--check` regenerates in memory and fails,
//! naming the stale files, when the committed code differs.

mod codegen;
mod crds;
mod overlay;
mod prune;
mod rules;

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use overlay::{Applied, Overlay};

/// REST versions with a spec in `openapi/` and a cargo feature in slurm-client.
const VERSIONS: &[&str] = &[
    "v0.0.40", "v0.0.41", "v0.0.42", "v0.0.43", "v0.0.44", "v0.0.45",
];

pub fn run(check: bool) -> Result<()> {
    let root = workspace_root();
    let overlay_path = root.join("openapi/overlay.json");
    let overlay = Overlay::parse(&read(&overlay_path)?)
        .with_context(|| format!("reading {}", overlay_path.display()))?;
    if let Some(unknown) = overlay.patch_versions().find(|v| !VERSIONS.contains(v)) {
        bail!(
            "{}: patch names unknown version `{unknown}`",
            overlay_path.display()
        );
    }

    let mut stale = Vec::new();
    let mut applied = Vec::new();
    for version in VERSIONS {
        let (source, changes) = generate_version(&root, &overlay, version)?;
        applied.push(changes);
        let out = root.join(format!(
            "slurm-client/src/generated/{}.rs",
            module_name(version)
        ));
        let current = std::fs::read_to_string(&out).ok();
        if current.as_deref() == Some(source.as_str()) {
            continue;
        }
        let relative = out
            .strip_prefix(&root)
            .unwrap_or(&out)
            .display()
            .to_string();
        if check {
            stale.push(relative);
        } else {
            std::fs::write(&out, source).with_context(|| format!("writing {}", out.display()))?;
            println!("wrote {relative}");
        }
    }
    overlay.check_rules_used(&applied)?;
    stale.extend(crds::run(&root, check)?);
    if !stale.is_empty() {
        bail!(
            "generated code is stale (regenerate with `cargo xtask generate` and commit):\n  {}",
            stale.join("\n  ")
        );
    }
    if check {
        println!("generated code is up to date");
    }
    Ok(())
}

fn generate_version(root: &Path, overlay: &Overlay, version: &str) -> Result<(String, Applied)> {
    let spec_path = root.join(format!("openapi/{version}.json"));
    let mut spec: serde_json::Value = serde_json::from_str(&read(&spec_path)?)
        .with_context(|| format!("{} is not JSON", spec_path.display()))?;
    let applied = overlay
        .apply(version, &mut spec)
        .with_context(|| format!("applying openapi/overlay.json to {version}"))?;
    eprintln!("{version}: {}", applied.lines.join("; "));
    Ok((codegen::generate(version, spec)?, applied))
}

/// `v0.0.42` -> `v0_0_42`, the module and cargo feature name.
fn module_name(version: &str) -> String {
    version.replace('.', "_")
}

fn read(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives in the workspace root")
        .to_path_buf()
}
