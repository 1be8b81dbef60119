//! Test binaries run two at a time on the test ground. The operator's tests mostly wait (for
//! pods, slurmctld, jobs of tens of seconds), one at a time they were the longest phase (14 of a
//! run's 51 minutes), and each keeps to a namespace of its own with its own operator. Those that
//! change what every test shares (they cordon or relabel the ground's nodes) run first, one at a
//! time, beside only those that run no Slurm workers.
//!
//! Each run's output goes to a file and is printed whole when the run ends, so that two runs'
//! lines do not interleave.

use std::collections::VecDeque;
use std::fs::File;
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::unified::TestRun;

/// Runs `runs` in two lanes. First, those named in `alone` one after the other in one lane, while
/// the other runs the `light` ones (no Slurm workers a cordon would drain); then all the others in
/// both lanes, in the order of `first` (the longest, so that the lanes end together), then their
/// own. After a failure no further run starts; the ones running end, and every failure is named.
pub fn run_all(
    runs: Vec<TestRun>,
    alone: &[&str],
    light: &[&str],
    first: &[&str],
    logs: &Path,
) -> Result<()> {
    std::fs::create_dir_all(logs).with_context(|| format!("creating {}", logs.display()))?;
    let named = |names: &[&str], r: &TestRun| names.contains(&r.name.as_str());
    let (solo, rest): (Vec<TestRun>, Vec<TestRun>) =
        runs.into_iter().partition(|r| named(alone, r));
    let (beside, mut rest): (Vec<TestRun>, Vec<TestRun>) =
        rest.into_iter().partition(|r| named(light, r));
    rest.sort_by_key(|r| {
        first
            .iter()
            .position(|f| *f == r.name)
            .unwrap_or(first.len())
    });
    let solo = Mutex::new(VecDeque::from(solo));
    let beside = Mutex::new(VecDeque::from(beside));
    let rest = Mutex::new(VecDeque::from(rest));
    let solo_ended = AtomicBool::new(false);
    let failures = Mutex::new(Vec::new());
    let next = |queue: &Mutex<VecDeque<TestRun>>| -> Option<TestRun> {
        if !failures.lock().expect("not poisoned").is_empty() {
            return None;
        }
        queue.lock().expect("not poisoned").pop_front()
    };
    let go = |run: TestRun| {
        if let Err(e) = one(run, logs) {
            failures
                .lock()
                .expect("not poisoned")
                .push(format!("{e:#}"));
        }
    };
    std::thread::scope(|scope| {
        scope.spawn(|| {
            while let Some(run) = next(&solo) {
                go(run);
            }
            solo_ended.store(true, Ordering::SeqCst);
            while let Some(run) = next(&rest) {
                go(run);
            }
        });
        scope.spawn(|| {
            while let Some(run) = next(&beside) {
                go(run);
            }
            while !solo_ended.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(200));
            }
            while let Some(run) = next(&rest) {
                go(run);
            }
        });
    });
    let failures = failures.into_inner().expect("not poisoned");
    if !failures.is_empty() {
        bail!("{}", failures.join("; "));
    }
    Ok(())
}

/// One run, its output to `<logs>/<name>.log`, printed when it ends.
fn one(mut run: TestRun, logs: &Path) -> Result<()> {
    let path = logs.join(format!("{}.log", run.name));
    let log = File::create(&path).with_context(|| format!("creating {}", path.display()))?;
    eprintln!("     Started {} (output when it ends)", run.label);
    let started = Instant::now();
    let status = run
        .command
        .stdout(log.try_clone()?)
        .stderr(log)
        .status()
        .with_context(|| format!("running {}", run.label));
    let output = std::fs::read_to_string(&path).unwrap_or_default();
    eprintln!(
        "     Ran {} in {:.0} s:\n{output}",
        run.label,
        started.elapsed().as_secs_f64()
    );
    let status = status?;
    if !status.success() {
        bail!("tests of {} failed ({status})", run.label);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::process::Command;

    use super::*;

    /// A run that appends its name to `record`, sleeping `secs` first, and fails when told.
    fn run(name: &str, secs: f64, fails: bool, record: &Path) -> TestRun {
        let mut command = Command::new("sh");
        command.args([
            "-c",
            &format!(
                "echo start {name} >> {r}; sleep {secs}; echo end {name} >> {r}; exit {}",
                u8::from(fails),
                r = record.display()
            ),
        ]);
        TestRun {
            label: name.to_owned(),
            name: name.to_owned(),
            command,
        }
    }

    fn lines(record: &Path) -> Vec<String> {
        std::fs::read_to_string(record)
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn the_alone_ones_run_beside_only_the_light_ones_then_the_rest_two_at_a_time() {
        let dir = std::env::temp_dir().join(format!("side-by-side-{}", std::process::id()));
        let record = dir.join("record");
        std::fs::create_dir_all(&dir).unwrap();
        let runs = vec![
            run("solo", 0.4, false, &record),
            run("light", 0.1, false, &record),
            run("short", 0.1, false, &record),
            run("long", 0.3, false, &record),
        ];
        run_all(runs, &["solo"], &["light"], &["long"], &dir.join("logs")).unwrap();
        let got = lines(&record);
        let at = |l: &str| got.iter().position(|g| g == l).unwrap();
        assert!(at("end light") < at("end solo"), "{got:?}");
        assert!(at("end solo") < at("start long"), "{got:?}");
        assert!(
            at("start long") < at("start short"),
            "longest first: {got:?}"
        );
        assert!(at("start short") < at("end long"), "two at a time: {got:?}");
        assert!(dir.join("logs/long.log").exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn after_a_failure_nothing_more_starts_and_the_failure_is_named() {
        let dir = std::env::temp_dir().join(format!("side-by-side-fail-{}", std::process::id()));
        let record = dir.join("record");
        std::fs::create_dir_all(&dir).unwrap();
        let runs = vec![
            run("broken", 0.0, true, &record),
            run("later", 0.0, false, &record),
        ];
        let err = run_all(runs, &["broken"], &[], &[], &dir.join("logs")).unwrap_err();
        assert!(err.to_string().contains("broken"), "{err}");
        assert_eq!(lines(&record), ["start broken", "end broken"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
