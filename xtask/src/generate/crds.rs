//! The committed CRDs, written by the operator binary itself (`slurm-operator crds --out-dir`, built
//! as the tests build it), so xtask does not compile kube and k8s-openapi. Their one place is the templates of the chart
//! `slurm-operator-crds` (templates, not `crds/`, so that `helm upgrade` upgrades them); the
//! operator's tests apply the same files. Being templates, they must not contain `{{`, which
//! Helm would read as the start of an action: a CRD that does is refused here.

use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result, bail};

const COMMITTED: &str = "slurm-operator/charts/slurm-operator-crds/templates";

/// Regenerates the CRDs into a scratch directory and returns the committed files that differ
/// (or are missing, or no longer generated), relative to `root`; without `check` it also
/// brings the committed directory up to date.
pub fn run(root: &Path, check: bool) -> Result<Vec<String>> {
    let scratch = root.join("target/xtask-generate-crds");
    if scratch.exists() {
        std::fs::remove_dir_all(&scratch)
            .with_context(|| format!("clearing {}", scratch.display()))?;
    }
    let operator = crate::unified::binaries(root, &["slurm-operator"])?.remove(0);
    let output = Command::new(&operator)
        .arg("crds")
        .arg("--out-dir")
        .arg(&scratch)
        .output()
        .with_context(|| format!("running {} crds", operator.display()))?;
    if !output.status.success() {
        bail!(
            "`slurm-operator crds --out-dir …` failed ({}):\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
    }

    let committed = root.join(COMMITTED);
    let mut stale = Vec::new();
    let mut generated = Vec::new();
    for entry in std::fs::read_dir(&scratch)? {
        let name = entry?.file_name().to_string_lossy().into_owned();
        let fresh = std::fs::read_to_string(scratch.join(&name))?;
        if let Some(line) = template_action(&fresh) {
            bail!(
                "{name}:{line}: `{{{{` in a CRD would be read by Helm as a template action \
                 ({COMMITTED} are Helm templates); reword the doc comment or rule it comes from"
            );
        }
        let target = committed.join(&name);
        if std::fs::read_to_string(&target).ok().as_deref() != Some(fresh.as_str()) {
            stale.push(format!("{COMMITTED}/{name}"));
            if !check {
                std::fs::create_dir_all(&committed)?;
                std::fs::write(&target, fresh)
                    .with_context(|| format!("writing {}", target.display()))?;
                println!("wrote {COMMITTED}/{name}");
            }
        }
        generated.push(name);
    }
    if let Ok(entries) = std::fs::read_dir(&committed) {
        for entry in entries {
            let name = entry?.file_name().to_string_lossy().into_owned();
            if name.ends_with(".yaml") && !generated.contains(&name) {
                stale.push(format!("{COMMITTED}/{name} (no longer generated)"));
                if !check {
                    std::fs::remove_file(committed.join(&name))?;
                    println!("removed {COMMITTED}/{name}");
                }
            }
        }
    }
    stale.sort();
    Ok(if check { stale } else { Vec::new() })
}

/// The first line (1-based) holding `{{`, which Helm would read as the start of a template action
/// (`}}` alone is plain text to Helm).
fn template_action(yaml: &str) -> Option<usize> {
    yaml.lines().position(|l| l.contains("{{")).map(|i| i + 1)
}

#[cfg(test)]
mod tests {
    use super::template_action;

    #[test]
    fn a_template_action_is_found() {
        assert_eq!(
            template_action("a: b\nrule: self.x == {'a': {'b': 1}}\n"),
            None
        );
        assert_eq!(
            template_action("a: b\ndescription: write {{ .Values.x }}\n"),
            Some(2)
        );
    }
}
