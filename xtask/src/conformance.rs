//! `cargo xtask conformance slinky --chart DIR`: Slinky's own `slurm` chart, from a checkout the
//! user gives (SlinkyProject/slurm-operator's `helm/slurm`; nothing of it is kept here), installed
//! by real Helm exactly as it renders onto this project's CRDs and operator on the test ground. Each
//! case must be accepted, come up (every pod Ready, every NodeSet and LoginSet at its replicas) and,
//! when it has workers, run a batch job with one task on each of them (`sbatch --wait`, `srun`).
//!
//! The cases: the chart's default values (no NodeSet: accepted and up, no job), the command of
//! Slinky's installation guide (`--set-json 'nodesets={"slinky":{}}' --set
//! partitions.all.enabled=true`), two workers with a login node, and each `--values` file given.
//! The chart's images are Slinky's names, which `cargo xtask image` gives this project's Debian
//! images, so no value changes them. The vendor example values it ships are for GPU machines
//! (NVIDIA DCGM, Google A3), which the ground has not.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::kube::ground;
use crate::kube::state::State;

#[derive(Debug, clap::Subcommand)]
pub enum ConformanceCmd {
    /// Slinky's `slurm` chart from a checkout (DIR is its `helm/slurm`): each case installed with
    /// real Helm as it renders, on this project's CRDs and operator on the test ground (started
    /// if needed), then up and running a job; prints a table, fails if a case does (needs root).
    Slinky(SlinkyArgs),
}

#[derive(Debug, clap::Args)]
pub struct SlinkyArgs {
    /// The chart directory: `helm/slurm` of a SlinkyProject/slurm-operator checkout.
    #[arg(long)]
    chart: PathBuf,
    /// A values file to install the chart with, as a case of its own (repeatable).
    #[arg(long = "values", short = 'f')]
    values: Vec<PathBuf>,
    /// Leave each case's release installed (namespace `conformance-N`) instead of uninstalling it.
    #[arg(long)]
    keep: bool,
}

/// The operator's namespace, as the demo installs it.
const OPERATOR_NS: &str = "slinky";
/// The release name Slinky's docs use: its objects are `slurm-controller-0`, `slurm-restapi`, ...
const RELEASE: &str = "slurm";
const UP_LIMIT: Duration = Duration::from_secs(420);
const JOB_LIMIT: &str = "300";

/// One way of installing the chart.
struct Case {
    name: String,
    args: Vec<String>,
}

/// What became of a case.
struct Outcome {
    case: String,
    accepted: Result<(), String>,
    up: Option<Result<Duration, String>>,
    job: Option<Result<String, String>>,
}

impl Outcome {
    fn passed(&self) -> bool {
        self.accepted.is_ok()
            && self.up.as_ref().is_none_or(Result::is_ok)
            && self.job.as_ref().is_none_or(Result::is_ok)
    }
}

pub fn run(workspace: &Path, cmd: &ConformanceCmd) -> Result<()> {
    let ConformanceCmd::Slinky(args) = cmd;
    slinky(workspace, &args.chart, &args.values, args.keep)
}

/// The variable that names checkouts of Slinky's chart (`helm/slurm` directories, separated by
/// `:`) for `cargo xtask test` to run the conformance cases of; CI runs them only when it is set.
pub const CHARTS_VARIABLE: &str = "SLINKY_CHARTS";

/// The chart directories [`CHARTS_VARIABLE`] names.
pub fn charts_in_env() -> Vec<PathBuf> {
    std::env::var_os(CHARTS_VARIABLE)
        .map(|v| std::env::split_paths(&v).collect())
        .unwrap_or_default()
}

