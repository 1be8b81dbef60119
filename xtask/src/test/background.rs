//! The static checks (clippy, rustdoc, each REST version alone), run in the background while the
//! ground tests run. They only compile, the ground tests mostly wait on pods; at nice 19 the
//! checks take only the CPU the tests leave. Their output goes to a log, printed if they fail.

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

pub struct Checks {
    log: PathBuf,
    thread: Option<JoinHandle<Result<()>>>,
    stop: Arc<Stop>,
}

/// How an unwaited `Checks` stops its thread: no further command, and the running one's process
/// group (cargo and its rustc children) terminated, so no cargo is left holding the target directory.
#[derive(Default)]
struct Stop {
    requested: AtomicBool,
    group: AtomicI32,
}

impl Checks {
    pub fn start(workspace: &Path) -> Result<Checks> {
        let log = crate::target_dir(workspace).join("ci-checks.log");
        std::fs::create_dir_all(log.parent().expect("has a parent"))?;
        let file = File::create(&log).with_context(|| format!("creating {}", log.display()))?;
        eprintln!(
            "  clippy, rustdoc and the REST versions run beside, at nice 19; log: {}",
            log.display()
        );
        let workspace = workspace.to_path_buf();
        let stop = Arc::new(Stop::default());
        let in_thread = Arc::clone(&stop);
        let thread = std::thread::spawn(move || run_all(&workspace, &file, &in_thread));
        Ok(Checks {
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
            .unwrap_or_else(|_| bail!("the checks' thread panicked"));
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
}

/// A run that fails before waiting for the checks stops them rather than leaving a cargo behind.
impl Drop for Checks {
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

fn run_all(workspace: &Path, log: &File, stop: &Stop) -> Result<()> {
    run(
        workspace,
        log,
        stop,
        &[
            "clippy",
            "--workspace",
            "--all-targets",
            "--all-features",
            "--",
            "-D",
            "warnings",
        ],
        &[],
    )?;
    // The crate docs are how a newcomer learns the client: a broken intra-doc link fails CI.
    run(
        workspace,
        log,
        stop,
        &[
            "doc",
            "--no-deps",
            "--all-features",
            "--package",
            "slurm-client",
            "--package",
            "slurm-exporter",
        ],
        &[("RUSTDOCFLAGS", "-D warnings")],
    )?;
    for feature in VERSION_FEATURES {
        run(
            workspace,
            log,
            stop,
            &[
                "check",
                "--package",
                "slurm-client",
                "--lib",
                "--no-default-features",
                "--features",
                feature,
            ],
            &[],
        )?;
    }
    Ok(())
}

fn run(
    workspace: &Path,
    log: &File,
    stop: &Stop,
    args: &[&str],
    env: &[(&str, &str)],
) -> Result<()> {
    if stop.requested.load(Ordering::SeqCst) {
        bail!("stopped before cargo {}", args[0]);
    }
    let started = std::time::Instant::now();
    let mut cmd = Command::new("nice");
    cmd.arg("-n19")
        .arg(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
        .args(args)
        .current_dir(workspace)
        .env(
            "CARGO_INCREMENTAL",
            std::env::var_os("CARGO_INCREMENTAL").unwrap_or("0".into()),
        )
        .envs(env.iter().copied())
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
        bail!(
            "cargo {} failed ({status}) after {secs:.0} s",
            args.join(" ")
        );
    }
    eprintln!(
        "  (beside the tests) cargo {} passed in {secs:.0} s",
        args[0]
    );
    Ok(())
}
