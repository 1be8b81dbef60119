//! Work that runs in the background while the ground tests run: the static checks (rustdoc, each
//! REST version alone, slurm-client with its MSRV; generated code current; clippy lints inside the
//! workspace build), the dev
//! images of the end-to-end, and the tests against local Slurm clusters. The first ones only
//! compile or pack, the ground tests mostly wait on pods: at nice 19 they take only the CPU the
//! tests leave; the Slurm tests run at nice 10, ahead of the compilers. Each lane's output goes to
//! a log, printed if it fails.

use std::ffi::OsString;
use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::thread::JoinHandle;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

use anyhow::{Context, Result, bail};

/// The slurm-client features that each pull in one REST version.
const VERSION_FEATURES: [&str; 6] = [
    "v0_0_40", "v0_0_41", "v0_0_42", "v0_0_43", "v0_0_44", "v0_0_45",
];

/// One command of a lane.
pub struct Step {
    program: OsString,
    args: Vec<String>,
    env: Vec<(&'static str, OsString)>,
    nice: u8,
}

impl Step {
    fn cargo(args: &[&str], env: &[(&'static str, OsString)]) -> Step {
        Step {
            program: std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()),
            args: args.iter().map(|a| a.to_string()).collect(),
            env: env.to_vec(),
            nice: 19,
        }
    }

    fn xtask(xtask: &Path, args: &[&str]) -> Step {
        Step {
            program: xtask.into(),
            args: args.iter().map(|a| a.to_string()).collect(),
            env: Vec::new(),
            nice: 19,
        }
    }

    fn label(&self) -> String {
        let program = Path::new(&self.program)
            .file_name()
            .unwrap_or_default()
            .to_string_lossy();
        format!("{program} {}", self.args.join(" "))
    }
}

/// A lane of background commands, run one after the other in a thread.
pub struct Background {
    log: PathBuf,
    thread: Option<JoinHandle<Result<()>>>,
    stop: Arc<Stop>,
}

/// How an unwaited `Background` stops its thread: no further command, and the running one's process
/// group (cargo and its rustc children) terminated, so no cargo is left holding the target directory.
#[derive(Default)]
struct Stop {
    requested: AtomicBool,
    group: AtomicI32,
}

impl Background {
    /// Rustdoc, each REST version alone, then slurm-client built with its MSRV by the
    /// xtask binary `xtask` (`msrv`); log `target/ci-checks.log`.
    pub fn checks(workspace: &Path, xtask: &Path) -> Result<Background> {
        Background::start(
            workspace,
            "ci-checks.log",
            "rustdoc, the REST versions and the MSRV build",
            checks(workspace, xtask),
        )
    }

    /// `xtask semver`: the published crates' API against the last release (cargo-semver-checks
    /// installed from crates.io on a machine that lacks it, then two rustdoc JSON builds); log
    /// `target/ci-semver.log`.
    pub fn semver(workspace: &Path, xtask: &Path) -> Result<Background> {
        let steps = vec![Step::xtask(xtask, &["semver", "--if-changed"])];
        Background::start(
            workspace,
            "ci-semver.log",
            "semver checks of the published crates",
            steps,
        )
    }

    /// `generate --check`, then `image project --dev` with `tags`, both by the xtask binary
    /// `xtask`; log `target/ci-images.log`. Generating six REST versions with the debug-built
    /// progenitor takes minutes of CPU, and the images are needed only after the ground tests.
    pub fn generated_and_dev_images(
        workspace: &Path,
        xtask: &Path,
        tags: &[String],
    ) -> Result<Background> {
        let mut images = Step::xtask(xtask, &["image", "project", "--dev"]);
        for tag in tags {
            images.args.extend(["--tag".to_owned(), tag.clone()]);
        }
        let steps = vec![Step::xtask(xtask, &["generate", "--check"]), images];
        Background::start(
            workspace,
            "ci-images.log",
            "generated code current, then the dev images",
            steps,
        )
    }

    /// `xtask test-slurm` with the unified build's `artifacts` (JSON) and the caller's test
    /// arguments, at nice 10; log `target/ci-slurm.log`.
    pub fn slurm(
        workspace: &Path,
        xtask: &Path,
        artifacts: &Path,
        test_args: &[String],
    ) -> Result<Background> {
        let mut step = Step::xtask(xtask, &["test-slurm", "--artifacts"]);
        step.args.push(artifacts.display().to_string());
        step.args.push("--".to_owned());
        step.args.extend(test_args.iter().cloned());
        step.nice = 10;
        Background::start(
            workspace,
            "ci-slurm.log",
            "the tests against local Slurm 24.11 and 26.05 clusters",
            vec![step],
        )
    }