/// Every case of Slinky's chart in `chart`, and one per file of `values`.
pub fn slinky(workspace: &Path, chart: &Path, values: &[PathBuf], keep: bool) -> Result<()> {
    if !nix::unistd::geteuid().is_root() {
        bail!("conformance needs root (the Kubernetes test ground and the image builder do)");
    }
    let version = chart_version(chart)?;
    let state = match ground::running()? {
        Some(state) => state,
        None => {
            eprintln!("==> starting the Kubernetes test ground (3 nodes)");
            let shape = ground::Shape {
                nodes: 3,
                slurm: None,
                hollow: None,
            };
            ground::up(&shape, workspace)?.0
        }
    };
    install_operator(workspace)?;
    let adapted = without_cgroups()?;
    let mut outcomes = Vec::new();
    for (i, mut case) in cases(values).into_iter().enumerate() {
        if let Some(file) = &adapted {
            case.args
                .splice(0..0, ["-f".to_owned(), file.display().to_string()]);
        }
        let ns = format!("conformance-{i}");
        eprintln!("==> Slinky chart {version}, {}: namespace {ns}", case.name);
        let outcome = run_case(&state, chart, &ns, &case);
        if !keep {
            let _ = helm(&["uninstall", RELEASE, "-n", &ns, "--wait"]);
            let _ = ground::kubectl_output(
                &state,
                &["delete", "namespace", &ns, "--wait=true", "--timeout=180s"],
            );
        }
        outcomes.push(outcome);
    }
    if adapted.is_some() {
        println!("\n{NO_CGROUP2_NOTE}");
    }
    println!("{}", table(&version, &outcomes));
    let failed = outcomes.iter().filter(|o| !o.passed()).count();
    if failed > 0 {
        bail!("{failed} of {} cases failed (above)", outcomes.len());
    }
    Ok(())
}

/// What a Slinky user on a host without cgroup v2 gives the chart: Slurm 26.05's cgroup plugin
/// runs on cgroup v2 only, and slurmd stops at start without it.
const NO_CGROUP2_VALUES: &str = "configFiles:
  cgroup.conf: |
    CgroupPlugin=disabled
controller:
  extraConf: |
    ProctrackType=proctrack/linuxproc
    TaskPlugin=task/none
";

const NO_CGROUP2_NOTE: &str = "This host has no cgroup v2 at /sys/fs/cgroup, on which Slurm's cgroup plugin runs: \
every case was installed with `configFiles.cgroup.conf: CgroupPlugin=disabled` and \
`controller.extraConf: ProctrackType=proctrack/linuxproc, TaskPlugin=task/none` first, as a Slinky \
user on such a host must.";

/// On a host whose /sys/fs/cgroup is not cgroup v2, a values file that turns Slurm's cgroups off.
fn without_cgroups() -> Result<Option<PathBuf>> {
    let cgroup2 = nix::sys::statfs::statfs("/sys/fs/cgroup")
        .is_ok_and(|fs| fs.filesystem_type() == nix::sys::statfs::CGROUP2_SUPER_MAGIC);
    if cgroup2 {
        return Ok(None);
    }
    let file = std::env::temp_dir().join("conformance-no-cgroup2.yaml");
    std::fs::write(&file, NO_CGROUP2_VALUES)
        .with_context(|| format!("writing {}", file.display()))?;
    Ok(Some(file))
}

/// The chart's version, after checking that DIR is Slinky's `slurm` chart.
fn chart_version(dir: &Path) -> Result<String> {
    let file = dir.join("Chart.yaml");
    let text = std::fs::read_to_string(&file).with_context(|| {
        format!(
            "reading {}: --chart is the helm/slurm directory of a SlinkyProject/slurm-operator checkout",
            file.display()
        )
    })?;
    let field = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key))
            .map(|v| v.trim().trim_matches('"').to_owned())
    };
    if field("name:").as_deref() != Some("slurm") {
        bail!(
            "{} is not Slinky's `slurm` chart (its name is not `slurm`)",
            file.display()
        );
    }
    field("version:").with_context(|| format!("{} has no version", file.display()))
}

fn cases(values: &[PathBuf]) -> Vec<Case> {
    let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect();
    let mut cases = vec![
        Case {
            name: "default values".into(),
            args: Vec::new(),
        },
        Case {
            name: "installation guide (a NodeSet, partition all)".into(),
            args: args(&[
                "--set-json",
                r#"nodesets={"slinky":{}}"#,
                "--set",
                "partitions.all.enabled=true",
            ]),
        },
        Case {
            name: "two workers and a login node".into(),
            args: args(&[
                "--set-json",
                r#"nodesets={"slinky":{"replicas":2}}"#,
                "--set-json",
                r#"loginsets={"slinky":{}}"#,
                "--set",
                "partitions.all.enabled=true",
            ]),
        },
    ];
    for file in values {
        cases.push(Case {
            name: format!("values {}", file.display()),
            args: vec!["-f".into(), file.display().to_string()],
        });
    }
    cases
}

