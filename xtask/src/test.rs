//! `cargo xtask test`: everything CI checks, in order, with real Slurm clusters up while the tests run,
//! then the benchmarks (`cargo xtask bench --quick`), which start their own large cluster.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result, bail};

use crate::slurm::{self, Release, UpArgs};

/// The slurm-client features that each pull in one REST version.
const VERSION_FEATURES: [&str; 6] = [
    "v0_0_40", "v0_0_41", "v0_0_42", "v0_0_43", "v0_0_44", "v0_0_45",
];

/// Phases and how long each took, printed at the end whatever happened.
struct Timings(Vec<(String, f64, bool)>);

impl Timings {
    fn phase<T>(&mut self, name: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
        eprintln!("==> {name}");
        let started = Instant::now();
        let result = f();
        self.0.push((
            name.to_owned(),
            started.elapsed().as_secs_f64(),
            result.is_ok(),
        ));
        result
    }

    fn print(&self) {
        eprintln!("\nphase timings:");
        for (name, secs, ok) in &self.0 {
            eprintln!(
                "  {:>7.1}s  {}  {name}",
                secs,
                if *ok { "ok  " } else { "FAIL" }
            );
        }
    }
}

pub fn run(workspace: &Path, cargo_args: &[String]) -> Result<()> {
    let mut t = Timings(Vec::new());
    let result = run_phases(&mut t, workspace, cargo_args);
    let _ = t.phase("stop clusters", || {
        for release in Release::ALL {
            slurm::down(release)?;
        }
        Ok(())
    });
    t.print();
    result
}

fn run_phases(t: &mut Timings, workspace: &Path, cargo_args: &[String]) -> Result<()> {
    let cargo = |args: &[&str]| {
        let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
        cmd.current_dir(workspace).args(args);
        cmd
    };
    t.phase(
        "generated code is current (cargo xtask generate --check)",
        || crate::generate::run(true),
    )?;
    t.phase("cargo fmt --check", || {
        status(cargo(&["fmt", "--all", "--", "--check"]))
    })?;
    t.phase("cargo clippy", || {
        status(cargo(&[
            "clippy",
            "--workspace",
            "--all-targets",
            "--all-features",
            "--",
            "-D",
            "warnings",
        ]))
    })?;
    t.phase("each REST version compiles alone", || {
        for feature in VERSION_FEATURES {
            status(cargo(&[
                "check",
                "--package",
                "slurm-client",
                "--lib",
                "--no-default-features",
                "--features",
                feature,
            ]))?;
        }
        Ok(())
    })?;
    t.phase("build Slurm root filesystems", || {
        for release in Release::ALL {
            slurm::rootfs::ensure(release)?;
        }
        Ok(())
    })?;
    // The xtask's own tests start and stop clusters themselves, so they run while none is up.
    for release in Release::ALL {
        slurm::down(release)?;
    }
    t.phase("xtask tests (cluster lifecycle)", || {
        status(cargo(&["test", "-p", "xtask", "--", "--test-threads=1"]))
    })?;
    t.phase("start Slurm 24.11 and 26.05 with accounting", || {
        for release in Release::ALL {
            slurm::up(&UpArgs {
                release,
                nodes: 4,
                accounting: true,
                port: None,
            })?;
        }
        Ok(())
    })?;
    let env_files: Vec<String> = Release::ALL
        .iter()
        .map(|r| slurm::state::env_file(*r).display().to_string())
        .collect();
    t.phase("workspace tests against both clusters", || {
        let mut cmd = cargo(&[
            "test",
            "--workspace",
            "--exclude",
            "xtask",
            "--all-features",
        ]);
        cmd.args(cargo_args)
            .env("SLURM_TEST_ENV_FILES", env_files.join(":"));
        status(cmd)
    })?;
    // Many sites run slurmrestd without slurmdbd: the exporter's tests against a 24.11
    // cluster without accounting check that it needs slurmdbd only for the accounting sources.
    t.phase("restart Slurm 24.11 without accounting", || {
        slurm::down(Release::R24_11)?;
        slurm::up(&UpArgs {
            release: Release::R24_11,
            nodes: 4,
            accounting: false,
            port: None,
        })
    })?;
    t.phase("exporter tests without slurmdbd", || {
        let mut cmd = cargo(&["test", "--package", "slurm-exporter", "--all-features"]);
        cmd.args(cargo_args).env(
            "SLURM_TEST_ENV_FILES",
            slurm::state::env_file(Release::R24_11),
        );
        status(cmd)
    })?;
    for release in Release::ALL {
        slurm::down(release)?;
    }
    t.phase("benchmarks (cargo xtask bench --quick)", || {
        crate::bench::run(workspace, true)
    })
}

fn status(mut cmd: Command) -> Result<()> {
    let status = cmd.status().with_context(|| format!("running {cmd:?}"))?;
    if !status.success() {
        bail!("{cmd:?} failed ({status})");
    }
    Ok(())
}