    fn start(workspace: &Path, log_name: &str, what: &str, steps: Vec<Step>) -> Result<Background> {
        let log = crate::target_dir(workspace).join(log_name);
        std::fs::create_dir_all(log.parent().expect("has a parent"))?;
        let file = File::create(&log).with_context(|| format!("creating {}", log.display()))?;
        let nice = steps.iter().map(|s| s.nice).max().unwrap_or(19);
        eprintln!(
            "  {what}: beside the tests, at nice {nice}; log: {}",
            log.display()
        );
        let workspace = workspace.to_path_buf();
        let stop = Arc::new(Stop::default());
        let in_thread = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            steps
                .iter()
                .try_for_each(|step| run(&workspace, &file, &in_thread, step))
        });
        Ok(Background {
            log,
            thread: Some(thread),
            stop,
        })
    }

    /// Waits for the checks; on failure, prints their log's end.
    pub fn wait(mut self) -> Result<()> {
        let thread = self.thread.take().expect("waited once");
        let result = thread
            .join()
            .unwrap_or_else(|_| bail!("the background thread panicked"));
        if result.is_err() {
            let text = std::fs::read_to_string(&self.log).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            eprintln!("--- the last lines of {} ---", self.log.display());
            for line in &lines[lines.len().saturating_sub(200)..] {
                eprintln!("{line}");
            }
        }
        result
    }

    /// Waits, then prints the phase timings the lane's own log ends with, whatever happened.
    pub fn wait_showing_timings(self) -> Result<()> {
        let log = self.log.clone();
        let result = self.wait();
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if let Some(at) = text.rfind(super::TIMINGS_HEADING) {
            eprint!("{}", &text[at..]);
        }
        result
    }
}

/// A run that fails before waiting for a lane stops it rather than leaving a cargo behind.
impl Drop for Background {
    fn drop(&mut self) {
        let Some(thread) = self.thread.take() else {
            return;
        };
        self.stop.requested.store(true, Ordering::SeqCst);
        let group = self.stop.group.load(Ordering::SeqCst);
        if group > 0 {
            let _ = killpg(Pid::from_raw(group), Signal::SIGTERM);
        }
        let _ = thread.join();
    }
}

/// The lane's cargo builds go to a target directory of their own: they only check, so they share
/// no artifact with the test build, and in the test build's directory they would hold its lock
/// while the images lane waits to build the binaries there.
fn checks(workspace: &Path, xtask: &Path) -> Vec<Step> {
    let target: OsString = crate::target_dir(workspace).join("checks").into();
    let own_dir = ("CARGO_TARGET_DIR", target);
    let mut steps = vec![
        // The crate docs are how a newcomer learns the client: a broken intra-doc link fails CI.
        Step::cargo(
            &[
                "doc",
                "--no-deps",
                "--all-features",
                "--package",
                "slurm-client",
                "--package",
                "slurm-exporter",
            ],
            &[("RUSTDOCFLAGS", "-D warnings".into()), own_dir.clone()],
        ),
    ];
    for feature in VERSION_FEATURES {
        steps.push(Step::cargo(
            &[
                "check",
                "--package",
                "slurm-client",
                "--lib",
                "--no-default-features",
                "--features",
                feature,
            ],
            std::slice::from_ref(&own_dir),
        ));
    }
    // slurm-client with Debian trixie's rustc and cargo, the rust-version it declares (msrv.rs).
    steps.push(Step::xtask(xtask, &["msrv"]));
    steps
}

fn run(workspace: &Path, log: &File, stop: &Stop, step: &Step) -> Result<()> {
    let label = step.label();
    if stop.requested.load(Ordering::SeqCst) {
        bail!("stopped before {label}");
    }
    let started = std::time::Instant::now();
    let mut cmd = Command::new("nice");
    cmd.arg(format!("-n{}", step.nice))
        .arg(&step.program)
        .args(&step.args)
        .current_dir(workspace)
        .env(
            "CARGO_INCREMENTAL",
            std::env::var_os("CARGO_INCREMENTAL").unwrap_or("0".into()),
        )
        .envs(step.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log.try_clone()?)
        .process_group(0);
    let mut child = cmd.spawn().with_context(|| format!("running {cmd:?}"))?;
    stop.group.store(child.id() as i32, Ordering::SeqCst);
    // Stopped between the check above and the spawn: the Drop may have missed this group.
    if stop.requested.load(Ordering::SeqCst) {
        let _ = killpg(Pid::from_raw(child.id() as i32), Signal::SIGTERM);
    }
    let status = child.wait()?;
    stop.group.store(0, Ordering::SeqCst);
    let secs = started.elapsed().as_secs_f64();
    if !status.success() {
        bail!("{label} failed ({status}) after {secs:.0} s");
    }
    let short: String = label
        .split_whitespace()
        .take(2)
        .collect::<Vec<_>>()
        .join(" ");
    eprintln!("  (beside the tests) {short} passed in {secs:.0} s");
    Ok(())
}
