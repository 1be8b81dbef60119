//! Real Helm 4 for chart tests: `xtask/helm/helm.py` (helm's arguments over PyPI's
//! helm-python-sdk) in the venv `cargo xtask helm setup` makes. Tests fail, never skip, without it.

pub mod objects;

use std::path::PathBuf;
use std::process::Command;

/// The workspace root.
pub fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("test-support is in the workspace, under xtask/")
        .to_owned()
}

/// The venv's python (`$SLURM_DEV_CACHE/helm/venv`, default under /var/cache/slurm-dev).
pub fn python() -> PathBuf {
    let cache = std::env::var_os("SLURM_DEV_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/cache/slurm-dev"));
    let python = cache.join("helm/venv/bin/python");
    assert!(
        python.is_file(),
        "{} is missing: make it with `cargo xtask helm setup`",
        python.display()
    );
    python
}

/// Runs `helm ARGS` (cluster: `kubeconfig`, else $KUBECONFIG); stdout on success, else what it
/// printed.
pub fn helm(args: &[&str], kubeconfig: Option<&std::path::Path>) -> Result<String, String> {
    let mut cmd = Command::new(python());
    cmd.arg(workspace().join("xtask/helm/helm.py")).args(args);
    if let Some(k) = kubeconfig {
        cmd.env("KUBECONFIG", k);
    }
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("running helm.py: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    if out.status.success() {
        Ok(stdout)
    } else {
        Err(format!(
            "helm {}: {stdout}{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// `helm template RELEASE CHART -n NAMESPACE --json` with values files and `--set`s: the rendered
/// objects as a JSON array (parse it with serde_json). `chart` is relative to the workspace.
pub fn template(
    chart: &str,
    release: &str,
    namespace: &str,
    extra: &[&str],
) -> Result<String, String> {
    let chart = workspace().join(chart);
    let chart = chart.to_str().expect("a UTF-8 path");
    let mut args = vec!["template", release, chart, "-n", namespace, "--json"];
    args.extend_from_slice(extra);
    helm(&args, None)
}