fn run_case(state: &State, chart: &Path, ns: &str, case: &Case) -> Outcome {
    let mut outcome = Outcome {
        case: case.name.clone(),
        accepted: Ok(()),
        up: None,
        job: None,
    };
    let chart = chart.display().to_string();
    let mut install = vec!["install", RELEASE, &chart, "-n", ns, "--create-namespace"];
    install.extend(case.args.iter().map(String::as_str));
    let started = Instant::now();
    if let Err(e) = helm(&install) {
        outcome.accepted = Err(format!("{e:#}"));
        return outcome;
    }
    let up = wait_up(state, ns).map(|()| started.elapsed());
    let failed = up.is_err();
    outcome.up = Some(up.map_err(|e| format!("{e:#}")));
    if failed {
        return outcome;
    }
    let workers = total(state, ns, "nodesets");
    if workers > 0 {
        outcome.job = Some(run_job(state, ns, workers).map_err(|e| format!("{e:#}")));
    }
    outcome
}

/// Waits until the namespace's pods are all Ready and each NodeSet and LoginSet has its replicas.
fn wait_up(state: &State, ns: &str) -> Result<()> {
    let deadline = Instant::now() + UP_LIMIT;
    loop {
        let pending = not_ready(state, ns)?;
        if pending.is_empty() {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!(
                "not up after {UP_LIMIT:?}: {}\n{}",
                pending.join("; "),
                ground::kubectl_output(state, &["get", "pods", "-n", ns, "-o", "wide"])?
            );
        }
        std::thread::sleep(Duration::from_secs(2));
    }
}

/// What is not up yet in `ns`.
fn not_ready(state: &State, ns: &str) -> Result<Vec<String>> {
    let mut pending = Vec::new();
    // A NodeSet counts its ready pods; a LoginSet, like Slinky's, only its pods (their
    // readiness is the pods' own, checked below).
    for (kind, ready) in [("nodesets", "readyReplicas"), ("loginsets", "replicas")] {
        let rows = ground::kubectl_output(
            state,
            &[
                "get",
                kind,
                "-n",
                ns,
                "-o",
                &format!(
                    r#"jsonpath={{range .items[*]}}{{.metadata.name}} {{.spec.replicas}} {{.status.{ready}}}{{"\n"}}{{end}}"#
                ),
            ],
        )?;
        for row in rows.lines() {
            let mut f = row.split_whitespace();
            let (name, want, ready) = (f.next(), f.next(), f.next());
            let want: u32 = want.and_then(|w| w.parse().ok()).unwrap_or(1);
            let ready: u32 = ready.and_then(|r| r.parse().ok()).unwrap_or(0);
            if ready < want {
                pending.push(format!(
                    "{kind}/{} {ready} ready of {want}",
                    name.unwrap_or("?")
                ));
            }
        }
    }
    let pods = ground::kubectl_output(
        state,
        &[
            "get",
            "pods",
            "-n",
            ns,
            "-o",
            r#"jsonpath={range .items[*]}{.metadata.name} {.status.phase} {.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}"#,
        ],
    )?;
    if pods.trim().is_empty() {
        pending.push("no pods yet".into());
    }
    for row in pods.lines() {
        let f: Vec<&str> = row.split_whitespace().collect();
        if f.get(1) != Some(&"Succeeded") && f.get(2) != Some(&"True") {
            pending.push(format!("pod/{} not Ready", f.first().unwrap_or(&"?")));
        }
    }
    Ok(pending)
}

/// The sum of `spec.replicas` of the namespace's objects of `kind`.
fn total(state: &State, ns: &str, kind: &str) -> u32 {
    ground::kubectl_output(
        state,
        &[
            "get",
            kind,
            "-n",
            ns,
            "-o",
            "jsonpath={.items[*].spec.replicas}",
        ],
    )
    .unwrap_or_default()
    .split_whitespace()
    .filter_map(|n| n.parse::<u32>().ok())
    .sum()
}

/// A batch job on every worker, one task each, from the controller pod; its hosts.
fn run_job(state: &State, ns: &str, workers: u32) -> Result<String> {
    let nodes = workers.to_string();
    let out = in_controller(
        state,
        ns,
        &[
            "timeout",
            JOB_LIMIT,
            "sbatch",
            "--wait",
            "--parsable",
            "-N",
            &nodes,
            "--output=/dev/null",
            "--wrap",
            "srun hostname",
        ],
    )?;
    let job = out.trim().to_owned();
    let state_of = in_controller(state, ns, &["scontrol", "show", "job", &job]).unwrap_or_default();
    let field = |key: &str| {
        state_of
            .split_whitespace()
            .find_map(|w| w.strip_prefix(key))
            .unwrap_or("?")
            .to_owned()
    };
    if field("JobState=") != "COMPLETED" {
        bail!(
            "job {job} ended {} (exit {})",
            field("JobState="),
            field("ExitCode=")
        );
    }
    Ok(format!("job {job} on {}", field("NodeList=")))
}

/// `command` in the slurmctld container of the release's controller pod; its output.
fn in_controller(state: &State, ns: &str, command: &[&str]) -> Result<String> {
    let pod = format!("{RELEASE}-controller-0");
    let mut args = vec!["exec", "-n", ns, &pod, "-c", "slurmctld", "--"];
    args.extend_from_slice(command);
    ground::kubectl_output(state, &args)
}

/// The operator and its CRDs from this project's charts and dev images, as the demo installs them.
fn install_operator(workspace: &Path) -> Result<()> {
    eprintln!("==> the project's images (cargo xtask image project --dev), CRDs and operator");
    let ok = Command::new(crate::THIS_BINARY)
        .current_dir(workspace)
        .args(["image", "project", "--dev"])
        .status()?
        .success();
    if !ok {
        bail!("building the project's images failed");
    }
    let chart = |c: &str| workspace.join(c).display().to_string();
    helm(&[
        "upgrade",
        "--install",
        "slurm-operator-crds",
        &chart("slurm-operator/charts/slurm-operator-crds"),
        "-n",
        "default",
    ])?;
    helm(&[
        "upgrade",
        "--install",
        "slurm-operator",
        &chart("slurm-operator/charts/slurm-operator"),
        "-n",
        OPERATOR_NS,
        "--create-namespace",
        "--wait",
    ])
}

/// Real Helm (xtask/helm/helm.py) on the ground; an error carries what it printed.
fn helm(args: &[&str]) -> Result<()> {
    let python = crate::helm::ensure()?;
    let out = Command::new(python)
        .arg(crate::workspace().join("xtask/helm/helm.py"))
        .args(args)
        .env("KUBECONFIG", crate::kube::state::kubeconfig())
        .output()?;
    if !out.status.success() {
        bail!(
            "helm {}: {}",
            args.first().unwrap_or(&""),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// The results as a Markdown table (the README keeps one).
fn table(version: &str, outcomes: &[Outcome]) -> String {
    let mut t = format!(
        "\nSlinky's slurm chart {version} on this operator:\n\n| case | accepted | up | job |\n|---|---|---|---|\n"
    );
    for o in outcomes {
        let accepted = match &o.accepted {
            Ok(()) => "yes".to_owned(),
            Err(e) => format!("no: {}", one_line(e)),
        };
        let up = match &o.up {
            None => "-".to_owned(),
            Some(Ok(d)) => format!("yes, {:.0} s", d.as_secs_f64()),
            Some(Err(e)) => format!("no: {}", one_line(e)),
        };
        let job = match &o.job {
            None if o.accepted.is_ok() && o.up.as_ref().is_some_and(Result::is_ok) => {
                "- (no worker)".to_owned()
            }
            None => "-".to_owned(),
            Some(Ok(what)) => what.clone(),
            Some(Err(e)) => format!("FAILED: {}", one_line(e)),
        };
        t.push_str(&format!("| {} | {accepted} | {up} | {job} |\n", o.case));
    }
    t
}

fn one_line(text: &str) -> String {
    let line = text.lines().next().unwrap_or_default();
    line.chars().take(200).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_that_is_not_slinkys_chart_is_refused_by_name() {
        let dir = std::env::temp_dir().join(format!("conformance-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let dir = Dir(dir);
        let err = chart_version(dir.path()).unwrap_err().to_string();
        assert!(err.contains("helm/slurm directory"), "{err}");
        std::fs::write(dir.path().join("Chart.yaml"), "name: slurm-operator\n").unwrap();
        let err = chart_version(dir.path()).unwrap_err().to_string();
        assert!(err.contains("is not Slinky's `slurm` chart"), "{err}");
        std::fs::write(
            dir.path().join("Chart.yaml"),
            "apiVersion: v2\nname: slurm\nversion: 1.2.1\n",
        )
        .unwrap();
        assert_eq!(chart_version(dir.path()).unwrap(), "1.2.1");
    }

    /// A scratch directory, removed when dropped.
    struct Dir(PathBuf);

    impl Dir {
        fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn every_values_file_is_a_case_after_the_built_in_ones() {
        let c = cases(&[PathBuf::from("/tmp/mine.yaml")]);
        assert_eq!(c.len(), 4);
        assert!(c[0].args.is_empty());
        assert_eq!(c[3].args, ["-f", "/tmp/mine.yaml"]);
    }
}
